// Heal: how the head judges a cached copy against what its nodes report, and
// rebuilds the copy's slice map once lost rows are loaded again.
//
// A replica of a scan task's rows is live when its node is alive and either
// its report (requested after the slice map last changed) shows the rows of
// that storage name and generation, or its report is older than the slice
// map and the catalog lists the node for those rows. A dead node, or an alive
// one whose fresh report lacks the rows (a restarted, empty node), holds
// nothing. Pure functions; the repair itself is HealRunner's (heal_runner.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "icefloe/head/core/catalog.h"
#include "icefloe/head/core/registry.h"

namespace icefloe {

/// What the nodes hold of one copy, per unit of rows: per plan task when
/// the entry has its task map, else per slice.
struct CopyHealth {
  struct Unit {
    uint64_t start = 0;
    uint64_t stop = 0;
    int64_t task = -1;                 ///< plan task index, -1 for a slice unit
    size_t slice = 0;                  ///< the catalog slice it lies in
    std::vector<std::string> holders;  ///< live nodes holding all its rows
    std::vector<std::string> partial;  ///< live nodes holding some of them
  };
  std::vector<Unit> units;       ///< units with rows, in row order
  int64_t slices_missing = 0;    ///< catalog slices with rows no live node holds
  int64_t replicas_missing = 0;  ///< sum over slices of replicas short of `replication`
};

/// Judges `entry` against the registry's `nodes`.
CopyHealth AssessCopy(const DatasetEntry& entry, const std::vector<NodeInfo>& nodes);

/// Rebuilds `entry`'s slice map (and `nodes`) from `health`: neighbouring
/// units held by the same nodes merge; a unit nobody holds keeps the nodes
/// the catalog listed (its rows are missing either way).
void RebuildSlices(const CopyHealth& health, DatasetEntry* entry);

/// Bytes the live holders report for `entry`'s storage name and generation.
int64_t HeldBytes(const DatasetEntry& entry, const std::vector<NodeInfo>& nodes);

/// Alive nodes whose report (requested after the slice map last changed)
/// shows rows of `entry`'s copy although the slice map lists them for none:
/// a node declared dead, healed around, then back with its old rows. Nothing
/// reads those rows; the head drops them so they stop taking memory.
std::vector<std::string> StrayHolders(const DatasetEntry& entry,
                                      const std::vector<NodeInfo>& nodes);

}  // namespace icefloe
