// Epoch plans: which global rows each consumer reads, in which order. Pure
// functions, shared by the head (to build endpoints and tickets) and the nodes
// (to serve plan tickets statelessly); docs/epochs.md is the user-facing text.
//
// An epoch has a global order G: a permutation of the dataset's row ids
// [0, N), chosen by (seed, epoch, shuffle mode) and never materialised
// (GlobalRow evaluates one position in O(1)). A job of world_size ranks with
// batch_size rows per batch reads G from position `start` on, in steps: at
// step s every rank r reads one batch, the positions
//   start + s*W*B + r*B ... start + s*W*B + (r+1)*B - 1   (W world_size, B batch_size),
// so after k steps all ranks together have read G[start, start + k*W*B): a
// prefix of what remains. The tail that does not fill a step is dropped
// (drop_last) or filled by reading G again from its first position (padding:
// position q >= N reads G[q mod N]), so every rank reads the same number of
// batches. A rank's DataLoader worker w of K reads the rank's steps w, w+K,
// w+2K, ...: exactly the batches PyTorch's DataLoader takes from it when it
// takes batches from its workers round-robin.
//
// Resume: a job's state is (seed, epoch, position), position being the count
// of G's positions consumed (PositionAfterSteps). A job restarted with any
// world_size, batch_size or num_workers and start = position reads exactly
// G[position, N), less its own drop or plus its own padding; with the same
// world_size and batch_size it reads exactly what the uninterrupted job would.
//
// All functions are pure (no state, safe from any thread). Those returning a
// Status or Result validate their input and answer Invalid naming the
// offending field; each costs time proportional to its output, never to N.
// slice_map.h turns the rows a plan yields into per-node reads.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "icefloe/common/row_range.h"

namespace icefloe {

/// Version of the order construction (permutation.h): tickets and resume
/// states that carry plan coordinates should carry it too.
inline constexpr uint32_t kEpochOrderVersion = 1;

/// Largest supported row count, block size and rows per step (2^62): keeps
/// every position sum below 2^63.
inline constexpr uint64_t kMaxPlanRows = uint64_t{1} << 62;

enum class ShuffleMode : uint8_t {
  kNone = 0,    ///< G is the identity: rows in id order (Kubeflow-like).
  kBlock = 1,   ///< Blocks of block_rows contiguous rows, in a permuted order.
  kSample = 2,  ///< A pseudo-random permutation of all rows.
};

/// "none", "block" or "sample".
std::string_view ShuffleModeName(ShuffleMode mode);

/// Parses ShuffleModeName's output; Invalid for anything else.
arrow::Result<ShuffleMode> ParseShuffleMode(std::string_view name);

/// Everything that determines an epoch's global order G.
struct EpochOrder {
  uint64_t num_rows = 0;  ///< N: the dataset's exact row count.
  uint64_t seed = 0;
  uint64_t epoch = 0;
  ShuffleMode mode = ShuffleMode::kNone;
  /// Block mode: rows per block (the last block of the dataset may be short).
  uint64_t block_rows = 0;
  /// Block mode: also permute the rows inside each block (per block and epoch).
  bool shuffle_within_block = false;
};

/// OK or Invalid naming the bad field.
arrow::Status ValidateOrder(const EpochOrder& order);

/// One consumer's coordinates in an epoch: a (rank, worker) pair of a job.
struct PlanParams {
  EpochOrder order;
  uint32_t world_size = 1;
  uint32_t rank = 0;
  /// DataLoader workers per rank; 0 (no workers) reads as 1 worker, worker 0.
  uint32_t num_workers = 0;
  uint32_t worker = 0;
  uint64_t batch_size = 1;
  /// True: drop the tail that does not fill a step. False: pad it.
  bool drop_last = true;
  /// Positions of G consumed before this plan (resume); at most N.
  uint64_t start = 0;
};

/// OK or Invalid naming the bad field (world_size 0, rank >= world_size,
/// worker >= num_workers, batch_size 0, start > N, block_rows 0, ...).
arrow::Status ValidatePlan(const PlanParams& params);

/// What a plan amounts to, from `start` on.
struct EpochShape {
  uint64_t remaining_rows = 0;  ///< N - start: positions of G left to read.
  uint64_t step_rows = 0;       ///< world_size * batch_size.
  uint64_t steps = 0;           ///< Batches every rank reads (the same for all ranks).
  uint64_t worker_batches = 0;  ///< Batches this worker reads: steps w, w+K, ... < steps.
  uint64_t dropped_rows = 0;    ///< drop_last: the last positions of G, never read.
  uint64_t padded_rows = 0;     ///< !drop_last: repeats of G[0, ...) that fill the last step.
};

/// The shape of `params`' epoch from its start on.
arrow::Result<EpochShape> Shape(const PlanParams& params);

/// G[position], the row id at a position of the epoch's order; O(1) (block
/// mode with shuffle_within_block and sample mode: a few dozen multiplies).
/// Invalid when position >= N.
arrow::Result<uint64_t> GlobalRow(const EpochOrder& order, uint64_t position);

/// Row ids G[begin], ..., G[end - 1], in order.
arrow::Result<std::vector<uint64_t>> PositionRows(const EpochOrder& order, uint64_t begin,
                                                  uint64_t end);

/// The same rows as maximal runs of consecutive ids, in read order: one run in
/// mode none, one per block touched in block mode without shuffle_within_block
/// (so nodes serve zero-copy slices), mostly single rows otherwise.
arrow::Result<std::vector<RowRange>> PositionRuns(const EpochOrder& order, uint64_t begin,
                                                  uint64_t end);

/// Positions into G rather than row ids.
using PositionRange = RowRange;

/// The rank step that this worker's batch `batch` (0-based, < worker_batches)
/// is: worker + batch * max(num_workers, 1).
uint64_t StepOfBatch(const PlanParams& params, uint64_t batch);

/// Positions of G that this worker's batch `batch` reads, in order: one range,
/// or more where padding wraps around to position 0. Invalid when batch >=
/// worker_batches. To address a rank's steps directly, pass num_workers 0.
arrow::Result<std::vector<PositionRange>> BatchPositions(const PlanParams& params, uint64_t batch);

/// Row ids of this worker's batch `batch`, in order (batch_size of them).
arrow::Result<std::vector<uint64_t>> BatchRows(const PlanParams& params, uint64_t batch);

/// BatchRows as maximal runs of consecutive ids (see PositionRuns).
arrow::Result<std::vector<RowRange>> BatchRuns(const PlanParams& params, uint64_t batch);

/// The resume position after every rank has finished `steps` steps of this
/// plan: min(start + steps * world_size * batch_size, N). Independent of rank
/// and worker; save it with (seed, epoch) and pass it as `start` to resume.
uint64_t PositionAfterSteps(const PlanParams& params, uint64_t steps);

}  // namespace icefloe
