// Tier files that outlive their node, when they can be proven intact (issue:
// the disk tier, item 4).
//
// Beside its tier files a node keeps one manifest per copy it publishes with
// rows on the tier (`<hex of the dataset name>.manifest.json`): the copy's
// name and generation, the head's catalog record of it (node.record), and
// per tier file its name, size, CRC-32 and the global row id of each of its
// record batches, and a CRC-32 of all that ("manifest_crc32": which rows the
// files hold is proven as well as their bytes; the format, a field-table
// message, is tier_manifest_format.h). A node started on the same
// directory maps again every file a manifest names after proving it
// (TierFile::Open: its size and every byte's CRC-32), and publishes those
// rows as the copy of that generation: the rows it held in memory are gone,
// and the head heals them as for any node that lost rows (head/core/heal.h: a
// tier file is one task's rows). A file that fails its proof, or that no manifest names, is
// removed: its rows are loaded again from the table, never read wrong. So is every file of a
// manifest that fails its own checksum or its field table (a field missing or of another type),
// or of another format version ("v"; version 1, before the checksum, included).
//
// A file is proven when adopted, not while it is served: one overwritten in
// place while mapped serves what it then holds (docs/kubernetes.md).
//
// A manifest is written after its files are whole and renamed (a crash in
// between leaves files no manifest names: removed), and written to a
// temporary name and renamed, so one found is whole.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <nlohmann/json.hpp>

#include "icefloe/common/memory.h"
#include "icefloe/node/copy/dataset.h"

namespace icefloe {

/// Writes (replaces) the manifest of `copy` in `dir`, with the head's
/// `record` (null: none yet); removes the name's manifest when the copy has
/// no rows on the tier. IOError naming the path.
arrow::Status SaveTierManifest(const std::string& dir, const CachedDataset& copy,
                               const nlohmann::json& record);

/// Removes `dataset`'s manifest from `dir` (its copy was evicted or
/// replaced: its files go with the copy). IOError naming the path.
arrow::Status RemoveTierManifest(const std::string& dir, const std::string& dataset);

struct TierAdoption {
  struct Copy {
    std::shared_ptr<const CachedDataset> copy;
    nlohmann::json record;  ///< null: the head had sent none
  };
  std::vector<Copy> copies;
  int64_t files_adopted = 0;
  /// Files removed: no manifest named them, or (then also in `refused`)
  /// they failed their proof.
  int64_t files_removed = 0;
  std::vector<std::string> refused;  ///< why, per file or manifest refused
};

/// What `dir` (made when missing) holds from an earlier run: the copies its
/// manifests describe, their files proven and mapped (charged to `disk`);
/// everything else there is removed. IOError naming the path when the
/// directory cannot be read or cleaned.
arrow::Result<TierAdoption> AdoptTierDir(const std::string& dir,
                                         const std::shared_ptr<MemoryBudget>& disk);

}  // namespace icefloe
