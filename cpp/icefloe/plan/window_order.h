// The window shuffle's order G (ShuffleMode::kWindow): stratified windows of
// small blocks, rows permuted within each window. docs/epochs.md has the
// user-facing text; plan.h uses this to evaluate G.
//
// Rows are cut into C = ceil(N / c) blocks of c = block_rows contiguous rows
// (the last may be short), and the blocks into m = min(window_blocks, C)
// strata: contiguous runs of n = floor(C / m) or n + 1 blocks, the e = C mod m
// longer ones spread evenly (Bresenham). Window k < n takes one block from
// every stratum, block sigma_s(k) of stratum s; window n, when e > 0, takes
// block sigma_s(n) of each of the e longer strata. sigma_s(k) = P((k + o_s)
// mod size_s): a keyed rotation o_s per stratum, then a keyed permutation P
// shared by the strata of one size (two, one per size: cheap to tabulate). So every window is a
// stratified sample of the whole table, one block from each of its m equal
// parts, and every block lies in exactly one window. G lists the windows in order 0, 1, ...; within
// window k the rows (its blocks in stratum order, concatenated) are read in the order of a keyed
// permutation pi_k of the window's rows.
//
// Why: a batch of B positions inside a window is a pseudo-random subset of a
// stratified sample, so however the table is sorted (by label, date, source)
// its label histogram is as close to the table's as a uniform sample's (the
// stratification removes the window's own error). And a window is small
// (m * c rows, 4096 by default) and made of whole blocks, so a node gathering
// a batch reads a few cache-resident blocks instead of B random rows of the
// whole table.
//
// Only the block holding the table's last row can be short; it is the last
// block of its window in stratum order, so window k's rows are [0, length)
// with row x in block x / c at offset x % c. Positions after that window
// shift back by the missing rows (Locate).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "icefloe/common/row_range.h"
#include "icefloe/plan/permutation.h"

namespace icefloe {

/// Per-window work kept between WindowOrder::AppendRows calls by a caller
/// that maps many batches of one order (a node serving a stream, whose
/// consecutive batches often share windows): the blocks and the tabulated
/// permutation of the last few windows. Results never depend on it. Not
/// thread-safe.
class WindowCache {
 private:
  friend class WindowOrder;
  static constexpr size_t kWindows = 4;
  struct Window {
    uint64_t k = 0;
    std::vector<uint64_t> blocks;  // j-th block of the window, or kUnknown
    std::optional<TabledPermutation> tabled;
  };
  std::vector<uint64_t> owner_;  // the order that filled it (WindowOrder::Identity)
  std::deque<Window> windows_;
  std::optional<TabledPermutation> strata_[2];  // the order's strata permutations
};

class WindowOrder {
 public:
  /// `num_rows`, `block_rows` >= 1 and 1 <= `window_blocks` <=
  /// kMaxWindowBlocks are validated by the caller (plan.cc's ValidateOrder);
  /// keys select the permutations (one for the strata, one for the windows).
  WindowOrder(uint64_t num_rows, uint64_t block_rows, uint64_t window_blocks, uint64_t strata_key,
              uint64_t window_key);

  /// G[position]; requires position < num_rows.
  uint64_t Row(uint64_t position) const;

  /// Appends G[begin], ..., G[end - 1]; requires begin <= end <= num_rows.
  /// Each window's permutation and blocks are computed once per call, or
  /// once per `cache` while it holds the window.
  void AppendRows(uint64_t begin, uint64_t end, std::vector<uint64_t>* out,
                  WindowCache* cache = nullptr) const;

  /// The rows of G[begin, end) that lie in `owned` (sorted, disjoint
  /// ranges), appended to `rows` with offset + (position - begin) appended to
  /// `offsets`: what one node serves of a run of positions. Window by window;
  /// where a window's owned rows are fewer than the positions asked of it,
  /// they are found from its blocks (inverting the window's permutation),
  /// ascending, instead of by mapping every position: a node's work then
  /// follows its share of the rows, not the whole batch.
  void AppendOwnedRows(uint64_t begin, uint64_t end, const std::vector<RowRange>& owned,
                       uint64_t offset, std::vector<uint64_t>* rows, std::vector<uint32_t>* offsets,
                       WindowCache* cache = nullptr) const;

  uint64_t num_windows() const { return num_windows_; }
  /// Rows in window k (< num_windows()).
  uint64_t WindowLength(uint64_t k) const;
  /// Position of window k's first row.
  uint64_t WindowStart(uint64_t k) const;

 private:
  // The window holding `position` and the offset into it.
  void Locate(uint64_t position, uint64_t* window, uint64_t* offset) const;
  uint64_t StratumStart(uint64_t s) const;
  uint64_t StratumSize(uint64_t s) const;
  // Stratum of the j-th block of window k.
  uint64_t StratumOf(uint64_t k, uint64_t j) const;
  // Keyed rotation of stratum s's blocks (of `size` of them).
  uint64_t StratumShift(uint64_t s, uint64_t size) const;
  uint64_t BlockOf(uint64_t k, uint64_t s, const WindowCache* cache) const;
  Permutation WindowPermutation(uint64_t k) const;
  std::vector<uint64_t> Identity() const;
  // Window k's entry in `cache` (filled in, evicting the oldest, if absent).
  WindowCache::Window* CachedWindow(uint64_t k, WindowCache* cache) const;

  uint64_t num_rows_;
  uint64_t block_rows_;
  uint64_t strata_key_;
  uint64_t window_key_;
  uint64_t strata_ = 0;       // m
  uint64_t per_stratum_ = 0;  // n: blocks in a short stratum
  uint64_t long_strata_ = 0;  // e: strata with n + 1 blocks
  uint64_t num_windows_ = 0;
  uint64_t window_rows_ = 0;   // m * c: rows in a full window
  uint64_t missing_rows_ = 0;  // c - rows of the last block
  uint64_t short_window_ = 0;  // the window holding the last block
  // Strata of n and of n + 1 blocks: which window takes which block.
  Permutation strata_perms_[2];
};

}  // namespace icefloe
