#include "icefloe/protocol/row_groups.h"

#include <algorithm>

namespace icefloe {

namespace {

template <typename T>
uint8_t* Put(uint8_t* at, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) at[i] = static_cast<uint8_t>((v >> (8 * i)) & 0xFF);
  return at + sizeof(T);
}

}  // namespace

size_t SliceOfRow(const SliceTable& table, uint64_t row) {
  const uint64_t* end = table.stops + table.num_slices;
  return static_cast<size_t>(std::upper_bound(table.stops, end, row) - table.stops);
}

RowGroupsError GroupRows(const SliceTable& table, const uint64_t* ids, uint32_t n,
                         uint32_t* scratch, uint8_t* out, uint64_t* offsets,
                         uint64_t* lengths) noexcept {
  if (table.num_slices == 0 && n > 0) return RowGroupsError::kRowOutside;
  for (size_t i = 0; i < table.num_slices; ++i) {
    if ((i > 0 && table.stops[i] < table.stops[i - 1]) ||
        table.group_of_slice[i] >= table.num_groups) {
      return RowGroupsError::kBadTable;
    }
  }
  const uint64_t rows = table.num_slices ? table.stops[table.num_slices - 1] : 0;
  for (uint32_t g = 0; g < table.num_groups; ++g) lengths[g] = 0;  // counts first
  for (uint32_t i = 0; i < n; ++i) {
    if (ids[i] >= rows) return RowGroupsError::kRowOutside;
    const uint32_t g = table.group_of_slice[SliceOfRow(table, ids[i])];
    scratch[i] = g;
    ++lengths[g];
  }
  uint64_t at = 0;
  for (uint32_t g = 0; g < table.num_groups; ++g) {
    const uint64_t count = lengths[g];
    offsets[g] = at;
    lengths[g] = count ? 8 + 12 * count : 0;
    if (count) {
      uint8_t* head = Put<uint32_t>(out + at, n);
      Put<uint32_t>(head, static_cast<uint32_t>(count));
    }
    at += lengths[g];
    if (count) offsets[g] += 8;  // a cursor past the head while entries are written
  }
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t& cursor = offsets[scratch[i]];
    Put<uint64_t>(Put<uint32_t>(out + cursor, i), ids[i]);
    cursor += 12;
  }
  for (uint32_t g = 0; g < table.num_groups; ++g) offsets[g] -= lengths[g];  // back to the start
  return RowGroupsError::kOk;
}

}  // namespace icefloe
