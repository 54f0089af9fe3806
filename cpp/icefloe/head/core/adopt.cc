#include "icefloe/head/core/adopt.h"

#include <algorithm>
#include <iterator>
#include <map>

#include "icefloe/head/core/catalog_record.h"

namespace icefloe {

namespace {

struct Holder {
  std::string node;
  std::vector<RowRange> ranges;
  int64_t bytes = 0;
};

// Everything reported about one copy (storage, generation).
struct Copy {
  std::vector<Holder> holders;
  std::vector<CatalogRecord> records;  // valid ones, each from one holder
  std::vector<std::string> record_nodes;
  const CatalogRecord* record = nullptr;  // the latest; set once all are read
};

bool Covers(const std::vector<RowRange>& ranges, uint64_t start, uint64_t stop) {
  for (const auto& r : ranges) {
    if (r.start <= start && stop <= r.stop) return true;
  }
  return false;
}

// The slice map over the record's boundaries and the holders' ranges; each
// slice lists the holders covering it, the record's order first.
std::vector<SliceLocation> SlicesOf(const CatalogRecord& record,
                                    const std::vector<Holder>& holders) {
  const uint64_t rows = static_cast<uint64_t>(record.num_rows);
  std::set<uint64_t> bounds = {0, rows};
  for (const auto& s : record.slices) bounds.insert(s.start);
  for (const auto& h : holders) {
    for (const auto& r : h.ranges) {
      bounds.insert(std::min(r.start, rows));
      bounds.insert(std::min(r.stop, rows));
    }
  }
  std::vector<SliceLocation> out;
  size_t slice = 0;  // the record's slice holding `start`
  for (auto it = bounds.begin(); it != bounds.end() && *it < rows; ++it) {
    const uint64_t start = *it, stop = *std::next(it);
    while (slice + 1 < record.slices.size() && record.slices[slice].stop <= start) ++slice;
    std::vector<std::string> nodes;
    if (slice < record.slices.size()) {
      for (const auto& n : record.slices[slice].nodes) {
        for (const auto& h : holders) {
          if (h.node == n && Covers(h.ranges, start, stop)) nodes.push_back(n);
        }
      }
    }
    std::vector<std::string> others;
    for (const auto& h : holders) {
      if (Covers(h.ranges, start, stop) &&
          std::find(nodes.begin(), nodes.end(), h.node) == nodes.end()) {
        others.push_back(h.node);
      }
    }
    std::sort(others.begin(), others.end());
    nodes.insert(nodes.end(), others.begin(), others.end());
    if (!out.empty() && out.back().nodes == nodes) {
      out.back().stop = stop;
    } else {
      out.push_back({start, stop, std::move(nodes)});
    }
  }
  return out;
}

std::string CopyName(const CopyId& id) {
  return "'" + id.first + "' generation " + std::to_string(id.second);
}

// Reads every report into copies; refusals go to `plan`.
std::map<CopyId, Copy> ReadReports(const std::vector<NodeReport>& reports, AdoptionPlan* plan) {
  std::map<CopyId, Copy> copies;
  for (const auto& report : reports) {
    for (const auto& d : report.datasets) {
      const CopyId id{d.name, d.generation};
      Copy& copy = copies[id];
      copy.holders.push_back({report.location, d.ranges, d.bytes});
      if (d.record.is_null()) continue;
      const std::string what = "node " + report.location + " copy " + CopyName(id) + " record";
      auto record = CatalogRecord::FromJson(d.record, what);
      if (!record.ok()) {
        plan->refused.push_back(record.status().message());
        continue;
      }
      if (record->storage_name != d.name || record->generation != d.generation) {
        plan->refused.push_back(what + " describes " +
                                CopyName({record->storage_name, record->generation}) +
                                ": contradicts the copy it came with");
        continue;
      }
      copy.records.push_back(std::move(*record));
      copy.record_nodes.push_back(report.location);
    }
  }
  // The latest record names the copy; holders must agree with it.
  for (auto& item : copies) {
    const CopyId& id = item.first;  // named, not bound: lambdas below capture them
    Copy& copy = item.second;
    if (copy.records.empty()) continue;
    size_t latest = 0;
    for (size_t i = 1; i < copy.records.size(); ++i) {
      if (copy.records[i].updated_us > copy.records[latest].updated_us) latest = i;
    }
    copy.record = &copy.records[latest];
    const uint64_t rows = static_cast<uint64_t>(copy.record->num_rows);
    for (size_t i = 0; i < copy.records.size(); ++i) {
      const CatalogRecord& r = copy.records[i];
      if (r.num_rows != copy.record->num_rows || r.key != copy.record->key) {
        plan->refused.push_back("node " + copy.record_nodes[i] + " copy " + CopyName(id) +
                                " record: " + std::to_string(r.num_rows) +
                                " rows and key differ from the latest record's " +
                                std::to_string(rows) + " rows");
        std::erase_if(copy.holders,
                      [&](const Holder& h) { return h.node == copy.record_nodes[i]; });
      }
    }
    std::erase_if(copy.holders, [&](const Holder& h) {
      for (const auto& r : h.ranges) {
        if (r.stop > rows || r.start > r.stop) {
          plan->refused.push_back("node " + h.node + " copy " + CopyName(id) + ": holds rows [" +
                                  std::to_string(r.start) + ", " + std::to_string(r.stop) +
                                  ") outside the record's " + std::to_string(rows) + " rows");
          return true;
        }
      }
      return false;
    });
  }
  return copies;
}

}  // namespace

AdoptionPlan PlanAdoption(const AdoptionInput& input) {
  AdoptionPlan plan;
  std::map<CopyId, Copy> copies = ReadReports(input.reports, &plan);
  std::set<CopyId> known;
  std::set<std::string> names;
  for (const auto& e : input.catalog) {
    known.insert({e->storage_name, e->generation});
    names.insert(e->name);
  }
  // Each name goes to the highest generation claiming it.
  std::map<std::string, CopyId> winner;
  for (const auto& [id, copy] : copies) {
    if (copy.record == nullptr || known.count(id) || input.gone.count(id) ||
        input.retained.count(id)) {
      continue;
    }
    for (const auto& r : copy.record->requests) {
      auto [it, fresh] = winner.emplace(r.name, id);
      if (!fresh && it->second.second < id.second) it->second = id;
    }
  }
  for (const auto& [id, copy] : copies) {
    // The catalog's (its holders are the heal path's business), or kept.
    if (known.count(id) || input.retained.count(id)) continue;
    std::vector<const LoadRequest*> adopted;
    std::string reason;
    if (input.gone.count(id)) {
      reason = "released by this head";
    } else if (copy.record == nullptr) {
      if (id.second >= input.first_generation) continue;  // maybe our load, not yet published
      reason = "no catalog record";
    } else {
      for (const auto& r : copy.record->requests) {
        if (names.count(r.name) || input.loading.count(r.name)) continue;
        if (winner.at(r.name) == id) adopted.push_back(&r);
      }
      reason = "every name it had is held by a newer copy";
    }
    if (adopted.empty()) {
      for (const auto& h : copy.holders)
        plan.drops.push_back({h.node, id.first, id.second, reason});
      continue;
    }
    const auto slices = SlicesOf(*copy.record, copy.holders);
    const bool missing = std::any_of(slices.begin(), slices.end(),
                                     [](const SliceLocation& s) { return s.nodes.empty(); });
    std::vector<std::string> holders;
    int64_t bytes = 0;
    for (const auto& h : copy.holders) {
      holders.push_back(h.node);
      bytes += h.bytes;
    }
    std::sort(holders.begin(), holders.end());
    for (const LoadRequest* r : adopted) {
      auto entry = EntryOf(*copy.record, *r);
      entry->slices = slices;
      entry->nodes = holders;
      entry->nbytes = bytes;
      if (missing) entry->state = CopyState::kDegraded;
      plan.entries.push_back(std::move(entry));
    }
  }
  return plan;
}

std::vector<RecordPush> PlanRecordPushes(
    const std::vector<NodeReport>& reports,
    const std::vector<std::shared_ptr<const DatasetEntry>>& catalog, int64_t now_us) {
  // The catalog's copies with every name sharing each (loads in flight and
  // failed ones have nothing on nodes to describe).
  std::map<CopyId, std::vector<std::shared_ptr<const DatasetEntry>>> copies;
  for (const auto& e : catalog) {
    if (!Loaded(e->state)) continue;
    auto& group = copies[{e->storage_name, e->generation}];
    // The entry named like its storage (the original load) describes the copy.
    if (e->name == e->storage_name) {
      group.insert(group.begin(), e);
    } else {
      group.push_back(e);
    }
  }
  std::map<CopyId, CatalogRecord> wanted;
  std::vector<RecordPush> out;
  for (const auto& report : reports) {
    for (const auto& d : report.datasets) {
      const CopyId id{d.name, d.generation};
      auto group = copies.find(id);
      if (group == copies.end()) continue;
      auto [it, fresh] = wanted.try_emplace(id);
      if (fresh) it->second = RecordOf(group->second, now_us);
      if (!d.record.is_null()) {
        auto held = CatalogRecord::FromJson(d.record, "record");
        if (held.ok() && held->SameAs(it->second)) continue;
      }
      out.push_back({report.location, {d.name, d.generation, it->second.ToJson()}});
    }
  }
  return out;
}

}  // namespace icefloe
