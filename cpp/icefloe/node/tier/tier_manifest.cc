#include "icefloe/node/tier/tier_manifest.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "icefloe/common/bytes.h"
#include "icefloe/node/tier/tier_file.h"
#include "icefloe/node/tier/tier_manifest_format.h"

namespace icefloe {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kManifestSuffix = ".manifest.json";
// Manifests and the files they name are small and few; one larger is not ours.
constexpr uintmax_t kMaxManifestBytes = uintmax_t{256} << 20;

fs::path ManifestPath(const std::string& dir, const std::string& dataset) {
  return fs::path(dir) / (HexEncode(dataset) + kManifestSuffix);
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
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
  TierManifest manifest{copy.name(), copy.generation(), record, {}};
  for (const auto& region : copy.held()) {
    const auto* file = dynamic_cast<const TierFile*>(region.get());
    if (file == nullptr) continue;
    TierManifestFile entry{
        fs::path(file->path()).filename().string(), file->bytes(), file->crc32(), {}};
    bool any = false;
    for (const auto& b : file->batches()) {
      auto it = starts.find(b.get());
      if (it == starts.end()) {
        entry.starts.push_back(std::nullopt);  // not part of this copy (a refresh dropped it)
      } else {
        entry.starts.push_back(it->second);
        any = true;
      }
    }
    if (any) manifest.files.push_back(std::move(entry));
  }
  if (manifest.files.empty()) return RemoveTierManifest(dir, copy.name());
  const fs::path path = ManifestPath(dir, copy.name());
  const std::string partial = path.string() + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out << manifest.Encode();
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
  auto manifest = TierManifest::Decode(text.str(), where);
  if (!manifest.ok()) {
    refused->push_back(manifest.status().message());
    return std::nullopt;
  }
  std::vector<CachedBatch> batches;
  std::vector<std::shared_ptr<const MappedRegion>> held;
  for (const TierManifestFile& f : manifest->files) {
    if (f.file.find('/') != std::string::npos || !EndsWith(f.file, ".arrow")) {
      refused->push_back(where + ": names '" + f.file + "', not a tier file of this directory");
      continue;
    }
    const std::string full = (path.parent_path() / f.file).string();
    std::shared_ptr<TierFile>& tier = (*opened)[full];
    if (tier == nullptr) {
      auto proven = TierFile::Open(full, f.bytes, f.crc32, disk);
      if (!proven.ok()) {
        refused->push_back(proven.status().ToString());
        opened->erase(full);
        continue;
      }
      tier = *proven;
    }
    if (f.starts.size() != tier->batches().size()) {
      refused->push_back(where + ": '" + f.file + "' has " +
                         std::to_string(tier->batches().size()) + " batches, not " +
                         std::to_string(f.starts.size()));
      continue;
    }
    for (size_t i = 0; i < f.starts.size(); ++i) {
      if (f.starts[i]) batches.push_back({*f.starts[i], tier->batches()[i]});
    }
    held.push_back(tier);
  }
  if (batches.empty()) return std::nullopt;
  std::sort(batches.begin(), batches.end(), [](const CachedBatch& a, const CachedBatch& b) {
    return a.global_start < b.global_start;
  });
  auto schema = batches.front().batch->schema();
  auto copy = CachedDataset::Make(manifest->dataset, manifest->generation, std::move(schema),
                                  std::move(batches), nullptr, {}, std::move(held));
  if (!copy.ok()) {
    refused->push_back(where + ": " + copy.status().ToString());
    return std::nullopt;
  }
  return TierAdoption::Copy{*copy, std::move(manifest->record)};
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
