#include "icefloe/head/core/catalog.h"

#include <algorithm>

#include <arrow/buffer.h>
#include <arrow/ipc/writer.h>
#include <arrow/type.h>
#include <arrow/util/base64.h>

#include "icefloe/protocol/fields.h"

namespace icefloe {

using json = nlohmann::json;

std::string SchemaToBase64(const arrow::Schema& schema) {
  auto buffer = arrow::ipc::SerializeSchema(schema);
  if (!buffer.ok()) return "";
  return arrow::util::base64_encode((*buffer)->ToString());
}

DatasetDescription DatasetEntry::Description(bool with_slices) const {
  DatasetDescription d;
  d.name = name;
  d.state = CopyStateName(state);
  d.source = request.source;
  d.metadata_location = metadata_location;
  d.snapshot_id = snapshot_id;
  d.columns = request.columns;
  d.filter = request.filter;
  d.batch_rows = request.batch_rows;
  d.replication = request.replication;
  d.generation = generation;
  d.rows = num_rows;
  d.bytes = nbytes;
  d.estimated_bytes = estimated_bytes;
  d.tasks = tasks_total;
  d.load_seconds = load_seconds;
  d.scan = scan;
  if (request.transform) {
    d.transform = request.transform;
    d.model_sha256 = model_sha256;
    d.model_kind = model_kind;
  }
  if (schema) {
    d.schema = SchemaToBase64(*schema);
    d.schema_text = schema->ToString();
  }
  if (!error.empty()) d.error = error;
  d.refresh = refresh;
  d.slices_missing = slices_missing;
  d.replicas_missing = replicas_missing;
  d.heal_seconds = heal_seconds;
  if (!heal_error.empty()) d.heal_error = heal_error;
  if (with_slices) {
    d.files = Files();
    d.slices.emplace();
    for (const auto& s : this->slices)
      d.slices->push_back({s.start, s.stop, s.nodes, std::nullopt});
  }
  return d;
}

std::vector<FileRun> DatasetEntry::Files() const {
  std::vector<FileRun> files;
  if (!plan || plan->tasks.size() != task_starts.size()) return files;
  for (size_t t = 0; t < plan->tasks.size(); ++t) {
    const std::string& path = plan->tasks[t].data_file.file_path;
    const auto start = static_cast<int64_t>(task_starts[t]);  // < 2^62 (plan.h)
    // A file split into several tasks is one run of row ids.
    if (!files.empty() && files.back().path == path &&
        files.back().start + files.back().rows == start) {
      files.back().rows += task_rows[t];
      continue;
    }
    files.push_back({path, start, task_rows[t]});
  }
  return files;
}

std::shared_ptr<const DatasetEntry> Catalog::Find(const std::string& name) const {
  MutexLock lock(&mu_);
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : it->second;
}

std::shared_ptr<const DatasetEntry> Catalog::FindByKey(const CopyKey& key) const {
  MutexLock lock(&mu_);
  for (const auto& [name, e] : entries_) {
    if (e->key == key && e->state == CopyState::kReady) return e;
  }
  return nullptr;
}

void Catalog::Put(std::shared_ptr<const DatasetEntry> entry) {
  MutexLock lock(&mu_);
  entries_[entry->name] = std::move(entry);
}

bool Catalog::Replace(const std::shared_ptr<const DatasetEntry>& expected,
                      std::shared_ptr<const DatasetEntry> entry) {
  MutexLock lock(&mu_);
  auto it = entries_.find(expected->name);
  if (it == entries_.end() || it->second != expected) return false;
  it->second = std::move(entry);
  return true;
}

std::pair<std::shared_ptr<const DatasetEntry>, bool> Catalog::Remove(const std::string& name) {
  MutexLock lock(&mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return {nullptr, false};
  auto entry = it->second;
  entries_.erase(it);
  for (const auto& [other, e] : entries_) {
    if (e->storage_name == entry->storage_name && e->generation == entry->generation) {
      return {entry, false};
    }
  }
  return {entry, true};
}

std::vector<std::shared_ptr<const DatasetEntry>> Catalog::All() const {
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<const DatasetEntry>> out;
  for (const auto& [name, e] : entries_) out.push_back(e);
  return out;
}

bool Catalog::UpdateCopies(const std::string& storage, uint64_t generation,
                           const std::function<void(DatasetEntry*)>& change) {
  bool any = false;
  for (const auto& e : All()) {
    if (e->storage_name != storage || e->generation != generation) continue;
    // A concurrent Put (a reload) wins: Replace then fails and the new entry stays.
    auto copy = std::make_shared<DatasetEntry>(*e);
    change(copy.get());
    if (Replace(e, copy)) any = true;
  }
  return any;
}

bool Catalog::StorageShared(const std::string& name, const std::string& storage_name,
                            uint64_t generation) const {
  MutexLock lock(&mu_);
  for (const auto& [other, e] : entries_) {
    if (other != name && e->storage_name == storage_name &&
        (generation == 0 || e->generation == generation)) {
      return true;
    }
  }
  for (const auto& r : retired_) {
    if (r.entry->storage_name == storage_name &&
        (generation == 0 || r.entry->generation == generation)) {
      return true;
    }
  }
  return false;
}

void Catalog::Retire(std::shared_ptr<const DatasetEntry> entry, uint64_t replaced_by,
                     std::chrono::steady_clock::time_point now) {
  MutexLock lock(&mu_);
  retired_.push_back({std::move(entry), replaced_by, now, now});
}

std::shared_ptr<const DatasetEntry> Catalog::FindGeneration(
    const std::string& name, uint64_t generation, std::chrono::steady_clock::time_point now) const {
  MutexLock lock(&mu_);
  auto it = entries_.find(name);
  if (it != entries_.end() && it->second->generation == generation) return it->second;
  for (auto& r : retired_) {
    if (r.entry->name == name && r.entry->generation == generation) {
      r.last_used = now;
      return r.entry;
    }
  }
  return nullptr;
}

void Catalog::TouchRetired(const std::string& storage, uint64_t generation,
                           std::chrono::steady_clock::time_point now) {
  MutexLock lock(&mu_);
  for (auto& r : retired_) {
    if (r.entry->storage_name == storage && r.entry->generation == generation) r.last_used = now;
  }
}

std::vector<RetiredCopy> Catalog::Retired() const {
  MutexLock lock(&mu_);
  return retired_;
}

std::vector<RetiredCopy> Catalog::TakeRetired(const std::string& name, uint64_t generation) {
  MutexLock lock(&mu_);
  std::vector<RetiredCopy> out;
  auto keep = std::partition(retired_.begin(), retired_.end(), [&](const RetiredCopy& r) {
    return r.entry->name != name || (generation != 0 && r.entry->generation != generation);
  });
  out.assign(std::make_move_iterator(keep), std::make_move_iterator(retired_.end()));
  retired_.erase(keep, retired_.end());
  return out;
}

}  // namespace icefloe
