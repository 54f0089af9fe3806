#include "icefloe/iceberg/metadata.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>

#include <arrow/util/compression.h>
#include <nlohmann/json.hpp>

#include "icefloe/iceberg/json_internal.h"

namespace icefloe::iceberg {

using json = nlohmann::json;
using internal::AsInt64;
using internal::AsString;
using internal::FindMember;
using internal::OptionalInt32;
using internal::OptionalInt64;
using internal::RequiredInt32;
using internal::RequiredInt64;
using internal::RequiredMember;
using internal::RequiredString;

namespace {

constexpr std::string_view kWhat = "table metadata";
constexpr int32_t kMaxFormatVersion = 3;

/// "2017-11-16T22:31:08.000Z" for milliseconds since the epoch.
std::string FormatTimestampMs(int64_t ms) {
  using namespace std::chrono;
  int64_t days = ms / 86400000 - (ms % 86400000 < 0 ? 1 : 0);
  int64_t in_day = ms - days * 86400000;
  year_month_day ymd{sys_days{std::chrono::days{days}}};
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ",
                static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                static_cast<unsigned>(ymd.day()), static_cast<int>(in_day / 3600000),
                static_cast<int>(in_day / 60000 % 60), static_cast<int>(in_day / 1000 % 60),
                static_cast<int>(in_day % 1000));
  return buf;
}

arrow::Status Prefix(const arrow::Status& st, std::string_view prefix) {
  return st.WithMessage(prefix, ": ", st.message());
}

arrow::Result<const json*> RequiredArray(const json& obj, std::string_view key,
                                         std::string_view what) {
  ARROW_ASSIGN_OR_RAISE(const json* v, RequiredMember(obj, key, what));
  if (!v->is_array()) return arrow::Status::Invalid(what, ": field '", key, "' is not a list");
  return v;
}

arrow::Status ParseSchemas(const json& j, TableMetadata* m) {
  const bool v1 = m->format_version == 1;
  const json* list = FindMember(j, "schemas");
  if (list != nullptr || !v1) {
    ARROW_ASSIGN_OR_RAISE(list, RequiredArray(j, "schemas", kWhat));
    for (size_t i = 0; i < list->size(); ++i) {
      auto schema = ParseSchema((*list)[i]);
      if (!schema.ok()) return Prefix(schema.status(), "schemas[" + std::to_string(i) + "]");
      m->schemas.push_back(std::move(*schema));
    }
  }
  const json* single = FindMember(j, "schema");
  std::optional<int32_t> single_id;
  if (v1 && (single != nullptr || list == nullptr)) {
    ARROW_ASSIGN_OR_RAISE(single, RequiredMember(j, "schema", kWhat));
    auto schema = ParseSchema(*single);
    if (!schema.ok()) return Prefix(schema.status(), "schema");
    single_id = schema->schema_id;
    if (list == nullptr) m->schemas.push_back(std::move(*schema));
  }
  ARROW_ASSIGN_OR_RAISE(auto current, OptionalInt32(j, "current-schema-id", kWhat));
  if (!current.has_value()) {
    if (!single_id.has_value()) {
      return arrow::Status::Invalid(kWhat, ": missing required field 'current-schema-id'");
    }
    current = single_id;
  }
  m->current_schema_id = *current;
  if (m->FindSchema(m->current_schema_id) == nullptr) {
    return arrow::Status::Invalid(kWhat, ": current-schema-id ", m->current_schema_id,
                                  " is not among the schemas");
  }
  return arrow::Status::OK();
}

arrow::Status ParseSpecs(const json& j, TableMetadata* m) {
  const bool v1 = m->format_version == 1;
  const json* list = FindMember(j, "partition-specs");
  if (list != nullptr || !v1) {
    ARROW_ASSIGN_OR_RAISE(list, RequiredArray(j, "partition-specs", kWhat));
    for (size_t i = 0; i < list->size(); ++i) {
      auto spec = ParsePartitionSpec((*list)[i]);
      if (!spec.ok()) return Prefix(spec.status(), "partition-specs[" + std::to_string(i) + "]");
      m->partition_specs.push_back(std::move(*spec));
    }
  } else {
    ARROW_ASSIGN_OR_RAISE(const json* fields, RequiredArray(j, "partition-spec", kWhat));
    auto spec = ParsePartitionSpec(*fields);
    if (!spec.ok()) return Prefix(spec.status(), "partition-spec");
    m->partition_specs.push_back(std::move(*spec));
  }
  ARROW_ASSIGN_OR_RAISE(auto default_id, OptionalInt32(j, "default-spec-id", kWhat));
  if (!default_id.has_value()) {
    if (!v1 || m->partition_specs.size() != 1) {
      return arrow::Status::Invalid(kWhat, ": missing required field 'default-spec-id'");
    }
    default_id = m->partition_specs[0].spec_id;
  }
  m->default_spec_id = *default_id;
  if (m->FindSpec(m->default_spec_id) == nullptr) {
    return arrow::Status::Invalid(kWhat, ": default-spec-id ", m->default_spec_id,
                                  " is not among the partition specs");
  }
  return arrow::Status::OK();
}

arrow::Result<Snapshot> ParseSnapshot(const json& j, int32_t format_version, size_t index) {
  Snapshot s;
  std::string what = "snapshots[" + std::to_string(index) + "]";
  ARROW_ASSIGN_OR_RAISE(s.snapshot_id, RequiredInt64(j, "snapshot-id", what));
  what = "snapshot " + std::to_string(s.snapshot_id);
  ARROW_ASSIGN_OR_RAISE(s.parent_snapshot_id, OptionalInt64(j, "parent-snapshot-id", what));
  if (format_version == 1) {
    ARROW_ASSIGN_OR_RAISE(auto seq, OptionalInt64(j, "sequence-number", what));
    s.sequence_number = seq.value_or(0);
  } else {
    ARROW_ASSIGN_OR_RAISE(s.sequence_number, RequiredInt64(j, "sequence-number", what));
  }
  ARROW_ASSIGN_OR_RAISE(s.timestamp_ms, RequiredInt64(j, "timestamp-ms", what));
  const json* manifests = FindMember(j, "manifests");
  if (format_version == 1 && FindMember(j, "manifest-list") == nullptr && manifests != nullptr) {
    if (!manifests->is_array()) {
      return arrow::Status::Invalid(what, ": field 'manifests' is not a list");
    }
    for (const auto& m : *manifests) {
      ARROW_ASSIGN_OR_RAISE(std::string path, AsString(m, "manifests", what));
      s.manifests.push_back(std::move(path));
    }
  } else {
    ARROW_ASSIGN_OR_RAISE(s.manifest_list, RequiredString(j, "manifest-list", what));
  }
  if (const json* summary = FindMember(j, "summary")) {
    ARROW_ASSIGN_OR_RAISE(s.summary, internal::StringMap(*summary, "summary", what));
  }
  ARROW_ASSIGN_OR_RAISE(s.schema_id, OptionalInt32(j, "schema-id", what));
  return s;
}

arrow::Status ParseSnapshots(const json& j, TableMetadata* m) {
  if (const json* list = FindMember(j, "snapshots")) {
    if (!list->is_array()) return arrow::Status::Invalid(kWhat, ": 'snapshots' is not a list");
    for (size_t i = 0; i < list->size(); ++i) {
      ARROW_ASSIGN_OR_RAISE(auto s, ParseSnapshot((*list)[i], m->format_version, i));
      m->snapshots.push_back(std::move(s));
    }
  }
  ARROW_ASSIGN_OR_RAISE(auto current, OptionalInt64(j, "current-snapshot-id", kWhat));
  if (current.has_value() && *current != -1) {
    if (m->FindSnapshot(*current) == nullptr) {
      return arrow::Status::Invalid(kWhat, ": current-snapshot-id ", *current,
                                    " is not among the snapshots");
    }
    m->current_snapshot_id = current;
  }
  if (const json* log = FindMember(j, "snapshot-log")) {
    if (!log->is_array()) return arrow::Status::Invalid(kWhat, ": 'snapshot-log' is not a list");
    for (const auto& e : *log) {
      SnapshotLogEntry entry;
      ARROW_ASSIGN_OR_RAISE(entry.timestamp_ms, RequiredInt64(e, "timestamp-ms", "snapshot-log"));
      ARROW_ASSIGN_OR_RAISE(entry.snapshot_id, RequiredInt64(e, "snapshot-id", "snapshot-log"));
      m->snapshot_log.push_back(entry);
    }
  }
  return arrow::Status::OK();
}

arrow::Status ParseRefs(const json& j, TableMetadata* m) {
  if (const json* refs = FindMember(j, "refs")) {
    if (!refs->is_object()) return arrow::Status::Invalid(kWhat, ": 'refs' is not an object");
    for (auto it = refs->begin(); it != refs->end(); ++it) {
      const std::string what = "ref '" + it.key() + "'";
      SnapshotRef ref;
      ARROW_ASSIGN_OR_RAISE(ref.snapshot_id, RequiredInt64(*it, "snapshot-id", what));
      ARROW_ASSIGN_OR_RAISE(std::string type, RequiredString(*it, "type", what));
      std::transform(type.begin(), type.end(), type.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (type == "branch") {
        ref.kind = SnapshotRef::Kind::kBranch;
      } else if (type == "tag") {
        ref.kind = SnapshotRef::Kind::kTag;
      } else {
        return arrow::Status::Invalid(what, ": unknown type '", type, "' (branch or tag)");
      }
      if (m->FindSnapshot(ref.snapshot_id) == nullptr) {
        return arrow::Status::Invalid(what, ": snapshot ", ref.snapshot_id,
                                      " is not among the snapshots");
      }
      m->refs.emplace(it.key(), ref);
    }
  }
  // The spec: without a "main" ref, the current snapshot is the main branch.
  auto main = m->refs.find("main");
  if (main == m->refs.end()) {
    if (m->current_snapshot_id.has_value()) {
      m->refs.emplace("main", SnapshotRef{*m->current_snapshot_id, SnapshotRef::Kind::kBranch});
    }
  } else if (main->second.snapshot_id != m->current_snapshot_id.value_or(-1)) {
    return arrow::Status::Invalid(kWhat, ": ref 'main' points at snapshot ",
                                  main->second.snapshot_id, " but current-snapshot-id is ",
                                  m->current_snapshot_id.value_or(-1));
  }
  return arrow::Status::OK();
}

arrow::Status ParseMetadataLog(const json& j, TableMetadata* m) {
  if (const json* log = FindMember(j, "metadata-log")) {
    if (!log->is_array()) return arrow::Status::Invalid(kWhat, ": 'metadata-log' is not a list");
    for (const auto& e : *log) {
      MetadataLogEntry entry;
      ARROW_ASSIGN_OR_RAISE(entry.timestamp_ms, RequiredInt64(e, "timestamp-ms", "metadata-log"));
      ARROW_ASSIGN_OR_RAISE(entry.metadata_file,
                            RequiredString(e, "metadata-file", "metadata-log"));
      m->metadata_log.push_back(std::move(entry));
    }
  }
  return arrow::Status::OK();
}

arrow::Result<TableMetadata> ParseChecked(const json& j) {
  if (!j.is_object()) return arrow::Status::Invalid(kWhat, " is not a JSON object");
  TableMetadata m;
  ARROW_ASSIGN_OR_RAISE(m.format_version, RequiredInt32(j, "format-version", kWhat));
  if (m.format_version < 1) {
    return arrow::Status::Invalid("invalid Iceberg format-version ", m.format_version);
  }
  if (m.format_version > kMaxFormatVersion) {
    return arrow::Status::NotImplemented("Iceberg format-version ", m.format_version,
                                         " is not supported (1 to ", kMaxFormatVersion, " are)");
  }
  const bool v1 = m.format_version == 1;
  if (v1) {
    if (const json* uuid = FindMember(j, "table-uuid")) {
      ARROW_ASSIGN_OR_RAISE(m.table_uuid, AsString(*uuid, "table-uuid", kWhat));
    }
  } else {
    ARROW_ASSIGN_OR_RAISE(m.table_uuid, RequiredString(j, "table-uuid", kWhat));
    ARROW_ASSIGN_OR_RAISE(m.last_sequence_number, RequiredInt64(j, "last-sequence-number", kWhat));
  }
  ARROW_ASSIGN_OR_RAISE(m.location, RequiredString(j, "location", kWhat));
  ARROW_ASSIGN_OR_RAISE(m.last_updated_ms, RequiredInt64(j, "last-updated-ms", kWhat));
  ARROW_ASSIGN_OR_RAISE(auto last_column_id, OptionalInt32(j, "last-column-id", kWhat));
  m.last_column_id = last_column_id.value_or(0);
  ARROW_RETURN_NOT_OK(ParseSchemas(j, &m));
  ARROW_RETURN_NOT_OK(ParseSpecs(j, &m));
  if (const json* properties = FindMember(j, "properties")) {
    ARROW_ASSIGN_OR_RAISE(m.properties, internal::StringMap(*properties, "properties", kWhat));
  }
  ARROW_RETURN_NOT_OK(ParseSnapshots(j, &m));
  ARROW_RETURN_NOT_OK(ParseRefs(j, &m));
  ARROW_RETURN_NOT_OK(ParseMetadataLog(j, &m));
  return m;
}

arrow::Result<std::string> Gunzip(const std::string& data, int64_t max_bytes) {
  ARROW_ASSIGN_OR_RAISE(auto codec, arrow::util::Codec::Create(arrow::Compression::GZIP));
  ARROW_ASSIGN_OR_RAISE(auto decompressor, codec->MakeDecompressor());
  const auto* in = reinterpret_cast<const uint8_t*>(data.data());
  int64_t in_left = static_cast<int64_t>(data.size());
  std::string out;
  std::vector<uint8_t> chunk(1 << 16);
  while (!decompressor->IsFinished()) {
    ARROW_ASSIGN_OR_RAISE(
        auto r,
        decompressor->Decompress(in_left, in, static_cast<int64_t>(chunk.size()), chunk.data()));
    in += r.bytes_read;
    in_left -= r.bytes_read;
    out.append(reinterpret_cast<const char*>(chunk.data()), static_cast<size_t>(r.bytes_written));
    if (static_cast<int64_t>(out.size()) > max_bytes) {
      return arrow::Status::IOError("inflates to more than ", max_bytes, " bytes");
    }
    if (r.bytes_read == 0 && r.bytes_written == 0 && !r.need_more_output) {
      return arrow::Status::IOError("truncated gzip data");
    }
  }
  return out;
}

/// The version of a metadata file name: N for vN[.gz].metadata.json (`*versioned`
/// true) or NNNNN-<uuid>[.gz].metadata.json (false); nullopt for other names.
std::optional<int64_t> MetadataFileVersion(const std::string& name, bool* versioned) {
  constexpr std::string_view kSuffix = ".metadata.json";
  if (name.size() <= kSuffix.size() ||
      name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return std::nullopt;
  }
  *versioned = name[0] == 'v';
  size_t i = *versioned ? 1 : 0;
  size_t start = i;
  int64_t n = 0;
  while (i < name.size() && i - start < 18 && std::isdigit(static_cast<unsigned char>(name[i]))) {
    n = n * 10 + (name[i] - '0');
    ++i;
  }
  if (i == start) return std::nullopt;
  std::string_view rest = std::string_view(name).substr(i);
  if (*versioned) {
    if (rest != kSuffix && rest != ".gz.metadata.json") return std::nullopt;
  } else if (rest.empty() || rest[0] != '-') {
    return std::nullopt;
  }
  return n;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

arrow::Result<std::string> FromVersionHint(FileIO& io, const std::string& metadata_dir,
                                           const std::string& hint_location) {
  ARROW_ASSIGN_OR_RAISE(std::string hint, io.ReadAll(hint_location));
  hint = Trim(hint);
  if (hint.empty()) return arrow::Status::Invalid(hint_location, ": empty version hint");
  std::vector<std::string> candidates;
  if (std::all_of(hint.begin(), hint.end(), [](unsigned char c) { return std::isdigit(c); })) {
    candidates.push_back(metadata_dir + "/v" + hint + ".metadata.json");
    candidates.push_back(metadata_dir + "/v" + hint + ".gz.metadata.json");
  } else if (hint.find("://") != std::string::npos || hint[0] == '/') {
    candidates.push_back(hint);
  } else {
    candidates.push_back(metadata_dir + "/" + hint);
  }
  for (const auto& c : candidates) {
    ARROW_ASSIGN_OR_RAISE(bool exists, io.Exists(c));
    if (exists) return c;
  }
  return arrow::Status::IOError(hint_location, ": names version '", hint, "' but ", candidates[0],
                                " does not exist");
}

}  // namespace

std::string Snapshot::operation() const {
  auto it = summary.find("operation");
  return it == summary.end() ? std::string() : it->second;
}

const Schema& TableMetadata::CurrentSchema() const {
  const Schema* s = FindSchema(current_schema_id);
  static const Schema kEmpty;
  return s != nullptr ? *s : kEmpty;  // only a default-constructed TableMetadata lacks one
}

const Schema* TableMetadata::FindSchema(int32_t schema_id) const {
  for (const auto& s : schemas) {
    if (s.schema_id == schema_id) return &s;
  }
  return nullptr;
}

const PartitionSpec* TableMetadata::FindSpec(int32_t spec_id) const {
  for (const auto& s : partition_specs) {
    if (s.spec_id == spec_id) return &s;
  }
  return nullptr;
}

const PartitionSpec& TableMetadata::DefaultSpec() const {
  const PartitionSpec* s = FindSpec(default_spec_id);
  static const PartitionSpec kUnpartitioned;
  return s != nullptr ? *s : kUnpartitioned;
}

const Snapshot* TableMetadata::FindSnapshot(int64_t snapshot_id) const {
  for (const auto& s : snapshots) {
    if (s.snapshot_id == snapshot_id) return &s;
  }
  return nullptr;
}

const Snapshot* TableMetadata::CurrentSnapshot() const {
  return current_snapshot_id.has_value() ? FindSnapshot(*current_snapshot_id) : nullptr;
}

arrow::Result<const Schema*> TableMetadata::SchemaFor(const Snapshot& snapshot) const {
  if (!snapshot.schema_id.has_value()) return &CurrentSchema();
  const Schema* s = FindSchema(*snapshot.schema_id);
  if (s == nullptr) {
    return arrow::Status::KeyError("snapshot ", snapshot.snapshot_id, " names schema ",
                                   *snapshot.schema_id, ", which the table does not have");
  }
  return s;
}

arrow::Result<TableMetadata> ParseTableMetadataJson(const json& j) {
  try {
    return ParseChecked(j);
  } catch (const json::exception& e) {
    // Backstop: accessors are checked, but a nested parser may still throw.
    return arrow::Status::Invalid(kWhat, ": ", e.what());
  }
}

arrow::Result<TableMetadata> ParseTableMetadata(std::string_view text, std::string_view source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    return arrow::Status::Invalid(source, ": malformed JSON at byte ", e.byte, ": ", e.what());
  }
  auto parsed = ParseTableMetadataJson(j);
  if (!parsed.ok()) return Prefix(parsed.status(), source);
  return parsed;
}

std::string SnapshotSelector::ToString() const {
  switch (kind) {
    case Kind::kCurrent:
      return "current snapshot";
    case Kind::kSnapshotId:
      return "snapshot " + std::to_string(snapshot_id);
    case Kind::kRef:
      return "ref '" + ref + "'";
    case Kind::kAsOfTimestamp:
      return "as of " + FormatTimestampMs(as_of_timestamp_ms) + " (" +
             std::to_string(as_of_timestamp_ms) + " ms)";
  }
  return "?";
}

arrow::Result<const Snapshot*> SelectSnapshot(const TableMetadata& m,
                                              const SnapshotSelector& selector) {
  using Kind = SnapshotSelector::Kind;
  switch (selector.kind) {
    case Kind::kCurrent:
      return m.CurrentSnapshot();
    case Kind::kSnapshotId: {
      const Snapshot* s = m.FindSnapshot(selector.snapshot_id);
      if (s == nullptr) {
        return arrow::Status::KeyError("table ", m.location, " has no snapshot ",
                                       selector.snapshot_id);
      }
      return s;
    }
    case Kind::kRef: {
      auto it = m.refs.find(selector.ref);
      if (it != m.refs.end()) return m.FindSnapshot(it->second.snapshot_id);
      if (selector.ref == "main") return m.CurrentSnapshot();
      std::string known;
      for (const auto& [name, ref] : m.refs) known += (known.empty() ? "" : ", ") + name;
      return arrow::Status::KeyError("table ", m.location, " has no branch or tag named '",
                                     selector.ref, "' (refs: ", known.empty() ? "none" : known,
                                     ")");
    }
    case Kind::kAsOfTimestamp:
      break;
  }
  const int64_t as_of = selector.as_of_timestamp_ms;
  if (!m.snapshot_log.empty()) {
    const SnapshotLogEntry* found = nullptr;
    for (const auto& e : m.snapshot_log) {
      if (e.timestamp_ms <= as_of && (found == nullptr || e.timestamp_ms >= found->timestamp_ms)) {
        found = &e;
      }
    }
    if (found != nullptr) {
      const Snapshot* s = m.FindSnapshot(found->snapshot_id);
      if (s == nullptr) {
        return arrow::Status::KeyError("table ", m.location, ": snapshot ", found->snapshot_id,
                                       ", current ", selector.ToString(), ", has expired");
      }
      return s;
    }
  } else {
    for (const Snapshot* s = m.CurrentSnapshot(); s != nullptr;
         s = s->parent_snapshot_id ? m.FindSnapshot(*s->parent_snapshot_id) : nullptr) {
      if (s->timestamp_ms <= as_of) return s;
    }
  }
  return arrow::Status::KeyError("table ", m.location, " has no snapshot ", selector.ToString());
}

bool IsMetadataFileLocation(const std::string& location) {
  std::string loc = location;
  while (loc.size() > 1 && loc.back() == '/') loc.pop_back();
  return EndsWith(loc, ".json") || EndsWith(loc, ".json.gz");
}

arrow::Result<std::string> ResolveMetadataLocation(FileIO& io, const std::string& location) {
  std::string loc = location;
  while (loc.size() > 1 && loc.back() == '/') loc.pop_back();
  if (IsMetadataFileLocation(loc)) return loc;
  const std::string metadata_dir = loc + "/metadata";
  const std::string hint = metadata_dir + "/version-hint.text";
  ARROW_ASSIGN_OR_RAISE(bool has_hint, io.Exists(hint));
  if (has_hint) return FromVersionHint(io, metadata_dir, hint);

  auto names = io.ListDir(metadata_dir);
  if (!names.ok()) return Prefix(names.status(), "no Iceberg table at " + location);
  // Hadoop tables name files vN.metadata.json; catalogs NNNNN-<uuid>.metadata.json.
  std::vector<std::string> best;
  int64_t best_version = -1;
  bool best_versioned = false;
  for (const auto& name : *names) {
    bool versioned = false;
    auto version = MetadataFileVersion(name, &versioned);
    if (!version.has_value()) continue;
    bool better = best.empty() || (versioned && !best_versioned) ||
                  (versioned == best_versioned && *version > best_version);
    if (better) {
      best = {name};
      best_version = *version;
      best_versioned = versioned;
    } else if (versioned == best_versioned && *version == best_version) {
      best.push_back(name);
    }
  }
  if (best.empty()) {
    return arrow::Status::IOError("no Iceberg table at ", location, ": no metadata.json file in ",
                                  metadata_dir);
  }
  if (best.size() > 1) {
    return arrow::Status::Invalid("ambiguous table metadata in ", metadata_dir, ": ", best[0],
                                  " and ", best[1], " share version ", best_version,
                                  "; name the metadata file instead");
  }
  return metadata_dir + "/" + best[0];
}

std::optional<std::string> TableOfMetadataFile(const std::string& location) {
  if (!IsMetadataFileLocation(location)) return std::nullopt;
  const size_t slash = location.rfind('/');
  constexpr std::string_view kDir = "/metadata";
  if (slash == std::string::npos || slash < kDir.size() ||
      location.compare(slash - kDir.size(), kDir.size(), kDir) != 0) {
    return std::nullopt;
  }
  return location.substr(0, slash - kDir.size());
}

arrow::Result<std::string> NewestMetadataLocation(FileIO& io, const std::string& source) {
  if (!IsMetadataFileLocation(source)) return ResolveMetadataLocation(io, source);
  auto table = TableOfMetadataFile(source);
  if (!table) return source;
  return ResolveMetadataLocation(io, *table);
}

arrow::Result<TableMetadata> LoadTableMetadata(FileIO& io, const std::string& location) {
  ARROW_ASSIGN_OR_RAISE(std::string file, ResolveMetadataLocation(io, location));
  ARROW_ASSIGN_OR_RAISE(std::string text, io.ReadAll(file));
  if (text.size() >= 2 && static_cast<uint8_t>(text[0]) == 0x1f &&
      static_cast<uint8_t>(text[1]) == 0x8b) {
    auto inflated = Gunzip(text, io.options().max_read_all_bytes);
    if (!inflated.ok()) return Prefix(inflated.status(), file);
    text = std::move(*inflated);
  }
  ARROW_ASSIGN_OR_RAISE(TableMetadata m, ParseTableMetadata(text, file));
  m.metadata_location = file;
  return m;
}

}  // namespace icefloe::iceberg
