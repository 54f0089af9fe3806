#include "icefloe/protocol/replies.h"

#include "icefloe/protocol/transform_spec.h"

namespace icefloe {

using json = nlohmann::json;

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kMaxItems = uint64_t{1} << 24;
constexpr std::string_view kDatasetStates[] = {"loading", "ready", "degraded", "healing", "failed"};
constexpr std::string_view kLoading[] = {"loading"};
constexpr std::string_view kPhases[] = {"queued", "planning", "loading", "committing", "finished"};

constexpr FieldSpec Count(std::string_view name) {
  return Int(name, kRequired, Values(0, kInt64Max));
}
// Free text the head passes on (paths, errors, schemas): bounded by the body.
constexpr FieldSpec Text(std::string_view name, bool required) {
  return Str(name, required, Values(0, kMaxBodyBytes));
}
const FieldSpec kName = Str("name", kRequired, Values(1, 1024));

const Field<ReplySlice> kSliceFields[] = {
    {Uint("start", kRequired, Values(0, kMaxRows)), &ReplySlice::start},
    {Uint("stop", kRequired, Values(0, kMaxRows)), &ReplySlice::stop},
    // A slice whose every node is lost has none (the dataset is degraded).
    {ListOf(FieldType::kStringList, "nodes", kRequired, Values(1, 4096), Values(0, 65536)),
     &ReplySlice::nodes},
};

const Field<DatasetDescription> kDescriptionFields[] = {
    {kName, &DatasetDescription::name},
    {Str("state", kRequired, Values(1, 16), kDatasetStates), &DatasetDescription::state},
    {Str("source", kRequired, Values(0, 65536)), &DatasetDescription::source},
    // Empty while the load plans.
    {Str("metadata_location", kRequired, Values(0, 65536)), &DatasetDescription::metadata_location},
    {Int("snapshot_id", kOptional, Values(std::numeric_limits<int64_t>::min(), kInt64Max)),
     &DatasetDescription::snapshot_id},
    {ListOf(FieldType::kStringList, "columns", kRequired, Values(1, 1024), Values(0, 65536)),
     &DatasetDescription::columns},
    {Str("filter", kRequired, Values(0, 65536)), &DatasetDescription::filter},
    {Int("batch_rows", kRequired, Values(1, kMaxBatchRows)), &DatasetDescription::batch_rows},
    {Int("replication", kRequired, Values(1, 16)), &DatasetDescription::replication},
    {Uint("generation", kRequired, Values(0, kU64Max)), &DatasetDescription::generation},
    {Count("rows"), &DatasetDescription::rows},
    {Count("bytes"), &DatasetDescription::bytes},
    {Count("estimated_bytes"), &DatasetDescription::estimated_bytes},
    {Count("tasks"), &DatasetDescription::tasks},
    {Num("load_seconds", kRequired, Values(0, kU64Max)), &DatasetDescription::load_seconds},
    {ListOf(FieldType::kStringList, "model_sha256", kOptional, Values(64, 64),
            Values(0, kMaxTransformColumns)),
     &DatasetDescription::model_sha256},
    {Text("schema", kOptional), &DatasetDescription::schema},
    {Text("schema_text", kOptional), &DatasetDescription::schema_text},
    {Text("error", kOptional), &DatasetDescription::error},
    {Count("slices_missing"), &DatasetDescription::slices_missing},
    {Count("replicas_missing"), &DatasetDescription::replicas_missing},
    {Num("heal_seconds", kOptional, Values(0, kU64Max)), &DatasetDescription::heal_seconds},
    {Text("heal_error", kOptional), &DatasetDescription::heal_error},
};
const FieldSpec kDescriptionScan = ObjectField("scan", kRequired);
const FieldSpec kDescriptionTransform = ObjectField("transform", kOptional);
const FieldSpec kDescriptionRefresh = ObjectField("refresh", kOptional);
const FieldSpec kDescriptionFiles = ObjectList("files", kOptional, Values(0, kMaxItems));
const FieldSpec kDescriptionSlices = ObjectList("slices", kOptional, Values(0, kMaxItems), "slice");
const FieldSpec kSlicesPerNode = ObjectField("slices_per_node", kOptional);

const Field<LoadProgressReply> kProgressFields[] = {
    {Str("state", kRequired, Values(1, 16), kLoading), &LoadProgressReply::state},
    {Str("phase", kRequired, Values(1, 16), kPhases), &LoadProgressReply::phase},
    {kName, &LoadProgressReply::name},
    {Count("tasks_done"), &LoadProgressReply::tasks_done},
    {Count("tasks_total"), &LoadProgressReply::tasks_total},
    {Count("estimated_bytes"), &LoadProgressReply::estimated_bytes},
    {Num("seconds", kRequired, Values(0, kU64Max)), &LoadProgressReply::seconds},
};

const Field<EvictReply> kEvictFields[] = {
    {kName, &EvictReply::name},
    {Count("bytes"), &EvictReply::bytes},
    {Flag("cancelled", kRequired), &EvictReply::cancelled},
    {ListOf(FieldType::kStringList, "unreached", kOptional, Values(1, 4096), Values(0, 65536)),
     &EvictReply::unreached},
};

const Field<SliceMapReply> kSliceMapFields[] = {
    {kName, &SliceMapReply::name},
    {Str("storage", kRequired, Values(1, 1024)), &SliceMapReply::storage},
    {Uint("generation", kRequired, Values(0, kU64Max)), &SliceMapReply::generation},
    {Str("state", kRequired, Values(1, 16), kDatasetStates), &SliceMapReply::state},
    {Count("rows"), &SliceMapReply::rows},
    {Text("schema", kRequired), &SliceMapReply::schema},
    {Str("grant", kRequired, Values(1, kMaxBodyBytes)), &SliceMapReply::grant},
};
const FieldSpec kSliceMapSlices = ObjectList("slices", kRequired, Values(0, kMaxItems), "slice");

const Field<OkReply> kOkFields[] = {
    {Flag("ok", kRequired), &OkReply::ok},
};

const Field<StatusReply> kStatusFields[] = {
    {Flag("ready", kRequired), &StatusReply::ready},
    {Str("reason", kRequired, Values(0, 65536)), &StatusReply::reason},
    {Flag("recovering", kRequired), &StatusReply::recovering},
    {Str("default_dataset", kRequired, Values(0, 1024)), &StatusReply::default_dataset},
};
const FieldSpec kStatusNodes = ObjectList("nodes", kRequired, Values(0, kMaxItems));
const FieldSpec kStatusDatasets =
    ObjectList("datasets", kRequired, Values(0, kMaxItems), "dataset description");
const FieldSpec kStatusRetired = ObjectList("retired", kRequired, Values(0, kMaxItems));
const FieldSpec kStatusLoads =
    ObjectList("loads", kRequired, Values(0, kMaxItems), "load progress");
const FieldSpec kStatusRecentLoads = ObjectList("recent_loads", kRequired, Values(0, kMaxItems));
const FieldSpec kStatusJobs = ObjectList("jobs", kRequired, Values(0, kMaxItems));
const FieldSpec kStatusFollow = ObjectField("follow", kRequired);

template <typename M>
json Write(std::span<const Field<M>> table, const M& m) {
  json j = json::object();
  WriteFields<M>(table, m, &j);
  return j;
}

template <typename M>
arrow::Result<M> Read(std::string_view body, std::string_view what,
                      std::span<const Field<M>> table) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(body, what));
  M m;
  ARROW_RETURN_NOT_OK(ReadFields<M>(JsonFields(j, std::string(what)), table, &m));
  return m;
}

// The field's object (null when absent and optional), checked to be one.
arrow::Result<json> ReadObject(const JsonFields& in, const FieldSpec& spec) {
  ARROW_ASSIGN_OR_RAISE(const json* v, in.Find(spec));
  if (v == nullptr) return json();
  ARROW_ASSIGN_OR_RAISE(v, in.Object(*v, spec));
  return *v;
}

// The field's list of objects (null when absent and optional), checked item by item.
arrow::Result<json> ReadObjectList(const JsonFields& in, const FieldSpec& spec) {
  ARROW_ASSIGN_OR_RAISE(const json* v, in.Find(spec));
  if (v == nullptr) return json();
  ARROW_ASSIGN_OR_RAISE(const json* list, in.List(*v, spec));
  for (size_t i = 0; i < list->size(); ++i) {
    if (!(*list)[i].is_object()) return in.Bad(spec, "a list of objects", (*list)[i], i);
  }
  return *list;
}

// Each item of a list of objects read by `read(item, what)`.
template <typename T, typename Fn>
arrow::Result<std::vector<T>> ReadEach(const JsonFields& in, const FieldSpec& spec,
                                       const json& list, Fn read) {
  std::vector<T> out;
  out.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    std::string what = in.what() + " '" + std::string(spec.name) + "'[" + std::to_string(i) + "]";
    ARROW_ASSIGN_OR_RAISE(T x, read(list[i], std::move(what)));
    out.push_back(std::move(x));
  }
  return out;
}

json ToJsonList(const std::vector<ReplySlice>& slices) {
  json out = json::array();
  for (const auto& s : slices) out.push_back(s.ToJson());
  return out;
}

arrow::Result<LoadProgressReply> ProgressFromJson(const json& j, std::string what) {
  LoadProgressReply p;
  ARROW_RETURN_NOT_OK(
      ReadFields<LoadProgressReply>(JsonFields(j, std::move(what)), kProgressFields, &p));
  return p;
}

}  // namespace

// --- ReplySlice -----------------------------------------------------------------

json ReplySlice::ToJson() const { return Write<ReplySlice>(kSliceFields, *this); }

arrow::Result<ReplySlice> ReplySlice::FromJson(const json& j, std::string what) {
  JsonFields in(j, std::move(what));
  ReplySlice s;
  ARROW_RETURN_NOT_OK(ReadFields<ReplySlice>(in, kSliceFields, &s));
  if (s.stop < s.start) {
    return arrow::Status::Invalid(in.what(), ": 'stop' ", s.stop, " is before 'start' ", s.start);
  }
  return s;
}

MessageSpec ReplySlice::Spec() { return SpecOf<ReplySlice>("slice", kSliceFields); }

// --- DatasetDescription ---------------------------------------------------------

json DatasetDescription::ToJson() const {
  json j = Write<DatasetDescription>(kDescriptionFields, *this);
  j["scan"] = scan;
  if (transform.is_null()) {
    j.erase("model_sha256");  // no transform, no models
  } else {
    j["transform"] = transform;
  }
  if (!refresh.is_null()) j["refresh"] = refresh;
  if (!files.is_null()) j["files"] = files;
  if (slices) j["slices"] = ToJsonList(*slices);
  if (!slices_per_node.is_null()) j["slices_per_node"] = slices_per_node;
  return j;
}

arrow::Result<DatasetDescription> DatasetDescription::FromJson(const json& j, std::string what) {
  JsonFields in(j, std::move(what));
  DatasetDescription d;
  ARROW_RETURN_NOT_OK(ReadFields<DatasetDescription>(in, kDescriptionFields, &d));
  ARROW_ASSIGN_OR_RAISE(d.scan, ReadObject(in, kDescriptionScan));
  ARROW_ASSIGN_OR_RAISE(d.transform, ReadObject(in, kDescriptionTransform));
  ARROW_ASSIGN_OR_RAISE(d.refresh, ReadObject(in, kDescriptionRefresh));
  ARROW_ASSIGN_OR_RAISE(d.files, ReadObjectList(in, kDescriptionFiles));
  ARROW_ASSIGN_OR_RAISE(json slices, ReadObjectList(in, kDescriptionSlices));
  if (!slices.is_null()) {
    ARROW_ASSIGN_OR_RAISE(
        d.slices, ReadEach<ReplySlice>(in, kDescriptionSlices, slices, ReplySlice::FromJson));
  }
  ARROW_ASSIGN_OR_RAISE(d.slices_per_node, ReadObject(in, kSlicesPerNode));
  return d;
}

arrow::Result<DatasetDescription> DatasetDescription::Parse(std::string_view body) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(body, "dataset description"));
  return FromJson(j, "dataset description");
}

MessageSpec DatasetDescription::Spec() {
  return SpecOf<DatasetDescription>("dataset description", kDescriptionFields,
                                    {kDescriptionScan, kDescriptionTransform, kDescriptionRefresh,
                                     kDescriptionFiles, kDescriptionSlices, kSlicesPerNode});
}

// --- LoadProgressReply ----------------------------------------------------------------

json LoadProgressReply::ToJson() const { return Write<LoadProgressReply>(kProgressFields, *this); }

arrow::Result<LoadProgressReply> LoadProgressReply::Parse(std::string_view body) {
  return Read<LoadProgressReply>(body, "load progress", kProgressFields);
}

MessageSpec LoadProgressReply::Spec() {
  return SpecOf<LoadProgressReply>("load progress", kProgressFields);
}

// --- EvictReply, OkReply -------------------------------------------------------

json EvictReply::ToJson() const { return Write<EvictReply>(kEvictFields, *this); }

arrow::Result<EvictReply> EvictReply::Parse(std::string_view body) {
  return Read<EvictReply>(body, "evict reply", kEvictFields);
}

MessageSpec EvictReply::Spec() { return SpecOf<EvictReply>("evict reply", kEvictFields); }

json OkReply::ToJson() const { return Write<OkReply>(kOkFields, *this); }

arrow::Result<OkReply> OkReply::Parse(std::string_view body) {
  return Read<OkReply>(body, "ok reply", kOkFields);
}

MessageSpec OkReply::Spec() { return SpecOf<OkReply>("ok reply", kOkFields); }

// --- SliceMapReply -------------------------------------------------------------

json SliceMapReply::ToJson() const {
  json j = Write<SliceMapReply>(kSliceMapFields, *this);
  j["slices"] = ToJsonList(slices);
  return j;
}

arrow::Result<SliceMapReply> SliceMapReply::Parse(std::string_view body) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(body, "slice_map reply"));
  JsonFields in(j, "slice_map reply");
  SliceMapReply r;
  ARROW_RETURN_NOT_OK(ReadFields<SliceMapReply>(in, kSliceMapFields, &r));
  ARROW_ASSIGN_OR_RAISE(json slices, ReadObjectList(in, kSliceMapSlices));
  ARROW_ASSIGN_OR_RAISE(r.slices,
                        ReadEach<ReplySlice>(in, kSliceMapSlices, slices, ReplySlice::FromJson));
  return r;
}

MessageSpec SliceMapReply::Spec() {
  return SpecOf<SliceMapReply>("slice_map reply", kSliceMapFields, {kSliceMapSlices});
}

// --- StatusReply ---------------------------------------------------------------

json StatusReply::ToJson() const {
  json j = Write<StatusReply>(kStatusFields, *this);
  json datasets = json::array(), loads = json::array();
  for (const auto& d : this->datasets) datasets.push_back(d.ToJson());
  for (const auto& l : this->loads) loads.push_back(l.ToJson());
  j["nodes"] = nodes;
  j["datasets"] = std::move(datasets);
  j["retired"] = retired;
  j["loads"] = std::move(loads);
  j["recent_loads"] = recent_loads;
  j["jobs"] = jobs;
  j["follow"] = follow;
  return j;
}

arrow::Result<StatusReply> StatusReply::Parse(std::string_view body) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(body, "status reply"));
  JsonFields in(j, "status reply");
  StatusReply r;
  ARROW_RETURN_NOT_OK(ReadFields<StatusReply>(in, kStatusFields, &r));
  ARROW_ASSIGN_OR_RAISE(r.nodes, ReadObjectList(in, kStatusNodes));
  ARROW_ASSIGN_OR_RAISE(json datasets, ReadObjectList(in, kStatusDatasets));
  ARROW_ASSIGN_OR_RAISE(r.datasets, ReadEach<DatasetDescription>(in, kStatusDatasets, datasets,
                                                                 DatasetDescription::FromJson));
  ARROW_ASSIGN_OR_RAISE(r.retired, ReadObjectList(in, kStatusRetired));
  ARROW_ASSIGN_OR_RAISE(json loads, ReadObjectList(in, kStatusLoads));
  ARROW_ASSIGN_OR_RAISE(r.loads,
                        ReadEach<LoadProgressReply>(in, kStatusLoads, loads, ProgressFromJson));
  ARROW_ASSIGN_OR_RAISE(r.recent_loads, ReadObjectList(in, kStatusRecentLoads));
  ARROW_ASSIGN_OR_RAISE(r.jobs, ReadObjectList(in, kStatusJobs));
  ARROW_ASSIGN_OR_RAISE(r.follow, ReadObject(in, kStatusFollow));
  return r;
}

MessageSpec StatusReply::Spec() {
  return SpecOf<StatusReply>("status reply", kStatusFields,
                             {kStatusNodes, kStatusDatasets, kStatusRetired, kStatusLoads,
                              kStatusRecentLoads, kStatusJobs, kStatusFollow});
}

}  // namespace icefloe
