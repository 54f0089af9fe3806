// Pieces a plan or row stream sends (protocol/piece.h's metadata), and
// the helpers the stream's producers share (piece_stream.cc, window_pieces.cc).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/status.h>

#include "icefloe/node/copy/dataset.h"
#include "icefloe/protocol/piece.h"
#include "icefloe/protocol/plan_ticket.h"

namespace icefloe {

/// One message of a stream: a record batch (or, for a reader of a shared
/// export, where its rows lie) and where its rows go.
struct Piece {
  std::shared_ptr<arrow::RecordBatch> batch;  // null: by reference, `info.source`
  PieceInfo info;
  bool gathered = false;   // rows copied from scattered places (for metrics)
  uint64_t first_row = 0;  // a slice of cached rows (not gathered): its first row's id

  int64_t num_rows() const;
};

/// Whole batches first, ..., first + count - 1 (each batch_size rows but the
/// last, last_size) in order: a chunk.
PieceInfo WholeBatches(uint64_t first, uint32_t batch_size, uint32_t count, uint32_t last_size);

/// How a stream's producers hand rows on: copied into messages from `pool`,
/// or, for a same-host reader of the dataset's shared export, by reference
/// (pieces name rows of the export; nothing is copied).
struct PieceTarget {
  arrow::MemoryPool* pool = nullptr;
  bool by_reference = false;
};

/// `rows` as runs of the dataset's local rows (its shared export's), in
/// order. KeyError naming a row the dataset does not hold.
arrow::Result<std::vector<SourceRun>> SourceRuns(const CachedDataset& dataset,
                                                 const std::vector<uint64_t>& rows);

// Bytes of the Arrow buffers one message may reference (a chunk, a span's
// gather), so a reader's receive buffers stay small.
constexpr int64_t kMaxChunkBytes = 8 << 20;

/// One piece holding `rows`, gathered in storage order (a copy of whole runs:
/// rows that come in blocks cost little more than slices; rows already
/// ascending in long stretches keep their order, CachedDataset::
/// GatherReadOrder), tagged with where each goes: rows[i] fills position
/// offsets[i] of the batch (or span) that `where` names (its positions are
/// filled here). The consumer reorders the rows of all endpoints in one step
/// anyway.
/// By reference (`target`), the piece names `rows` in their own order instead.
arrow::Status GatheredPiece(const CachedDataset& dataset, PieceInfo where,
                            const std::vector<uint64_t>& rows, const std::vector<uint32_t>& offsets,
                            PieceTarget target, const std::vector<int>& columns,
                            std::deque<Piece>* out);

}  // namespace icefloe
