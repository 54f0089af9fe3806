#include "icefloe/node/tier/working_set.h"

#include <algorithm>

namespace icefloe {

namespace {

template <typename Reads>
auto FindStream(Reads& reads, uint32_t stream) {
  return std::find_if(reads.begin(), reads.end(),
                      [stream](const auto& e) { return e.first == stream; });
}

}  // namespace

WorkingSet::WorkingSet(int64_t capacity_bytes, Policy policy)
    : capacity_(std::max<int64_t>(capacity_bytes, 0)), policy_(policy) {}

void WorkingSet::Forget(uint32_t stream) {
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  for (Unit unit : it->second.upcoming) {
    auto p = planned_.find(unit);
    if (p == planned_.end()) continue;
    auto& reads = p->second.reads;
    if (auto mine = FindStream(reads, stream); mine != reads.end()) reads.erase(mine);
    if (reads.empty()) planned_.erase(p);
  }
  it->second.upcoming.clear();
}

void WorkingSet::Plan(uint32_t stream, const std::vector<std::pair<Unit, int64_t>>& upcoming) {
  Forget(stream);
  for (const auto& [unit, bytes] : upcoming) Extend(stream, unit, bytes);
}

void WorkingSet::Extend(uint32_t stream, Unit unit, int64_t bytes) {
  Stream& s = streams_[stream];
  const uint64_t index = s.reads + s.upcoming.size();
  s.upcoming.push_back(unit);
  Planned& planned = planned_[unit];
  planned.bytes = bytes;
  auto mine = FindStream(planned.reads, stream);
  if (mine == planned.reads.end()) {
    planned.reads.push_back({stream, {}});
    mine = planned.reads.end() - 1;
  }
  mine->second.push_back(index);
}

void WorkingSet::End(uint32_t stream) {
  Forget(stream);
  streams_.erase(stream);
}

uint64_t WorkingSet::NextRead(Unit unit) const {
  auto p = planned_.find(unit);
  if (p == planned_.end()) return kNever;
  uint64_t next = kNever;
  for (const auto& [stream, indices] : p->second.reads) {
    next = std::min(next, indices.front() - streams_.at(stream).reads);  // never empty
  }
  return next;
}

bool WorkingSet::MakeRoom(int64_t bytes, Unit keep, std::vector<Unit>* evicted) {
  if (bytes > capacity_) return false;
  while (used_ + bytes > capacity_) {
    // LRU: the least recently used. Belady: the one read furthest ahead (or
    // never), the least recently used among equals.
    auto victim = recent_.end();
    uint64_t furthest = 0;
    for (auto it = recent_.rbegin(); it != recent_.rend(); ++it) {
      if (*it == keep) continue;
      const uint64_t next = policy_ == Policy::kLru ? kNever : NextRead(*it);
      if (victim == recent_.end() || next > furthest) {
        victim = std::prev(it.base());
        furthest = next;
        if (next == kNever) break;
      }
    }
    if (victim == recent_.end()) return false;
    used_ -= resident_.at(*victim).bytes;
    if (evicted != nullptr) evicted->push_back(*victim);
    resident_.erase(*victim);
    recent_.erase(victim);
  }
  return true;
}

arrow::Status WorkingSet::Insert(Unit unit, int64_t bytes, std::vector<Unit>* evicted) {
  if (!MakeRoom(bytes, unit, evicted)) {
    return arrow::Status::Invalid("working set: unit ", unit, " of ", bytes,
                                  " bytes is larger than the set's ", capacity_);
  }
  recent_.push_front(unit);
  resident_[unit] = Held{bytes, recent_.begin()};
  used_ += bytes;
  return arrow::Status::OK();
}

arrow::Result<bool> WorkingSet::Read(uint32_t stream, std::vector<Unit>* evicted) {
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.upcoming.empty()) {
    return arrow::Status::Invalid("working set: stream ", stream, " has no planned read");
  }
  Stream& s = it->second;
  const Unit unit = s.upcoming.front();
  auto p = planned_.find(unit);
  const int64_t bytes = p->second.bytes;
  // The read is made: it no longer counts as a future read of the unit.
  auto mine = FindStream(p->second.reads, stream);
  mine->second.pop_front();
  if (mine->second.empty()) p->second.reads.erase(mine);
  if (p->second.reads.empty()) planned_.erase(p);
  s.upcoming.pop_front();
  ++s.reads;
  if (auto held = resident_.find(unit); held != resident_.end()) {
    recent_.splice(recent_.begin(), recent_, held->second.recent);
    return true;
  }
  ARROW_RETURN_NOT_OK(Insert(unit, bytes, evicted));
  return false;
}

std::optional<WorkingSet::Unit> WorkingSet::NextToLoad() const {
  if (policy_ != Policy::kBelady) return std::nullopt;
  std::optional<Unit> best;
  uint64_t soonest = kNever;
  for (const auto& [unit, planned] : planned_) {
    if (resident_.count(unit) != 0) continue;
    const uint64_t next = NextRead(unit);
    if (next < soonest || (next == soonest && best && unit < *best)) {
      best = unit;
      soonest = next;
    }
  }
  if (!best) return std::nullopt;
  // Worth loading only when the room it needs is free or held by units read
  // later than it (eviction takes those first).
  int64_t room = capacity_ - used_;
  for (const auto& [unit, held] : resident_) {
    if (NextRead(unit) > soonest) room += held.bytes;
  }
  return room >= planned_.at(*best).bytes ? best : std::nullopt;
}

arrow::Status WorkingSet::Load(Unit unit, std::vector<Unit>* evicted) {
  auto p = planned_.find(unit);
  if (p == planned_.end()) {
    return arrow::Status::Invalid("working set: no stream plans to read unit ", unit);
  }
  if (resident_.count(unit) != 0) return arrow::Status::OK();
  return Insert(unit, p->second.bytes, evicted);
}

}  // namespace icefloe
