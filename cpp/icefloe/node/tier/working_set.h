// Which of a node's on-disk units to keep in RAM, knowing what its streams
// will read (issue: the disk tier, "clairvoyant prefetch and eviction"; the
// node calls it read-ahead, ARCHITECTURE.md's glossary).
//
// An epoch's order is a pure function of its plan (plan.h), so a node knows,
// once a consumer's stream starts, the exact units (cached batches, or parts
// of them, on disk) the stream will read and in what order. A WorkingSet
// holds a bounded set of units in RAM and, told each stream's upcoming reads,
// keeps the units needed soonest: on a miss it evicts the resident unit whose
// next read, over every stream, lies furthest ahead (Belady's choice, optimal
// when every future read is known; units no stream will read go first, least
// recently used among them), and NextToLoad names the unit to load next, so a
// reader can fill RAM ahead of the streams. Policy::kLru is the baseline it is
// measured against (an LRU cache thrashes under epoch scans larger than it).
//
// "Ahead" is counted in reads of the stream itself: streams are taken to move
// at one pace, which a node serving one job's ranks sees. A stream's upcoming
// reads are what its caller says (a bounded horizon, extended as it reads).
// Not thread-safe: the caller serializes; every call costs O(resident units
// + streams) at most.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

namespace icefloe {

class WorkingSet {
 public:
  enum class Policy { kBelady, kLru };
  using Unit = uint64_t;
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

  /// A set of at most `capacity_bytes` bytes of units.
  WorkingSet(int64_t capacity_bytes, Policy policy);

  /// Stream `stream`'s reads after the ones it made, nearest first (replacing
  /// what it said before), each unit with its bytes.
  void Plan(uint32_t stream, const std::vector<std::pair<Unit, int64_t>>& upcoming);
  /// Appends to stream `stream`'s upcoming reads (its horizon moved on).
  void Extend(uint32_t stream, Unit unit, int64_t bytes);
  /// The stream is gone: its reads no longer count.
  void End(uint32_t stream);

  /// Stream `stream` reads its next planned unit: whether it was resident (a
  /// hit). A miss loads it, evicting as the policy says (the units evicted
  /// are appended to `evicted`, when given). Invalid when the stream has
  /// nothing planned, or the unit alone is larger than the set.
  arrow::Result<bool> Read(uint32_t stream, std::vector<Unit>* evicted = nullptr);

  /// The unit to load ahead of the streams (Policy::kBelady): the one not
  /// resident whose next read is soonest, when it fits without evicting a
  /// unit read sooner than it; nullopt when none. Load it with Load.
  std::optional<Unit> NextToLoad() const;
  /// Loads `unit` (planned by some stream), evicting as the policy says
  /// (into `evicted`, as Read).
  arrow::Status Load(Unit unit, std::vector<Unit>* evicted = nullptr);

  bool Resident(Unit unit) const { return resident_.count(unit) != 0; }
  int64_t used_bytes() const { return used_; }
  int64_t capacity_bytes() const { return capacity_; }

 private:
  struct Stream {
    std::deque<Unit> upcoming;
    uint64_t reads = 0;  // reads made: the index of upcoming.front()
  };
  struct Held {
    int64_t bytes = 0;
    std::list<Unit>::iterator recent;  // its place in recent_ (front: most recent)
  };
  // Reads from now until `unit` is next read by any stream; kNever: by none.
  uint64_t NextRead(Unit unit) const;
  void Forget(uint32_t stream);  // its planned reads
  // Makes room for `bytes` more, evicting; false when it cannot.
  bool MakeRoom(int64_t bytes, Unit keep, std::vector<Unit>* evicted);
  arrow::Status Insert(Unit unit, int64_t bytes, std::vector<Unit>* evicted);

  const int64_t capacity_;
  const Policy policy_;
  int64_t used_ = 0;
  std::unordered_map<uint32_t, Stream> streams_;
  // A unit some stream plans to read: its bytes and, per such stream, the
  // indices of its reads of it, ascending.
  struct Planned {
    int64_t bytes = 0;
    std::vector<std::pair<uint32_t, std::deque<uint64_t>>> reads;
  };
  std::unordered_map<Unit, Planned> planned_;
  std::unordered_map<Unit, Held> resident_;
  std::list<Unit> recent_;
};

}  // namespace icefloe
