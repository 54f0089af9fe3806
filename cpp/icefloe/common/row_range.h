// A contiguous run of global row ids, [start, stop).
#pragma once

#include <cstdint>
#include <vector>

namespace icefloe {

/// Global rows [start, stop).
struct RowRange {
  uint64_t start = 0;
  uint64_t stop = 0;
  uint64_t size() const { return stop - start; }
  bool operator==(const RowRange&) const = default;
};

/// Appends rows [start, stop) to `runs`, extending the last run when
/// contiguous with it; nothing for an empty range.
inline void AppendRun(std::vector<RowRange>* runs, uint64_t start, uint64_t stop) {
  if (start == stop) return;
  if (!runs->empty() && runs->back().stop == start) {
    runs->back().stop = stop;
  } else {
    runs->push_back({start, stop});
  }
}

}  // namespace icefloe
