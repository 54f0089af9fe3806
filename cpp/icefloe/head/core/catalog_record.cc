#include "icefloe/head/core/catalog_record.h"

#include <algorithm>
#include <chrono>

#include <arrow/buffer.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/dictionary.h>
#include <arrow/ipc/reader.h>
#include <arrow/type.h>
#include <arrow/util/base64.h>

#include "icefloe/protocol/fields.h"

namespace icefloe {

using json = nlohmann::json;

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kMaxSlices = uint64_t{1} << 20;

constexpr FieldSpec Count(std::string_view name) {
  return Int(name, kOptional, Values(0, kInt64Max));
}

const Field<CatalogRecord> kRecordFields[] = {
    {Str("storage_name", kRequired, Values(1, 1024)), &CatalogRecord::storage_name},
    {Uint("generation", kRequired, Values(1, kU64Max)), &CatalogRecord::generation},
    {Str("metadata_location", kOptional, Values(0, 65536)), &CatalogRecord::metadata_location},
    {Int("snapshot_id", kOptional, Values(std::numeric_limits<int64_t>::min(), kInt64Max)),
     &CatalogRecord::snapshot_id},
    {Int("rows", kOptional, Values(0, kMaxRows)), &CatalogRecord::num_rows},
    {Count("bytes"), &CatalogRecord::nbytes},
    {Count("tasks"), &CatalogRecord::tasks_total},
    {Count("estimated_bytes"), &CatalogRecord::estimated_bytes},
    {Count("split_bytes"), &CatalogRecord::split_bytes},
    {Count("updated_us"), &CatalogRecord::updated_us},
    {ListOf(FieldType::kIntList, "task_rows", kOptional, Values(0, kMaxRows),
            Values(0, kMaxSlices)),
     &CatalogRecord::task_rows},
    {ListOf(FieldType::kStringList, "model_sha256", kOptional, Values(64, 64), Values(0, 256)),
     &CatalogRecord::model_sha256},
    {ListOf(FieldType::kStringList, "model_kind", kOptional, Values(1, 256), Values(0, 256)),
     &CatalogRecord::model_kind},
};
const FieldSpec kKey = Str("key", kOptional, Values(0, 1 << 20));
const FieldSpec kRequests = ObjectList("requests", kRequired, Values(1, 4096));
const FieldSpec kSchema = Str("schema", kRequired, Values(1, size_t{16} << 20));
const FieldSpec kScan = ObjectField("scan", kOptional);
const FieldSpec kSlices = ObjectList("slices", kOptional, Values(0, kMaxSlices));
const FieldSpec kSliceBound = Uint("start/stop", kRequired, Values(0, kMaxRows));
const FieldSpec kSliceNodes =
    ListOf(FieldType::kStringList, "nodes", kOptional, Values(1, 1024), Values(0, 64));

arrow::Result<std::shared_ptr<arrow::Schema>> SchemaFromBase64(const std::string& text,
                                                               const std::string& what) {
  auto bytes = arrow::util::base64_decode(text);
  if (!bytes.ok()) {
    return arrow::Status::Invalid(what, ": 'schema' is not base64: ", bytes.status().message());
  }
  auto reader =
      std::make_shared<arrow::io::BufferReader>(arrow::Buffer::FromString(std::move(*bytes)));
  arrow::ipc::DictionaryMemo memo;
  auto schema = arrow::ipc::ReadSchema(reader.get(), &memo);
  if (!schema.ok()) {
    return arrow::Status::Invalid(
        what, ": 'schema' is not a base64 Arrow IPC schema: ", schema.status().message());
  }
  return *schema;
}

// A number field read by hand (the field tables hold integers only).
arrow::Result<double> Number(const JsonFields& in, const json& j, std::string_view name) {
  auto it = j.find(std::string(name));
  if (it == j.end()) return 0.0;
  if (!it->is_number() || it->get<double>() < 0) {
    return in.Bad(Str(name, kOptional, Values(0, 0)), "a number >= 0", *it);
  }
  return it->get<double>();
}

arrow::Status ReadSlices(const JsonFields& in, CatalogRecord* r) {
  ARROW_ASSIGN_OR_RAISE(const json* v, in.Find(kSlices));
  if (v == nullptr) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(const json* list, in.List(*v, kSlices));
  uint64_t next = 0;
  for (size_t i = 0; i < list->size(); ++i) {
    const json& s = (*list)[i];
    const std::string what = in.what() + " 'slices'[" + std::to_string(i) + "]";
    if (!s.is_object()) return in.Bad(kSlices, "a list of objects", s, i);
    JsonFields sin(s, what);
    SliceLocation slice;
    for (auto [field, out] : {std::pair{"start", &slice.start}, std::pair{"stop", &slice.stop}}) {
      auto it = s.find(field);
      if (it == s.end()) return arrow::Status::Invalid(what, ": '", field, "' is required");
      ARROW_ASSIGN_OR_RAISE(*out, sin.Uint(*it, kSliceBound));
    }
    if (slice.start != next || slice.stop <= slice.start) {
      return arrow::Status::Invalid(what, ": slices must be non-empty and contiguous from row 0; ",
                                    "expected start ", next, ", got [", slice.start, ", ",
                                    slice.stop, ")");
    }
    next = slice.stop;
    if (auto it = s.find("nodes"); it != s.end()) {
      ARROW_RETURN_NOT_OK(fields_internal::ReadInto(sin, *it, kSliceNodes, &slice.nodes));
    }
    r->slices.push_back(std::move(slice));
  }
  if (next != static_cast<uint64_t>(r->num_rows)) {
    return arrow::Status::Invalid(in.what(), ": 'slices' cover rows [0, ", next, ") but 'rows' is ",
                                  r->num_rows);
  }
  return arrow::Status::OK();
}

}  // namespace

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json CatalogRecord::ToJson() const {
  json j = json::object();
  WriteFields<CatalogRecord>(kRecordFields, *this, &j);
  j["key"] = key.ToText();
  json reqs = json::array();
  for (const auto& r : requests) reqs.push_back(r.ToJson());
  j["requests"] = std::move(reqs);
  j["schema"] = schema ? SchemaToBase64(*schema) : std::string();
  j["load_seconds"] = load_seconds;
  j["scan"] = ScanMetricsToJson(scan);
  json list = json::array();
  for (const auto& s : slices) {
    list.push_back({{"start", s.start}, {"stop", s.stop}, {"nodes", s.nodes}});
  }
  j["slices"] = std::move(list);
  return j;
}

arrow::Result<CatalogRecord> CatalogRecord::FromJson(const json& j, const std::string& what) {
  if (!j.is_object()) return arrow::Status::Invalid(what, ": not an object");
  JsonFields in(j, what);
  CatalogRecord r;
  ARROW_RETURN_NOT_OK(ReadFields<CatalogRecord>(in, kRecordFields, &r));
  ARROW_RETURN_NOT_OK(CheckDatasetName(r.storage_name, what));
  ARROW_ASSIGN_OR_RAISE(const json* key, in.Find(kKey));
  if (key != nullptr) {
    ARROW_ASSIGN_OR_RAISE(std::string key_text, in.String(*key, kKey));
    ARROW_ASSIGN_OR_RAISE(r.key, CopyKey::FromText(key_text, what + " 'key'"));
  }
  ARROW_ASSIGN_OR_RAISE(const json* reqs, in.Find(kRequests));
  ARROW_ASSIGN_OR_RAISE(reqs, in.List(*reqs, kRequests));
  for (size_t i = 0; i < reqs->size(); ++i) {
    auto req = LoadRequest::FromJson((*reqs)[i]);
    if (!req.ok()) {
      return arrow::Status::Invalid(what, " 'requests'[", i, "]: ", req.status().message());
    }
    if (!r.requests.empty() && r.requests.back().name >= req->name) {
      return arrow::Status::Invalid(what, " 'requests'[", i,
                                    "]: names must be unique and sorted; '", req->name,
                                    "' follows '", r.requests.back().name, "'");
    }
    r.requests.push_back(std::move(*req));
  }
  ARROW_ASSIGN_OR_RAISE(const json* schema, in.Find(kSchema));
  ARROW_ASSIGN_OR_RAISE(std::string schema_text, in.String(*schema, kSchema));
  ARROW_ASSIGN_OR_RAISE(r.schema, SchemaFromBase64(schema_text, what));
  ARROW_ASSIGN_OR_RAISE(r.load_seconds, Number(in, j, "load_seconds"));
  ARROW_ASSIGN_OR_RAISE(const json* scan, in.Find(kScan));
  if (scan != nullptr) {
    ARROW_ASSIGN_OR_RAISE(scan, in.Object(*scan, kScan));
    ARROW_ASSIGN_OR_RAISE(r.scan, ScanMetricsFromJson(*scan, what + " 'scan'"));
  }
  ARROW_RETURN_NOT_OK(ReadSlices(in, &r));
  if (!r.task_rows.empty()) {
    uint64_t total = 0;
    for (int64_t rows : r.task_rows) total += static_cast<uint64_t>(rows);  // each < 2^62
    if (total != static_cast<uint64_t>(r.num_rows)) {
      return arrow::Status::Invalid(what, ": 'task_rows' add up to ", total, " but 'rows' is ",
                                    r.num_rows);
    }
  }
  return r;
}

bool CatalogRecord::SameAs(const CatalogRecord& other) const {
  json a = ToJson(), b = other.ToJson();
  a.erase("updated_us");
  b.erase("updated_us");
  return a == b;
}

CatalogRecord RecordOf(const std::vector<std::shared_ptr<const DatasetEntry>>& entries,
                       int64_t updated_us) {
  CatalogRecord r;
  if (entries.empty()) return r;
  const DatasetEntry& e = *entries.front();
  r.storage_name = e.storage_name;
  r.key = e.key;
  r.generation = e.generation;
  r.metadata_location = e.metadata_location;
  r.snapshot_id = e.snapshot_id;
  r.schema = e.schema;
  r.model_sha256 = e.model_sha256;
  r.model_kind = e.model_kind;
  r.num_rows = e.num_rows;
  r.nbytes = e.nbytes;
  r.tasks_total = e.tasks_total;
  r.estimated_bytes = e.estimated_bytes;
  r.split_bytes = e.split_bytes;
  r.load_seconds = e.load_seconds;
  r.scan = e.scan;
  r.slices = e.slices;
  r.task_rows = e.task_rows;
  r.updated_us = updated_us;
  for (const auto& x : entries) r.requests.push_back(x->request);
  std::sort(r.requests.begin(), r.requests.end(),
            [](const LoadRequest& a, const LoadRequest& b) { return a.name < b.name; });
  return r;
}

std::shared_ptr<DatasetEntry> EntryOf(const CatalogRecord& record, const LoadRequest& request) {
  auto e = std::make_shared<DatasetEntry>();
  e->name = request.name;
  e->storage_name = record.storage_name;
  e->key = record.key;
  e->generation = record.generation;
  e->state = CopyState::kReady;
  e->request = request;
  e->metadata_location = record.metadata_location;
  e->snapshot_id = record.snapshot_id;
  e->schema = record.schema;
  e->model_sha256 = record.model_sha256;
  e->model_kind = record.model_kind;
  e->num_rows = record.num_rows;
  e->nbytes = record.nbytes;
  e->slices = record.slices;
  e->scan = record.scan;
  e->tasks_total = record.tasks_total;
  e->estimated_bytes = record.estimated_bytes;
  e->split_bytes = record.split_bytes;
  e->load_seconds = record.load_seconds;
  e->task_rows = record.task_rows;
  uint64_t start = 0;
  for (int64_t rows : record.task_rows) {
    e->task_starts.push_back(start);
    start += static_cast<uint64_t>(rows);
  }
  for (const auto& s : record.slices) {
    for (const auto& n : s.nodes) {
      if (std::find(e->nodes.begin(), e->nodes.end(), n) == e->nodes.end()) e->nodes.push_back(n);
    }
  }
  return e;
}

}  // namespace icefloe
