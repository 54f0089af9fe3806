// The merge of an epoch's streams into its batches, for the Python client
// (docs/protocol.md, "Pieces"): which pieces make each batch, where each
// one's positions start, and every check that the streams agree.
//
// Every endpoint of an epoch streams pieces in increasing batch order, so a
// merge is a loop over the streams' next messages ("heads"). The caller owns
// the streams and the rows; the merger sees headers and row counts only:
//
//   m = icefloe_merger_new(streams, first, num_batches)
//   icefloe_merger_next(m, &step), then by step.kind:
//     NEED   read stream step.stream's next message: icefloe_merger_push it,
//            or icefloe_merger_end at the end of the stream (each fills the
//            step after it, as icefloe_merger_next would: one call, not two)
//     BATCH  batch step.batch (or, count > 1, the span of batches from it) is
//            the rows of the front message of each of step.streams[k], put at
//            step.bases[k] (no bases: one batch, every piece at 0): the one
//            piece's rows as they are (step.in_order), or
//            icefloe_merger_assemble's
//     CHUNK  step.stream's front message is batches step.batch.. whole
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
#include "icefloe/client/protocol_abi.h"

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
  const int64_t* offsets;  // CHUNK pushed with runs: each batch's first row; else null
  int32_t in_order;        // BATCH: one piece whose rows fill the batch in order, as they are
};

// How a pushed message holds its rows.
enum : int32_t {
  ICEFLOE_ROWS_CARRIED = 0,  // in the message (its header must not be by reference)
  ICEFLOE_ROWS_TAKEN = 1,    // by reference, already taken out of the node's file
  ICEFLOE_ROWS_IN_FILE = 2,  // by reference, left in the file: its source runs name them
};

// A merge of `streams` streams from batch `first` to `num_batches` (or null
// when the arguments are wrong or no memory is left).
__attribute__((visibility("default"))) IcefloeMerger* icefloe_merger_new(
    int32_t streams, uint64_t first, uint64_t num_batches) noexcept;
__attribute__((visibility("default"))) void icefloe_merger_free(IcefloeMerger* merger) noexcept;

// Stream `stream`'s next message, asked for by a NEED: its piece header
// (`size` bytes, which the caller keeps until the message's batch is
// assembled), which *parsed receives when not null, and the rows it holds; `holds` says
// how (ICEFLOE_ROWS_*). A piece whose runs or positions do not count its rows
// is refused. `num_runs` runs (starts, lengths) of the
// message's rows: a chunk whose batches are those runs of its rows, not all of
// them (a span of the shared file); its batches' first rows come back in
// step.offsets. Fills *next with the step after it and returns its kind
// (ICEFLOE_MERGE_ERROR when the message is refused).
__attribute__((visibility("default"))) int32_t icefloe_merger_push(
    IcefloeMerger* merger, int32_t stream, const uint8_t* header, int64_t size, int64_t rows,
    int32_t holds, const int64_t* run_starts, const int64_t* run_lengths, int64_t num_runs,
    IcefloePieceHeader* parsed, IcefloeMergeStep* next) noexcept;

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
// node's file for ICEFLOE_ROWS_IN_FILE), at step.bases, with every argument
// and result as there. May be called again for the same batch (with the
// inverse, say); called after any other step, it returns
// kIcefloeAssembleMalformed and touches nothing.
__attribute__((visibility("default"))) int32_t icefloe_merger_assemble(
    IcefloeMerger* merger, const struct ArrowSchema* schema, struct ArrowArray* batches,
    struct ArrowArray* out, int64_t* inverse, char* error, int64_t error_size) noexcept;

// Why the merger refused (empty while it has not).
__attribute__((visibility("default"))) const char* icefloe_merger_error(
    const IcefloeMerger* merger) noexcept;

}  // extern "C"
