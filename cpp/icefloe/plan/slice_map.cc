#include "icefloe/plan/slice_map.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <utility>

namespace icefloe {

namespace {

// Checks slices and returns the slice holding `row` (index into slices).
arrow::Result<size_t> FindSlice(const std::vector<SliceOwner>& slices, uint64_t row) {
  auto it = std::upper_bound(slices.begin(), slices.end(), row,
                             [](uint64_t r, const SliceOwner& s) { return r < s.rows.start; });
  if (it == slices.begin() || row >= std::prev(it)->rows.stop) {
    return arrow::Status::Invalid("row ", row, " is in no slice");
  }
  return static_cast<size_t>(std::prev(it) - slices.begin());
}

arrow::Status ValidateSlices(const std::vector<SliceOwner>& slices) {
  for (size_t i = 0; i < slices.size(); ++i) {
    const RowRange& r = slices[i].rows;
    if (r.start > r.stop) {
      return arrow::Status::Invalid("slice ", i, " has start ", r.start, " after stop ", r.stop);
    }
    if (i > 0 && slices[i - 1].rows.stop > r.start) {
      return arrow::Status::Invalid("slices must be sorted and disjoint: slice ", i - 1,
                                    " ends at ", slices[i - 1].rows.stop, " but slice ", i,
                                    " starts at ", r.start);
    }
  }
  return arrow::Status::OK();
}

}  // namespace

void AppendRun(std::vector<RowRange>* runs, uint64_t start, uint64_t stop) {
  if (start == stop) return;
  if (!runs->empty() && runs->back().stop == start) {
    runs->back().stop = stop;
  } else {
    runs->push_back({start, stop});
  }
}

arrow::Result<std::vector<NodeRuns>> GroupRunsByNode(const std::vector<RowRange>& runs,
                                                     const std::vector<SliceOwner>& slices) {
  ARROW_RETURN_NOT_OK(ValidateSlices(slices));
  std::vector<NodeRuns> groups;
  for (const RowRange& run : runs) {
    for (uint64_t row = run.start; row < run.stop;) {
      ARROW_ASSIGN_OR_RAISE(size_t i, FindSlice(slices, row));
      const uint64_t stop = std::min(run.stop, slices[i].rows.stop);
      if (groups.empty() || groups.back().node != slices[i].node) {
        groups.push_back({slices[i].node, {}});
      }
      AppendRun(&groups.back().runs, row, stop);
      row = stop;
    }
  }
  return groups;
}

arrow::Result<std::vector<NodeRows>> GroupRowsByNode(const std::vector<uint64_t>& rows,
                                                     const std::vector<SliceOwner>& slices) {
  ARROW_RETURN_NOT_OK(ValidateSlices(slices));
  std::map<int32_t, NodeRows> by_node;
  for (uint64_t i = 0; i < rows.size(); ++i) {
    ARROW_ASSIGN_OR_RAISE(size_t s, FindSlice(slices, rows[i]));
    NodeRows& group = by_node[slices[s].node];
    group.node = slices[s].node;
    group.rows.push_back(rows[i]);
    group.indices.push_back(i);
  }
  std::vector<NodeRows> out;
  out.reserve(by_node.size());
  for (auto& [node, group] : by_node) out.push_back(std::move(group));
  return out;
}

}  // namespace icefloe
