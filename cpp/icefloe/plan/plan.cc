#include "icefloe/plan/plan.h"

#include <algorithm>
#include <optional>
#include <string>

#include "icefloe/plan/permutation.h"
#include "icefloe/plan/window_order.h"

namespace icefloe {

namespace {

// Domain tags: each use of the (seed, epoch) key gets its own permutation.
constexpr uint64_t kTagBlocks = 1;
constexpr uint64_t kTagWithinBlock = 2;
constexpr uint64_t kTagSample = 3;
constexpr uint64_t kTagStrata = 4;
constexpr uint64_t kTagWindows = 5;

uint64_t OrderKey(const EpochOrder& order, uint64_t tag) {
  return MixKey(MixKey(order.seed, order.epoch), tag);
}

uint64_t Workers(const PlanParams& params) { return std::max<uint64_t>(params.num_workers, 1); }

// Evaluates G for one validated EpochOrder. Block mode: blocks are numbered
// by their rows (block b holds [b*B, min((b+1)*B, N))), slots by their place
// in G; slot k holds block blocks_.Forward(k). Only the last block may be
// short, and it may land in any slot, so positions after that slot shift.
// Window mode: window_order.h.
class OrderEval {
 public:
  explicit OrderEval(const EpochOrder& order) : order_(order), blocks_(0, 0), rows_(0, 0) {
    const uint64_t n = order.num_rows;
    if (order.mode == ShuffleMode::kWindow) {
      window_.emplace(n, order.block_rows, order.window_blocks, OrderKey(order, kTagStrata),
                      OrderKey(order, kTagWindows));
    } else if (order.mode == ShuffleMode::kBlock) {
      const uint64_t b = order.block_rows;
      num_blocks_ = n / b + (n % b != 0);
      blocks_ = Permutation(num_blocks_, OrderKey(order, kTagBlocks));
      if (num_blocks_ > 0) {
        short_length_ = n - (num_blocks_ - 1) * b;
        short_slot_ = blocks_.Inverse(num_blocks_ - 1);
      }
    } else if (order.mode == ShuffleMode::kSample) {
      rows_ = Permutation(n, OrderKey(order, kTagSample));
    }
  }

  // Calls visit(base, first, count, within) for the pieces of positions
  // [begin, end): rows base + f(first) ... base + f(first + count - 1), where
  // f is `within` (a per-block permutation) or the identity when null.
  // Not for window mode (callers use window_ directly).
  template <typename Visit>
  void ForEachPiece(uint64_t begin, uint64_t end, Visit&& visit) const {
    switch (order_.mode) {
      case ShuffleMode::kNone:
        if (begin < end) visit(begin, 0, end - begin, nullptr);
        return;
      case ShuffleMode::kSample:
        for (uint64_t p = begin; p < end; ++p) visit(rows_.Forward(p), 0, 1, nullptr);
        return;
      case ShuffleMode::kBlock:
      case ShuffleMode::kWindow:
        break;
    }
    const uint64_t b = order_.block_rows;
    for (uint64_t p = begin; p < end;) {
      uint64_t slot;
      uint64_t offset;
      Locate(p, &slot, &offset);
      const uint64_t block = blocks_.Forward(slot);
      const uint64_t length = block == num_blocks_ - 1 ? short_length_ : b;
      const uint64_t count = std::min(end - p, length - offset);
      if (order_.shuffle_within_block) {
        const Permutation within(length, MixKey(OrderKey(order_, kTagWithinBlock), block));
        visit(block * b, offset, count, &within);
      } else {
        visit(block * b + offset, 0, count, nullptr);
      }
      p += count;
    }
  }

  uint64_t Row(uint64_t position) const {
    if (window_) return window_->Row(position);
    uint64_t row = 0;
    ForEachPiece(position, position + 1,
                 [&](uint64_t base, uint64_t first, uint64_t, const Permutation* within) {
                   row = base + (within ? within->Forward(first) : first);
                 });
    return row;
  }

  void AppendRows(uint64_t begin, uint64_t end, std::vector<uint64_t>* out,
                  PlanCache* cache = nullptr) const {
    if (window_) {
      window_->AppendRows(begin, end, out, cache ? cache->window() : nullptr);
      return;
    }
    ForEachPiece(begin, end,
                 [&](uint64_t base, uint64_t first, uint64_t count, const Permutation* within) {
                   for (uint64_t i = first; i < first + count; ++i) {
                     out->push_back(base + (within ? within->Forward(i) : i));
                   }
                 });
  }

  // Window mode: the order's windows; null otherwise.
  const WindowOrder* window() const { return window_ ? &*window_ : nullptr; }

  void AppendRuns(uint64_t begin, uint64_t end, std::vector<RowRange>* out) const {
    if (window_) {
      std::vector<uint64_t> rows;
      rows.reserve(end - begin);
      window_->AppendRows(begin, end, &rows);
      for (uint64_t row : rows) AppendRun(out, row, row + 1);
      return;
    }
    ForEachPiece(begin, end,
                 [&](uint64_t base, uint64_t first, uint64_t count, const Permutation* within) {
                   if (within == nullptr) {
                     AppendRun(out, base + first, base + first + count);
                     return;
                   }
                   for (uint64_t i = first; i < first + count; ++i) {
                     const uint64_t row = base + within->Forward(i);
                     AppendRun(out, row, row + 1);
                   }
                 });
  }

 private:
  // The slot holding `position` and the offset into its block.
  void Locate(uint64_t position, uint64_t* slot, uint64_t* offset) const {
    const uint64_t b = order_.block_rows;
    const uint64_t short_begin = short_slot_ * b;
    if (position >= short_begin && position < short_begin + short_length_) {
      *slot = short_slot_;
      *offset = position - short_begin;
      return;
    }
    // Past the short block, positions are b - short_length_ behind where
    // full blocks would put them.
    const uint64_t p = position < short_begin ? position : position + (b - short_length_);
    *slot = p / b;
    *offset = p % b;
  }

  EpochOrder order_;
  Permutation blocks_;  // Block mode: slot -> block.
  Permutation rows_;    // Sample mode: position -> row.
  std::optional<WindowOrder> window_;
  uint64_t num_blocks_ = 0;
  uint64_t short_length_ = 0;  // Rows in the last block (== block_rows when it is full).
  uint64_t short_slot_ = 0;    // Slot the last block lands in.
};

arrow::Status CheckPositions(const EpochOrder& order, uint64_t begin, uint64_t end) {
  if (begin > end || end > order.num_rows) {
    return arrow::Status::Invalid("positions [", begin, ", ", end, ") are not within the epoch's ",
                                  order.num_rows, " rows");
  }
  return arrow::Status::OK();
}

// The modes are the values 0 .. size - 1 (a ticket carries the value as a byte).
constexpr bool ModesAreDense() {
  for (size_t v = 0; v < std::size(kShuffleModes); ++v) {
    bool found = false;
    for (const ShuffleModeInfo& m : kShuffleModes) found |= static_cast<size_t>(m.mode) == v;
    if (!found) return false;
  }
  return true;
}
static_assert(ModesAreDense(), "kShuffleModes must hold every value 0 .. size - 1");

}  // namespace

bool IsShuffleMode(uint8_t value) { return value < std::size(kShuffleModes); }

std::string_view ShuffleModeName(ShuffleMode mode) {
  for (const ShuffleModeInfo& m : kShuffleModes) {
    if (m.mode == mode) return m.name;
  }
  return "unknown";
}

arrow::Result<ShuffleMode> ParseShuffleMode(std::string_view name) {
  for (const ShuffleModeInfo& m : kShuffleModes) {
    if (m.name == name) return m.mode;
  }
  // The modes in value order (0, 1, ...): "'none', 'block', 'sample' or 'window'".
  std::string expected;
  constexpr size_t kCount = std::size(kShuffleModes);
  for (size_t v = 0; v < kCount; ++v) {
    expected += v == 0 ? "'" : (v + 1 == kCount ? " or '" : ", '");
    expected += std::string(ShuffleModeName(static_cast<ShuffleMode>(v))) + "'";
  }
  return arrow::Status::Invalid("unknown shuffle mode '", name, "'; expected ", expected);
}

void ResolveDefaults(EpochOrder* order) {
  switch (order->mode) {
    case ShuffleMode::kBlock:
      if (order->block_rows == 0) {
        const uint64_t n = order->num_rows;
        const uint64_t per = n / kDefaultBlockCount + (n % kDefaultBlockCount != 0);
        order->block_rows = std::clamp<uint64_t>(per, 1, kMaxDefaultBlockRows);
      }
      order->window_blocks = 0;
      return;
    case ShuffleMode::kWindow:
      if (order->block_rows == 0) order->block_rows = kDefaultWindowBlockRows;
      if (order->window_blocks == 0) order->window_blocks = kDefaultWindowBlocks;
      order->shuffle_within_block = false;
      return;
    case ShuffleMode::kNone:
    case ShuffleMode::kSample:
      break;
  }
  order->block_rows = 0;
  order->window_blocks = 0;
  order->shuffle_within_block = false;
}

arrow::Status ValidateOrder(const EpochOrder& order) {
  if (!IsShuffleMode(static_cast<uint8_t>(order.mode))) {
    return arrow::Status::Invalid("unknown shuffle mode ", static_cast<int>(order.mode));
  }
  if (order.num_rows > kMaxPlanRows) {
    return arrow::Status::Invalid("num_rows ", order.num_rows, " exceeds the supported maximum ",
                                  kMaxPlanRows);
  }
  if (order.mode == ShuffleMode::kBlock || order.mode == ShuffleMode::kWindow) {
    if (order.block_rows == 0) {
      return arrow::Status::Invalid("block_rows must be at least 1 in ",
                                    ShuffleModeName(order.mode), " shuffle mode");
    }
    if (order.block_rows > kMaxPlanRows) {
      return arrow::Status::Invalid("block_rows ", order.block_rows,
                                    " exceeds the supported maximum ", kMaxPlanRows);
    }
  }
  if (order.mode == ShuffleMode::kWindow) {
    if (order.window_blocks == 0 || order.window_blocks > kMaxWindowBlocks) {
      return arrow::Status::Invalid("window_blocks ", order.window_blocks, " is not between 1 and ",
                                    kMaxWindowBlocks);
    }
    if (order.block_rows > kMaxPlanRows / order.window_blocks) {
      return arrow::Status::Invalid("block_rows * window_blocks (", order.block_rows, " * ",
                                    order.window_blocks, ") exceeds the supported maximum ",
                                    kMaxPlanRows);
    }
  }
  return arrow::Status::OK();
}

arrow::Status ValidatePlan(const PlanParams& params) {
  ARROW_RETURN_NOT_OK(ValidateOrder(params.order));
  if (params.world_size == 0) return arrow::Status::Invalid("world_size must be at least 1");
  if (params.rank >= params.world_size) {
    return arrow::Status::Invalid("rank ", params.rank, " is out of range for world_size ",
                                  params.world_size);
  }
  if (params.worker >= Workers(params)) {
    return arrow::Status::Invalid("worker ", params.worker, " is out of range for num_workers ",
                                  params.num_workers,
                                  params.num_workers == 0 ? " (0 means one worker, 0)" : "");
  }
  if (params.batch_size == 0) return arrow::Status::Invalid("batch_size must be at least 1");
  if (params.batch_size > kMaxPlanRows / params.world_size) {
    return arrow::Status::Invalid("world_size * batch_size (", params.world_size, " * ",
                                  params.batch_size, ") exceeds the supported maximum ",
                                  kMaxPlanRows);
  }
  if (params.start > params.order.num_rows) {
    return arrow::Status::Invalid("start ", params.start, " is past the end of the epoch (",
                                  params.order.num_rows, " rows)");
  }
  return arrow::Status::OK();
}

arrow::Result<EpochShape> Shape(const PlanParams& params) {
  ARROW_RETURN_NOT_OK(ValidatePlan(params));
  EpochShape s;
  const uint64_t w = params.world_size;
  const uint64_t b = params.batch_size;
  s.remaining_rows = params.order.num_rows - params.start;
  s.step_rows = w * b;
  if (params.drop_last) {
    s.steps = s.remaining_rows / s.step_rows;
    s.last_batch_size = s.steps > 0 ? b : 0;
    s.dropped_rows = s.remaining_rows - s.steps * s.step_rows;
  } else if (s.remaining_rows > 0) {
    // DistributedSampler's rule: every rank reads ceil(R / W) positions, the
    // last step's batches as long as what is left of them.
    const uint64_t per_rank = s.remaining_rows / w + (s.remaining_rows % w != 0);
    s.steps = per_rank / b + (per_rank % b != 0);
    s.last_batch_size = per_rank - (s.steps - 1) * b;
    s.padded_rows = per_rank * w - s.remaining_rows;
  }
  const uint64_t k = Workers(params);
  s.worker_batches = s.steps > params.worker ? (s.steps - params.worker + k - 1) / k : 0;
  s.worker_rows = s.worker_batches * b;
  if (s.worker_batches > 0 && StepOfBatch(params, s.worker_batches - 1) == s.steps - 1) {
    s.worker_rows -= b - s.last_batch_size;
  }
  return s;
}

arrow::Result<uint64_t> GlobalRow(const EpochOrder& order, uint64_t position) {
  ARROW_RETURN_NOT_OK(ValidateOrder(order));
  if (position >= order.num_rows) {
    return arrow::Status::Invalid("position ", position, " is past the end of the epoch (",
                                  order.num_rows, " rows)");
  }
  return OrderEval(order).Row(position);
}

arrow::Result<std::vector<uint64_t>> PositionRows(const EpochOrder& order, uint64_t begin,
                                                  uint64_t end) {
  ARROW_RETURN_NOT_OK(ValidateOrder(order));
  ARROW_RETURN_NOT_OK(CheckPositions(order, begin, end));
  std::vector<uint64_t> rows;
  rows.reserve(end - begin);
  OrderEval(order).AppendRows(begin, end, &rows);
  return rows;
}

arrow::Result<std::vector<RowRange>> PositionRuns(const EpochOrder& order, uint64_t begin,
                                                  uint64_t end) {
  ARROW_RETURN_NOT_OK(ValidateOrder(order));
  ARROW_RETURN_NOT_OK(CheckPositions(order, begin, end));
  std::vector<RowRange> runs;
  OrderEval(order).AppendRuns(begin, end, &runs);
  return runs;
}

uint64_t StepOfBatch(const PlanParams& params, uint64_t batch) {
  return params.worker + batch * Workers(params);
}

uint64_t BatchLength(const PlanParams& params, const EpochShape& shape, uint64_t batch) {
  if (batch >= shape.worker_batches) return 0;
  return StepOfBatch(params, batch) + 1 == shape.steps ? shape.last_batch_size : params.batch_size;
}

arrow::Result<std::vector<PositionRange>> BatchPositions(const PlanParams& params, uint64_t batch) {
  ARROW_ASSIGN_OR_RAISE(EpochShape shape, Shape(params));
  if (batch >= shape.worker_batches) {
    return arrow::Status::Invalid("batch ", batch, " is out of range: worker ", params.worker,
                                  " of rank ", params.rank, " reads ", shape.worker_batches,
                                  " batch(es) this epoch");
  }
  // The last step's batches may be shorter, rank after rank as in any step.
  // Padding reads G again from its first position: position q >= N reads
  // G[q mod N], so a resumed job of the same shape pads exactly as the
  // uninterrupted one would have.
  const uint64_t n = params.order.num_rows;
  const uint64_t length = BatchLength(params, shape, batch);
  const uint64_t begin =
      params.start + StepOfBatch(params, batch) * shape.step_rows + params.rank * length;
  const uint64_t end = begin + length;
  std::vector<PositionRange> out;
  for (uint64_t q = begin; q < end;) {
    const uint64_t position = q % n;
    const uint64_t count = std::min(end - q, n - position);
    out.push_back({position, position + count});
    q += count;
  }
  return out;
}

arrow::Result<std::vector<uint64_t>> BatchRows(const PlanParams& params, uint64_t batch,
                                               PlanCache* cache) {
  ARROW_ASSIGN_OR_RAISE(auto positions, BatchPositions(params, batch));
  const OrderEval eval(params.order);
  std::vector<uint64_t> rows;
  uint64_t total = 0;
  for (const PositionRange& p : positions) total += p.size();
  rows.reserve(total);
  for (const PositionRange& p : positions) eval.AppendRows(p.start, p.stop, &rows, cache);
  return rows;
}

namespace {

template <typename T>
void ReserveMore(std::vector<T>* v, size_t more) {
  if (v->capacity() - v->size() < more) v->reserve(std::max(v->size() + more, 2 * v->capacity()));
}

}  // namespace

arrow::Status BatchOwnedRows(const PlanParams& params, uint64_t batch,
                             const std::vector<RowRange>& owned, PlanCache* cache,
                             std::vector<uint64_t>* rows, std::vector<uint32_t>* offsets) {
  ARROW_ASSIGN_OR_RAISE(auto positions, BatchPositions(params, batch));
  const OrderEval eval(params.order);
  uint64_t offset = 0;
  // Callers append batch after batch (a window span's): grow geometrically,
  // as push_back would, or each batch copies all the rows before it.
  ReserveMore(rows, params.batch_size);
  ReserveMore(offsets, params.batch_size);
  if (const WindowOrder* window = eval.window()) {
    for (const PositionRange& p : positions) {
      window->AppendOwnedRows(p.start, p.stop, owned, offset, rows, offsets,
                              cache ? cache->window() : nullptr);
      offset += p.size();
    }
    return arrow::Status::OK();
  }
  std::vector<uint64_t> all;
  for (const PositionRange& p : positions) eval.AppendRows(p.start, p.stop, &all, cache);
  for (uint64_t i = 0; i < all.size(); ++i) {
    auto it = std::upper_bound(owned.begin(), owned.end(), all[i],
                               [](uint64_t v, const RowRange& r) { return v < r.stop; });
    if (it == owned.end() || it->start > all[i]) continue;
    rows->push_back(all[i]);
    offsets->push_back(static_cast<uint32_t>(i));
  }
  return arrow::Status::OK();
}

arrow::Result<std::vector<RowRange>> BatchRuns(const PlanParams& params, uint64_t batch) {
  ARROW_ASSIGN_OR_RAISE(auto positions, BatchPositions(params, batch));
  const OrderEval eval(params.order);
  std::vector<RowRange> runs;
  for (const PositionRange& p : positions) eval.AppendRuns(p.start, p.stop, &runs);
  return runs;
}

uint64_t PositionAfterSteps(const PlanParams& params, uint64_t steps) {
  const uint64_t n = params.order.num_rows;
  if (params.start >= n) return n;
  uint64_t rows;
  if (__builtin_mul_overflow(steps, uint64_t{params.world_size} * params.batch_size, &rows) ||
      rows >= n - params.start) {
    return n;
  }
  return params.start + rows;
}

arrow::Result<uint64_t> ResumePosition(const PlanParams& saved, uint64_t steps) {
  ARROW_ASSIGN_OR_RAISE(EpochShape shape, Shape(saved));
  if (steps > shape.steps) {
    return arrow::Status::Invalid("resume_steps ", steps, " is more than the ", shape.steps,
                                  " steps the saved job's epoch has from position ", saved.start,
                                  " (world_size ", saved.world_size, ", batch_size ",
                                  saved.batch_size, ")");
  }
  return PositionAfterSteps(saved, steps);
}

}  // namespace icefloe
