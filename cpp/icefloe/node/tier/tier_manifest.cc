#include "icefloe/node/tier/tier_manifest.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include <arrow/util/crc32.h>

#include "icefloe/common/bytes.h"
#include "icefloe/node/tier/tier_file.h"

namespace icefloe {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kManifestSuffix = ".manifest.json";
// Manifests and the files they name are small and few; one larger is not ours.
constexpr uintmax_t kMaxManifestBytes = uintmax_t{256} << 20;
// The manifest's format ("v"): a node adopts only the version it writes.
// Version 2 added manifest_crc32; version 1 manifests are refused by version.
constexpr uint64_t kManifestVersion = 2;
// The manifest's own checksum: CRC-32 of the rest of it, as nlohmann::json
// dumps it compactly (keys sorted), so key order and spacing do not count.
constexpr const char* kChecksumKey = "manifest_crc32";

uint32_t ContentCrc32(const json& manifest_without_checksum) {
  const std::string text = manifest_without_checksum.dump();
  return arrow::internal::crc32(0, text.data(), text.size());
}

fs::path ManifestPath(const std::string& dir, const std::string& dataset) {
  return fs::path(dir) / (HexEncode(dataset) + kManifestSuffix);
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A manifest object's unsigned field into *out; false when `j` is no object,
// or the field is absent or of another type.
bool Unsigned(const json& j, const char* key, uint64_t* out) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) return false;
  *out = it->get<uint64_t>();
  return true;
}

}  // namespace

arrow::Status RemoveTierManifest(const std::string& dir, const std::string& dataset) {
  std::error_code ec;
  const fs::path path = ManifestPath(dir, dataset);
  fs::remove(path, ec);
  if (ec) return arrow::Status::IOError("disk tier: removing ", path.string(), ": ", ec.message());
  return arrow::Status::OK();
}

arrow::Status SaveTierManifest(const std::string& dir, const CachedDataset& copy,
                               const json& record) {
  // Each batch of a tier file this copy holds, by the batch object.
  std::unordered_map<const arrow::RecordBatch*, uint64_t> starts;
  for (const CachedBatch& b : copy.batches()) starts[b.batch.get()] = b.global_start;
  json files = json::array();
  for (const auto& region : copy.held()) {
    const auto* file = dynamic_cast<const TierFile*>(region.get());
    if (file == nullptr) continue;
    json batch_starts = json::array();
    bool any = false;
    for (const auto& b : file->batches()) {
      auto it = starts.find(b.get());
      if (it == starts.end()) {
        batch_starts.push_back(nullptr);  // not part of this copy (a refresh dropped it)
      } else {
        batch_starts.push_back(it->second);
        any = true;
      }
    }
    if (!any) continue;
    files.push_back({{"file", fs::path(file->path()).filename().string()},
                     {"bytes", file->bytes()},
                     {"crc32", file->crc32()},
                     {"starts", std::move(batch_starts)}});
  }
  if (files.empty()) return RemoveTierManifest(dir, copy.name());
  json manifest = {{"v", kManifestVersion},
                   {"dataset", copy.name()},
                   {"generation", copy.generation()},
                   {"record", record},
                   {"files", std::move(files)}};
  manifest[kChecksumKey] = ContentCrc32(manifest);
  const fs::path path = ManifestPath(dir, copy.name());
  const std::string partial = path.string() + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out << manifest.dump();
    out.flush();
    if (!out) {
      std::remove(partial.c_str());
      return arrow::Status::IOError("disk tier: writing ", partial);
    }
  }
  std::error_code ec;
  fs::rename(partial, path, ec);
  if (ec) {
    std::remove(partial.c_str());
    return arrow::Status::IOError("disk tier: renaming ", partial, ": ", ec.message());
  }
  return arrow::Status::OK();
}

namespace {

// One manifest's copy, its files proven; `opened` shares files that two
// manifests name (a refresh's generations). Refusals go to `refused`.
std::optional<TierAdoption::Copy> AdoptManifest(
    const fs::path& path, const std::shared_ptr<MemoryBudget>& disk,
    std::map<std::string, std::shared_ptr<TierFile>>* opened, std::vector<std::string>* refused) {
  const std::string where = "disk tier manifest " + path.string();
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec || size > kMaxManifestBytes) {
    refused->push_back(where + ": unreadable or too large");
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const json m = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  // A manifest another version wrote may mean other things by its fields.
  uint64_t version = 0;
  if (m.is_object() && (!Unsigned(m, "v", &version) || version != kManifestVersion)) {
    const auto v = m.find("v");
    refused->push_back(where + ": version " + (v == m.end() ? "none" : v->dump()) +
                       ", this node reads version " + std::to_string(kManifestVersion));
    return std::nullopt;
  }
  // The data files prove themselves; this proves which rows they hold (a
  // manifest edited into other valid JSON would serve rows at wrong ids).
  if (m.is_object()) {
    uint64_t checksum = 0;
    if (!Unsigned(m, kChecksumKey, &checksum)) {
      refused->push_back(where + ": no " + kChecksumKey);
      return std::nullopt;
    }
    json content = m;
    content.erase(kChecksumKey);
    if (ContentCrc32(content) != checksum) {
      refused->push_back(where + ": its content does not match its checksum (" + kChecksumKey +
                         " " + std::to_string(checksum) + "): edited or corrupt");
      return std::nullopt;
    }
  }
  uint64_t generation = 0;
  const bool has_generation = Unsigned(m, "generation", &generation);
  auto dataset = m.is_object() ? m.find("dataset") : m.end();
  auto files = m.is_object() ? m.find("files") : m.end();
  if (!has_generation || dataset == m.end() || !dataset->is_string() || files == m.end() ||
      !files->is_array()) {
    refused->push_back(where + ": not a manifest");
    return std::nullopt;
  }
  const std::string name = dataset->get<std::string>();
  std::vector<CachedBatch> batches;
  std::vector<std::shared_ptr<const MappedRegion>> held;
  for (const json& f : *files) {
    auto file = f.is_object() ? f.find("file") : f.end();
    auto starts = f.is_object() ? f.find("starts") : f.end();
    uint64_t bytes = 0, crc = 0;
    const bool sized = Unsigned(f, "bytes", &bytes) && Unsigned(f, "crc32", &crc);
    if (file == f.end() || !file->is_string() || starts == f.end() || !starts->is_array() ||
        !sized || bytes > static_cast<uint64_t>(INT64_MAX) || crc > UINT32_MAX) {
      refused->push_back(where + ": a malformed file entry");
      continue;
    }
    const std::string base = file->get<std::string>();
    if (base.find('/') != std::string::npos || !EndsWith(base, ".arrow")) {
      refused->push_back(where + ": names '" + base + "', not a tier file of this directory");
      continue;
    }
    const std::string full = (path.parent_path() / base).string();
    std::shared_ptr<TierFile>& tier = (*opened)[full];
    if (tier == nullptr) {
      auto proven =
          TierFile::Open(full, static_cast<int64_t>(bytes), static_cast<uint32_t>(crc), disk);
      if (!proven.ok()) {
        refused->push_back(proven.status().ToString());
        opened->erase(full);
        continue;
      }
      tier = *proven;
    }
    if (starts->size() != tier->batches().size()) {
      refused->push_back(where + ": '" + base + "' has " + std::to_string(tier->batches().size()) +
                         " batches, not " + std::to_string(starts->size()));
      continue;
    }
    for (size_t i = 0; i < starts->size(); ++i) {
      const json& s = (*starts)[i];
      if (s.is_number_unsigned()) batches.push_back({s.get<uint64_t>(), tier->batches()[i]});
    }
    held.push_back(tier);
  }
  if (batches.empty()) return std::nullopt;
  std::sort(batches.begin(), batches.end(), [](const CachedBatch& a, const CachedBatch& b) {
    return a.global_start < b.global_start;
  });
  auto schema = batches.front().batch->schema();
  auto copy = CachedDataset::Make(name, generation, std::move(schema), std::move(batches), nullptr,
                                  {}, std::move(held));
  if (!copy.ok()) {
    refused->push_back(where + ": " + copy.status().ToString());
    return std::nullopt;
  }
  auto record = m.find("record");
  return TierAdoption::Copy{*copy, record != m.end() && record->is_object() ? *record : json()};
}

}  // namespace

arrow::Result<TierAdoption> AdoptTierDir(const std::string& dir,
                                         const std::shared_ptr<MemoryBudget>& disk) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return arrow::Status::IOError("disk tier ", dir, ": ", ec.message());
  std::vector<fs::path> manifests, others;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (EndsWith(name, kManifestSuffix)) {
      manifests.push_back(entry.path());
    } else if (EndsWith(name, ".arrow") || EndsWith(name, ".partial")) {
      others.push_back(entry.path());
    }
  }
  if (ec) return arrow::Status::IOError("disk tier ", dir, ": ", ec.message());
  TierAdoption out;
  std::map<std::string, std::shared_ptr<TierFile>> opened;
  std::sort(manifests.begin(), manifests.end());
  for (const fs::path& m : manifests) {
    auto copy = AdoptManifest(m, disk, &opened, &out.refused);
    if (copy) {
      out.copies.push_back(std::move(*copy));
    } else if (!fs::remove(m, ec) || ec) {
      return arrow::Status::IOError("disk tier: removing ", m.string(), ": ", ec.message());
    }
  }
  // Files no adopted copy holds go (a file opened for a manifest whose copy
  // was refused is removed by its TierFile when `opened` lets it go).
  std::set<std::string> kept;
  for (const auto& c : out.copies) {
    for (const auto& region : c.copy->held()) {
      if (const auto* f = dynamic_cast<const TierFile*>(region.get())) kept.insert(f->path());
    }
  }
  out.files_adopted = static_cast<int64_t>(kept.size());
  for (const fs::path& p : others) {
    if (kept.count(p.string()) != 0) continue;
    if (opened.count(p.string()) != 0) {
      ++out.files_removed;  // its TierFile removes it below
      continue;
    }
    if (!fs::remove(p, ec) || ec) {
      return arrow::Status::IOError("disk tier: removing ", p.string(), ": ", ec.message());
    }
    ++out.files_removed;
  }
  return out;
}

}  // namespace icefloe
