// Putting the pieces of a window span in place on the client, in one pass.
//
// A window epoch's span (docs/protocol.md, "Pieces": a span piece) arrives as one piece
// per node: that node's rows, in the order it holds them, and for each row its
// position in the span (u32 positions, or u32 runs of positions). The span is
// the pieces' rows with every row at its position. In Python that took a
// concatenation of the pieces, an inverse permutation and a take: three
// passes over the data, four by reference (the rows first taken out of the
// node's shared file). icefloe_scatter writes each piece's rows straight to
// their positions, column by column, from the message or from the file.
//
// It is a C ABI (the Python package loads it with ctypes; no exception, no
// allocation visible to the caller, no Arrow types) so that it has no binding
// dependency and cannot throw across the boundary. The caller allocates the
// output columns and keeps every buffer alive for the call.
#pragma once

#include <cstdint>

extern "C" {

// The positions of one piece's rows: `positions` (one u32 per row) when not
// null, else `runs` (`num_runs` pairs of u32 offset, length, covering the rows
// in order). Every position is counted from `base`.
struct IcefloeScatterPiece {
  const uint32_t* positions;
  const uint32_t* runs;
  int64_t num_runs;
  int64_t rows;
  int64_t base;
  // num_columns pointers: the piece's values of column c, its first row's first.
  const uint8_t* const* columns;
  // Not null: the piece's rows are not `columns`' first `rows` rows but these
  // runs of them, in order (a piece by reference names rows of a node's shared
  // file): `num_source_runs` packed 12-byte records, u64 first row and u32
  // length (little-endian, as the node sends them), every row below
  // `source_rows` (the rows `columns` hold).
  const uint8_t* source_runs;
  int64_t num_source_runs;
  int64_t source_rows;
};

enum IcefloeScatterResult : int32_t {
  kIcefloeScatterOk = 0,
  // A piece's runs (or source runs) do not cover its rows, or a width or
  // count is negative.
  kIcefloeScatterMalformed = 1,
  // A position at or past the span's `span_rows`.
  kIcefloeScatterOutside = 2,
  // A position named twice (so, as the pieces hold span_rows rows together,
  // another is never written).
  kIcefloeScatterTwice = 3,
  // The pieces hold a different number of rows than the span.
  kIcefloeScatterCount = 4,
  kIcefloeScatterNoMemory = 5,
  // A source row at or past the piece's `source_rows`.
  kIcefloeScatterOutsideSource = 6,
};

// Writes every row of every piece to its position in `out` (num_columns
// columns of span_rows values, widths[c] bytes each). Checks every position
// first and writes nothing unless the pieces fill the span exactly once.
__attribute__((visibility("default"))) int32_t icefloe_scatter(
    int64_t span_rows, int32_t num_columns, const int64_t* widths, uint8_t* const* out,
    int32_t num_pieces, const IcefloeScatterPiece* pieces) noexcept;

}  // extern "C"
