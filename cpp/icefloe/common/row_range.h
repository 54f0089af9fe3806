// A contiguous run of global row ids, [start, stop).
#pragma once

#include <cstdint>

namespace icefloe {

/// Global rows [start, stop).
struct RowRange {
  uint64_t start = 0;
  uint64_t stop = 0;
  uint64_t size() const { return stop - start; }
  bool operator==(const RowRange&) const = default;
};

}  // namespace icefloe
