// Adoption: how a head (re)builds its catalog from what its nodes report,
// and which catalog records it hands back to them. Pure decisions over
// reports and the catalog's entries, so tests drive them directly; the head
// runs them every poll round (head/core/adopter.h).
//
// Each node reports, per copy it holds: storage name, generation, the global
// row ranges it holds and the catalog record the head gave it (if any). A
// copy (storage, generation) is adopted when:
//   - some holder reports a valid record for it (a record that does not
//     parse, or names another storage or generation, is refused: logged and
//     skipped, the holder's rows still count for the copy);
//   - the catalog does not hold it already, and this head has not released
//     it (evicted or replaced since it started: `gone`);
//   - it is, for at least one of its names, the highest generation any
//     report claims for that name, and that name is neither in the catalog
//     nor being loaded.
// Of a copy's records the latest (updated_us) gives its names. The slice map
// comes from the union of the holders' ranges over the record's slice
// boundaries; a slice no holder covers has no nodes, and the entry is then
// `degraded` (the heal path repairs it). Holders whose ranges or row count
// contradict the record are refused.
// Copies that are neither adopted nor in the catalog are dropped on their
// holders (node.evict of that generation), unless they may be this head's
// own load between commit and publish (no record and a generation from this
// head: >= first_generation).
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "icefloe/head/core/catalog.h"
#include "icefloe/protocol/messages.h"

namespace icefloe {

/// One live node's report.
struct NodeReport {
  std::string location;
  std::vector<NodeDatasetInfo> datasets;
};

using CopyId = std::pair<std::string, uint64_t>;  ///< storage name, generation

struct AdoptionInput {
  std::vector<NodeReport> reports;  ///< live nodes only
  std::vector<std::shared_ptr<const DatasetEntry>> catalog;
  std::set<CopyId> gone;          ///< copies this head released
  std::set<CopyId> retained;      ///< replaced copies this head keeps for their readers
  std::set<std::string> loading;  ///< names this head is loading
  uint64_t first_generation = 0;  ///< this head's first generation
};

/// A copy a node should drop.
struct StaleCopy {
  std::string node;
  std::string storage_name;
  uint64_t generation = 0;
  std::string reason;
};

struct AdoptionPlan {
  std::vector<std::shared_ptr<DatasetEntry>> entries;  ///< new catalog entries
  std::vector<StaleCopy> drops;
  std::vector<std::string> refused;  ///< one line per refused report, for the log
};

AdoptionPlan PlanAdoption(const AdoptionInput& input);

/// node.record calls that bring every holder's record up to date with the
/// catalog (new copies, aliases added or evicted, slice maps changed).
struct RecordPush {
  std::string node;
  NodeRecordRequest request;
};
std::vector<RecordPush> PlanRecordPushes(
    const std::vector<NodeReport>& reports,
    const std::vector<std::shared_ptr<const DatasetEntry>>& catalog, int64_t now_us);

}  // namespace icefloe
