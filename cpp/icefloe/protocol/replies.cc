#include "icefloe/protocol/replies.h"

#include "icefloe/plan/plan.h"
#include "icefloe/protocol/copy_state.h"

namespace icefloe {

using json = nlohmann::json;

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kMaxItems = uint64_t{1} << 24;
// Segments one shared file names: bounded by the node's open files.
constexpr uint64_t kMaxSegments = uint64_t{1} << 20;
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
constexpr Bounds kAnyInt64 = Values(std::numeric_limits<int64_t>::min(), kInt64Max);
constexpr Bounds kLocation = Values(1, 4096);
constexpr FieldSpec Seconds(std::string_view name, bool required = kRequired) {
  return Num(name, required, Values(0, kU64Max));
}
// A count a producer may leave out (the catalog record's scan metrics).
constexpr FieldSpec OptionalCount(std::string_view name) {
  return Int(name, kOptional, Values(0, kInt64Max));
}

using iceberg::ScanMetrics;
const std::vector<Field<ScanMetrics>> kScanFields = JoinFields<ScanMetrics>({
    {{OptionalCount("manifests_total"), &ScanMetrics::manifests_total},
     {OptionalCount("manifests_pruned"), &ScanMetrics::manifests_pruned},
     {OptionalCount("manifests_cached"), &ScanMetrics::manifests_cached},
     {OptionalCount("data_files_total"), &ScanMetrics::data_files_total},
     {OptionalCount("data_files_pruned_by_partition"),
      &ScanMetrics::data_files_pruned_by_partition},
     {OptionalCount("data_files_pruned_by_bounds"), &ScanMetrics::data_files_pruned_by_bounds},
     {OptionalCount("delete_files"), &ScanMetrics::delete_files}},
    LoadCounterFields<ScanMetrics>(),
    {{Seconds("planning_ms", kOptional), &ScanMetrics::planning_ms}},
});

const Field<RefreshSummary> kRefreshFields[] = {
    {Uint("from_generation", kRequired, Values(0, kU64Max)), &RefreshSummary::from_generation},
    {Int("from_snapshot_id", kOptional, kAnyInt64), &RefreshSummary::from_snapshot_id},
    {Count("tasks_reused"), &RefreshSummary::tasks_reused},
    {Count("tasks_read"), &RefreshSummary::tasks_read},
    {Count("tasks_dropped"), &RefreshSummary::tasks_dropped},
    {Count("rows_reused"), &RefreshSummary::rows_reused},
    {Count("rows_read"), &RefreshSummary::rows_read},
    {Count("rows_dropped"), &RefreshSummary::rows_dropped},
    {Count("files_added"), &RefreshSummary::files_added},
    {Count("files_removed"), &RefreshSummary::files_removed},
};

const Field<FileRun> kFileRunFields[] = {
    {Str("path", kRequired, Values(1, 65536)), &FileRun::path},
    {Int("start", kRequired, Values(0, kMaxRows)), &FileRun::start},
    {Int("rows", kRequired, Values(0, kMaxRows)), &FileRun::rows},
};

const Field<NodeSlices> kNodeSlicesFields[] = {
    {Str("node", kRequired, kLocation), &NodeSlices::node},
    {Count("slices"), &NodeSlices::slices},
};

constexpr std::string_view kNodeStates[] = {"alive", "dead", "unknown"};
const Field<ClusterNode> kNodeFields[] = {
    {Str("location", kRequired, kLocation), &ClusterNode::location},
    {Str("state", kRequired, Values(1, 16), kNodeStates), &ClusterNode::state},
    {Count("memory_limit_bytes"), &ClusterNode::memory_limit_bytes},
    {Count("memory_used_bytes"), &ClusterNode::memory_used_bytes},
    {Seconds("last_heartbeat_s", kOptional), &ClusterNode::last_heartbeat_s},
    {Seconds("last_seen_s", kOptional), &ClusterNode::last_heartbeat_s},
    {Text("error", kRequired), &ClusterNode::error},
    {Text("refused", kRequired), &ClusterNode::refused},
    {Count("disk_limit_bytes"), &ClusterNode::disk_limit_bytes},
    {Count("disk_used_bytes"), &ClusterNode::disk_used_bytes},
    {Count("tier_ram_bytes"), &ClusterNode::tier_ram_bytes},
    {Count("tier_disk_bytes"), &ClusterNode::tier_disk_bytes},
    {Count("prefetch_lead_batches"), &ClusterNode::prefetch_lead_batches},
};
// NodeDatasetInfo::ToJson's objects; their `ranges` are [start, stop] pairs.
const FieldSpec kNodeDatasets = ObjectList("datasets", kRequired, Values(0, kMaxItems));

const Field<JobSource> kJobSourceFields[] = {
    {Str("dataset", kRequired, Values(1, 1024)), &JobSource::dataset},
    {Uint("rows_total", kRequired, Values(0, kU64Max)), &JobSource::rows_total},
    {Uint("batches_total", kRequired, Values(0, kU64Max)), &JobSource::batches_total},
    {Seconds("rows_per_s"), &JobSource::rows_per_s},
};

const Field<JobStatus> kJobFields[] = {
    {Str("job", kRequired, Values(1, 1024)), &JobStatus::job},
    {ListOf(FieldType::kStringList, "datasets", kRequired, Values(1, 1024), Values(0, 65536)),
     &JobStatus::datasets},
    {ListOf(FieldType::kStringList, "nodes", kRequired, kLocation, Values(0, 65536)),
     &JobStatus::nodes},
    {Count("consumers"), &JobStatus::consumers},
    {Count("ranks"), &JobStatus::ranks},
    {Num("stall_ratio", kRequired, Values(0, 1)), &JobStatus::stall_ratio},
    {Seconds("rows_per_s"), &JobStatus::rows_per_s},
    {Count("worst_rank"), &JobStatus::worst_rank},
    {Num("worst_rank_stall_ratio", kRequired, Values(0, 1)), &JobStatus::worst_rank_stall_ratio},
    {Seconds("last_report_age_s"), &JobStatus::last_report_age_s},
    {Uint("rows_total", kRequired, Values(0, kU64Max)), &JobStatus::rows_total},
    {Uint("batches_total", kRequired, Values(0, kU64Max)), &JobStatus::batches_total},
    {Seconds("wait_s_total"), &JobStatus::wait_s_total},
    {Seconds("elapsed_s_total"), &JobStatus::elapsed_s_total},
};
// Absent from a head that predates it: read as none.
const FieldSpec kJobSources = ObjectList("sources", kOptional, Values(0, 65536), "job source");

const Field<RetiredCopyReply> kRetiredFields[] = {
    {kName, &RetiredCopyReply::name},
    {Uint("generation", kRequired, Values(0, kU64Max)), &RetiredCopyReply::generation},
    {Uint("replaced_by", kRequired, Values(0, kU64Max)), &RetiredCopyReply::replaced_by},
    {Count("bytes"), &RetiredCopyReply::bytes},
    {Seconds("age_s"), &RetiredCopyReply::age_s},
    {Seconds("idle_s"), &RetiredCopyReply::idle_s},
};

const Field<RecentLoad> kRecentFields[] = {
    {kName, &RecentLoad::name},
    {Str("state", kRequired, Values(1, 16), kCopyStateNames), &RecentLoad::state},
    {Count("rows"), &RecentLoad::rows},
    {Count("bytes"), &RecentLoad::bytes},
    {Seconds("load_seconds"), &RecentLoad::load_seconds},
    {Text("error", kRequired), &RecentLoad::error},
    {Seconds("finished_s_ago"), &RecentLoad::finished_s_ago},
};

const Field<FollowedDataset> kFollowedFields[] = {
    {kName, &FollowedDataset::name},
    {Str("source", kRequired, Values(0, 65536)), &FollowedDataset::source},
    {Str("ref", kOptional, Values(1, 1024)), &FollowedDataset::ref},
    {Flag("followed", kRequired), &FollowedDataset::followed},
    {Text("why_not", kRequired), &FollowedDataset::why_not},
    {Str("state", kRequired, Values(1, 64)), &FollowedDataset::state},
    {Int("snapshot_id", kOptional, kAnyInt64), &FollowedDataset::snapshot_id},
    {Int("table_snapshot_id", kOptional, kAnyInt64), &FollowedDataset::table_snapshot_id},
    {Str("metadata_location", kRequired, Values(0, 65536)), &FollowedDataset::metadata_location},
    {Seconds("last_check_unix_s", kOptional), &FollowedDataset::last_check_unix_s},
    {Seconds("last_check_s_ago", kOptional), &FollowedDataset::last_check_s_ago},
    {Seconds("last_refresh_unix_s", kOptional), &FollowedDataset::last_refresh_unix_s},
    {Seconds("last_refresh_s_ago", kOptional), &FollowedDataset::last_refresh_s_ago},
    {Seconds("lag_s", kOptional), &FollowedDataset::lag_s},
    {Int("refreshed_to", kOptional, kAnyInt64), &FollowedDataset::refreshed_to},
    {Count("checks"), &FollowedDataset::checks},
    {Count("refreshes"), &FollowedDataset::refreshes},
    {Count("errors"), &FollowedDataset::errors},
    {Text("last_error", kRequired), &FollowedDataset::last_error},
    {Seconds("last_error_s_ago", kOptional), &FollowedDataset::last_error_s_ago},
};

const Field<FollowStatus> kFollowFields[] = {
    {Seconds("period_s"), &FollowStatus::period_s},
};
const FieldSpec kFollowDatasets =
    ObjectList("datasets", kRequired, Values(0, kMaxItems), "followed dataset");

const Field<SharedFileReply> kSharedFileFields[] = {
    {Int("pid", kRequired, Values(1, kInt32Max)), &SharedFileReply::pid},
    {Int("fd", kRequired, Values(0, kInt32Max)), &SharedFileReply::fd},
    {Uint("inode", kRequired, Values(0, kU64Max)), &SharedFileReply::inode},
    {Uint("size", kRequired, Values(1, kU64Max)), &SharedFileReply::size},
    {ListOf(FieldType::kIntList, "columns", kRequired, Values(0, kInt32Max), Values(0, 65536)),
     &SharedFileReply::columns},
    {Str("dataset", kRequired, Values(1, 1024)), &SharedFileReply::dataset},
    {Uint("generation", kRequired, Values(0, kU64Max)), &SharedFileReply::generation},
    {ListOf(FieldType::kUintList, "held", kRequired, Values(0, kMaxRows), Values(0, kMaxItems)),
     &SharedFileReply::held},
    {ListOf(FieldType::kUintList, "segments", kRequired, Values(0, kU64Max),
            Values(0, 3 * kMaxSegments)),
     &SharedFileReply::segments},
    {ListOf(FieldType::kUintList, "batches", kOptional, Values(0, kMaxRows),
            Values(0, 3 * (kMaxSegments + 1))),
     &SharedFileReply::batches},
};

const Field<EpochShapeReply> kShapeFields[] = {
    {Count("num_rows"), &EpochShapeReply::num_rows},
    {Int("order_version", kRequired, Values(1, 255)), &EpochShapeReply::order_version},
    {Str("shuffle", kRequired, Values(1, 16), kShuffleModeNames), &EpochShapeReply::shuffle},
    {Uint("steps", kRequired, Values(0, kMaxRows)), &EpochShapeReply::steps},
    {Uint("worker_batches", kRequired, Values(0, kMaxRows)), &EpochShapeReply::worker_batches},
    {Uint("worker_rows", kRequired, Values(0, kMaxRows)), &EpochShapeReply::worker_rows},
    {Uint("batch_size", kRequired, Values(1, kMaxRows)), &EpochShapeReply::batch_size},
    {Uint("last_batch_size", kRequired, Values(0, kMaxRows)), &EpochShapeReply::last_batch_size},
    {Uint("dropped_rows", kRequired, Values(0, kMaxRows)), &EpochShapeReply::dropped_rows},
    {Uint("padded_rows", kRequired, Values(0, kMaxRows)), &EpochShapeReply::padded_rows},
    {Uint("start", kRequired, Values(0, kMaxRows)), &EpochShapeReply::start},
    {Uint("first_batch", kRequired, Values(0, kMaxRows)), &EpochShapeReply::first_batch},
    {Uint("generation", kRequired, Values(0, kU64Max)), &EpochShapeReply::generation},
    {Uint("block_rows", kRequired, Values(0, kMaxRows)), &EpochShapeReply::block_rows},
    {Uint("window_blocks", kRequired, Values(0, kMaxRows)), &EpochShapeReply::window_blocks},
};

const Field<ReplySlice> kSliceFields[] = {
    {Uint("start", kRequired, Values(0, kMaxRows)), &ReplySlice::start},
    {Uint("stop", kRequired, Values(0, kMaxRows)), &ReplySlice::stop},
    // A slice whose every node is lost has none (the dataset is degraded).
    {ListOf(FieldType::kStringList, "nodes", kRequired, Values(1, 4096), Values(0, 65536)),
     &ReplySlice::nodes},
};
// Optional, so outside the table (which has no optional lists).
struct SliceDiskRows {
  std::vector<uint64_t> rows;
};
const FieldSpec kSliceDiskRows =
    ListOf(FieldType::kUintList, "disk_rows", kOptional, Values(0, kMaxRows), Values(0, 65536));
const Field<SliceDiskRows> kSliceDiskRowsField[] = {{kSliceDiskRows, &SliceDiskRows::rows}};

const Field<DatasetDescription> kDescriptionFields[] = {
    {kName, &DatasetDescription::name},
    {Str("state", kRequired, Values(1, 16), kCopyStateNames), &DatasetDescription::state},
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
    {ListOf(FieldType::kStringList, "model_kind", kOptional, Values(1, 256),
            Values(0, kMaxTransformColumns)),
     &DatasetDescription::model_kind},
    {Text("schema", kOptional), &DatasetDescription::schema},
    {Text("schema_text", kOptional), &DatasetDescription::schema_text},
    {Text("error", kOptional), &DatasetDescription::error},
    {Count("slices_missing"), &DatasetDescription::slices_missing},
    {Count("replicas_missing"), &DatasetDescription::replicas_missing},
    {Num("heal_seconds", kOptional, Values(0, kU64Max)), &DatasetDescription::heal_seconds},
    {Text("heal_error", kOptional), &DatasetDescription::heal_error},
    {ObjectField("transform", kOptional),
     MessageOf<&DatasetDescription::transform, MessageErrors::kNamed>()},
};
const FieldSpec kDescriptionScan = ObjectField("scan", kRequired, "scan metrics");
const FieldSpec kDescriptionRefresh = ObjectField("refresh", kOptional, "refresh summary");
const FieldSpec kDescriptionFiles =
    ObjectList("files", kOptional, Values(0, kMaxItems), "file run");
const FieldSpec kDescriptionSlices = ObjectList("slices", kOptional, Values(0, kMaxItems), "slice");
const FieldSpec kSlicesPerNode =
    ObjectList("slices_per_node", kOptional, Values(0, kMaxItems), "node slices");

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
    {Str("state", kRequired, Values(1, 16), kCopyStateNames), &SliceMapReply::state},
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
const FieldSpec kStatusNodes = ObjectList("nodes", kRequired, Values(0, kMaxItems), "cluster node");
const FieldSpec kStatusDatasets =
    ObjectList("datasets", kRequired, Values(0, kMaxItems), "dataset description");
const FieldSpec kStatusRetired =
    ObjectList("retired", kRequired, Values(0, kMaxItems), "retired copy");
const FieldSpec kStatusLoads =
    ObjectList("loads", kRequired, Values(0, kMaxItems), "load progress");
const FieldSpec kStatusRecentLoads =
    ObjectList("recent_loads", kRequired, Values(0, kMaxItems), "recent load");
const FieldSpec kStatusJobs = ObjectList("jobs", kRequired, Values(0, kMaxItems), "job status");
const FieldSpec kStatusFollow = ObjectField("follow", kRequired, "follow status");

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

// One nested message read by its table (`what` names it in errors).
template <typename M>
arrow::Result<M> ReadMessage(const json& j, std::string what, std::span<const Field<M>> table) {
  M m;
  ARROW_RETURN_NOT_OK(ReadFields<M>(JsonFields(j, std::move(what)), table, &m));
  return m;
}

template <typename T>
json ToJsonList(const std::vector<T>& items) {
  json out = json::array();
  for (const auto& x : items) out.push_back(x.ToJson());
  return out;
}

// The field's list of objects, each read by `read`; absent (optional): nullopt.
template <typename T, typename Fn>
arrow::Result<std::optional<std::vector<T>>> ReadOptionalList(const JsonFields& in,
                                                              const FieldSpec& spec, Fn read) {
  ARROW_ASSIGN_OR_RAISE(json list, ReadObjectList(in, spec));
  if (list.is_null()) return std::nullopt;
  return ReadEach<T>(in, spec, list, read);
}

// The field's object read by `read`; absent (optional): nullopt.
template <typename T, typename Fn>
arrow::Result<std::optional<T>> ReadOptionalObject(const JsonFields& in, const FieldSpec& spec,
                                                   Fn read) {
  ARROW_ASSIGN_OR_RAISE(json object, ReadObject(in, spec));
  if (object.is_null()) return std::nullopt;
  return read(object, in.what() + " '" + std::string(spec.name) + "'");
}

arrow::Result<LoadProgressReply> ProgressFromJson(const json& j, std::string what) {
  return ReadMessage<LoadProgressReply>(j, std::move(what), kProgressFields);
}

}  // namespace

// --- ReplySlice -----------------------------------------------------------------

json ReplySlice::ToJson() const {
  json j = Write<ReplySlice>(kSliceFields, *this);
  if (disk_rows) j["disk_rows"] = *disk_rows;
  return j;
}

arrow::Result<ReplySlice> ReplySlice::FromJson(const json& j, std::string what) {
  JsonFields in(j, std::move(what));
  ReplySlice s;
  ARROW_RETURN_NOT_OK(ReadFields<ReplySlice>(in, kSliceFields, &s));
  if (s.stop < s.start) {
    return arrow::Status::Invalid(in.what(), ": 'stop' ", s.stop, " is before 'start' ", s.start);
  }
  ARROW_ASSIGN_OR_RAISE(const json* disk, in.Find(kSliceDiskRows));
  if (disk == nullptr) return s;
  SliceDiskRows rows;
  ARROW_RETURN_NOT_OK(ReadFields<SliceDiskRows>(in, kSliceDiskRowsField, &rows));
  if (rows.rows.size() != s.nodes.size()) {
    return arrow::Status::Invalid(in.what(), ": 'disk_rows' has ", rows.rows.size(), " counts for ",
                                  s.nodes.size(), " nodes");
  }
  for (uint64_t n : rows.rows) {
    if (n > s.stop - s.start) {
      return arrow::Status::Invalid(in.what(), ": 'disk_rows' ", n, " is more than the slice's ",
                                    s.stop - s.start, " rows");
    }
  }
  s.disk_rows = std::move(rows.rows);
  return s;
}

MessageSpec ReplySlice::Spec() {
  return SpecOf<ReplySlice>("slice", kSliceFields, {kSliceDiskRows});
}

// --- DatasetDescription ---------------------------------------------------------

json DatasetDescription::ToJson() const {
  json j = Write<DatasetDescription>(kDescriptionFields, *this);
  j["scan"] = ScanMetricsToJson(scan);
  if (!transform) {
    j.erase("model_sha256");  // no transform, no models
    j.erase("model_kind");
  }
  if (refresh) j["refresh"] = refresh->ToJson();
  if (files) j["files"] = ToJsonList(*files);
  if (slices) j["slices"] = ToJsonList(*slices);
  if (slices_per_node) j["slices_per_node"] = ToJsonList(*slices_per_node);
  return j;
}

arrow::Result<DatasetDescription> DatasetDescription::FromJson(const json& j, std::string what) {
  JsonFields in(j, std::move(what));
  DatasetDescription d;
  ARROW_RETURN_NOT_OK(ReadFields<DatasetDescription>(in, kDescriptionFields, &d));
  ARROW_ASSIGN_OR_RAISE(auto scan,
                        ReadOptionalObject<ScanMetrics>(in, kDescriptionScan, ScanMetricsFromJson));
  d.scan = *scan;  // required: present
  ARROW_ASSIGN_OR_RAISE(d.refresh, ReadOptionalObject<RefreshSummary>(in, kDescriptionRefresh,
                                                                      RefreshSummary::FromJson));
  ARROW_ASSIGN_OR_RAISE(d.files,
                        ReadOptionalList<FileRun>(in, kDescriptionFiles, FileRun::FromJson));
  ARROW_ASSIGN_OR_RAISE(d.slices,
                        ReadOptionalList<ReplySlice>(in, kDescriptionSlices, ReplySlice::FromJson));
  ARROW_ASSIGN_OR_RAISE(d.slices_per_node,
                        ReadOptionalList<NodeSlices>(in, kSlicesPerNode, NodeSlices::FromJson));
  return d;
}

arrow::Result<DatasetDescription> DatasetDescription::Parse(std::string_view body) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(body, "dataset description"));
  return FromJson(j, "dataset description");
}

MessageSpec DatasetDescription::Spec() {
  return SpecOf<DatasetDescription>("dataset description", kDescriptionFields,
                                    {kDescriptionScan, kDescriptionRefresh, kDescriptionFiles,
                                     kDescriptionSlices, kSlicesPerNode});
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
  j["nodes"] = ToJsonList(nodes);
  j["datasets"] = ToJsonList(datasets);
  j["retired"] = ToJsonList(retired);
  j["loads"] = ToJsonList(loads);
  j["recent_loads"] = ToJsonList(recent_loads);
  j["jobs"] = ToJsonList(jobs);
  j["follow"] = follow.ToJson();
  return j;
}

arrow::Result<StatusReply> StatusReply::Parse(std::string_view body) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(body, "status reply"));
  JsonFields in(j, "status reply");
  StatusReply r;
  ARROW_RETURN_NOT_OK(ReadFields<StatusReply>(in, kStatusFields, &r));
  // Every list and object here is required: present.
  ARROW_ASSIGN_OR_RAISE(auto nodes,
                        ReadOptionalList<ClusterNode>(in, kStatusNodes, ClusterNode::FromJson));
  ARROW_ASSIGN_OR_RAISE(auto datasets, ReadOptionalList<DatasetDescription>(
                                           in, kStatusDatasets, DatasetDescription::FromJson));
  ARROW_ASSIGN_OR_RAISE(auto retired, ReadOptionalList<RetiredCopyReply>(
                                          in, kStatusRetired, RetiredCopyReply::FromJson));
  ARROW_ASSIGN_OR_RAISE(auto loads,
                        ReadOptionalList<LoadProgressReply>(in, kStatusLoads, ProgressFromJson));
  ARROW_ASSIGN_OR_RAISE(auto recent,
                        ReadOptionalList<RecentLoad>(in, kStatusRecentLoads, RecentLoad::FromJson));
  ARROW_ASSIGN_OR_RAISE(auto jobs,
                        ReadOptionalList<JobStatus>(in, kStatusJobs, JobStatus::FromJson));
  ARROW_ASSIGN_OR_RAISE(
      auto follow, ReadOptionalObject<FollowStatus>(in, kStatusFollow, FollowStatus::FromJson));
  r.nodes = std::move(*nodes);
  r.datasets = std::move(*datasets);
  r.retired = std::move(*retired);
  r.loads = std::move(*loads);
  r.recent_loads = std::move(*recent);
  r.jobs = std::move(*jobs);
  r.follow = std::move(*follow);
  return r;
}

MessageSpec StatusReply::Spec() {
  return SpecOf<StatusReply>("status reply", kStatusFields,
                             {kStatusNodes, kStatusDatasets, kStatusRetired, kStatusLoads,
                              kStatusRecentLoads, kStatusJobs, kStatusFollow});
}

// --- The typed parts ---------------------------------------------------------

json ScanMetricsToJson(const ScanMetrics& scan) { return Write<ScanMetrics>(kScanFields, scan); }

arrow::Result<ScanMetrics> ScanMetricsFromJson(const json& j, std::string what) {
  return ReadMessage<ScanMetrics>(j, std::move(what), kScanFields);
}

MessageSpec ScanMetricsSpec() { return SpecOf<ScanMetrics>("scan metrics", kScanFields); }

json RefreshSummary::ToJson() const { return Write<RefreshSummary>(kRefreshFields, *this); }
arrow::Result<RefreshSummary> RefreshSummary::FromJson(const json& j, std::string what) {
  return ReadMessage<RefreshSummary>(j, std::move(what), kRefreshFields);
}
MessageSpec RefreshSummary::Spec() {
  return SpecOf<RefreshSummary>("refresh summary", kRefreshFields);
}

json FileRun::ToJson() const { return Write<FileRun>(kFileRunFields, *this); }
arrow::Result<FileRun> FileRun::FromJson(const json& j, std::string what) {
  return ReadMessage<FileRun>(j, std::move(what), kFileRunFields);
}
MessageSpec FileRun::Spec() { return SpecOf<FileRun>("file run", kFileRunFields); }

json NodeSlices::ToJson() const { return Write<NodeSlices>(kNodeSlicesFields, *this); }
arrow::Result<NodeSlices> NodeSlices::FromJson(const json& j, std::string what) {
  return ReadMessage<NodeSlices>(j, std::move(what), kNodeSlicesFields);
}
MessageSpec NodeSlices::Spec() { return SpecOf<NodeSlices>("node slices", kNodeSlicesFields); }

json ClusterNode::ToJson() const {
  json j = Write<ClusterNode>(kNodeFields, *this);
  j["datasets"] = datasets;
  return j;
}
arrow::Result<ClusterNode> ClusterNode::FromJson(const json& j, std::string what) {
  JsonFields in(j, std::move(what));
  ClusterNode n;
  ARROW_RETURN_NOT_OK(ReadFields<ClusterNode>(in, kNodeFields, &n));
  ARROW_ASSIGN_OR_RAISE(n.datasets, ReadObjectList(in, kNodeDatasets));
  return n;
}
MessageSpec ClusterNode::Spec() {
  return SpecOf<ClusterNode>("cluster node", kNodeFields, {kNodeDatasets});
}

json JobSource::ToJson() const { return Write<JobSource>(kJobSourceFields, *this); }
arrow::Result<JobSource> JobSource::FromJson(const json& j, std::string what) {
  return ReadMessage<JobSource>(j, std::move(what), kJobSourceFields);
}
MessageSpec JobSource::Spec() { return SpecOf<JobSource>("job source", kJobSourceFields); }

json JobStatus::ToJson() const {
  json j = Write<JobStatus>(kJobFields, *this);
  j["sources"] = ToJsonList(sources);
  return j;
}
arrow::Result<JobStatus> JobStatus::FromJson(const json& j, std::string what) {
  JsonFields in(j, std::move(what));
  JobStatus s;
  ARROW_RETURN_NOT_OK(ReadFields<JobStatus>(in, kJobFields, &s));
  ARROW_ASSIGN_OR_RAISE(auto sources,
                        ReadOptionalList<JobSource>(in, kJobSources, JobSource::FromJson));
  if (sources) s.sources = std::move(*sources);
  return s;
}
MessageSpec JobStatus::Spec() { return SpecOf<JobStatus>("job status", kJobFields, {kJobSources}); }

json RetiredCopyReply::ToJson() const { return Write<RetiredCopyReply>(kRetiredFields, *this); }
arrow::Result<RetiredCopyReply> RetiredCopyReply::FromJson(const json& j, std::string what) {
  return ReadMessage<RetiredCopyReply>(j, std::move(what), kRetiredFields);
}
MessageSpec RetiredCopyReply::Spec() {
  return SpecOf<RetiredCopyReply>("retired copy", kRetiredFields);
}

json RecentLoad::ToJson() const { return Write<RecentLoad>(kRecentFields, *this); }
arrow::Result<RecentLoad> RecentLoad::FromJson(const json& j, std::string what) {
  return ReadMessage<RecentLoad>(j, std::move(what), kRecentFields);
}
MessageSpec RecentLoad::Spec() { return SpecOf<RecentLoad>("recent load", kRecentFields); }

json FollowedDataset::ToJson() const { return Write<FollowedDataset>(kFollowedFields, *this); }
arrow::Result<FollowedDataset> FollowedDataset::FromJson(const json& j, std::string what) {
  return ReadMessage<FollowedDataset>(j, std::move(what), kFollowedFields);
}
MessageSpec FollowedDataset::Spec() {
  return SpecOf<FollowedDataset>("followed dataset", kFollowedFields);
}

json FollowStatus::ToJson() const {
  json j = Write<FollowStatus>(kFollowFields, *this);
  j["datasets"] = ToJsonList(datasets);
  return j;
}
arrow::Result<FollowStatus> FollowStatus::FromJson(const json& j, std::string what) {
  JsonFields in(j, std::move(what));
  FollowStatus f;
  ARROW_RETURN_NOT_OK(ReadFields<FollowStatus>(in, kFollowFields, &f));
  ARROW_ASSIGN_OR_RAISE(auto datasets, ReadOptionalList<FollowedDataset>(
                                           in, kFollowDatasets, FollowedDataset::FromJson));
  f.datasets = std::move(*datasets);  // required: present
  return f;
}
MessageSpec FollowStatus::Spec() {
  return SpecOf<FollowStatus>("follow status", kFollowFields, {kFollowDatasets});
}

json EpochShapeReply::ToJson() const { return Write<EpochShapeReply>(kShapeFields, *this); }
arrow::Result<EpochShapeReply> EpochShapeReply::Parse(std::string_view body) {
  return Read<EpochShapeReply>(body, "epoch shape", kShapeFields);
}
MessageSpec EpochShapeReply::Spec() { return SpecOf<EpochShapeReply>("epoch shape", kShapeFields); }

json SharedFileReply::ToJson() const { return Write<SharedFileReply>(kSharedFileFields, *this); }
arrow::Result<SharedFileReply> SharedFileReply::Parse(std::string_view body) {
  ARROW_ASSIGN_OR_RAISE(SharedFileReply f,
                        Read<SharedFileReply>(body, "shared file", kSharedFileFields));
  if (f.held.size() % 2 != 0) {
    return arrow::Status::Invalid("shared file: 'held' must hold (start, stop) pairs; got ",
                                  f.held.size(), " numbers");
  }
  for (size_t i = 0; i < f.held.size(); i += 2) {
    if (f.held[i] >= f.held[i + 1] || (i > 0 && f.held[i] < f.held[i - 1])) {
      return arrow::Status::Invalid("shared file: 'held' range ", i / 2, " [", f.held[i], ", ",
                                    f.held[i + 1], ") is empty or before the one before it");
    }
  }
  if (f.segments.size() % 3 != 0) {
    return arrow::Status::Invalid(
        "shared file: 'segments' must hold (fd, inode, size) triples; got ", f.segments.size(),
        " numbers");
  }
  for (size_t i = 0; i < f.segments.size(); i += 3) {
    if (f.segments[i] > static_cast<uint64_t>(kInt32Max) || f.segments[i + 2] == 0) {
      return arrow::Status::Invalid("shared file: 'segments' segment ", i / 3 + 1, " has fd ",
                                    f.segments[i], " and size ", f.segments[i + 2],
                                    " (fd 0..2^31-1, size 1 or more)");
    }
  }
  return f;
}
MessageSpec SharedFileReply::Spec() {
  return SpecOf<SharedFileReply>("shared file", kSharedFileFields);
}

}  // namespace icefloe
