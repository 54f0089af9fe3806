#include "icefloe/iceberg/manifest.h"

#include <limits>

#include <arrow/buffer.h>

#include "icefloe/iceberg/avro.h"

namespace icefloe::iceberg {

namespace {

arrow::Result<std::unique_ptr<AvroReader>> OpenAvro(FileIO& io, const std::string& location) {
  ARROW_ASSIGN_OR_RAISE(std::string bytes, io.ReadAll(location));
  return AvroReader::OpenBuffer(arrow::Buffer::FromString(std::move(bytes)), location);
}

// Iceberg writes int-keyed maps as arrays of {key, value} records; other
// writers may use Avro maps with string keys. Accept both.
template <typename V, typename Fn>
arrow::Status ReadIntMap(const AvroValue* value, std::map<int32_t, V>* out, Fn convert) {
  if (value == nullptr || value->is_null()) return arrow::Status::OK();
  if (const AvroArray* items = value->array()) {
    for (const auto& item : *items) {
      const AvroRecord* kv = item.record();
      if (kv == nullptr || kv->fields.size() < 2) {
        return arrow::Status::Invalid("map entry is not a key/value record");
      }
      ARROW_ASSIGN_OR_RAISE(int32_t key, kv->fields[0].As<int32_t>("map key"));
      ARROW_ASSIGN_OR_RAISE(V v, convert(kv->fields[1]));
      (*out)[key] = std::move(v);
    }
    return arrow::Status::OK();
  }
  if (const AvroMap* map = value->map()) {
    for (const auto& [k, v] : *map) {
      ARROW_ASSIGN_OR_RAISE(V converted, convert(v));
      (*out)[std::stoi(k)] = std::move(converted);
    }
    return arrow::Status::OK();
  }
  return arrow::Status::Invalid("expected a map");
}

arrow::Result<int64_t> AsLong(const AvroValue& v) { return v.As<int64_t>("map value"); }
arrow::Result<std::string> AsBytes(const AvroValue& v) {
  ARROW_ASSIGN_OR_RAISE(std::string_view s, v.As<std::string_view>("bound"));
  return std::string(s);
}

// A partition value as written in a manifest, typed by its partition field.
arrow::Result<Literal> PartitionLiteral(const AvroValue& value, const Type& type) {
  Literal lit;
  lit.type = type.id;
  if (value.is_null()) return lit;
  switch (type.id) {
    case TypeId::kBoolean: {
      ARROW_ASSIGN_OR_RAISE(bool b, value.As<bool>("partition value"));
      lit.value = b;
      return lit;
    }
    case TypeId::kFloat:
    case TypeId::kDouble: {
      ARROW_ASSIGN_OR_RAISE(double d, value.As<double>("partition value"));
      lit.value = d;
      return lit;
    }
    case TypeId::kString:
    case TypeId::kBinary:
    case TypeId::kFixed:
    case TypeId::kUuid: {
      ARROW_ASSIGN_OR_RAISE(std::string_view s, value.As<std::string_view>("partition value"));
      lit.value = std::string(s);
      return lit;
    }
    case TypeId::kDecimal: {
      ARROW_ASSIGN_OR_RAISE(std::string_view s, value.As<std::string_view>("partition value"));
      return DecodeSingleValue(type, s);
    }
    default: {
      ARROW_ASSIGN_OR_RAISE(int64_t i, value.As<int64_t>("partition value"));
      lit.value = i;
      return lit;
    }
  }
}

arrow::Result<DataFile> ReadDataFile(const AvroValue& df, const ManifestFile& manifest,
                                     const std::vector<NestedField>& partition_type) {
  DataFile f;
  f.spec_id = manifest.partition_spec_id;
  ARROW_ASSIGN_OR_RAISE(auto content, df.GetOptional<int32_t>(134));
  f.content = static_cast<FileContent>(content.value_or(0));
  ARROW_ASSIGN_OR_RAISE(std::string_view path, df.Get<std::string_view>(100));
  f.file_path = std::string(path);
  ARROW_ASSIGN_OR_RAISE(std::string_view format, df.Get<std::string_view>(101));
  f.file_format = std::string(format);
  for (auto& c : f.file_format) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  ARROW_ASSIGN_OR_RAISE(f.record_count, df.Get<int64_t>(103));
  ARROW_ASSIGN_OR_RAISE(f.file_size_in_bytes, df.Get<int64_t>(104));

  if (const AvroValue* partition = df.FindField(102); partition && partition->record()) {
    const AvroRecord& rec = *partition->record();
    for (size_t i = 0; i < partition_type.size(); ++i) {
      const AvroValue* v = partition->FindField(partition_type[i].id);
      if (v == nullptr && i < rec.fields.size()) v = &rec.fields[i];
      Literal lit;
      lit.type = partition_type[i].type->id;
      if (v != nullptr) {
        ARROW_ASSIGN_OR_RAISE(lit, PartitionLiteral(*v, *partition_type[i].type));
      }
      f.partition.push_back(std::move(lit));
    }
  }
  ARROW_RETURN_NOT_OK(ReadIntMap(df.FindField(108), &f.column_sizes, AsLong));
  ARROW_RETURN_NOT_OK(ReadIntMap(df.FindField(109), &f.value_counts, AsLong));
  ARROW_RETURN_NOT_OK(ReadIntMap(df.FindField(110), &f.null_value_counts, AsLong));
  ARROW_RETURN_NOT_OK(ReadIntMap(df.FindField(137), &f.nan_value_counts, AsLong));
  ARROW_RETURN_NOT_OK(ReadIntMap(df.FindField(125), &f.lower_bounds, AsBytes));
  ARROW_RETURN_NOT_OK(ReadIntMap(df.FindField(128), &f.upper_bounds, AsBytes));
  if (const AvroValue* splits = df.FindField(132); splits && splits->array()) {
    for (const auto& s : *splits->array()) {
      ARROW_ASSIGN_OR_RAISE(int64_t off, s.As<int64_t>("split offset"));
      f.split_offsets.push_back(off);
    }
  }
  if (const AvroValue* ids = df.FindField(135); ids && ids->array()) {
    for (const auto& s : *ids->array()) {
      // The spec says int; pyiceberg's manifest schema declares long.
      ARROW_ASSIGN_OR_RAISE(int64_t id, s.As<int64_t>("equality id"));
      if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
        return arrow::Status::Invalid("equality id ", id, " is not a field id");
      }
      f.equality_ids.push_back(static_cast<int32_t>(id));
    }
  }
  ARROW_ASSIGN_OR_RAISE(auto referenced, df.GetOptional<std::string_view>(143));
  if (referenced) f.referenced_data_file = std::string(*referenced);
  // v3 deletion vectors; row lineage's first_row_id (142) is not needed to read.
  ARROW_ASSIGN_OR_RAISE(f.content_offset, df.GetOptional<int64_t>(144));
  ARROW_ASSIGN_OR_RAISE(f.content_size_in_bytes, df.GetOptional<int64_t>(145));
  return f;
}

}  // namespace

arrow::Result<std::vector<ManifestFile>> ReadManifestList(FileIO& io, const std::string& location) {
  ARROW_ASSIGN_OR_RAISE(auto reader, OpenAvro(io, location));
  std::vector<ManifestFile> out;
  AvroValue v;
  while (true) {
    ARROW_ASSIGN_OR_RAISE(bool more, reader->Next(&v));
    if (!more) break;
    auto parse = [&]() -> arrow::Result<ManifestFile> {
      ManifestFile m;
      ARROW_ASSIGN_OR_RAISE(std::string_view path, v.Get<std::string_view>(500));
      m.manifest_path = std::string(path);
      ARROW_ASSIGN_OR_RAISE(m.manifest_length, v.Get<int64_t>(501));
      ARROW_ASSIGN_OR_RAISE(m.partition_spec_id, v.Get<int32_t>(502));
      ARROW_ASSIGN_OR_RAISE(auto content, v.GetOptional<int32_t>(517));
      m.content = content.value_or(0) == 1 ? FileContent::kPositionDeletes : FileContent::kData;
      ARROW_ASSIGN_OR_RAISE(auto seq, v.GetOptional<int64_t>(515));
      m.sequence_number = seq.value_or(0);
      ARROW_ASSIGN_OR_RAISE(auto min_seq, v.GetOptional<int64_t>(516));
      m.min_sequence_number = min_seq.value_or(0);
      ARROW_ASSIGN_OR_RAISE(auto added_id, v.GetOptional<int64_t>(503));
      m.added_snapshot_id = added_id.value_or(0);
      ARROW_ASSIGN_OR_RAISE(auto added, v.GetOptional<int64_t>(504));
      ARROW_ASSIGN_OR_RAISE(auto existing, v.GetOptional<int64_t>(505));
      m.added_files_count = added.value_or(-1);
      m.existing_files_count = existing.value_or(-1);
      if (const AvroValue* parts = v.FindField(507); parts && parts->array()) {
        for (const auto& p : *parts->array()) {
          FieldSummary s;
          ARROW_ASSIGN_OR_RAISE(s.contains_null, p.Get<bool>(509));
          ARROW_ASSIGN_OR_RAISE(s.contains_nan, p.GetOptional<bool>(518));
          ARROW_ASSIGN_OR_RAISE(auto lower, p.GetOptional<std::string_view>(510));
          ARROW_ASSIGN_OR_RAISE(auto upper, p.GetOptional<std::string_view>(511));
          if (lower) s.lower_bound = std::string(*lower);
          if (upper) s.upper_bound = std::string(*upper);
          m.partitions.push_back(std::move(s));
        }
      }
      return m;
    };
    auto m = parse();
    if (!m.ok()) {
      return m.status().WithMessage("manifest list ", location, ": ", m.status().message());
    }
    out.push_back(std::move(*m));
  }
  return out;
}

arrow::Result<std::vector<ManifestEntry>> ReadManifest(FileIO& io, ManifestFile manifest,
                                                       const PartitionTypeFn& partition_type_fn) {
  ARROW_ASSIGN_OR_RAISE(auto reader, OpenAvro(io, manifest.manifest_path));
  if (manifest.partition_spec_id < 0) {
    const std::string* id = reader->FindMetadata("partition-spec-id");
    manifest.partition_spec_id = id ? std::atoi(id->c_str()) : 0;
  }
  ARROW_ASSIGN_OR_RAISE(auto partition_type, partition_type_fn(manifest.partition_spec_id));
  std::vector<ManifestEntry> out;
  AvroValue v;
  while (true) {
    ARROW_ASSIGN_OR_RAISE(bool more, reader->Next(&v));
    if (!more) break;
    auto parse = [&]() -> arrow::Result<std::optional<ManifestEntry>> {
      ARROW_ASSIGN_OR_RAISE(int32_t status, v.Get<int32_t>(0));
      if (status == 2) return std::optional<ManifestEntry>();  // deleted
      ManifestEntry e;
      e.status = status;
      const AvroValue* df = v.FindField(2);
      if (df == nullptr || df->record() == nullptr) {
        return arrow::Status::Invalid("entry without data_file (field 2)");
      }
      ARROW_ASSIGN_OR_RAISE(e.file, ReadDataFile(*df, manifest, partition_type));
      // Sequence number inheritance: null means "the manifest's".
      ARROW_ASSIGN_OR_RAISE(auto seq, v.GetOptional<int64_t>(3));
      ARROW_ASSIGN_OR_RAISE(auto file_seq, v.GetOptional<int64_t>(4));
      e.file.data_sequence_number = seq.value_or(manifest.sequence_number);
      e.file.file_sequence_number = file_seq.value_or(manifest.sequence_number);
      return std::optional<ManifestEntry>(std::move(e));
    };
    auto e = parse();
    if (!e.ok()) {
      return e.status().WithMessage("manifest ", manifest.manifest_path, ": ",
                                    e.status().message());
    }
    if (*e) out.push_back(std::move(**e));
  }
  return out;
}

ManifestCache::Entries ManifestCache::Find(const std::string& location) {
  MutexLock lock(&mu_);
  auto it = index_.find(location);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void ManifestCache::Put(const std::string& location, Entries entries) {
  if (!entries || entries->size() > max_entries_) return;
  MutexLock lock(&mu_);
  if (index_.count(location)) return;
  held_ += entries->size();
  lru_.emplace_front(location, std::move(entries));
  index_[location] = lru_.begin();
  while (held_ > max_entries_ && !lru_.empty()) {
    held_ -= lru_.back().second->size();
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

size_t ManifestCache::held_entries() const {
  MutexLock lock(&mu_);
  return held_;
}

}  // namespace icefloe::iceberg
