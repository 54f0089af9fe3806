// Assembling a consumer batch (or a span of batches) from its pieces, in C++,
// through the Arrow C Data Interface.
//
// A batch arrives as one piece per node (docs/protocol.md, "Pieces"): that
// node's rows, in the order it holds them, and for each row its position in
// the batch (u32 positions, or u32 runs of positions), counted from a base.
// By reference, a piece's rows are runs of a node's shared file instead
// (source runs). icefloe_assemble checks that the pieces fill the batch
// exactly once, then builds every column of the batch in one pass per column,
// copying runs of values straight from the pieces (or the file) into new
// buffers: fixed-width values, booleans, validity bitmaps, strings and
// binaries, lists, fixed-size lists, maps and structs, at any depth.
//
// The pieces come in as ArrowArray structs that pyarrow exported (record
// batches, as struct arrays) and the batch goes out as one, which pyarrow
// imports without a copy; the call consumes (releases) every piece's array. A
// node's shared file of many segments is exported once instead
// (icefloe_file_new), and pieces name rows of it by number. It is a C ABI
// that links no Arrow library (the Python package loads it with ctypes), so
// the client works beside any pyarrow the training image has.
#pragma once

#include <cstdint>

#include "icefloe/client/arrow_c_abi.h"

extern "C" {

// A node's shared file as the reader holds it for a stream: its segments'
// record batches (struct arrays of one schema), laid end to end, so that a
// piece whose source runs cross segments is assembled in one call (a window
// span's rows of a copy on the disk tier lie in hundreds of segments).
struct IcefloeFile;

// One piece of the batch. Its rows are `batch`'s rows (`rows` of them), or,
// when `source_runs` is not null, these runs of `batch`'s rows in order:
// `num_source_runs` packed 12-byte records (u64 first row, u32 length,
// little-endian as the node sends them). With `file` (and no `batch`), the
// source runs name rows of the file, counted from its first row, and may
// cross its segments. Row i of the piece goes to position base +
// positions[i] (`positions` not null), else the rows fill `runs` in order
// (`num_runs` pairs of u32 offset, length, each counted from base).
struct IcefloeAssemblePiece {
  struct ArrowArray* batch;  // a struct array; released by the call
  const uint32_t* positions;
  const uint32_t* runs;
  int64_t num_runs;
  int64_t rows;
  int64_t base;
  const uint8_t* source_runs;
  int64_t num_source_runs;
  const struct IcefloeFile* file;  // not released: the caller's
};

enum IcefloeAssembleResult : int32_t {
  kIcefloeAssembleOk = 0,
  // A piece's runs (or source runs) do not cover its rows, a count is
  // negative, or a piece's arrays do not match the schema.
  kIcefloeAssembleMalformed = 1,
  // A position at or past the batch's rows.
  kIcefloeAssembleOutside = 2,
  // A position named twice (so, as the pieces hold `rows` rows together,
  // another is never written).
  kIcefloeAssembleTwice = 3,
  // The pieces hold a different number of rows than the batch.
  kIcefloeAssembleCount = 4,
  kIcefloeAssembleNoMemory = 5,
  // A source row at or past the rows of the piece's batch.
  kIcefloeAssembleOutsideSource = 6,
  // A column whose layout this library does not build (dictionaries, views,
  // unions, run-end encoding); `inverse` is filled, so the caller can take
  // the rows instead. `error` names the column.
  kIcefloeAssembleUnsupported = 7,
  // A piece's list or string offsets go backwards or past their values, or
  // the batch's offsets would not fit their type. `error` names the column.
  kIcefloeAssembleBadOffsets = 8,
};

// A file of `num_segments` segments, `segments` (struct arrays, moved in:
// each source's release is set to null), or null when the arguments are
// wrong or no memory is left (the segments are then released). A segment's
// array is checked against a batch's schema where a piece reads it.
__attribute__((visibility("default"))) struct IcefloeFile* icefloe_file_new(
    int32_t num_segments, struct ArrowArray* segments) noexcept;
// Releases the file's segments; no piece of a batch not yet assembled may
// name it.
__attribute__((visibility("default"))) void icefloe_file_free(struct IcefloeFile* file) noexcept;
// The file's rows: its segments' lengths added up.
__attribute__((visibility("default"))) int64_t icefloe_file_rows(
    const struct IcefloeFile* file) noexcept;

// Builds the batch of `rows` rows of `schema` (a struct: the record batch's
// schema, not released) from the pieces into *out, which the caller releases
// (out->release) once done. Each piece's batch must pass Arrow's basic
// validation (buffers as long as the lengths need, first and last offsets in
// range: pyarrow's RecordBatch.validate()); everything else (every position,
// run and source run, every interior offset) is checked here. `inverse`, when not null, gets rows
// int64 values: the row, of the pieces' rows laid end to end, at each position (filled once the
// positions check out, so also on kIcefloeAssembleUnsupported). `error` (error_size bytes, may be
// null) gets a message for the codes that name a column. Every piece's batch is released, whatever
// the result (files are not); *out is set only on kIcefloeAssembleOk.
__attribute__((visibility("default"))) int32_t icefloe_assemble(
    int64_t rows, const struct ArrowSchema* schema, int32_t num_pieces,
    const IcefloeAssemblePiece* pieces, struct ArrowArray* out, int64_t* inverse, char* error,
    int64_t error_size) noexcept;

}  // extern "C"
