#include "icefloe/protocol/messages.h"

#include <algorithm>

#include "icefloe/iceberg/types.h"
#include "icefloe/protocol/data_file_json.h"
#include "icefloe/protocol/job_report.h"

namespace icefloe {

using json = nlohmann::json;

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr std::string_view kErrorKinds[] = {"",   "invalid",   "not_found", "out_of_memory",
                                            "io", "cancelled", "other"};
constexpr uint64_t kMaxTasks = uint64_t{1} << 20;

const FieldSpec kNodeDataset = Str("dataset", kRequired, Values(1, 1024));
const FieldSpec kGeneration = Uint("generation", kRequired, Values(1, kU64Max));

constexpr FieldSpec Count(std::string_view name) {
  return Int(name, kOptional, Values(0, kInt64Max));
}

const Field<NodeDatasetInfo> kDatasetInfoFields[] = {
    {Str("name", kRequired, Values(1, 1024)), &NodeDatasetInfo::name},
    {Uint("generation", kOptional, Values(0, kU64Max)), &NodeDatasetInfo::generation},
    {Count("rows"), &NodeDatasetInfo::rows},
    {Count("bytes"), &NodeDatasetInfo::bytes},
    {Count("readers"), &NodeDatasetInfo::readers},
};
const FieldSpec kDatasetRecord = ObjectField("record", kOptional);
const FieldSpec kRanges = ObjectList("ranges", kOptional, Values(0, kMaxTasks));
const FieldSpec kRangeBound = Uint("ranges", kRequired, Values(0, kMaxRows));
// The rows of `ranges` the node holds on its disk tier (the rest in memory).
const FieldSpec kDiskRanges = ObjectList("disk_ranges", kOptional, Values(0, kMaxTasks));
const FieldSpec kDiskRangeBound = Uint("disk_ranges", kRequired, Values(0, kMaxRows));

const std::vector<Field<NodeLoadState>> kLoadStateFields = JoinFields<NodeLoadState>({
    {{kNodeDataset, &NodeLoadState::dataset},
     {Uint("generation", kOptional, Values(0, kU64Max)), &NodeLoadState::generation},
     {Count("tasks_total"), &NodeLoadState::tasks_total},
     {Count("tasks_done"), &NodeLoadState::tasks_done},
     {Count("rows"), &NodeLoadState::rows},
     {Str("error", kOptional, Values(0, 65536)), &NodeLoadState::error},
     {Str("error_kind", kOptional, Values(0, 16), kErrorKinds), &NodeLoadState::error_kind},
     {ListOf(FieldType::kIntList, "task_rows", kOptional, Values(0, kMaxRows),
             Values(0, kMaxTasks)),
      &NodeLoadState::task_rows},
     {Count("bytes"), &NodeLoadState::bytes},
     {Count("bytes_read"), &NodeLoadState::bytes_read}},
    LoadCounterFields<NodeLoadState>(),
});

// Read by hand (an enum), listed third in the spec as it always was.
const FieldSpec kLoadStateField = Str("state", kRequired, Values(1, 16), kLoadStateNames);

const Field<NodeStatus> kStatusFields[] = {
    {Str("location", kOptional, Values(0, 1024)), &NodeStatus::location},
    {Count("memory_limit_bytes"), &NodeStatus::memory_limit_bytes},
    {Count("memory_used_bytes"), &NodeStatus::memory_used_bytes},
    {Count("row_memory_bytes"), &NodeStatus::row_memory_bytes},
    {Uint("staged", kOptional, Values(0, kMaxTasks)), &NodeStatus::staged},
    {Uint("newest_generation", kOptional, Values(0, kU64Max)), &NodeStatus::newest_generation},
    {Count("disk_limit_bytes"), &NodeStatus::disk_limit_bytes},
    {Count("disk_used_bytes"), &NodeStatus::disk_used_bytes},
    {Count("tier_ram_bytes"), &NodeStatus::tier_ram_bytes},
    {Count("tier_disk_bytes"), &NodeStatus::tier_disk_bytes},
    {Count("prefetch_lead_batches"), &NodeStatus::prefetch_lead_batches},
};
const FieldSpec kStatusDatasets = ObjectList("datasets", kOptional, Values(0, 65536));
const FieldSpec kStatusLoads = ObjectList("loads", kOptional, Values(0, 65536));

const Field<RegisterRequest> kRegisterFields[] = {
    {Str("location", kRequired, Values(1, 1024)), &RegisterRequest::location},
};
const FieldSpec kRegisterStatus = ObjectField("status", kRequired);

const Field<NodeLoadRequest> kLoadFields[] = {
    {kNodeDataset, &NodeLoadRequest::dataset},
    {kGeneration, &NodeLoadRequest::generation},
    {ListOf(FieldType::kIntList, "projection", kOptional, Values(0, kInt64Max >> 32),
            Values(0, 65536)),
     &NodeLoadRequest::projection},
    {Str("filter", kOptional, Values(0, 65536)), &NodeLoadRequest::filter},
    {Int("batch_rows", kOptional, Values(1, kMaxBatchRows)), &NodeLoadRequest::batch_rows},
    // JSON text of the table property schema.name-mapping.default (or empty).
    {Str("name_mapping", kOptional, Values(0, size_t{16} << 20)), &NodeLoadRequest::name_mapping},
    // Heal (issue 14): rows added to a copy of this generation.
    {Flag("extend"), &NodeLoadRequest::extend},
    {ListOf(FieldType::kStringList, "model_sha256", kOptional, Values(64, 64),
            Values(0, kMaxTransformColumns)),
     &NodeLoadRequest::model_sha256},
    // Refresh (issue 30): the held copy reused tasks take their rows from.
    // (Empty and 0 when no task is reused.)
    {Str("reuse_dataset", kOptional, Values(0, 1024)), &NodeLoadRequest::reuse_dataset},
    {Uint("reuse_generation", kOptional, Values(0, kU64Max)), &NodeLoadRequest::reuse_generation},
    {ObjectField("transform", kOptional), MessageOf<&NodeLoadRequest::transform>()},
};
const FieldSpec kLoadSchema = ObjectField("schema", kRequired);
const FieldSpec kLoadTasks = ObjectList("tasks", kRequired, Values(0, kMaxTasks));
const FieldSpec kTaskIndex = Int("index", kRequired, Values(0, kMaxTasks));
const FieldSpec kTaskData = ObjectField("data", kRequired);
const FieldSpec kTaskDeletes = ObjectList("deletes", kOptional, Values(0, 65536));
// A part of a split data file: its row groups (see iceberg::ScanTask).
const FieldSpec kTaskFirstRowGroup = Int("first_row_group", kOptional, Values(0, kInt32Max));
const FieldSpec kTaskRowGroups = Int("row_groups", kOptional, Values(1, kInt32Max));
// A reused task (refresh): its rows in the copy named by reuse_dataset.
const FieldSpec kTaskReuseStart = Uint("reuse_start", kOptional, Values(0, kMaxRows));
const FieldSpec kTaskReuseRows = Int("reuse_rows", kOptional, Values(0, kMaxRows));

const Field<NodeLoadStatusRequest> kLoadStatusFields[] = {
    {kNodeDataset, &NodeLoadStatusRequest::dataset},
    {kGeneration, &NodeLoadStatusRequest::generation},
    {Uint("wait_ms", kOptional, Values(0, kMaxLoadWaitMs)), &NodeLoadStatusRequest::wait_ms},
};

const Field<NodeCommit> kCommitFields[] = {
    {kNodeDataset, &NodeCommit::dataset},
    {kGeneration, &NodeCommit::generation},
    {ListOf(FieldType::kUintList, "task_starts", kRequired, Values(0, kMaxRows),
            Values(0, kMaxTasks)),
     &NodeCommit::task_starts},
};
const Field<NodeCommitResult> kCommitResultFields[] = {
    {Count("rows"), &NodeCommitResult::rows},
    {Count("bytes"), &NodeCommitResult::bytes},
};

const Field<NodeEvict> kEvictFields[] = {
    {kNodeDataset, &NodeEvict::dataset},
    {Uint("generation", kOptional, Values(0, kU64Max)), &NodeEvict::generation},
    // Heal clean-up (issue 14): only the load, not the published copy.
    {Flag("staged_only"), &NodeEvict::staged_only},
    // A copy the slice map does not place here: the generation may heal here later.
    {Flag("stray"), &NodeEvict::stray},
};
const Field<NodeEvictResult> kEvictResultFields[] = {
    {Flag("evicted"), &NodeEvictResult::evicted},
    {Count("bytes"), &NodeEvictResult::bytes},
};

// node.record (head -> node): the catalog record a node keeps with a copy.
const Field<NodeRecordRequest> kRecordFields[] = {
    {kNodeDataset, &NodeRecordRequest::dataset},
    {kGeneration, &NodeRecordRequest::generation},
};
const FieldSpec kRecordObject = ObjectField("record", kRequired);

template <typename M>
json Write(std::span<const Field<M>> table, const M& m, bool versioned = true) {
  json j = versioned ? json{{"v", kProtocolVersion}} : json::object();
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

// Each item of an optional list of objects, read by `read(item, what)`.
template <typename T, typename Fn>
arrow::Status ReadObjects(const JsonFields& in, const FieldSpec& spec, Fn read,
                          std::vector<T>* out) {
  ARROW_ASSIGN_OR_RAISE(const json* v, in.Find(spec));
  if (v == nullptr) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(const json* list, in.List(*v, spec));
  for (size_t i = 0; i < list->size(); ++i) {
    const json& item = (*list)[i];
    std::string what = in.what() + " '" + std::string(spec.name) + "'[" + std::to_string(i) + "]";
    if (!item.is_object()) return in.Bad(spec, "a list of objects", item, i);
    ARROW_ASSIGN_OR_RAISE(T x, read(item, std::move(what)));
    out->push_back(std::move(x));
  }
  return arrow::Status::OK();
}

// An optional list of [start, stop] row ranges, each bound checked by `bound`.
arrow::Status ReadRanges(const JsonFields& in, const FieldSpec& spec, const FieldSpec& bound,
                         std::vector<RowRange>* out) {
  ARROW_ASSIGN_OR_RAISE(const json* ranges, in.Find(spec));
  if (ranges == nullptr) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(const json* list, in.List(*ranges, spec));
  for (size_t i = 0; i < list->size(); ++i) {
    const json& pair = (*list)[i];
    if (!pair.is_array() || pair.size() != 2) return in.Bad(spec, "[start, stop]", pair, i);
    ARROW_ASSIGN_OR_RAISE(uint64_t a, in.Uint(pair[0], bound, i));
    ARROW_ASSIGN_OR_RAISE(uint64_t b, in.Uint(pair[1], bound, i));
    if (b < a) return in.Bad(spec, "[start, stop] with start <= stop", pair, i);
    out->push_back({a, b});
  }
  return arrow::Status::OK();
}

json RangesJson(const std::vector<RowRange>& ranges) {
  json out = json::array();
  for (const auto& r : ranges) out.push_back({r.start, r.stop});
  return out;
}

arrow::Result<NodeDatasetInfo> DatasetInfoFromJson(const json& j, std::string what) {
  JsonFields in(j, what);
  NodeDatasetInfo d;
  ARROW_RETURN_NOT_OK(ReadFields<NodeDatasetInfo>(in, kDatasetInfoFields, &d));
  ARROW_ASSIGN_OR_RAISE(const json* record, in.Find(kDatasetRecord));
  if (record != nullptr) {
    ARROW_ASSIGN_OR_RAISE(record, in.Object(*record, kDatasetRecord));
    d.record = *record;
  }
  ARROW_RETURN_NOT_OK(ReadRanges(in, kRanges, kRangeBound, &d.ranges));
  ARROW_RETURN_NOT_OK(ReadRanges(in, kDiskRanges, kDiskRangeBound, &d.disk_ranges));
  return d;
}

}  // namespace

// --- NodeDatasetInfo, NodeLoadState, NodeStatus -----------------------------

json NodeDatasetInfo::ToJson() const {
  json j = Write<NodeDatasetInfo>(kDatasetInfoFields, *this, false);
  j["ranges"] = RangesJson(ranges);
  if (!disk_ranges.empty()) j["disk_ranges"] = RangesJson(disk_ranges);
  if (record.is_object()) j["record"] = record;
  return j;
}

json NodeLoadState::ToJson() const {
  json j = Write<NodeLoadState>(kLoadStateFields, *this);
  j["state"] = LoadStateName(state);
  return j;
}

void NodeLoadState::SetError(const arrow::Status& st) {
  error = st.message();
  switch (st.code()) {
    case arrow::StatusCode::Invalid:
    case arrow::StatusCode::TypeError:
    case arrow::StatusCode::IndexError:
      error_kind = "invalid";
      break;
    case arrow::StatusCode::KeyError:
      error_kind = "not_found";
      break;
    case arrow::StatusCode::OutOfMemory:
      error_kind = "out_of_memory";
      break;
    case arrow::StatusCode::IOError:
      error_kind = "io";
      break;
    case arrow::StatusCode::Cancelled:
      error_kind = "cancelled";
      break;
    default:
      error_kind = "other";
  }
}

arrow::Status NodeLoadState::ErrorStatus(const std::string& context) const {
  const std::string message = context + error;
  if (error_kind == "invalid") return arrow::Status::Invalid(message);
  if (error_kind == "not_found") return arrow::Status::KeyError(message);
  if (error_kind == "out_of_memory") return arrow::Status::OutOfMemory(message);
  if (error_kind == "cancelled") return arrow::Status::Cancelled(message);
  return arrow::Status::IOError(message);
}

arrow::Result<NodeLoadState> NodeLoadState::FromJson(const json& j, std::string what) {
  NodeLoadState s;
  const JsonFields in(j, std::move(what));
  ARROW_RETURN_NOT_OK(ReadFields<NodeLoadState>(in, kLoadStateFields, &s));
  ARROW_ASSIGN_OR_RAISE(const json* state, in.Find(kLoadStateField));
  ARROW_ASSIGN_OR_RAISE(std::string text, in.String(*state, kLoadStateField));
  ARROW_ASSIGN_OR_RAISE(s.state, LoadStateFromName(text, in.what() + ": 'state'"));
  return s;
}

MessageSpec NodeLoadState::Spec() {
  MessageSpec spec = SpecOf<NodeLoadState>("node load state", kLoadStateFields);
  spec.fields.insert(spec.fields.begin() + 2, kLoadStateField);
  return spec;
}

json NodeStatus::ToJson() const {
  json j = Write<NodeStatus>(kStatusFields, *this);
  json datasets = json::array(), loads = json::array();
  for (const auto& d : this->datasets) datasets.push_back(d.ToJson());
  for (const auto& l : this->loads) loads.push_back(l.ToJson());
  j["datasets"] = std::move(datasets);
  j["loads"] = std::move(loads);
  return j;
}

arrow::Result<NodeStatus> NodeStatus::FromJson(const json& j, std::string what) {
  if (!j.is_object()) return arrow::Status::Invalid(what, ": not an object");
  JsonFields in(j, what);
  NodeStatus s;
  ARROW_RETURN_NOT_OK(ReadFields<NodeStatus>(in, kStatusFields, &s));
  ARROW_RETURN_NOT_OK(ReadObjects(in, kStatusDatasets, DatasetInfoFromJson, &s.datasets));
  ARROW_RETURN_NOT_OK(ReadObjects(in, kStatusLoads, NodeLoadState::FromJson, &s.loads));
  return s;
}

arrow::Result<NodeStatus> NodeStatus::Parse(std::string_view body) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(body, "node.status reply"));
  return FromJson(j, "node.status reply");
}

MessageSpec NodeStatus::Spec() {
  return SpecOf<NodeStatus>("node.status reply", kStatusFields, {kStatusDatasets, kStatusLoads});
}

// --- RegisterRequest ----------------------------------------------------------

json RegisterRequest::ToJson() const {
  json j = Write<RegisterRequest>(kRegisterFields, *this);
  j["status"] = status.ToJson();
  return j;
}

arrow::Result<RegisterRequest> RegisterRequest::Parse(std::string_view body) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(body, "node.register"));
  JsonFields in(j, "node.register");
  RegisterRequest r;
  ARROW_RETURN_NOT_OK(ReadFields<RegisterRequest>(in, kRegisterFields, &r));
  ARROW_ASSIGN_OR_RAISE(const json* status, in.Find(kRegisterStatus));
  ARROW_ASSIGN_OR_RAISE(status, in.Object(*status, kRegisterStatus));
  ARROW_ASSIGN_OR_RAISE(r.status, NodeStatus::FromJson(*status, "node.register 'status'"));
  return r;
}

MessageSpec RegisterRequest::Spec() {
  return SpecOf<RegisterRequest>("node.register", kRegisterFields, {kRegisterStatus});
}

// --- NodeLoadRequest ----------------------------------------------------------

json NodeLoadRequest::ToJson() const {
  json j = Write<NodeLoadRequest>(kLoadFields, *this);
  j["schema"] = schema;
  json tasks_json = json::array();
  for (const auto& t : tasks) {
    json deletes = json::array();
    for (const auto& d : t.task.deletes) deletes.push_back(DataFileToJson(d));
    json task = {
        {"index", t.index}, {"data", DataFileToJson(t.task.data_file)}, {"deletes", deletes}};
    if (t.task.first_row_group != 0) task["first_row_group"] = t.task.first_row_group;
    if (t.task.row_groups >= 0) task["row_groups"] = t.task.row_groups;
    if (t.reused()) {
      task["reuse_start"] = t.reuse_start;
      task["reuse_rows"] = t.reuse_rows;
    }
    tasks_json.push_back(std::move(task));
  }
  j["tasks"] = std::move(tasks_json);
  return j;
}

arrow::Result<NodeLoadRequest> NodeLoadRequest::FromJson(const json& j) {
  JsonFields in(j, "node.load");
  NodeLoadRequest r;
  ARROW_RETURN_NOT_OK(ReadFields<NodeLoadRequest>(in, kLoadFields, &r));
  ARROW_ASSIGN_OR_RAISE(const json* schema, in.Find(kLoadSchema));
  ARROW_ASSIGN_OR_RAISE(schema, in.Object(*schema, kLoadSchema));
  auto parsed = iceberg::ParseSchema(*schema);  // rows are read with it: check it now
  if (!parsed.ok())
    return parsed.status().WithMessage("node.load 'schema': ", parsed.status().message());
  r.schema = *schema;
  if (r.transform && r.transform->ModelLocations().size() != r.model_sha256.size()) {
    return arrow::Status::Invalid("node.load: 'model_sha256' has ", r.model_sha256.size(),
                                  " hashes for ", r.transform->ModelLocations().size(),
                                  " tokenize models");
  }
  auto read_task = [](const json& t, std::string what) -> arrow::Result<TaskSpec> {
    JsonFields tin(t, what);
    TaskSpec spec;
    ARROW_ASSIGN_OR_RAISE(const json* index, tin.Find(kTaskIndex));
    ARROW_ASSIGN_OR_RAISE(spec.index, tin.Int(*index, kTaskIndex));
    ARROW_ASSIGN_OR_RAISE(const json* data, tin.Find(kTaskData));
    ARROW_ASSIGN_OR_RAISE(data, tin.Object(*data, kTaskData));
    ARROW_ASSIGN_OR_RAISE(spec.task.data_file, DataFileFromJson(*data, what + " 'data'"));
    auto read_delete = [](const json& d, std::string w) { return DataFileFromJson(d, w); };
    ARROW_RETURN_NOT_OK(ReadObjects(tin, kTaskDeletes, read_delete, &spec.task.deletes));
    ARROW_ASSIGN_OR_RAISE(const json* first, tin.Find(kTaskFirstRowGroup));
    if (first != nullptr) {
      ARROW_ASSIGN_OR_RAISE(int64_t v, tin.Int(*first, kTaskFirstRowGroup));
      spec.task.first_row_group = static_cast<int32_t>(v);  // within int32 by its range
    }
    ARROW_ASSIGN_OR_RAISE(const json* count, tin.Find(kTaskRowGroups));
    if (count != nullptr) {
      ARROW_ASSIGN_OR_RAISE(int64_t v, tin.Int(*count, kTaskRowGroups));
      spec.task.row_groups = static_cast<int32_t>(v);
    }
    ARROW_ASSIGN_OR_RAISE(const json* reuse_rows, tin.Find(kTaskReuseRows));
    ARROW_ASSIGN_OR_RAISE(const json* reuse_start, tin.Find(kTaskReuseStart));
    if ((reuse_rows == nullptr) != (reuse_start == nullptr)) {
      return arrow::Status::Invalid(what, ": 'reuse_start' and 'reuse_rows' come together");
    }
    if (reuse_rows != nullptr) {
      ARROW_ASSIGN_OR_RAISE(spec.reuse_rows, tin.Int(*reuse_rows, kTaskReuseRows));
      ARROW_ASSIGN_OR_RAISE(spec.reuse_start, tin.Uint(*reuse_start, kTaskReuseStart));
      if (spec.reuse_start + static_cast<uint64_t>(spec.reuse_rows) > kMaxRows) {
        return arrow::Status::Invalid(what, ": 'reuse_start' + 'reuse_rows' exceeds ", kMaxRows);
      }
    }
    return spec;
  };
  ARROW_RETURN_NOT_OK(ReadObjects(in, kLoadTasks, read_task, &r.tasks));
  const bool any_reused =
      std::any_of(r.tasks.begin(), r.tasks.end(), [](const TaskSpec& t) { return t.reused(); });
  if (any_reused && (r.reuse_dataset.empty() || r.reuse_generation == 0)) {
    return arrow::Status::Invalid(
        "node.load: a task has 'reuse_rows' but 'reuse_dataset' or 'reuse_generation' is missing");
  }
  if (any_reused && r.extend) {
    return arrow::Status::Invalid("node.load: a heal ('extend') cannot reuse rows");
  }
  return r;
}

arrow::Result<NodeLoadRequest> NodeLoadRequest::Parse(std::string_view body) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(body, "node.load"));
  return FromJson(j);
}

MessageSpec NodeLoadRequest::Spec() {
  return SpecOf<NodeLoadRequest>("node.load", kLoadFields, {kLoadSchema, kLoadTasks});
}

// --- the small ones -----------------------------------------------------------

json NodeLoadStatusRequest::ToJson() const {
  return Write<NodeLoadStatusRequest>(kLoadStatusFields, *this);
}
arrow::Result<NodeLoadStatusRequest> NodeLoadStatusRequest::Parse(std::string_view body) {
  return Read<NodeLoadStatusRequest>(body, "node.load_status", kLoadStatusFields);
}
MessageSpec NodeLoadStatusRequest::Spec() {
  return SpecOf<NodeLoadStatusRequest>("node.load_status", kLoadStatusFields);
}

json NodeCommit::ToJson() const { return Write<NodeCommit>(kCommitFields, *this); }
arrow::Result<NodeCommit> NodeCommit::Parse(std::string_view body) {
  return Read<NodeCommit>(body, "node.commit", kCommitFields);
}
MessageSpec NodeCommit::Spec() { return SpecOf<NodeCommit>("node.commit", kCommitFields); }

json NodeCommitResult::ToJson() const {
  return Write<NodeCommitResult>(kCommitResultFields, *this);
}
arrow::Result<NodeCommitResult> NodeCommitResult::Parse(std::string_view body) {
  return Read<NodeCommitResult>(body, "node.commit reply", kCommitResultFields);
}
MessageSpec NodeCommitResult::Spec() {
  return SpecOf<NodeCommitResult>("node.commit reply", kCommitResultFields);
}

json NodeEvict::ToJson() const { return Write<NodeEvict>(kEvictFields, *this); }
arrow::Result<NodeEvict> NodeEvict::Parse(std::string_view body) {
  return Read<NodeEvict>(body, "node.evict", kEvictFields);
}
MessageSpec NodeEvict::Spec() { return SpecOf<NodeEvict>("node.evict", kEvictFields); }

json NodeEvictResult::ToJson() const { return Write<NodeEvictResult>(kEvictResultFields, *this); }
arrow::Result<NodeEvictResult> NodeEvictResult::Parse(std::string_view body) {
  return Read<NodeEvictResult>(body, "node.evict reply", kEvictResultFields);
}
MessageSpec NodeEvictResult::Spec() {
  return SpecOf<NodeEvictResult>("node.evict reply", kEvictResultFields);
}

json NodeRecordRequest::ToJson() const {
  json j = Write<NodeRecordRequest>(kRecordFields, *this);
  j["record"] = record;
  return j;
}
arrow::Result<NodeRecordRequest> NodeRecordRequest::Parse(std::string_view body) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(body, "node.record"));
  JsonFields in(j, "node.record");
  NodeRecordRequest r;
  ARROW_RETURN_NOT_OK(ReadFields<NodeRecordRequest>(in, kRecordFields, &r));
  ARROW_ASSIGN_OR_RAISE(const json* record, in.Find(kRecordObject));
  ARROW_ASSIGN_OR_RAISE(record, in.Object(*record, kRecordObject));
  r.record = *record;
  return r;
}
MessageSpec NodeRecordRequest::Spec() {
  return SpecOf<NodeRecordRequest>("node.record", kRecordFields, {kRecordObject});
}

std::vector<MessageSpec> AllMessageSpecs() {
  return {LoadRequest::Spec(),
          NameRequest::Spec("describe"),
          NameRequest::Spec("evict"),
          NameRequest::Spec("refresh"),
          SliceMapRequest::Spec(),
          RangeDescriptor::Spec(),
          EpochDescriptor::Spec(),
          RowsDescriptor::Spec(),
          RegisterRequest::Spec(),
          NodeStatus::Spec(),
          NodeLoadRequest::Spec(),
          NodeLoadStatusRequest::Spec(),
          NodeLoadState::Spec(),
          NodeCommit::Spec(),
          NodeCommitResult::Spec(),
          NodeEvict::Spec(),
          NodeEvictResult::Spec(),
          NodeRecordRequest::Spec(),
          DataFileSpec(),
          JobReport::Spec(),
          DatasetDescription::Spec(),
          ReplySlice::Spec(),
          LoadProgressReply::Spec(),
          EvictReply::Spec(),
          SliceMapReply::Spec(),
          OkReply::Spec(),
          StatusReply::Spec(),
          ScanMetricsSpec(),
          RefreshSummary::Spec(),
          FileRun::Spec(),
          NodeSlices::Spec(),
          ClusterNode::Spec(),
          JobStatus::Spec(),
          JobSource::Spec(),
          RetiredCopyReply::Spec(),
          RecentLoad::Spec(),
          FollowedDataset::Spec(),
          FollowStatus::Spec(),
          EpochShapeReply::Spec(),
          SharedFileReply::Spec()};
}

arrow::Status ParseMessage(std::string_view message, std::string_view body) {
  if (message == "load") return LoadRequest::Parse(body).status();
  if (message == "describe" || message == "evict" || message == "refresh") {
    return NameRequest::Parse(body, message).status();
  }
  if (message == "slice_map") return SliceMapRequest::Parse(body).status();
  if (message == "descriptor") return ParseDescriptor(body).status();
  if (message == "node.register") return RegisterRequest::Parse(body).status();
  if (message == "node.status reply") return NodeStatus::Parse(body).status();
  if (message == "node.load") return NodeLoadRequest::Parse(body).status();
  if (message == "node.load_status") return NodeLoadStatusRequest::Parse(body).status();
  if (message == "node.load_status reply") {
    ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(body, message));
    return NodeLoadState::FromJson(j, std::string(message)).status();
  }
  if (message == "node.commit") return NodeCommit::Parse(body).status();
  if (message == "node.commit reply") return NodeCommitResult::Parse(body).status();
  if (message == "node.evict") return NodeEvict::Parse(body).status();
  if (message == "node.evict reply") return NodeEvictResult::Parse(body).status();
  if (message == "node.record") return NodeRecordRequest::Parse(body).status();
  if (message == "job.report") return JobReport::Parse(body).status();
  if (message == "dataset description") return DatasetDescription::Parse(body).status();
  if (message == "slice") {
    ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(body, message));
    return ReplySlice::FromJson(j, std::string(message)).status();
  }
  if (message == "load progress") return LoadProgressReply::Parse(body).status();
  if (message == "evict reply") return EvictReply::Parse(body).status();
  if (message == "slice_map reply") return SliceMapReply::Parse(body).status();
  if (message == "ok reply") return OkReply::Parse(body).status();
  if (message == "status reply") return StatusReply::Parse(body).status();
  if (message == "epoch shape") return EpochShapeReply::Parse(body).status();
  if (message == "shared file") return SharedFileReply::Parse(body).status();
  // The typed parts of replies, each alone.
  auto part = [&](auto from_json) -> arrow::Status {
    ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(body, message));
    return from_json(j, std::string(message)).status();
  };
  if (message == "scan metrics") return part(ScanMetricsFromJson);
  if (message == "refresh summary") return part(RefreshSummary::FromJson);
  if (message == "file run") return part(FileRun::FromJson);
  if (message == "node slices") return part(NodeSlices::FromJson);
  if (message == "cluster node") return part(ClusterNode::FromJson);
  if (message == "job status") return part(JobStatus::FromJson);
  if (message == "job source") return part(JobSource::FromJson);
  if (message == "retired copy") return part(RetiredCopyReply::FromJson);
  if (message == "recent load") return part(RecentLoad::FromJson);
  if (message == "followed dataset") return part(FollowedDataset::FromJson);
  if (message == "follow status") return part(FollowStatus::FromJson);
  return arrow::Status::NotImplemented("no message '", message, "'");
}

}  // namespace icefloe
