// The one piece format: the app_metadata that tags every record batch a node
// streams for a plan or row ticket (docs/protocol.md, "Pieces").
//
// A piece is some rows of one consumer batch, or of a span of consecutive
// batches, and says where they go. One header, little-endian, 36 bytes:
//
//   "IFPC" | u8 version | u8 flags | u16 0 | u64 first_batch | u32 batch_size
//   | u32 count | u32 last_size | u32 entries | u32 sources
//
// then `entries` runs (u32 offset, u32 length) or, with kPiecePositions,
// `entries` u32 positions, then `sources` source runs (u64 start, u32
// length, packed 12-byte records). The piece covers batches first_batch ..
// first_batch + count - 1, each batch_size rows but the last (last_size; a
// single batch's last_size is its batch_size), laid end to end: batch
// first_batch + i's positions start at i * batch_size. Its rows, in order,
// fill the positions its runs or positions name.
//
// Flags:
//   kPiecePositions   entries are one position per row, not runs
//   kPieceWhole       the rows are the batches' rows in order (no entries)
//   kPieceSpan        count > 1 (set exactly then)
//   kPieceByReference the message carries no columns: its rows are the source
//                     runs of the node's shared file (node/copy/shared_export.h)
// A new kind of piece is a flag or a header field behind a new version, never
// a new magic.
//
// This header and piece.cc use no Arrow and no exceptions, so the client's
// native library (cpp/icefloe/client) parses pieces with the same code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace icefloe {

inline constexpr std::string_view kPieceMagic = "IFPC";
inline constexpr uint8_t kPieceVersion = 1;
inline constexpr size_t kPieceHeaderBytes = 36;

enum PieceFlag : uint8_t {
  kPiecePositions = 1,
  kPieceWhole = 2,
  kPieceSpan = 4,
  kPieceByReference = 8,
};
inline constexpr uint8_t kPieceKnownFlags = 15;

/// Where a run of a piece's rows go: positions [offset, offset + length).
struct PieceRun {
  uint32_t offset = 0;
  uint32_t length = 0;
};

/// A run of rows of a node's shared export (node/copy/shared_export.h): rows
/// [start, start + length) in the export's order.
struct SourceRun {
  uint64_t start = 0;
  uint32_t length = 0;
};

/// What a node encodes (and tests decode into).
struct PieceInfo {
  uint64_t batch = 0;       ///< The first batch.
  uint32_t batch_size = 0;  ///< Its rows; in a span, every batch's but the last.
  std::vector<PieceRun> runs{};
  uint32_t count = 1;      ///< Batches covered.
  uint32_t last_size = 0;  ///< The last batch's rows; 0 for a single batch: batch_size.
  /// One position per row, instead of runs, when not empty (what a gather of
  /// scattered positions has at hand; the encoder picks the smaller form).
  std::vector<uint32_t> positions{};
  bool whole = false;  ///< The batches' rows in order: no runs or positions.
  bool by_reference = false;
  std::vector<SourceRun> source{};  ///< By reference: the rows, as runs of the export.

  /// Positions the piece's batch or span has.
  uint64_t span_rows() const {
    return count <= 1 ? batch_size : uint64_t{batch_size} * (count - 1) + last_size;
  }
};

/// The piece's bytes: runs, or positions where runs average fewer than two
/// rows (from `positions` when given, else from `runs`).
std::string EncodePiece(const PieceInfo& piece);

/// Why bytes are not a piece. PieceErrorText names each.
enum class PieceError : uint8_t {
  kOk = 0,
  kTruncated,     // shorter than the header
  kBadMagic,      // not "IFPC"
  kBadVersion,    // a version this build does not read
  kUnknownFlags,  // a flag bit this version does not define
  kReserved,      // the u16 after the flags is not 0
  kBadCount,      // count 0, or the span flag disagrees with count > 1
  kBadLastSize,   // last_size not in 1..batch_size, or not batch_size for one batch
  kTooManyRows,   // a span of more than 2^32 - 1 positions
  kWholeEntries,  // whole batches with runs or positions
  kStraySources,  // source runs without the by-reference flag
  kLength,        // the length is not the header's entries and sources
};
/// A fixed description of `error`, the same words the Python client uses
/// (tests/test_piece_vectors.py checks both against the shared vectors).
const char* PieceErrorText(PieceError error) noexcept;

/// A parsed piece, pointing into the bytes it was parsed from.
struct PieceView {
  uint8_t flags = 0;
  uint64_t batch = 0;
  uint32_t batch_size = 0;
  uint32_t count = 0;
  uint32_t last_size = 0;
  uint32_t entries = 0;
  uint32_t sources = 0;
  const uint8_t* entry_bytes = nullptr;   ///< entries x 8 (runs) or x 4 (positions) bytes
  const uint8_t* source_bytes = nullptr;  ///< sources x 12 bytes

  bool has(PieceFlag flag) const { return (flags & flag) != 0; }
  uint64_t span_rows() const { return uint64_t{batch_size} * (count - 1) + last_size; }
};

/// Checks and parses `size` bytes; allocates nothing.
PieceError ParsePiece(const uint8_t* data, size_t size, PieceView* out) noexcept;

/// ParsePiece, then the entries and sources copied into a PieceInfo
/// (positions stay positions). For tests and tools.
PieceError DecodePiece(std::string_view bytes, PieceInfo* out);

}  // namespace icefloe
