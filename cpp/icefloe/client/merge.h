// The merge of an epoch's streams into its batches, for the Python client
// (docs/protocol.md, "Pieces"): which pieces make each batch, where each
// one's positions start, and every check that the streams agree.
//
// Every endpoint of an epoch streams pieces in increasing batch order, so a
// merge is a loop over the streams' next messages ("heads"). The caller owns
// the streams and the rows; the merger sees headers and row counts, and
// decides how rows by reference are read (a slice of the node's file, or
// assembled from it):
//
//   m = icefloe_merger_new(streams, first, num_batches)
//   icefloe_merger_next(m, &step), then by step.kind:
//     NEED   read stream step.stream's next message: icefloe_merger_push it,
//            or icefloe_merger_end at the end of the stream (each fills the
//            step after it, as icefloe_merger_next would: one call, not two)
//     BATCH  batch step.batch (or, count > 1, the span of batches from it) is
//            the rows of the front message of each of step.streams[k], put at
//            step.bases[k] (no bases: one batch, every piece at 0): the one
//            piece's rows as they are (step.in_order; by reference, a slice
//            of the node's file, step.in_file), or icefloe_merger_assemble's
//     CHUNK  step.stream's front message is batches step.batch.. whole (by
//            reference, a slice of the node's file, step.in_file)
//     DONE   every batch to num_batches was handed out
//   and icefloe_merger_next again after a BATCH or CHUNK.
//
// A stream's messages leave in the order they were pushed, so the caller keeps
// a queue per stream and takes each step's pieces off their fronts. A refused
// message or a merge that cannot go on (the cluster changed under the epoch)
// returns ICEFLOE_MERGE_ERROR, with the words in icefloe_merger_error;
// the merger then refuses everything. No Arrow, no exceptions.
#pragma once

#include <cstdint>

#include "icefloe/client/arrow_c_abi.h"

extern "C" {

struct IcefloeMerger;

enum : int32_t {
  ICEFLOE_MERGE_ERROR = -1,
  ICEFLOE_MERGE_NEED = 0,
  ICEFLOE_MERGE_BATCH = 1,
  ICEFLOE_MERGE_CHUNK = 2,
  ICEFLOE_MERGE_DONE = 3,
};

// What to do next. Pointers stay valid until the next call on the merger.
struct IcefloeMergeStep {
  int32_t kind;
  int32_t stream;          // NEED: the stream to read; CHUNK: the one whose front it is
  uint64_t batch;          // BATCH, CHUNK: the first batch
  uint32_t count;          // batches: 1, or more for a span or chunk
  uint32_t batch_size;     // every batch's rows but the last
  uint32_t last_size;      // the last batch's rows (batch_size for one batch)
  int32_t num_pieces;      // BATCH
  const int32_t* streams;  // BATCH: each piece's stream, in assembly order
  const int64_t* bases;    // BATCH of a span: each piece's first position; else null
  const int64_t* offsets;  // CHUNK: each batch's first row in its rows; null: one after another
  int32_t in_order;        // BATCH: one piece whose rows are the batch in order, as they are
  // BATCH in_order, CHUNK of a message by reference: its rows are rows
  // start .. start + rows - 1 of the node's file (a zero-copy slice).
  int32_t in_file;
  int64_t start;
  int64_t rows;
};

// How a pushed message holds its rows.
enum : int32_t {
  ICEFLOE_ROWS_CARRIED = 0,  // in the message (its header must not be by reference)
  ICEFLOE_ROWS_IN_FILE = 1,  // in the node's shared file, where its header's source runs name them
};

// Merge flags.
enum : int32_t {
  // Every batch's rows copied out of the nodes' files, never a slice of one
  // (a take's rows are the caller's to write into).
  ICEFLOE_MERGE_COPY = 1,
};

// A merge of `streams` streams from batch `first` to `num_batches`, with
// `flags` (ICEFLOE_MERGE_*), or null when the arguments are wrong or no memory
// is left.
__attribute__((visibility("default"))) IcefloeMerger* icefloe_merger_new(int32_t streams,
                                                                         uint64_t first,
                                                                         uint64_t num_batches,
                                                                         int32_t flags) noexcept;
__attribute__((visibility("default"))) void icefloe_merger_free(IcefloeMerger* merger) noexcept;

// Stream `stream`'s next message, asked for by a NEED: its piece header
// (`size` bytes, which the caller keeps until the message's batch is
// assembled) and the `rows` rows it holds; `holds` says how (ICEFLOE_ROWS_*).
// By reference, its source runs name rows of the node's file, `file_rows`
// rows, which the caller exports for the assembly; the merger decides how they
// are read: a chunk of one run, or of long runs none overlapping another (a
// rank's batches in a span of the file), as a slice of the file (each batch
// at step.offsets), any other chunk as a BATCH of one piece, gathered; a batch
// of one piece whose rows are one run in order as a slice, others assembled
// from the file. A piece whose runs or positions do not count its rows, or
// whose source runs leave the file or do not count them, is refused. Fills
// *next with the step after it and returns its kind (ICEFLOE_MERGE_ERROR when
// the message is refused).
__attribute__((visibility("default"))) int32_t icefloe_merger_push(
    IcefloeMerger* merger, int32_t stream, const uint8_t* header, int64_t size, int64_t rows,
    int32_t holds, int64_t file_rows, IcefloeMergeStep* next) noexcept;

// Stream `stream`'s next message, asked for by a NEED, by reference, whose
// source runs name rows of `file` (assemble.h) and may cross its segments:
// as icefloe_merger_push with ICEFLOE_ROWS_IN_FILE and the file's rows, but
// the merger never hands its rows out as a slice (a batch of it is
// assembled; a chunk is refused: nodes cut chunks at segments). The caller
// keeps `file` until the message's batch is assembled.
__attribute__((visibility("default"))) int32_t icefloe_merger_push_file(
    IcefloeMerger* merger, int32_t stream, const uint8_t* header, int64_t size, int64_t rows,
    const struct IcefloeFile* file, IcefloeMergeStep* next) noexcept;

// Stream `stream`'s next message, asked for by a NEED, when the caller made
// it (a take's rows from a node's shared file it holds): `rows` rows of batch
// `batch`, of `batch_size` positions, at `positions` (copied). Fills *next
// as icefloe_merger_push does.
__attribute__((visibility("default"))) int32_t icefloe_merger_push_rows(
    IcefloeMerger* merger, int32_t stream, uint64_t batch, uint32_t batch_size, int64_t rows,
    const uint32_t* positions, IcefloeMergeStep* next) noexcept;

// Stream `stream` ended (asked for by a NEED). Fills *next as
// icefloe_merger_push does.
__attribute__((visibility("default"))) int32_t icefloe_merger_end(IcefloeMerger* merger,
                                                                  int32_t stream,
                                                                  IcefloeMergeStep* next) noexcept;

// The next step into *out; returns its kind.
__attribute__((visibility("default"))) int32_t icefloe_merger_next(IcefloeMerger* merger,
                                                                   IcefloeMergeStep* out) noexcept;

// Assembles the batch of the last step, a BATCH (before the next call of
// icefloe_merger_next): icefloe_assemble (assemble.h) of its pieces, whose
// arrays the caller exported in step.streams' order (a message's rows, or the
// node's file for ICEFLOE_ROWS_IN_FILE; for a message pushed with its file,
// an array the call ignores), at step.bases, with every argument
// and result as there, except `error`: the words of the caller's error for
// every result but kIcefloeAssembleOk (the column, for
// kIcefloeAssembleUnsupported). May be called again for the same batch (with
// the inverse, say); called after any other step, it returns
// kIcefloeAssembleMalformed and touches nothing else.
__attribute__((visibility("default"))) int32_t icefloe_merger_assemble(
    IcefloeMerger* merger, const struct ArrowSchema* schema, struct ArrowArray* batches,
    struct ArrowArray* out, int64_t* inverse, char* error, int64_t error_size) noexcept;

// The rows of piece `piece` of the last BATCH (before the next call of
// icefloe_merger_next) as rows of what the caller exported for it, in the
// piece's order: its source rows in the node's file, by reference, else
// 0, 1, ...: `out` gets the piece's rows int64 values (for a column the
// assembly does not build, which the caller takes instead). Returns 0, or -1
// after any other step or for a piece out of range.
__attribute__((visibility("default"))) int32_t icefloe_merger_piece_rows(
    const IcefloeMerger* merger, int32_t piece, int64_t* out) noexcept;

// Why the merger refused (empty while it has not).
__attribute__((visibility("default"))) const char* icefloe_merger_error(
    const IcefloeMerger* merger) noexcept;

}  // extern "C"
