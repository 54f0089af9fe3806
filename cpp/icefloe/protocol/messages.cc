#include "icefloe/protocol/messages.h"

namespace icefloe {

using json = nlohmann::json;

arrow::Result<json> ParseBody(std::string_view body, std::string_view what) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return arrow::Status::Invalid(what, ": body is not a JSON object");
  }
  if (j.contains("v")) {
    if (!j["v"].is_number_integer()) return arrow::Status::Invalid(what, ": 'v' is not an integer");
    int v = j["v"].get<int>();
    if (v < 1 || v > kProtocolVersion) {
      return arrow::Status::Invalid(what, ": unsupported version ", v, " (this server speaks 1..",
                                    kProtocolVersion, ")");
    }
  }
  return j;
}

namespace {

template <typename T>
arrow::Result<T> Get(const json& j, const char* key, std::string_view what) {
  if (!j.contains(key) || j[key].is_null()) {
    return arrow::Status::Invalid(what, ": missing '", key, "'");
  }
  try {
    return j[key].get<T>();
  } catch (const json::exception&) {
    return arrow::Status::Invalid(what, ": '", key, "' has the wrong type");
  }
}

template <typename T>
arrow::Result<std::optional<T>> GetOptional(const json& j, const char* key, std::string_view what) {
  if (!j.contains(key) || j[key].is_null()) return std::optional<T>();
  ARROW_ASSIGN_OR_RAISE(T v, Get<T>(j, key, what));
  return std::optional<T>(std::move(v));
}

template <typename T>
arrow::Result<T> GetOr(const json& j, const char* key, T fallback, std::string_view what) {
  ARROW_ASSIGN_OR_RAISE(auto v, GetOptional<T>(j, key, what));
  return v.value_or(std::move(fallback));
}

}  // namespace

json LoadRequest::ToJson() const {
  json j = {{"v", kProtocolVersion},     {"name", name},     {"source", source},
            {"columns", columns},        {"filter", filter}, {"batch_rows", batch_rows},
            {"replication", replication}};
  if (snapshot_id) j["snapshot_id"] = *snapshot_id;
  if (ref) j["ref"] = *ref;
  if (as_of_ms) j["as_of_ms"] = *as_of_ms;
  return j;
}

arrow::Result<LoadRequest> LoadRequest::FromJson(const json& j) {
  constexpr std::string_view what = "load";
  LoadRequest r;
  ARROW_ASSIGN_OR_RAISE(r.name, Get<std::string>(j, "name", what));
  ARROW_ASSIGN_OR_RAISE(r.source, Get<std::string>(j, "source", what));
  ARROW_ASSIGN_OR_RAISE(r.snapshot_id, GetOptional<int64_t>(j, "snapshot_id", what));
  ARROW_ASSIGN_OR_RAISE(r.ref, GetOptional<std::string>(j, "ref", what));
  ARROW_ASSIGN_OR_RAISE(r.as_of_ms, GetOptional<int64_t>(j, "as_of_ms", what));
  ARROW_ASSIGN_OR_RAISE(r.columns, GetOr<std::vector<std::string>>(j, "columns", {}, what));
  ARROW_ASSIGN_OR_RAISE(r.filter, GetOr<std::string>(j, "filter", "", what));
  ARROW_ASSIGN_OR_RAISE(r.batch_rows, GetOr<int64_t>(j, "batch_rows", kDefaultBatchRows, what));
  ARROW_ASSIGN_OR_RAISE(r.replication, GetOr<int32_t>(j, "replication", 1, what));
  if (r.name.empty() || r.name.size() > 200) {
    return arrow::Status::Invalid("load: 'name' must be 1..200 characters");
  }
  for (char c : r.name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
          c == '/')) {
      return arrow::Status::Invalid("load: dataset name '", r.name,
                                    "' may only hold letters, digits and - _ . /");
    }
  }
  if (r.source.empty()) return arrow::Status::Invalid("load: 'source' is empty");
  if (r.batch_rows < 1 || r.batch_rows > (1 << 24)) {
    return arrow::Status::Invalid("load: 'batch_rows' must be in 1..16777216, got ", r.batch_rows);
  }
  if (r.replication < 1 || r.replication > 16) {
    return arrow::Status::Invalid("load: 'replication' must be in 1..16, got ", r.replication);
  }
  int selectors = (r.snapshot_id ? 1 : 0) + (r.ref ? 1 : 0) + (r.as_of_ms ? 1 : 0);
  if (selectors > 1) {
    return arrow::Status::Invalid("load: give at most one of snapshot_id, ref, as_of");
  }
  return r;
}

arrow::Result<RangeCommand> ParseRangeCommand(const json& j) {
  constexpr std::string_view what = "range descriptor";
  RangeCommand c;
  ARROW_ASSIGN_OR_RAISE(c.dataset, Get<std::string>(j, "dataset", what));
  ARROW_ASSIGN_OR_RAISE(c.start, GetOr<uint64_t>(j, "start", 0, what));
  ARROW_ASSIGN_OR_RAISE(c.stop, GetOptional<uint64_t>(j, "stop", what));
  if (c.stop && *c.stop < c.start) {
    return arrow::Status::Invalid("range descriptor: stop ", *c.stop, " is before start ", c.start);
  }
  return c;
}

namespace {

std::string ToHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

arrow::Result<std::string> FromHex(std::string_view hex) {
  auto nibble = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  if (hex.size() % 2 != 0) return arrow::Status::Invalid("data file: odd-length hex value");
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return arrow::Status::Invalid("data file: bad hex value");
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

// Identity partition values: {"id", "type" (Iceberg's spelling), "value" (the
// single-value binary serialization in hex, or null)}.
arrow::Result<json> PartitionValuesToJson(const std::vector<iceberg::PartitionValue>& values) {
  json out = json::array();
  for (const auto& v : values) {
    json value;  // null
    if (!v.value.is_null()) {
      ARROW_ASSIGN_OR_RAISE(std::string bytes, iceberg::EncodeSingleValue(v.value, *v.type));
      value = ToHex(bytes);
    }
    out.push_back({{"id", v.source_id}, {"type", v.type->ToString()}, {"value", value}});
  }
  return out;
}

arrow::Result<std::vector<iceberg::PartitionValue>> PartitionValuesFromJson(const json& j) {
  constexpr std::string_view what = "data file partition value";
  if (!j.is_array()) return arrow::Status::Invalid("data file: 'partition_values' is not a list");
  std::vector<iceberg::PartitionValue> out;
  for (const auto& item : j) {
    iceberg::PartitionValue v;
    ARROW_ASSIGN_OR_RAISE(v.source_id, Get<int32_t>(item, "id", what));
    ARROW_ASSIGN_OR_RAISE(std::string type, Get<std::string>(item, "type", what));
    ARROW_ASSIGN_OR_RAISE(v.type, iceberg::ParseType(json(type)));
    if (!v.type->is_primitive()) return arrow::Status::Invalid(what, ": type ", type);
    ARROW_ASSIGN_OR_RAISE(auto hex, GetOptional<std::string>(item, "value", what));
    v.value.type = v.type->id;
    v.value.scale = v.type->scale;
    if (hex) {
      ARROW_ASSIGN_OR_RAISE(std::string bytes, FromHex(*hex));
      ARROW_ASSIGN_OR_RAISE(v.value, iceberg::DecodeSingleValue(*v.type, bytes));
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace

json DataFileToJson(const iceberg::DataFile& f) {
  json j = {{"content", static_cast<int>(f.content)},
            {"path", f.file_path},
            {"format", f.file_format},
            {"records", f.record_count},
            {"size", f.file_size_in_bytes},
            {"spec_id", f.spec_id},
            {"seq", f.data_sequence_number}};
  if (!f.equality_ids.empty()) j["equality_ids"] = f.equality_ids;
  if (f.referenced_data_file) j["referenced_data_file"] = *f.referenced_data_file;
  if (f.content_offset) j["content_offset"] = *f.content_offset;
  if (f.content_size_in_bytes) j["content_size"] = *f.content_size_in_bytes;
  if (!f.identity_values.empty()) {
    // The planner checks that every value has a binary form. Should one not,
    // null makes the node refuse the file instead of reading wrong values.
    auto values = PartitionValuesToJson(f.identity_values);
    j["partition_values"] = values.ok() ? std::move(*values) : json();
  }
  return j;
}

arrow::Result<iceberg::DataFile> DataFileFromJson(const json& j) {
  constexpr std::string_view what = "data file";
  iceberg::DataFile f;
  ARROW_ASSIGN_OR_RAISE(int content, Get<int>(j, "content", what));
  if (content < 0 || content > 2) return arrow::Status::Invalid("data file: bad content ", content);
  f.content = static_cast<iceberg::FileContent>(content);
  ARROW_ASSIGN_OR_RAISE(f.file_path, Get<std::string>(j, "path", what));
  ARROW_ASSIGN_OR_RAISE(f.file_format, GetOr<std::string>(j, "format", "PARQUET", what));
  ARROW_ASSIGN_OR_RAISE(f.record_count, GetOr<int64_t>(j, "records", 0, what));
  ARROW_ASSIGN_OR_RAISE(f.file_size_in_bytes, GetOr<int64_t>(j, "size", 0, what));
  ARROW_ASSIGN_OR_RAISE(f.spec_id, GetOr<int32_t>(j, "spec_id", 0, what));
  ARROW_ASSIGN_OR_RAISE(f.data_sequence_number, GetOr<int64_t>(j, "seq", 0, what));
  ARROW_ASSIGN_OR_RAISE(f.equality_ids, GetOr<std::vector<int32_t>>(j, "equality_ids", {}, what));
  ARROW_ASSIGN_OR_RAISE(f.referenced_data_file,
                        GetOptional<std::string>(j, "referenced_data_file", what));
  ARROW_ASSIGN_OR_RAISE(f.content_offset, GetOptional<int64_t>(j, "content_offset", what));
  ARROW_ASSIGN_OR_RAISE(f.content_size_in_bytes, GetOptional<int64_t>(j, "content_size", what));
  if (j.contains("partition_values")) {
    ARROW_ASSIGN_OR_RAISE(f.identity_values, PartitionValuesFromJson(j["partition_values"]));
  }
  return f;
}

json NodeLoadRequest::ToJson() const {
  json tasks_json = json::array();
  for (const auto& t : tasks) {
    json deletes = json::array();
    for (const auto& d : t.task.deletes) deletes.push_back(DataFileToJson(d));
    tasks_json.push_back(
        {{"index", t.index}, {"data", DataFileToJson(t.task.data_file)}, {"deletes", deletes}});
  }
  json j = {{"v", kProtocolVersion},    {"dataset", dataset},       {"generation", generation},
            {"schema", schema},         {"projection", projection}, {"filter", filter},
            {"batch_rows", batch_rows}, {"tasks", tasks_json}};
  if (!name_mapping.empty()) j["name_mapping"] = name_mapping;
  return j;
}

arrow::Result<NodeLoadRequest> NodeLoadRequest::FromJson(const json& j) {
  constexpr std::string_view what = "node.load";
  NodeLoadRequest r;
  ARROW_ASSIGN_OR_RAISE(r.dataset, Get<std::string>(j, "dataset", what));
  ARROW_ASSIGN_OR_RAISE(r.generation, Get<uint64_t>(j, "generation", what));
  if (!j.contains("schema") || !j["schema"].is_object()) {
    return arrow::Status::Invalid("node.load: missing 'schema'");
  }
  r.schema = j["schema"];
  ARROW_ASSIGN_OR_RAISE(r.projection, GetOr<std::vector<int32_t>>(j, "projection", {}, what));
  ARROW_ASSIGN_OR_RAISE(r.filter, GetOr<std::string>(j, "filter", "", what));
  ARROW_ASSIGN_OR_RAISE(r.name_mapping, GetOr<std::string>(j, "name_mapping", "", what));
  ARROW_ASSIGN_OR_RAISE(r.batch_rows, GetOr<int64_t>(j, "batch_rows", kDefaultBatchRows, what));
  if (!j.contains("tasks") || !j["tasks"].is_array()) {
    return arrow::Status::Invalid("node.load: missing 'tasks'");
  }
  for (const auto& t : j["tasks"]) {
    TaskSpec spec;
    ARROW_ASSIGN_OR_RAISE(spec.index, Get<int64_t>(t, "index", what));
    if (!t.contains("data")) return arrow::Status::Invalid("node.load: task without 'data'");
    ARROW_ASSIGN_OR_RAISE(spec.task.data_file, DataFileFromJson(t["data"]));
    if (t.contains("deletes") && t["deletes"].is_array()) {
      for (const auto& d : t["deletes"]) {
        ARROW_ASSIGN_OR_RAISE(auto del, DataFileFromJson(d));
        spec.task.deletes.push_back(std::move(del));
      }
    }
    r.tasks.push_back(std::move(spec));
  }
  return r;
}

}  // namespace icefloe
