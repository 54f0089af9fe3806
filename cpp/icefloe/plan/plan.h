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
// prefix of what remains. With drop_last the tail that does not fill a step
// is dropped. Without it every rank reads ceil(R / W) positions of the R that
// remain (as PyTorch's DistributedSampler does): full batches, then one last
// step whose batches are shorter (the same length L on every rank, rank r
// reading the L positions after rank r-1's), with the at most W - 1 positions
// past the end read as G again from its first position (padding: position
// q >= N reads G[q mod N]). Every rank reads the same number of batches. A
// rank's DataLoader worker w of K reads the rank's steps w, w+K, w+2K, ...:
// exactly the batches PyTorch's DataLoader takes from it when it takes
// batches from its workers round-robin.
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

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "icefloe/common/row_range.h"
#include "icefloe/plan/window_order.h"

namespace icefloe {

/// Version of the order construction (permutation.h): tickets and resume
/// states that carry plan coordinates should carry it too.
/// 2: the window mode, mode defaults for block_rows, and padding that gives
/// every rank ceil(R / W) positions (a short last batch) instead of full
/// batches.
inline constexpr uint32_t kEpochOrderVersion = 2;

/// Largest supported row count, block size and rows per step (2^62): keeps
/// every position sum below 2^63.
inline constexpr uint64_t kMaxPlanRows = uint64_t{1} << 62;

/// Largest window_blocks (window mode): bounds the per-window work.
inline constexpr uint64_t kMaxWindowBlocks = uint64_t{1} << 16;

enum class ShuffleMode : uint8_t {
  kNone = 0,    ///< G is the identity: rows in id order (Kubeflow-like).
  kBlock = 1,   ///< Blocks of block_rows contiguous rows, in a permuted order.
  kSample = 2,  ///< A pseudo-random permutation of all rows.
  /// Windows of window_blocks blocks, one block from each of window_blocks
  /// equal strata of the table, rows permuted within each window
  /// (window_order.h). The default.
  kWindow = 3,
};

/// A shuffle mode and its name on the wire.
struct ShuffleModeInfo {
  ShuffleMode mode;
  std::string_view name;
};

/// Every shuffle mode, the default (window) first: the one list of them, in
/// the order the wire names them (the epoch descriptor's and epoch shape's
/// choices, python/icefloe/_fields.json).
inline constexpr ShuffleModeInfo kShuffleModes[] = {
    {ShuffleMode::kWindow, "window"},
    {ShuffleMode::kNone, "none"},
    {ShuffleMode::kBlock, "block"},
    {ShuffleMode::kSample, "sample"},
};

/// kShuffleModes' names, in its order (a string field's choices).
inline constexpr std::array<std::string_view, std::size(kShuffleModes)> kShuffleModeNames = [] {
  std::array<std::string_view, std::size(kShuffleModes)> names{};
  for (size_t i = 0; i < names.size(); ++i) names[i] = kShuffleModes[i].name;
  return names;
}();

/// Whether `value` is a ShuffleMode's (a ticket's mode byte).
bool IsShuffleMode(uint8_t value);

/// "none", "block", "sample" or "window" (kShuffleModes).
std::string_view ShuffleModeName(ShuffleMode mode);

/// Parses ShuffleModeName's output; Invalid for anything else.
arrow::Result<ShuffleMode> ParseShuffleMode(std::string_view name);

/// Everything that determines an epoch's global order G.
struct EpochOrder {
  uint64_t num_rows = 0;  ///< N: the dataset's exact row count.
  uint64_t seed = 0;
  uint64_t epoch = 0;
  ShuffleMode mode = ShuffleMode::kNone;
  /// Block and window modes: rows per block (the last block of the dataset
  /// may be short). 0 before ResolveDefaults: the mode's default.
  uint64_t block_rows = 0;
  /// Block mode: also permute the rows inside each block (per block and epoch).
  bool shuffle_within_block = false;
  /// Window mode: blocks per window (and strata of the table). 0 before
  /// ResolveDefaults: the default.
  uint64_t window_blocks = 0;
};

/// Window mode's defaults: 32-row blocks (two 64-byte cache lines of a
/// 4-byte column), 128 per window: 4096 rows, a power of four (its
/// permutation needs no cycle walking) no larger than common batches (a
/// batch holding whole windows is gathered as whole blocks), with strata
/// fine enough that batches of 1024 rows mix as well as uniform samples.
inline constexpr uint64_t kDefaultWindowBlockRows = 32;
inline constexpr uint64_t kDefaultWindowBlocks = 128;
/// Block mode's default: ceil(N / 64) rows per block, at most 65536, so a
/// small table still has 64 blocks to permute.
inline constexpr uint64_t kDefaultBlockCount = 64;
inline constexpr uint64_t kMaxDefaultBlockRows = 65536;

/// Replaces a 0 block_rows or window_blocks with the mode's default, and
/// clears the fields the mode does not use (so equal orders compare equal).
/// Depends only on the order (never on how the dataset was loaded).
void ResolveDefaults(EpochOrder* order);

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
  /// True: drop the tail that does not fill a step. False: read it in a
  /// shorter last step, padded to a multiple of world_size.
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
  uint64_t step_rows = 0;       ///< world_size * batch_size: positions of a full step.
  uint64_t steps = 0;           ///< Batches every rank reads (the same for all ranks).
  /// Rows of every rank's batch in the last step: batch_size, or fewer
  /// without drop_last; 0 when there are no steps.
  uint64_t last_batch_size = 0;
  uint64_t worker_batches = 0;  ///< Batches this worker reads: steps w, w+K, ... < steps.
  uint64_t worker_rows = 0;     ///< Rows in this worker's batches.
  uint64_t dropped_rows = 0;    ///< drop_last: the last positions of G, never read.
  /// !drop_last: W * ceil(R / W) - R (< W) repeats of G[0, ...) that fill the last step.
  uint64_t padded_rows = 0;
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

/// Rows in this worker's batch `batch` (batch_size, or last_batch_size in the
/// last step); 0 when batch >= worker_batches.
uint64_t BatchLength(const PlanParams& params, const EpochShape& shape, uint64_t batch);

/// Positions of G that this worker's batch `batch` reads, in order: one range,
/// or more where padding wraps around to position 0. Invalid when batch >=
/// worker_batches. To address a rank's steps directly, pass num_workers 0.
arrow::Result<std::vector<PositionRange>> BatchPositions(const PlanParams& params, uint64_t batch);

/// Scratch state for evaluating many batches of one plan faster (a node
/// serving a plan ticket's stream); results never depend on it. Not
/// thread-safe: one per stream.
class PlanCache {
 public:
  WindowCache* window() { return &window_; }

 private:
  WindowCache window_;
};

/// Row ids of this worker's batch `batch`, in order (BatchLength of them).
arrow::Result<std::vector<uint64_t>> BatchRows(const PlanParams& params, uint64_t batch,
                                               PlanCache* cache = nullptr);

/// The rows of this worker's batch `batch` that lie in `owned` (sorted,
/// disjoint ranges), and the offset of each in the batch: what one endpoint
/// serves of it, in no particular order. In window mode the work follows the
/// owned share of the batch rather than the whole batch (when the batch
/// covers windows whole). Same errors as BatchRows.
arrow::Status BatchOwnedRows(const PlanParams& params, uint64_t batch,
                             const std::vector<RowRange>& owned, PlanCache* cache,
                             std::vector<uint64_t>* rows, std::vector<uint32_t>* offsets);

/// BatchRows as maximal runs of consecutive ids (see PositionRuns).
arrow::Result<std::vector<RowRange>> BatchRuns(const PlanParams& params, uint64_t batch);

/// The resume position after every rank has finished `steps` steps of this
/// plan: min(start + steps * world_size * batch_size, N) (N after the last
/// step, whether it was short or not). Independent of rank and worker; save
/// it with (seed, epoch) and pass it as `start` to resume.
uint64_t PositionAfterSteps(const PlanParams& params, uint64_t steps);

/// PositionAfterSteps for a saved job, validated: Invalid when `saved` is not
/// a valid plan or `steps` exceeds the steps its epoch has.
arrow::Result<uint64_t> ResumePosition(const PlanParams& saved, uint64_t steps);

}  // namespace icefloe
