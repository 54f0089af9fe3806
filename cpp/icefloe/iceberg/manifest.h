// Reading manifest lists and manifests (Avro) into plain structs.
//
// Field ids are the Iceberg spec's (see iceberg-notes.md). Sequence numbers
// are inherited here: a manifest entry with a null sequence number takes the
// manifest's (spec: "inheritance"), so every DataFile carries its real data
// and file sequence numbers.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/result.h>

#include "icefloe/common/mutex.h"
#include "icefloe/iceberg/data_file.h"
#include "icefloe/iceberg/file_io.h"
#include "icefloe/iceberg/partition.h"
#include "icefloe/iceberg/types.h"

namespace icefloe::iceberg {

struct FieldSummary {                      // 508
  bool contains_null = true;               // 509
  std::optional<bool> contains_nan;        // 518
  std::optional<std::string> lower_bound;  // 510, single-value serialized
  std::optional<std::string> upper_bound;  // 511
};

struct ManifestFile {                        // a manifest list entry
  std::string manifest_path;                 // 500
  int64_t manifest_length = 0;               // 501
  int32_t partition_spec_id = 0;             // 502
  FileContent content = FileContent::kData;  // 517: 0 data, 1 deletes
  int64_t sequence_number = 0;               // 515
  int64_t min_sequence_number = 0;           // 516
  int64_t added_snapshot_id = 0;             // 503
  int64_t added_files_count = -1;            // 504
  int64_t existing_files_count = -1;         // 505
  std::vector<FieldSummary> partitions;      // 507
};

/// Reads a manifest list. Invalid naming the file for malformed entries.
arrow::Result<std::vector<ManifestFile>> ReadManifestList(FileIO& io, const std::string& location);

/// A live (not deleted) manifest entry.
struct ManifestEntry {
  int32_t status = 0;  // 0 existing, 1 added
  DataFile file;
};

/// The partition tuple fields of a spec id (for typing partition values).
using PartitionTypeFn = std::function<arrow::Result<std::vector<NestedField>>(int32_t spec_id)>;

/// Reads the live entries of a manifest. A negative manifest.partition_spec_id
/// (v1 snapshots listing manifests directly) is taken from the file's
/// `partition-spec-id` metadata.
arrow::Result<std::vector<ManifestEntry>> ReadManifest(FileIO& io, ManifestFile manifest,
                                                       const PartitionTypeFn& partition_type);

/// Parsed manifests by location, shared by the scan plans of one process.
/// A manifest file never changes once a snapshot lists it, so a refresh of a
/// table re-plans reading only the manifests its new snapshots added.
/// Thread-safe; bounded by the entries it holds (the least recently used
/// manifests go first; one larger than the bound is not kept).
class ManifestCache {
 public:
  explicit ManifestCache(size_t max_entries) : max_entries_(max_entries) {}

  using Entries = std::shared_ptr<const std::vector<ManifestEntry>>;
  /// The entries of the manifest at `location`, or null when not cached.
  Entries Find(const std::string& location) EXCLUDES(mu_);
  void Put(const std::string& location, Entries entries) EXCLUDES(mu_);
  size_t held_entries() const EXCLUDES(mu_);

 private:
  const size_t max_entries_;
  mutable Mutex mu_;
  std::list<std::pair<std::string, Entries>> lru_ GUARDED_BY(mu_);  // most recent first
  std::map<std::string, std::list<std::pair<std::string, Entries>>::iterator> index_
      GUARDED_BY(mu_);
  size_t held_ GUARDED_BY(mu_) = 0;
};

}  // namespace icefloe::iceberg
