// Which replica set holds row r, and the rows-ticket bodies of a random-access
// read: the one answer the head's rows descriptor (head/core/flight_info_planner.cc) and the
// client's one-hop take (python/icefloe/_slice_map.py, through the client
// library's icefloe_group_rows) both use.
//
// A dataset's slices tile [0, rows): slice i holds rows [stops[i - 1],
// stops[i]) (from 0 for the first) on replica set group_of_slice[i]. A rows
// body (protocol/plan_ticket.h's RowsTicket) is, little-endian:
//
//   u32 total | u32 n | n x (u32 position, u64 row)
//
// and GroupRows writes one per replica set that holds any of the rows asked
// for, its rows in the order they were asked. Plain C++: no Arrow, no
// exceptions, no allocation (the client library links it).
#pragma once

#include <cstddef>
#include <cstdint>

namespace icefloe {

struct SliceTable {
  const uint64_t* stops = nullptr;           ///< Ascending; the last is the rows.
  const uint32_t* group_of_slice = nullptr;  ///< Each below num_groups.
  size_t num_slices = 0;
  uint32_t num_groups = 0;
};

/// The slice holding `row` (below the table's last stop): one binary search.
size_t SliceOfRow(const SliceTable& table, uint64_t row);

enum class RowGroupsError : int32_t {
  kOk = 0,
  kRowOutside = 1,  // a row at or past the last stop
  kBadTable = 2,    // stops not ascending, or a group number out of range
};

/// Bytes GroupRows needs for `n` rows over `num_groups` replica sets.
inline uint64_t RowGroupsBytes(uint32_t num_groups, uint32_t n) {
  return 8 * uint64_t{num_groups} + 12 * uint64_t{n};
}

/// Writes replica set g's rows body at out + offsets[g], lengths[g] bytes (0:
/// it holds none of `ids`), for every g below num_groups. `out` holds
/// RowGroupsBytes(num_groups, n) bytes; `scratch` n entries. Checks the table
/// and every row before it writes.
RowGroupsError GroupRows(const SliceTable& table, const uint64_t* ids, uint32_t n,
                         uint32_t* scratch, uint8_t* out, uint64_t* offsets,
                         uint64_t* lengths) noexcept;

}  // namespace icefloe
