#include "icefloe/node/tier/readahead.h"

#include <algorithm>
#include <chrono>

#include <sys/mman.h>
#include <unistd.h>

namespace icefloe {

namespace {

// How far ahead a stream's reads are planned: batches, and bytes of reads
// beyond the working set's bound (enough for Belady to see past it).
constexpr uint64_t kHorizonBatches = 1024;
constexpr int64_t kMinHorizonBytes = int64_t{64} << 20;
// Units the thread takes in at once (their reads go to the disk together).
constexpr size_t kRoundUnits = 16;
constexpr int64_t kRoundBytes = int64_t{8} << 20;
// The most the thread sleeps between looks when nothing wakes it.
constexpr auto kIdleWait = std::chrono::milliseconds(200);

int64_t PageSize() {
  static const int64_t size = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
  return size;
}

// The pages `span` touches (outward) or lies over whole (inward).
std::pair<uintptr_t, uintptr_t> Pages(const MappedSpan& span, bool outward) {
  const auto page = static_cast<uintptr_t>(PageSize());
  const auto begin = reinterpret_cast<uintptr_t>(span.data);
  const uintptr_t end = begin + static_cast<uintptr_t>(span.size);
  if (outward) return {begin / page * page, (end + page - 1) / page * page};
  return {(begin + page - 1) / page * page, end / page * page};
}

// Asks the kernel to read `span` (it reads in the background).
void AskFor(const MappedSpan& span) {
  const auto [begin, end] = Pages(span, /*outward=*/true);
  if (end <= begin) return;
  // Advice only: a failure leaves LoadPages to fault the pages in.
  (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);
}

// Touches one byte per page of `span`, so that it is in RAM when this returns.
void LoadPages(const MappedSpan& span) {
  const auto page = static_cast<uintptr_t>(PageSize());
  const auto first = reinterpret_cast<uintptr_t>(span.data);
  const uintptr_t last = first + static_cast<uintptr_t>(span.size);
  uint8_t sum = 0;
  for (uintptr_t at = first; at < last; at = (at / page + 1) * page) {
    sum ^= *reinterpret_cast<const volatile uint8_t*>(at);
  }
  static_cast<void>(sum);
}

// The kernel may reclaim `span`'s pages first (they stay while memory allows).
void MarkCold(const MappedSpan& span) {
  const auto [begin, end] = Pages(span, /*outward=*/false);
  if (end <= begin) return;
#ifdef MADV_COLD
  (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_COLD);
#endif
}

// Bytes of `span` in RAM now (mincore), by whole pages.
int64_t ResidentBytes(const MappedSpan& span) {
  const auto [begin, end] = Pages(span, /*outward=*/true);
  if (end <= begin) return 0;
  const auto page = static_cast<uintptr_t>(PageSize());
  std::vector<unsigned char> in((end - begin) / page);
  if (mincore(reinterpret_cast<void*>(begin), end - begin, in.data()) != 0) return span.size;
  const auto resident = std::count_if(in.begin(), in.end(), [](unsigned char c) { return c & 1; });
  return std::min<int64_t>(span.size, static_cast<int64_t>(resident) * PageSize());
}

}  // namespace

TierReadahead::TierReadahead(int64_t capacity_bytes, WorkingSet::Policy policy)
    : capacity_(capacity_bytes), set_(capacity_bytes, policy) {
  loop_.Start("node readahead", [this]() -> std::optional<BackgroundLoop::Duration> {
    // Units taken in: look for the next ones at once; none: until woken.
    if (Round()) return BackgroundLoop::Duration::zero();
    return kIdleWait;
  });
}

TierReadahead::~TierReadahead() { Stop(); }

void TierReadahead::Stop() { loop_.Stop(); }

ReadaheadStats TierReadahead::Stats() const {
  ReadaheadStats stats;
  stats.ram_bytes = ram_bytes_.load();
  stats.disk_bytes = disk_bytes_.load();
  stats.disk_waits = disk_waits_.load();
  stats.read_ahead_bytes = read_ahead_bytes_.load();
  stats.set_reads = set_reads_.load();
  stats.set_hits = set_hits_.load();
  MutexLock lock(&mu_);
  stats.used_bytes = set_.used_bytes();
  stats.capacity_bytes = set_.capacity_bytes();
  stats.streams = static_cast<int64_t>(streams_.size());
  bool first = true;
  for (const auto& [id, plan] : streams_) {
    int64_t lead = 0;
    for (const PlannedBatch& b : plan.upcoming) {
      bool in = true;
      for (const auto& access : b.units) in = in && InRam(access.unit);
      if (!in) break;
      ++lead;
    }
    stats.lead_batches = first ? lead : std::min(stats.lead_batches, lead);
    first = false;
  }
  return stats;
}

arrow::Result<std::unique_ptr<TierReadahead::TrackedStream>> TierReadahead::Track(
    std::shared_ptr<const CachedDataset> dataset, const PlanTicket& ticket) {
  const ShuffleMode mode = ticket.params.order.mode;
  if (dataset->on_disk().empty() || (mode != ShuffleMode::kNone && mode != ShuffleMode::kBlock)) {
    return nullptr;
  }
  // Units name a batch by the copy's serial and its index (32 bits each); a
  // copy beyond that is not tracked.
  if (dataset->serial() > UINT32_MAX || dataset->batches().size() > UINT32_MAX) return nullptr;
  uint32_t stream = 0;
  {
    MutexLock lock(&mu_);
    // Ids of streams tracked now; the counter wraps past the ones in use.
    while (streams_.count(next_stream_) != 0) ++next_stream_;
    stream = next_stream_++;
    streams_[stream];
  }
  std::unique_ptr<TrackedStream> tracked(
      new TrackedStream(this, stream, std::move(dataset), ticket));
  ARROW_RETURN_NOT_OK(tracked->PlanAhead(ticket.batch_begin));
  return tracked;
}

void TierReadahead::Unplan(Unit unit) {
  auto it = units_.find(unit);
  if (it == units_.end()) return;
  if (--it->second.planned <= 0 && !set_.Resident(unit)) units_.erase(it);
}

void TierReadahead::Untrack(uint32_t stream) {
  MutexLock lock(&mu_);
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  for (const PlannedBatch& b : it->second.upcoming) {
    for (Unit unit : b.reads) Unplan(unit);
  }
  set_.End(stream);
  streams_.erase(it);
  loop_.Wake();
}

void TierReadahead::Plan(uint32_t stream, std::vector<PlannedBatch> batches,
                         const std::vector<std::pair<Unit, MappedSpan>>& spans,
                         const std::shared_ptr<const CachedDataset>& owner) {
  MutexLock lock(&mu_);
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  for (const auto& [unit, span] : spans) {
    UnitInfo& info = units_[unit];
    info.span = span;
    info.owner = owner;
  }
  for (PlannedBatch& b : batches) {
    for (Unit unit : b.reads) {
      UnitInfo& info = units_[unit];
      ++info.planned;
      set_.Extend(stream, unit, info.span.size);
    }
    it->second.upcoming.push_back(std::move(b));
  }
  loop_.Wake();
}

void TierReadahead::Evicted(const std::vector<Unit>& evicted, std::vector<SpanUse>* cold) {
  for (Unit unit : evicted) {
    loading_.erase(unit);
    auto it = units_.find(unit);
    if (it == units_.end()) continue;
    if (auto owner = it->second.owner.lock()) cold->push_back({it->second.span, std::move(owner)});
    if (it->second.planned <= 0) units_.erase(it);
  }
}

void TierReadahead::Read(uint32_t stream, uint64_t end,
                         const std::shared_ptr<const CachedDataset>& owner,
                         std::vector<SpanUse>* missed) {
  std::vector<Unit> evicted;
  std::vector<SpanUse> cold;
  {
    MutexLock lock(&mu_);
    auto it = streams_.find(stream);
    if (it == streams_.end()) return;
    auto& upcoming = it->second.upcoming;
    while (!upcoming.empty() && upcoming.front().batch < end) {
      const PlannedBatch& b = upcoming.front();
      // Where its bytes were as the stream came: in the working set, or
      // else where the kernel says (a miss is then read into the set).
      for (const auto& access : b.units) {
        if (InRam(access.unit)) {
          ram_bytes_ += access.bytes;
        } else {
          missed->push_back({access.span, owner, access.bytes});
        }
      }
      for (Unit unit : b.reads) {
        const bool in = InRam(unit);
        // Invalid only for a unit larger than the whole set: left to the kernel.
        (void)set_.Read(stream, &evicted);
        ++set_reads_;
        if (in) ++set_hits_;
        Unplan(unit);
      }
      upcoming.pop_front();
    }
    Evicted(evicted, &cold);
    loop_.Wake();
  }
  for (const SpanUse& m : cold) MarkCold(m.span);
}

void TierReadahead::CountSpanUse(const std::vector<SpanUse>& missed) {
  for (const SpanUse& m : missed) {
    const int64_t in = ResidentBytes(m.span);
    if (in >= m.span.size) {
      ram_bytes_ += m.bytes;
      continue;
    }
    // The stream read its share of the batch at the share of it in RAM.
    const auto from_ram = static_cast<int64_t>(
        static_cast<double>(m.bytes) * static_cast<double>(in) / static_cast<double>(m.span.size));
    ram_bytes_ += from_ram;
    disk_bytes_ += m.bytes - from_ram;
    ++disk_waits_;
  }
}

bool TierReadahead::Round() {
  std::vector<Unit> evicted;
  std::vector<std::pair<Unit, SpanUse>> round;  // units taken in, their reads in flight
  std::vector<SpanUse> cold;
  {
    MutexLock lock(&mu_);
    // The units read soonest, taken into the set at once (it evicts as
    // Belady says), so that their reads go to the disk together.
    int64_t bytes = 0;
    while (round.size() < kRoundUnits && bytes < kRoundBytes) {
      auto next = set_.NextToLoad();
      if (!next) break;
      auto it = units_.find(*next);
      if (it == units_.end()) break;
      auto owner = it->second.owner.lock();
      if (owner == nullptr || !set_.Load(*next, &evicted).ok()) break;
      loading_.insert(*next);
      round.push_back({*next, {it->second.span, std::move(owner), 0}});
      bytes += it->second.span.size;
    }
    Evicted(evicted, &cold);
  }
  for (const SpanUse& m : cold) MarkCold(m.span);
  cold.clear();  // holds the copies: they go when evicted
  if (round.empty()) return false;
  for (const auto& [unit, load] : round) AskFor(load.span);
  for (const auto& [unit, load] : round) {
    LoadPages(load.span);  // outside the lock: streams go on meanwhile
    MutexLock lock(&mu_);
    if (loading_.erase(unit) != 0) read_ahead_bytes_ += load.span.size;
  }
  return true;
}

TierReadahead::TrackedStream::TrackedStream(TierReadahead* owner, uint32_t stream,
                                            std::shared_ptr<const CachedDataset> dataset,
                                            PlanTicket ticket)
    : owner_(owner),
      stream_(stream),
      dataset_(std::move(dataset)),
      ticket_(std::move(ticket)),
      next_plan_(ticket_.batch_begin) {}

TierReadahead::TrackedStream::~TrackedStream() { owner_->Untrack(stream_); }

arrow::Status TierReadahead::TrackedStream::PlanAhead(uint64_t reading) {
  const int64_t horizon_bytes = std::max(kMinHorizonBytes, 2 * owner_->capacity_);
  const auto& batches = dataset_->batches();
  const auto& on_disk = dataset_->on_disk();
  const uint64_t serial = dataset_->serial();
  std::vector<PlannedBatch> planned;
  std::vector<std::pair<Unit, MappedSpan>> spans;
  while (next_plan_ < ticket_.batch_end && next_plan_ < reading + kHorizonBatches &&
         planned_bytes_ < horizon_bytes) {
    ARROW_ASSIGN_OR_RAISE(std::vector<RowRange> runs, BatchRuns(ticket_.params, next_plan_));
    PlannedBatch b{next_plan_, {}, {}};
    int64_t bytes = 0;
    for (const RowRange& run : runs) {
      // The run's rows this ticket answers for, batch by cached batch.
      auto owned = std::upper_bound(ticket_.owned.begin(), ticket_.owned.end(), run.start,
                                    [](uint64_t v, const RowRange& o) { return v < o.stop; });
      for (; owned != ticket_.owned.end() && owned->start < run.stop; ++owned) {
        uint64_t row = std::max(run.start, owned->start);
        const uint64_t stop = std::min(run.stop, owned->stop);
        while (row < stop) {
          const size_t i = dataset_->BatchIndex(row);
          if (i >= batches.size()) break;  // not held: the stream will say so
          const CachedBatch& held = batches[i];
          const uint64_t to = std::min(stop, held.global_stop());
          if (on_disk[i].size > 0) {
            const Unit unit = (serial << 32) | i;
            const auto share = static_cast<int64_t>(static_cast<double>(on_disk[i].size) *
                                                    static_cast<double>(to - row) /
                                                    static_cast<double>(held.batch->num_rows()));
            if (!b.units.empty() && b.units.back().unit == unit) {
              b.units.back().bytes += share;
            } else {
              b.units.push_back({unit, on_disk[i], share});
            }
            if (unit != last_unit_) {
              b.reads.push_back(unit);
              bytes += on_disk[i].size;
              spans.emplace_back(unit, on_disk[i]);
            }
            last_unit_ = unit;
          }
          row = to;
        }
      }
    }
    planned_.emplace_back(next_plan_, bytes);
    planned_bytes_ += bytes;
    planned.push_back(std::move(b));
    ++next_plan_;
  }
  if (!planned.empty()) owner_->Plan(stream_, std::move(planned), spans, dataset_);
  return arrow::Status::OK();
}

arrow::Status TierReadahead::TrackedStream::Reading(uint64_t end) {
  while (!planned_.empty() && planned_.front().first < end) {
    planned_bytes_ -= planned_.front().second;
    planned_.pop_front();
  }
  std::vector<SpanUse> missed;
  owner_->Read(stream_, end, dataset_, &missed);
  owner_->CountSpanUse(missed);
  return PlanAhead(end);
}

}  // namespace icefloe
