// The slice map's side of planning: which node serves which rows. Pure
// functions. The head cuts a consumer's runs (plan.h's BatchRuns) into
// per-node endpoints with GroupRunsByNode; random access and sample-mode
// batches are split into one gather per node with GroupRowsByNode.
//
// A slice map lists contiguous global row ranges with the node to read each
// from (replicas already resolved), sorted by start and disjoint; it need not
// cover [0, N), but every requested row must lie in some slice.
#pragma once

#include <cstdint>
#include <vector>

#include <arrow/result.h>

#include "icefloe/common/row_range.h"

namespace icefloe {

/// Which node serves a contiguous range of global rows (one entry per slice,
/// replicas already resolved to the node to read from).
struct SliceOwner {
  RowRange rows;
  int32_t node = 0;
};

/// Runs that one node serves, in read order.
struct NodeRuns {
  int32_t node = 0;
  std::vector<RowRange> runs;
};

/// Splits `runs` at slice boundaries and groups consecutive pieces read from
/// the same node, keeping read order: the groups' runs, concatenated, list the
/// same rows in the same order as `runs`, so each group can be one endpoint.
/// Invalid when `slices` are not sorted and disjoint or a row lies in no slice.
arrow::Result<std::vector<NodeRuns>> GroupRunsByNode(const std::vector<RowRange>& runs,
                                                     const std::vector<SliceOwner>& slices);

/// Rows that one node serves, with where each goes in the caller's list.
struct NodeRows {
  int32_t node = 0;
  std::vector<uint64_t> rows;     ///< In the order they appear in the input.
  std::vector<uint64_t> indices;  ///< rows[i] is input[indices[i]].
};

/// Splits a list of row ids (any order, duplicates allowed) by node: one entry
/// per node that holds any, in increasing node order, so a gather takes one
/// call per node and `indices` scatters the answers back. Same errors as
/// GroupRunsByNode.
arrow::Result<std::vector<NodeRows>> GroupRowsByNode(const std::vector<uint64_t>& rows,
                                                     const std::vector<SliceOwner>& slices);

/// Appends rows [start, stop) to `runs`, extending the last run when
/// contiguous with it; nothing for an empty range.
void AppendRun(std::vector<RowRange>* runs, uint64_t start, uint64_t stop);

}  // namespace icefloe
