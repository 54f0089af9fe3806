#include "icefloe/iceberg/scan.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <tuple>

#include <arrow/type.h>

#include "icefloe/iceberg/expr.h"
#include "icefloe/iceberg/manifest.h"
#include "icefloe/iceberg/metadata.h"
#include "icefloe/iceberg/name_mapping.h"
#include "icefloe/iceberg/partition.h"
#include "icefloe/iceberg/puffin.h"

namespace icefloe::iceberg {

int64_t ScanPlan::total_records() const {
  int64_t n = 0;
  for (const auto& t : tasks) {
    if (t.first_row_group == 0) n += t.data_file.record_count;
  }
  return n;
}

int64_t ScanPlan::total_bytes() const {
  int64_t n = 0;
  for (const auto& t : tasks) {
    if (t.first_row_group == 0) n += t.data_file.file_size_in_bytes;
  }
  return n;
}

namespace {

constexpr size_t kManifestReadParallelism = 8;

arrow::Result<const Snapshot*> ChooseSnapshot(const TableMetadata& metadata,
                                              const ScanOptions& options) {
  if (options.snapshot_id)
    return SelectSnapshot(metadata, SnapshotSelector::Id(*options.snapshot_id));
  if (options.ref) return SelectSnapshot(metadata, SnapshotSelector::Ref(*options.ref));
  if (options.as_of_ms) return SelectSnapshot(metadata, SnapshotSelector::AsOf(*options.as_of_ms));
  return metadata.CurrentSnapshot();  // nullptr: a table without data
}

arrow::Result<std::vector<int32_t>> ResolveProjection(const Schema& schema,
                                                      const std::vector<std::string>& columns) {
  std::vector<int32_t> ids;
  if (columns.empty()) {
    for (const auto& f : schema.fields) ids.push_back(f.id);
    return ids;
  }
  for (const auto& name : columns) {
    const NestedField* found = nullptr;
    for (const auto& f : schema.fields) {
      if (f.name == name) found = &f;
    }
    if (found == nullptr) {
      std::string known;
      for (const auto& f : schema.fields) known += (known.empty() ? "" : ", ") + f.name;
      return arrow::Status::Invalid("unknown column '", name,
                                    "' in columns (table columns: ", known, ")");
    }
    ids.push_back(found->id);
  }
  return ids;
}

// Inclusive projection of a normalized row filter onto one partition spec:
// true for every partition that might hold a matching row.
BoundExpr ProjectToPartition(const BoundExpr& e, const PartitionSpec& spec,
                             const std::vector<NestedField>& partition_type) {
  using Op = ExprOp;
  switch (e.op) {
    case Op::kTrue:
    case Op::kFalse:
      return e;
    case Op::kAnd:
    case Op::kOr: {
      std::vector<BoundExpr> children;
      for (const auto& c : e.children)
        children.push_back(ProjectToPartition(c, spec, partition_type));
      return e.op == Op::kAnd ? BoundExpr::And(std::move(children))
                              : BoundExpr::Or(std::move(children));
    }
    default:
      break;
  }
  std::vector<BoundExpr> parts;
  for (size_t i = 0; i < spec.fields.size(); ++i) {
    const PartitionField& pf = spec.fields[i];
    if (pf.source_id != e.field_id || pf.transform.kind == Transform::kVoid) continue;
    const TypePtr& ptype = partition_type[i].type;
    const bool identity = pf.transform.kind == Transform::kIdentity;
    if (e.op == Op::kIsNull || e.op == Op::kNotNull) {
      parts.push_back(BoundExpr::Predicate(e.op, pf.field_id, ptype, {}));
      continue;
    }
    if (identity) {
      parts.push_back(BoundExpr::Predicate(e.op, pf.field_id, ptype, e.literals));
      continue;
    }
    // Order-preserving transforms (truncate, time) and bucket (equality only).
    const bool ordered = pf.transform.kind != Transform::kBucket;
    Op op = e.op;
    if (!ordered && op != Op::kEq && op != Op::kIn) continue;
    if (op == Op::kNe || op == Op::kNotIn || op == Op::kIsNan || op == Op::kNotNan ||
        op == Op::kNotStartsWith) {
      continue;
    }
    if (op == Op::kStartsWith) {
      // A truncate[W] partition of a string starts with the prefix's first W
      // characters; time transforms do not apply to strings.
      if (pf.transform.kind != Transform::kTruncate) continue;
      auto t = pf.transform.Apply(e.literals[0]);
      if (!t.ok()) continue;
      parts.push_back(BoundExpr::Compare(Op::kStartsWith, pf.field_id, ptype, *t));
      continue;
    }
    std::vector<Literal> transformed;
    bool ok = true;
    for (const auto& lit : e.literals) {
      auto t = pf.transform.Apply(lit);
      if (!t.ok()) {
        ok = false;
        break;
      }
      transformed.push_back(*t);
    }
    if (!ok) continue;
    if (op == Op::kLt) op = Op::kLe;  // transform(x) <= transform(lit) for x < lit
    if (op == Op::kGt) op = Op::kGe;
    parts.push_back(BoundExpr::Predicate(op, pf.field_id, ptype, std::move(transformed)));
  }
  if (parts.empty()) return BoundExpr::True();
  return parts.size() == 1 ? parts[0] : BoundExpr::And(std::move(parts));
}

bool SamePartition(const DataFile& a, const DataFile& b) {
  if (a.spec_id != b.spec_id || a.partition.size() != b.partition.size()) return false;
  for (size_t i = 0; i < a.partition.size(); ++i) {
    const Literal& x = a.partition[i];
    const Literal& y = b.partition[i];
    if (x.is_null() != y.is_null()) return false;
    if (x.is_null()) continue;
    auto c = CompareLiterals(x, y);
    if (!c.ok() || *c != 0) return false;
  }
  return true;
}

struct DeleteIndex {
  std::vector<DataFile> deletes;  // delete files (Parquet)
  // Deletion vectors by the data file they reference.
  std::multimap<std::string, DataFile> vectors;
  // Spec ids whose partition tuple is empty: their equality deletes apply
  // globally.
  std::map<int32_t, bool> unpartitioned_spec;

  arrow::Status Add(DataFile file) {
    if (!file.is_deletion_vector()) {
      deletes.push_back(std::move(file));
      return arrow::Status::OK();
    }
    if (!file.referenced_data_file) {
      return arrow::Status::Invalid("deletion vector in Puffin file ", file.file_path,
                                    ": the manifest gives no referenced_data_file");
    }
    std::string key = *file.referenced_data_file;
    vectors.emplace(std::move(key), std::move(file));
    return arrow::Status::OK();
  }

  arrow::Result<std::vector<DataFile>> For(const DataFile& data) const {
    std::vector<DataFile> out;
    // A deletion vector holds every position delete of the file (writers
    // merge older position delete files into it), so those are not read.
    auto [begin, end] = vectors.equal_range(data.file_path);
    for (auto it = begin; it != end; ++it) {
      const DataFile& dv = it->second;
      if (!SamePartition(data, dv) || data.data_sequence_number > dv.data_sequence_number) continue;
      if (!out.empty()) {
        return arrow::Status::Invalid("two deletion vectors apply to ", data.file_path, ": ",
                                      out[0].file_path, " and ", dv.file_path);
      }
      out.push_back(dv);
    }
    const bool has_vector = !out.empty();
    for (const auto& d : deletes) {
      if (d.content == FileContent::kPositionDeletes) {
        if (has_vector) continue;
        // Same spec and partition values, even for an unpartitioned spec.
        if (!SamePartition(data, d)) continue;
        if (data.data_sequence_number > d.data_sequence_number) continue;
        if (d.referenced_data_file && *d.referenced_data_file != data.file_path) continue;
      } else {
        auto it = unpartitioned_spec.find(d.spec_id);
        bool global = it != unpartitioned_spec.end() && it->second;
        if (!global && !SamePartition(data, d)) continue;
        if (data.data_sequence_number >= d.data_sequence_number) continue;
      }
      out.push_back(d);
    }
    return out;
  }
};

// The values that the identity fields of `file`'s partition spec give their
// source columns (see PartitionValue). Each must have a binary form: that is
// how it travels to the nodes.
arrow::Result<std::vector<PartitionValue>> IdentityValues(
    const DataFile& file, const PartitionSpec* spec,
    const std::vector<NestedField>& partition_type) {
  std::vector<PartitionValue> out;
  if (spec == nullptr || spec->fields.size() != file.partition.size() ||
      partition_type.size() != file.partition.size()) {
    return out;
  }
  for (size_t i = 0; i < spec->fields.size(); ++i) {
    if (spec->fields[i].transform.kind != Transform::kIdentity) continue;
    const Literal& value = file.partition[i];
    if (!value.is_null()) {
      auto encoded = EncodeSingleValue(value, *partition_type[i].type);
      if (!encoded.ok()) {
        return encoded.status().WithMessage("partition value '", spec->fields[i].name, "' of ",
                                            file.file_path, ": ", encoded.status().message());
      }
    }
    out.push_back({spec->fields[i].source_id, partition_type[i].type, value});
  }
  return out;
}

// Reads the footer of a Puffin file and checks that every deletion vector the
// manifests place in it is a deletion-vector-v1 blob at that offset and
// length, for the same data file and of the same cardinality: a table whose
// manifests and Puffin files disagree fails to plan, naming the file, rather
// than deleting the wrong rows.
arrow::Status CheckPuffinFile(FileIO& io, const std::string& location,
                              const std::vector<const DataFile*>& vectors) {
  ARROW_ASSIGN_OR_RAISE(auto input, io.OpenInput(location));
  ARROW_ASSIGN_OR_RAISE(PuffinFooter footer, ReadPuffinFooter(input.get(), location));
  for (const DataFile* dv : vectors) {
    auto bad = [&](auto&&... why) {
      return arrow::Status::Invalid("deletion vector for ", *dv->referenced_data_file,
                                    " in Puffin file ", location, ": ", why...);
    };
    if (!dv->content_offset || !dv->content_size_in_bytes) {
      return bad("the manifest gives no content_offset and content_size_in_bytes");
    }
    const PuffinBlobMetadata* blob = nullptr;
    for (const auto& b : footer.blobs) {
      if (b.offset == *dv->content_offset && b.length == *dv->content_size_in_bytes) blob = &b;
    }
    if (blob == nullptr) {
      return bad("the footer lists no blob at offset ", *dv->content_offset, " of ",
                 *dv->content_size_in_bytes, " bytes");
    }
    if (blob->type != kDeletionVectorBlobType) return bad("the blob is a ", blob->type);
    if (blob->compression_codec && *blob->compression_codec != "none") {
      return bad("the blob is compressed (", *blob->compression_codec, ")");
    }
    auto property = [&](const char* key) -> const std::string* {
      auto it = blob->properties.find(key);
      return it == blob->properties.end() ? nullptr : &it->second;
    };
    if (const std::string* ref = property("referenced-data-file");
        ref && *ref != *dv->referenced_data_file) {
      return bad("the footer says it applies to ", *ref);
    }
    if (const std::string* cardinality = property("cardinality");
        cardinality && *cardinality != std::to_string(dv->record_count)) {
      return bad("the footer gives cardinality ", *cardinality, ", the manifest ",
                 dv->record_count);
    }
  }
  return arrow::Status::OK();
}

arrow::Status CheckDeletionVectors(FileIO& io, const DeleteIndex& deletes) {
  std::map<std::string, std::vector<const DataFile*>> by_file;
  for (const auto& [data_path, dv] : deletes.vectors) by_file[dv.file_path].push_back(&dv);
  std::vector<const decltype(by_file)::value_type*> files;
  for (const auto& entry : by_file) files.push_back(&entry);
  // A few footers at a time, as manifests are read.
  for (size_t begin = 0; begin < files.size(); begin += kManifestReadParallelism) {
    const size_t end = std::min(files.size(), begin + kManifestReadParallelism);
    std::vector<std::future<arrow::Status>> checks;
    for (size_t i = begin; i < end; ++i) {
      checks.push_back(std::async(std::launch::async, [&io, file = files[i]] {
        return CheckPuffinFile(io, file->first, file->second);
      }));
    }
    arrow::Status first_error;
    for (auto& check : checks) {
      arrow::Status st = check.get();
      if (first_error.ok()) first_error = st;
    }
    ARROW_RETURN_NOT_OK(first_error);
  }
  return arrow::Status::OK();
}

// Oldest data first: data sequence number, then path. Files of one commit
// share a sequence number; their paths order them the same way in every
// load of the snapshot, whatever the manifests' order.
void SortTasks(std::vector<ScanTask>* tasks) {
  std::stable_sort(tasks->begin(), tasks->end(), [](const ScanTask& a, const ScanTask& b) {
    return std::tie(a.data_file.data_sequence_number, a.data_file.file_path) <
           std::tie(b.data_file.data_sequence_number, b.data_file.file_path);
  });
}

}  // namespace

arrow::Result<ScanPlan> PlanScan(FileIO& io, const std::string& location,
                                 const ScanOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  ARROW_ASSIGN_OR_RAISE(TableMetadata metadata, LoadTableMetadata(io, location));
  ScanPlan plan;
  plan.metadata_location = metadata.metadata_location;
  plan.table_uuid = metadata.table_uuid;
  plan.format_version = metadata.format_version;
  ARROW_ASSIGN_OR_RAISE(const Snapshot* snapshot, ChooseSnapshot(metadata, options));
  const bool time_travel = options.snapshot_id || options.ref || options.as_of_ms;
  if (snapshot != nullptr && time_travel) {
    ARROW_ASSIGN_OR_RAISE(const Schema* s, metadata.SchemaFor(*snapshot));
    plan.schema = *s;
  } else {
    plan.schema = metadata.CurrentSchema();
  }
  if (snapshot != nullptr) plan.snapshot_id = snapshot->snapshot_id;
  ARROW_ASSIGN_OR_RAISE(plan.projection, ResolveProjection(plan.schema, options.columns));
  ARROW_ASSIGN_OR_RAISE(plan.arrow_schema, ToArrowSchema(plan.schema, &plan.projection));
  plan.filter = options.filter;
  if (auto it = metadata.properties.find(std::string(kNameMappingProperty));
      it != metadata.properties.end()) {
    // Checked here so that a malformed mapping fails the plan, not every node.
    ARROW_RETURN_NOT_OK(ParseNameMapping(it->second).status());
    plan.name_mapping = it->second;
  }

  BoundExpr filter = BoundExpr::True();
  if (!options.filter.empty()) {
    ARROW_ASSIGN_OR_RAISE(auto parsed, ParseFilter(options.filter));
    ARROW_ASSIGN_OR_RAISE(filter, Bind(parsed, plan.schema));
  }
  if (snapshot == nullptr) return plan;

  // Manifests: from the manifest list, or (v1) listed on the snapshot.
  std::vector<ManifestFile> manifests;
  if (!snapshot->manifest_list.empty()) {
    ARROW_ASSIGN_OR_RAISE(manifests, ReadManifestList(io, snapshot->manifest_list));
  } else {
    for (const auto& path : snapshot->manifests) {
      ManifestFile m;
      m.manifest_path = path;
      m.partition_spec_id = -1;
      manifests.push_back(std::move(m));
    }
  }

  std::map<int32_t, std::vector<NestedField>> partition_types;
  auto partition_type = [&](int32_t spec_id) -> arrow::Result<std::vector<NestedField>> {
    auto it = partition_types.find(spec_id);
    if (it != partition_types.end()) return it->second;
    const PartitionSpec* spec = metadata.FindSpec(spec_id);
    if (spec == nullptr) return arrow::Status::Invalid("unknown partition spec id ", spec_id);
    ARROW_ASSIGN_OR_RAISE(auto type, spec->PartitionType(plan.schema));
    partition_types[spec_id] = type;
    return type;
  };
  // Resolve every spec up front: the lambda is then read-only for the threads.
  for (const auto& spec : metadata.partition_specs) {
    auto t = partition_type(spec.spec_id);
    if (!t.ok()) partition_types[spec.spec_id] = {};  // a spec over dropped columns
  }
  auto cached_partition_type = [&](int32_t spec_id) -> arrow::Result<std::vector<NestedField>> {
    auto it = partition_types.find(spec_id);
    if (it == partition_types.end()) {
      return arrow::Status::Invalid("unknown partition spec id ", spec_id);
    }
    return it->second;
  };
  auto partition_filter = [&](int32_t spec_id) -> BoundExpr {
    const PartitionSpec* spec = metadata.FindSpec(spec_id);
    auto it = partition_types.find(spec_id);
    if (spec == nullptr || it == partition_types.end() ||
        it->second.size() != spec->fields.size()) {
      return BoundExpr::True();
    }
    return ProjectToPartition(filter, *spec, it->second);
  };

  // Prune manifests with their partition summaries.
  std::vector<ManifestFile> kept;
  for (auto& m : manifests) {
    plan.metrics.manifests_total++;
    bool is_data = m.content == FileContent::kData;
    if (is_data && m.added_files_count >= 0 && m.existing_files_count >= 0) {
      plan.metrics.data_files_total += m.added_files_count + m.existing_files_count;
    }
    if (is_data && m.partition_spec_id >= 0 && !m.partitions.empty()) {
      auto ptype = cached_partition_type(m.partition_spec_id);
      if (ptype.ok() && ptype->size() == m.partitions.size()) {
        std::map<int32_t, ColumnStats> stats;
        for (size_t i = 0; i < m.partitions.size(); ++i) {
          const auto& s = m.partitions[i];
          ColumnStats cs;
          if (!s.contains_null) cs.null_count = 0;
          if (s.lower_bound) {
            auto v = DecodeSingleValue(*(*ptype)[i].type, *s.lower_bound);
            if (v.ok()) cs.lower = *v;
          }
          if (s.upper_bound) {
            auto v = DecodeSingleValue(*(*ptype)[i].type, *s.upper_bound);
            if (v.ok()) cs.upper = *v;
          }
          if (s.contains_nan && !*s.contains_nan) cs.nan_count = 0;
          stats[(*ptype)[i].id] = cs;
        }
        ARROW_ASSIGN_OR_RAISE(bool might, MightMatch(
                                              partition_filter(m.partition_spec_id),
                                              [&](int32_t id) -> const ColumnStats* {
                                                auto it = stats.find(id);
                                                return it == stats.end() ? nullptr : &it->second;
                                              },
                                              -1));
        if (!might) {
          plan.metrics.manifests_pruned++;
          continue;
        }
      }
    }
    kept.push_back(std::move(m));
  }

  // Read the remaining manifests (those an earlier plan parsed come from the
  // cache), a few at a time, keeping their order.
  std::vector<std::vector<ManifestEntry>> entries(kept.size());
  std::vector<size_t> to_read;
  for (size_t i = 0; i < kept.size(); ++i) {
    auto cached = options.manifests ? options.manifests->Find(kept[i].manifest_path) : nullptr;
    if (cached) {
      entries[i] = *cached;
      plan.metrics.manifests_cached++;
    } else {
      to_read.push_back(i);
    }
  }
  for (size_t begin = 0; begin < to_read.size(); begin += kManifestReadParallelism) {
    size_t end = std::min(to_read.size(), begin + kManifestReadParallelism);
    std::vector<std::future<arrow::Result<std::vector<ManifestEntry>>>> reads;
    for (size_t k = begin; k < end; ++k) {
      reads.push_back(std::async(std::launch::async, [&, i = to_read[k]] {
        return ReadManifest(io, kept[i], cached_partition_type);
      }));
    }
    for (size_t k = begin; k < end; ++k) {
      const size_t i = to_read[k];
      ARROW_ASSIGN_OR_RAISE(entries[i], reads[k - begin].get());
      if (options.manifests) {
        options.manifests->Put(kept[i].manifest_path,
                               std::make_shared<const std::vector<ManifestEntry>>(entries[i]));
      }
    }
  }

  DeleteIndex deletes;
  for (const auto& spec : metadata.partition_specs) {
    deletes.unpartitioned_spec[spec.spec_id] = spec.is_unpartitioned();
  }
  std::vector<DataFile> data_files;
  const bool count_files = plan.metrics.data_files_total == 0;
  for (size_t i = 0; i < kept.size(); ++i) {
    for (auto& e : entries[i]) {
      if (e.file.content != FileContent::kData) {
        ARROW_RETURN_NOT_OK(deletes.Add(std::move(e.file)));
        plan.metrics.delete_files++;
        continue;
      }
      if (count_files) plan.metrics.data_files_total++;
      // Partition pruning.
      BoundExpr pfilter = partition_filter(e.file.spec_id);
      auto ptype = cached_partition_type(e.file.spec_id);
      if (ptype.ok() && ptype->size() == e.file.partition.size()) {
        ARROW_ASSIGN_OR_RAISE(bool might,
                              MightMatchPartition(pfilter, [&](int32_t id) -> const Literal* {
                                for (size_t k = 0; k < ptype->size(); ++k) {
                                  if ((*ptype)[k].id == id) return &e.file.partition[k];
                                }
                                return nullptr;
                              }));
        if (!might) {
          plan.metrics.data_files_pruned_by_partition++;
          continue;
        }
      }
      // Column bounds pruning.
      std::map<int32_t, ColumnStats> stats;
      for (int32_t id : ReferencedFieldIds(filter)) {
        const NestedField* field = plan.schema.FindById(id);
        if (field == nullptr || !field->type->is_primitive()) continue;
        ColumnStats cs;
        if (auto it = e.file.lower_bounds.find(id); it != e.file.lower_bounds.end()) {
          auto v = DecodeSingleValue(*field->type, it->second);
          if (v.ok()) cs.lower = *v;
        }
        if (auto it = e.file.upper_bounds.find(id); it != e.file.upper_bounds.end()) {
          auto v = DecodeSingleValue(*field->type, it->second);
          if (v.ok()) cs.upper = *v;
        }
        if (auto it = e.file.null_value_counts.find(id); it != e.file.null_value_counts.end()) {
          cs.null_count = it->second;
        }
        if (auto it = e.file.value_counts.find(id); it != e.file.value_counts.end()) {
          cs.value_count = it->second;
        }
        if (auto it = e.file.nan_value_counts.find(id); it != e.file.nan_value_counts.end()) {
          cs.nan_count = it->second;
        }
        stats[id] = std::move(cs);
      }
      ARROW_ASSIGN_OR_RAISE(bool might, MightMatch(
                                            filter,
                                            [&](int32_t id) -> const ColumnStats* {
                                              auto it = stats.find(id);
                                              return it == stats.end() ? nullptr : &it->second;
                                            },
                                            e.file.record_count));
      if (!might) {
        plan.metrics.data_files_pruned_by_bounds++;
        continue;
      }
      if (ptype.ok()) {
        ARROW_ASSIGN_OR_RAISE(e.file.identity_values,
                              IdentityValues(e.file, metadata.FindSpec(e.file.spec_id), *ptype));
      }
      data_files.push_back(std::move(e.file));
    }
  }

  ARROW_RETURN_NOT_OK(CheckDeletionVectors(io, deletes));
  for (auto& f : data_files) {
    ScanTask task;
    ARROW_ASSIGN_OR_RAISE(task.deletes, deletes.For(f));
    task.data_file = std::move(f);
    plan.tasks.push_back(std::move(task));
  }
  SortTasks(&plan.tasks);
  plan.metrics.planning_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return plan;
}

}  // namespace icefloe::iceberg
