// A node's clairvoyant read-ahead for its disk tier (issue: the disk tier,
// "clairvoyant prefetch and eviction"; on a node the word is read-ahead,
// prefetch being the client's: ARCHITECTURE.md's glossary).
//
// A plan stream's order is known the moment it starts (plan.h), so the
// batches of a copy on the tier that it will read, and in what order, are
// known too. The read-ahead tracks every plan stream over a copy with rows
// on the tier (a *tracked stream*): each tells it the tier batches (units: record batches of a
// tier file, contiguous on disk, about kTierBatchBytes) its next batches read,
// a bounded horizon ahead, and as it reads them. One WorkingSet (Belady: the
// unit read furthest ahead over all streams goes first) holds the units in
// RAM, shared by every job reading the copy; the read-ahead's one thread
// loads the units read soonest whenever that evicts nothing read sooner, a
// few at a time (madvise(MADV_WILLNEED) on all, so that their reads go to
// the disk together, then one read per page so that it knows each is in),
// and marks evicted units cold (MADV_COLD: the kernel reclaims them
// first, and keeps them while memory allows).
//
// Streams never wait for it: a stream reads through the mapping, and a page
// that is not in RAM is read by the kernel on the fault. What each stream
// read is counted by where it was (ReadaheadStats): in RAM (read ahead, or
// still cached by the kernel) or read from disk while the stream waited.
//
// Which streams it tracks: shuffles whose batches are runs of rows (none,
// block). A window or sample batch reads a few rows of every stratum of the
// table, so its tier batches are all of them, every batch; the kernel's
// own readahead serves those (this one would only reload what it evicts).
//
// Thread-safe. Threads: one, joined by Stop or the destructor.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <arrow/result.h>

#include "icefloe/common/background_loop.h"
#include "icefloe/common/mutex.h"
#include "icefloe/node/copy/dataset.h"
#include "icefloe/node/tier/working_set.h"
#include "icefloe/plan/plan.h"
#include "icefloe/protocol/plan_ticket.h"

namespace icefloe {

/// What the read-ahead did and saw (counters since start, and gauges now).
struct ReadaheadStats {
  int64_t ram_bytes = 0;         ///< tier bytes streams read that were in RAM
  int64_t disk_bytes = 0;        ///< tier bytes streams waited for the disk to read
  int64_t disk_waits = 0;        ///< reads of a tier batch that waited for the disk
  int64_t read_ahead_bytes = 0;  ///< bytes read ahead of the streams
  /// Reads of a unit the streams made (a unit read on by the next batch is
  /// one read), and of those the ones that found it in the working set: the
  /// policy's hit ratio (Belady with read-ahead against LRU).
  int64_t set_reads = 0;
  int64_t set_hits = 0;
  int64_t used_bytes = 0;      ///< the working set now
  int64_t capacity_bytes = 0;  ///< its bound
  int64_t streams = 0;         ///< streams tracked now
  /// Of the streams tracked, the fewest upcoming batches whose tier batches
  /// are all in the working set (0 when none is tracked).
  int64_t lead_batches = 0;
};

class TierReadahead {
 public:
  /// A working set of `capacity_bytes` (0: nothing is read ahead; reads are
  /// still counted). `policy`: kLru is the baseline it is measured against.
  explicit TierReadahead(int64_t capacity_bytes,
                         WorkingSet::Policy policy = WorkingSet::Policy::kBelady);
  ~TierReadahead();
  TierReadahead(const TierReadahead&) = delete;
  TierReadahead& operator=(const TierReadahead&) = delete;

  class TrackedStream;
  /// Tracks a plan stream over `dataset` serving `ticket` (checked by the
  /// caller): null when the copy has nothing on the tier or the shuffle is
  /// not tracked (window, sample).
  arrow::Result<std::unique_ptr<TrackedStream>> Track(std::shared_ptr<const CachedDataset> dataset,
                                                      const PlanTicket& ticket);

  ReadaheadStats Stats() const;
  /// Stops the thread (idempotent); tracked streams still count their reads.
  void Stop();

 private:
  using Unit = WorkingSet::Unit;
  struct UnitInfo {
    MappedSpan span;
    std::weak_ptr<const CachedDataset> owner;  // null once the copy is gone
    int64_t planned = 0;                       // planned reads of it, all streams
  };
  struct PlannedBatch {
    uint64_t batch = 0;
    // Every tier batch it reads, with the bytes it reads of it (its share
    // of the batch's bytes by rows).
    struct Access {
      Unit unit;
      MappedSpan span;
      int64_t bytes;
    };
    std::vector<Access> units;
    // The reads planned for it: its units, less the first when the batch
    // before read that one last (a stream reads on in a unit without a new read).
    std::vector<Unit> reads;
  };
  struct StreamPlan {
    std::deque<PlannedBatch> upcoming;
  };
  // A unit's span, its copy held while the span is touched outside the
  // lock: a read missed in the working set (the kernel is asked where it
  // was), a unit being loaded, or one evicted to mark cold.
  struct SpanUse {
    MappedSpan span;
    std::shared_ptr<const CachedDataset> owner;
    int64_t bytes = 0;  // a missed read: what the stream read of it
  };

  // One round of the thread: the units read soonest taken into the working
  // set and read in. False when there were none.
  bool Round() EXCLUDES(mu_);
  void Untrack(uint32_t stream) EXCLUDES(mu_);
  // Appends planned batches of `stream`, whose units' spans are `spans`.
  void Plan(uint32_t stream, std::vector<PlannedBatch> batches,
            const std::vector<std::pair<Unit, MappedSpan>>& spans,
            const std::shared_ptr<const CachedDataset>& owner) EXCLUDES(mu_);
  // The tracked stream reads its planned batches before `end`: the units
  // not in the working set go to `missed` (asked of the kernel after).
  void Read(uint32_t stream, uint64_t end, const std::shared_ptr<const CachedDataset>& owner,
            std::vector<SpanUse>* missed) EXCLUDES(mu_);
  // One fewer planned read of `unit`: forgotten when none is left and it is
  // not resident.
  void Unplan(Unit unit) REQUIRES(mu_);
  // Evicted units: forgotten unless planned; the live ones go to `cold`.
  void Evicted(const std::vector<Unit>& evicted, std::vector<SpanUse>* cold) REQUIRES(mu_);
  void CountSpanUse(const std::vector<SpanUse>& missed);
  // In the working set and read in (not still being read).
  bool InRam(Unit unit) const REQUIRES(mu_) {
    return set_.Resident(unit) && loading_.count(unit) == 0;
  }

  const int64_t capacity_;
  mutable Mutex mu_;
  WorkingSet set_ GUARDED_BY(mu_);
  std::unordered_map<Unit, UnitInfo> units_ GUARDED_BY(mu_);
  std::unordered_set<Unit> loading_ GUARDED_BY(mu_);  // in the set, reads in flight
  std::unordered_map<uint32_t, StreamPlan> streams_ GUARDED_BY(mu_);
  uint32_t next_stream_ GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> ram_bytes_{0}, disk_bytes_{0}, disk_waits_{0}, read_ahead_bytes_{0};
  std::atomic<int64_t> set_reads_{0}, set_hits_{0};
  BackgroundLoop loop_;  // last: started once the rest is, stopped first
};

/// One plan stream, tracked: it calls Reading as it reads and ends when it
/// goes. Used by the stream's thread only.
class TierReadahead::TrackedStream {
 public:
  ~TrackedStream();
  TrackedStream(const TrackedStream&) = delete;
  TrackedStream& operator=(const TrackedStream&) = delete;
  /// The stream reads its batches before `end` now.
  arrow::Status Reading(uint64_t end);

 private:
  friend class TierReadahead;
  TrackedStream(TierReadahead* owner, uint32_t stream, std::shared_ptr<const CachedDataset> dataset,
                PlanTicket ticket);
  // Plans batches from next_plan_ on, up to the horizon.
  arrow::Status PlanAhead(uint64_t reading);

  TierReadahead* owner_;
  const uint32_t stream_;
  std::shared_ptr<const CachedDataset> dataset_;
  const PlanTicket ticket_;
  PlanCache cache_;
  uint64_t next_plan_;         // the first batch not yet planned
  Unit last_unit_ = ~Unit{0};  // the last unit planned (read once while batches stay in it)
  // Planned reads not yet made: (batch, bytes its reads planned), in order.
  std::deque<std::pair<uint64_t, int64_t>> planned_;
  int64_t planned_bytes_ = 0;  // their sum
};

}  // namespace icefloe
