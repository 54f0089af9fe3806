// Bodies of plan tickets (kind kPlan) and row tickets (kind kRows), and the
// app_metadata that tags each record batch a node streams for them.
//
// A plan ticket carries a consumer's PlanParams, a range of its batches and
// the global row ranges this endpoint answers for (the slices whose replicas
// it names), so a node serves it without state: for each batch it streams the
// rows of the batch that fall in those ranges. Each record batch it sends is
// a *piece* of one consumer batch, tagged with where its rows go, as runs or
// (for scattered rows, where that is smaller) one position per row:
//
//   "IFP1" | u64 batch | u32 batch_rows | u32 runs | runs x (u32 offset, u32 length)
//   "IFP2" | u64 batch | u32 batch_rows | u32 rows | rows x u32 position
//
// (little-endian): the piece's rows, in order, fill positions
// [offset, offset + length) of batch `batch`, run after run (IFP1), or one
// position each (IFP2). A consumer assembles every batch from the pieces of
// all endpoints (docs/protocol.md). Consecutive batches an endpoint holds
// whole and contiguous travel as one *chunk*, split by the consumer:
//
//   "IFP3" | u64 first_batch | u32 batch_rows | u32 count | u32 last_rows
//
// and an endpoint's rows of several consecutive batches (a window-mode
// *span*) travel as one piece whose positions run over the span, batch
// first_batch + i's positions starting at i * batch_rows:
//
//   "IFP4" | u64 first_batch | u32 batch_rows | u32 count | u32 last_rows | u32 runs | runs x (u32
//   offset, u32 length) "IFP5" | u64 first_batch | u32 batch_rows | u32 count | u32 last_rows | u32
//   rows | rows x u32 position
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>

#include "icefloe/plan/plan.h"
#include "icefloe/protocol/ticket.h"

namespace icefloe {

struct PlanTicket {
  PlanParams params;
  uint64_t batch_begin = 0;     ///< First of this worker's batches to serve.
  uint64_t batch_end = 0;       ///< One past the last.
  std::vector<RowRange> owned;  ///< Global rows this endpoint answers for, sorted, disjoint.
};
std::string EncodePlanBody(const PlanTicket& ticket);
/// Invalid("Invalid ticket format: ...") for malformed bodies, an unknown order
/// version, or parameters ValidatePlan rejects.
arrow::Result<PlanTicket> DecodePlanBody(std::string_view body);

/// A random-access request: rows[i] goes to position positions[i] of the answer.
struct RowsTicket {
  uint32_t total = 0;  ///< Rows in the whole answer (all endpoints).
  std::vector<uint32_t> positions;
  std::vector<uint64_t> rows;
};
std::string EncodeRowsBody(const RowsTicket& ticket);
arrow::Result<RowsTicket> DecodeRowsBody(std::string_view body);

/// Where a piece's rows go in its consumer batch (or span of batches).
struct PieceRun {
  uint32_t offset = 0;
  uint32_t length = 0;
};
struct PieceInfo {
  uint64_t batch = 0;          ///< The batch; a span's first.
  uint32_t batch_rows = 0;     ///< Its rows; in a span, every batch's but the last.
  std::vector<PieceRun> runs;  ///< Positions in the batch, or in the span.
  uint32_t count = 1;          ///< Batches spanned: above 1, a span (IFP4/IFP5).
  uint32_t last_rows = 0;      ///< A span's last batch's rows (unused when count is 1).
  /// The same one per row, instead of runs, when not empty (what a gather of
  /// scattered positions has at hand; the encoder picks the smaller form).
  std::vector<uint32_t> positions{};

  /// Positions the piece's batch or span has.
  uint64_t span_rows() const {
    return count <= 1 ? batch_rows : uint64_t{batch_rows} * (count - 1) + last_rows;
  }
};
/// IFP1, or IFP2 where runs average fewer than two rows; IFP4 or IFP5 the
/// same way for a span (count above 1). From `positions` when given, else
/// from `runs`.
std::string EncodePieceMetadata(const PieceInfo& piece);
/// Any form, as runs (positions become runs of one row). Invalid on a bad
/// magic, a truncated header, a span of fewer than 2 batches, a last_rows of
/// 0 or above batch_rows, or a span of more than 2^32 - 1 positions.
arrow::Result<PieceInfo> DecodePieceMetadata(std::string_view bytes);

/// A run of rows of a node's shared export (node/shared_export.h): rows
/// [start, start + length) in the export's order.
struct SourceRun {
  uint64_t start = 0;
  uint32_t length = 0;
};
/// A shared-memory stream's message metadata: "IFS1" | u32 runs | runs x (u64
/// start, u32 length), then the piece's or chunk's own metadata. The message
/// carries no columns; its rows are those runs of the export, in order.
std::string EncodeSourcePrefix(const std::vector<SourceRun>& runs);
/// The runs, and the rest of `bytes` (the piece's metadata) in *rest. Invalid
/// on a bad magic or a truncated prefix.
arrow::Result<std::vector<SourceRun>> DecodeSourcePrefix(std::string_view bytes,
                                                         std::string_view* rest);

/// Whole consumer batches sent as one message (IFP3): batches first_batch,
/// ..., first_batch + count - 1 of the consumer, in order, each batch_rows
/// rows but the last, which has last_rows (the epoch's last batch may be
/// short). The message's rows are those batches' rows, in order.
struct ChunkInfo {
  uint64_t first_batch = 0;
  uint32_t batch_rows = 0;
  uint32_t count = 0;
  uint32_t last_rows = 0;
};
std::string EncodeChunkMetadata(const ChunkInfo& chunk);
/// Invalid on a bad magic, a truncated or overlong header, a count below 2 or
/// a last_rows of 0 or above batch_rows.
arrow::Result<ChunkInfo> DecodeChunkMetadata(std::string_view bytes);

}  // namespace icefloe
