// Replies the head sends for client actions (docs/protocol.md, "Replies"),
// typed like the requests they answer (actions.h): each is a struct with one
// field table that writes it (ToJson), reads it back (Parse, Invalid naming
// the reply and field) and describes it (Spec, so the Python client checks
// every reply it decodes against the same list).
//
// Every nested part is typed too (a description's scan, refresh and files,
// status's nodes, jobs and follower), so Python checks a reply all the way
// down against the same lists. Two parts stay objects checked by their own
// parsers: a description's `transform` (TransformSpec) and each node's
// `datasets` (NodeDatasetInfo, whose `ranges` are pairs).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>
#include <nlohmann/json.hpp>

#include "icefloe/iceberg/scan_metrics.h"
#include "icefloe/protocol/actions.h"
#include "icefloe/protocol/fields.h"
#include "icefloe/protocol/transform_spec.h"

namespace icefloe {

/// One run of global rows `[start, stop)` and the nodes holding it (primary
/// first): an item of the describe and slice_map replies' `slices`.
struct ReplySlice {
  uint64_t start = 0;
  uint64_t stop = 0;
  std::vector<std::string> nodes;
  /// describe only: per node of `nodes`, the slice's rows it holds on its
  /// disk tier (0: all in memory; as its last status said).
  std::optional<std::vector<uint64_t>> disk_rows;

  bool operator==(const ReplySlice&) const = default;
  nlohmann::json ToJson() const;
  static arrow::Result<ReplySlice> FromJson(const nlohmann::json& j, std::string what);
  static MessageSpec Spec();
};

/// The load's counters (iceberg::kLoadCounters) as fields of M, a message
/// that derives from iceberg::LoadCounters: each an optional integer
/// 0..2^63-1 under its wire name, flat in M's object. The node's load state
/// and the scan metrics both splice these into their tables.
template <typename M>
std::vector<Field<M>> LoadCounterFields() {
  static_assert(std::is_base_of_v<iceberg::LoadCounters, M>);
  std::vector<Field<M>> fields;
  for (const iceberg::LoadCounter& c : iceberg::kLoadCounters) {
    const FieldSpec spec = Int(c.name, kOptional, Values(0, std::numeric_limits<int64_t>::max()));
    fields.push_back({spec, static_cast<int64_t M::*>(c.member)});
  }
  return fields;
}

/// A load's scan metrics (iceberg/scan_metrics.h), as a description's `scan`
/// and the head's catalog record carry them; absent fields read as 0.
nlohmann::json ScanMetricsToJson(const iceberg::ScanMetrics& scan);
arrow::Result<iceberg::ScanMetrics> ScanMetricsFromJson(const nlohmann::json& j, std::string what);
MessageSpec ScanMetricsSpec();

/// What a refresh reused, read and dropped against the copy it replaced: a
/// description's `refresh` (docs/protocol.md, "Refresh").
struct RefreshSummary {
  uint64_t from_generation = 0;
  std::optional<int64_t> from_snapshot_id;  ///< absent: the old copy had no snapshot
  int64_t tasks_reused = 0;
  int64_t tasks_read = 0;
  int64_t tasks_dropped = 0;
  int64_t rows_reused = 0;
  int64_t rows_read = 0;
  int64_t rows_dropped = 0;
  int64_t files_added = 0;
  int64_t files_removed = 0;

  bool operator==(const RefreshSummary&) const = default;
  nlohmann::json ToJson() const;
  static arrow::Result<RefreshSummary> FromJson(const nlohmann::json& j, std::string what);
  static MessageSpec Spec();
};

/// One data file's rows in a copy, global rows `[start, start + rows)`: an
/// item of describe's `files`.
struct FileRun {
  std::string path;
  int64_t start = 0;
  int64_t rows = 0;

  bool operator==(const FileRun&) const = default;
  nlohmann::json ToJson() const;
  static arrow::Result<FileRun> FromJson(const nlohmann::json& j, std::string what);
  static MessageSpec Spec();
};

/// How many of a dataset's slices one node holds: an item of status's
/// `slices_per_node`.
struct NodeSlices {
  std::string node;
  int64_t slices = 0;

  bool operator==(const NodeSlices&) const = default;
  nlohmann::json ToJson() const;
  static arrow::Result<NodeSlices> FromJson(const nlohmann::json& j, std::string what);
  static MessageSpec Spec();
};

/// A dataset's description: the reply of "describe" (with `files` and
/// `slices`), each item of "list", the last message of a "load" or "refresh"
/// stream, and each dataset of "status" (with `slices_per_node`).
struct DatasetDescription {
  std::string name;
  /// loading, ready, degraded, healing or failed.
  std::string state;
  std::string source;
  std::string metadata_location;
  std::optional<int64_t> snapshot_id;  ///< absent: no snapshot (an empty table)
  std::vector<std::string> columns;    ///< as loaded; empty: all
  std::string filter;
  int64_t batch_rows = kDefaultBatchRows;
  int32_t replication = 1;
  uint64_t generation = 0;
  int64_t rows = 0;
  int64_t bytes = 0;  ///< on the nodes, all replicas
  int64_t estimated_bytes = 0;
  int64_t tasks = 0;
  double load_seconds = 0;
  iceberg::ScanMetrics scan;
  /// The load's transform, parsed with the description; empty: none (then
  /// `model_sha256` and `model_kind` are not written).
  std::optional<TransformSpec> transform;
  std::vector<std::string> model_sha256;
  /// Each tokenize model's kind, in column order: "sentencepiece" or
  /// "tokenizer.json <model type>" ("tokenizer.json WordPiece").
  std::vector<std::string> model_kind;
  std::optional<std::string> schema;       ///< base64 Arrow IPC of the cached columns
  std::optional<std::string> schema_text;  ///< the same, as text
  std::optional<std::string> error;
  std::optional<RefreshSummary> refresh;  ///< absent after a full load
  int64_t slices_missing = 0;
  int64_t replicas_missing = 0;
  std::optional<double> heal_seconds;
  std::optional<std::string> heal_error;
  /// describe: each data file's rows; absent: not sent.
  std::optional<std::vector<FileRun>> files;
  /// describe: the slice map; absent: not sent.
  std::optional<std::vector<ReplySlice>> slices;
  /// status: how many slices each node holds; absent: not sent.
  std::optional<std::vector<NodeSlices>> slices_per_node;

  nlohmann::json ToJson() const;
  static arrow::Result<DatasetDescription> FromJson(const nlohmann::json& j, std::string what);
  static arrow::Result<DatasetDescription> Parse(std::string_view body);
  static MessageSpec Spec();
};

/// A load's progress: the messages of a "load" or "refresh" stream before
/// the description, and each item of status's `loads`.
struct LoadProgressReply {
  std::string state = "loading";
  /// queued, planning, loading, committing or finished.
  std::string phase = "queued";
  std::string name;
  int64_t tasks_done = 0;
  int64_t tasks_total = 0;
  int64_t estimated_bytes = 0;
  double seconds = 0;  ///< since the load started

  bool operator==(const LoadProgressReply&) const = default;
  nlohmann::json ToJson() const;
  static arrow::Result<LoadProgressReply> Parse(std::string_view body);
  static MessageSpec Spec();
};

/// Reply to "evict".
struct EvictReply {
  std::string name;
  int64_t bytes = 0;       ///< freed on the nodes (0: the copy is still shared)
  bool cancelled = false;  ///< a running load of the name was cancelled
  /// Nodes that did not answer the evict (they drop the copy on their own
  /// once the head forgets it).
  std::vector<std::string> unreached;

  bool operator==(const EvictReply&) const = default;
  nlohmann::json ToJson() const;
  static arrow::Result<EvictReply> Parse(std::string_view body);
  static MessageSpec Spec();
};

/// Reply to "slice_map" (docs/protocol.md, "Slice map").
struct SliceMapReply {
  std::string name;
  std::string storage;  ///< the name nodes store the copy under
  uint64_t generation = 0;
  std::string state;
  int64_t rows = 0;
  std::string schema;  ///< base64 Arrow IPC, of the requested columns
  std::vector<ReplySlice> slices;
  std::string grant;  ///< base64 read grant

  bool operator==(const SliceMapReply&) const = default;
  nlohmann::json ToJson() const;
  static arrow::Result<SliceMapReply> Parse(std::string_view body);
  static MessageSpec Spec();
};

/// Reply to "job.report" and "node.register": {"ok": true}.
struct OkReply {
  bool ok = true;

  nlohmann::json ToJson() const;
  static arrow::Result<OkReply> Parse(std::string_view body);
  static MessageSpec Spec();
};

/// A data node as the head sees it: an item of status's `nodes`.
struct ClusterNode {
  std::string location;
  std::string state;  ///< alive, dead or unknown
  int64_t memory_limit_bytes = 0;
  int64_t memory_used_bytes = 0;
  /// Seconds since the head last heard from the node; absent: never. Both
  /// names are sent (last_seen_s is the older one).
  std::optional<double> last_heartbeat_s;
  std::string error;    ///< the last heartbeat's error; empty: none
  std::string refused;  ///< why the node refuses this head's node actions; empty: it does not
  /// What the node holds (NodeDatasetInfo::ToJson, without the catalog record).
  nlohmann::json datasets = nlohmann::json::array();
  int64_t disk_limit_bytes = 0;  ///< the node's disk tier budget; 0: none
  int64_t disk_used_bytes = 0;
  /// The node's read-ahead: tier bytes read from RAM and from disk since
  /// it started, and its lead now (NodeStatus's).
  int64_t tier_ram_bytes = 0;
  int64_t tier_disk_bytes = 0;
  int64_t prefetch_lead_batches = 0;

  nlohmann::json ToJson() const;
  static arrow::Result<ClusterNode> FromJson(const nlohmann::json& j, std::string what);
  static MessageSpec Spec();
};

/// One dataset a job reads (a mixture reads several): an item of a job
/// status's `sources`, summed from the reports that name it.
struct JobSource {
  std::string dataset;
  uint64_t rows_total = 0;
  uint64_t batches_total = 0;
  double rows_per_s = 0;  ///< over the window, as the job's

  bool operator==(const JobSource&) const = default;
  nlohmann::json ToJson() const;
  static arrow::Result<JobSource> FromJson(const nlohmann::json& j, std::string what);
  static MessageSpec Spec();
};

/// One training job's input stalls, from its consumers' job.report: an item
/// of status's `jobs` (head/core/jobs.h).
struct JobStatus {
  std::string job;
  std::vector<std::string> datasets;
  std::vector<std::string> nodes;
  int64_t consumers = 0;  ///< consumers that reported within the window
  int64_t ranks = 0;      ///< distinct ranks among them
  double stall_ratio = 0;
  double rows_per_s = 0;
  int64_t worst_rank = 0;
  double worst_rank_stall_ratio = 0;
  double last_report_age_s = 0;
  uint64_t rows_total = 0;
  uint64_t batches_total = 0;
  double wait_s_total = 0;
  double elapsed_s_total = 0;
  std::vector<JobSource> sources;  ///< per dataset, by name

  bool operator==(const JobStatus&) const = default;
  nlohmann::json ToJson() const;
  static arrow::Result<JobStatus> FromJson(const nlohmann::json& j, std::string what);
  static MessageSpec Spec();
};

/// A copy a refresh replaced, kept for the epochs still reading it: an item
/// of status's `retired`.
struct RetiredCopyReply {
  std::string name;
  uint64_t generation = 0;
  uint64_t replaced_by = 0;
  int64_t bytes = 0;
  double age_s = 0;
  double idle_s = 0;

  bool operator==(const RetiredCopyReply&) const = default;
  nlohmann::json ToJson() const;
  static arrow::Result<RetiredCopyReply> FromJson(const nlohmann::json& j, std::string what);
  static MessageSpec Spec();
};

/// A finished load: an item of status's `recent_loads`.
struct RecentLoad {
  std::string name;
  std::string state;
  int64_t rows = 0;
  int64_t bytes = 0;
  double load_seconds = 0;
  std::string error;  ///< empty: none
  double finished_s_ago = 0;

  bool operator==(const RecentLoad&) const = default;
  nlohmann::json ToJson() const;
  static arrow::Result<RecentLoad> FromJson(const nlohmann::json& j, std::string what);
  static MessageSpec Spec();
};

/// One dataset the follower (--follow) watches: an item of status's
/// `follow.datasets`. Times are absent until the event first happens.
struct FollowedDataset {
  std::string name;
  std::string source;
  std::optional<std::string> ref;  ///< the branch or tag followed; absent: main
  bool followed = false;
  std::string why_not;  ///< why it is not followed; empty when it is
  std::string state;
  std::optional<int64_t> snapshot_id;        ///< of the cached copy
  std::optional<int64_t> table_snapshot_id;  ///< the table's, at the last check
  std::string metadata_location;
  std::optional<double> last_check_unix_s;
  std::optional<double> last_check_s_ago;
  std::optional<double> last_refresh_unix_s;
  std::optional<double> last_refresh_s_ago;
  std::optional<double> lag_s;
  std::optional<int64_t> refreshed_to;
  int64_t checks = 0;
  int64_t refreshes = 0;
  int64_t errors = 0;
  std::string last_error;
  std::optional<double> last_error_s_ago;

  bool operator==(const FollowedDataset&) const = default;
  nlohmann::json ToJson() const;
  static arrow::Result<FollowedDataset> FromJson(const nlohmann::json& j, std::string what);
  static MessageSpec Spec();
};

/// The follower: status's `follow` (period 0 and no datasets when off).
struct FollowStatus {
  double period_s = 0;
  std::vector<FollowedDataset> datasets;

  bool operator==(const FollowStatus&) const = default;
  nlohmann::json ToJson() const;
  static arrow::Result<FollowStatus> FromJson(const nlohmann::json& j, std::string what);
  static MessageSpec Spec();
};

/// The shape of one consumer's epoch: the epoch FlightInfo's app_metadata
/// (docs/epochs.md). Counts are of this consumer's share.
struct EpochShapeReply {
  int64_t num_rows = 0;       ///< the dataset's
  int64_t order_version = 0;  ///< plan.h's kEpochOrderVersion
  std::string shuffle;
  uint64_t steps = 0;
  uint64_t worker_batches = 0;
  uint64_t worker_rows = 0;
  uint64_t batch_size = 0;
  uint64_t last_batch_size = 0;
  uint64_t dropped_rows = 0;
  uint64_t padded_rows = 0;
  uint64_t start = 0;        ///< the resolved start position
  uint64_t first_batch = 0;  ///< the first batch the endpoints send
  uint64_t generation = 0;   ///< of the copy read (a failover must read the same)
  uint64_t block_rows = 0;
  uint64_t window_blocks = 0;

  bool operator==(const EpochShapeReply&) const = default;
  nlohmann::json ToJson() const;
  static arrow::Result<EpochShapeReply> Parse(std::string_view body);
  static MessageSpec Spec();
};

/// What a stream by reference names in its schema's metadata
/// ("icefloe.shared"; docs/protocol.md, "Shared memory"): the node's shared
/// file (open /proc/<pid>/fd/<fd>, check that it is inode `inode` of `size`
/// bytes, map it, read it as an Arrow IPC file of one record batch), the
/// ticket's projection and which copy's rows the file holds, for takes from
/// it later.
struct SharedFileReply {
  int64_t pid = 0;
  /// The file's first segment (the whole file when it has one).
  int64_t fd = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  std::vector<int64_t> columns;  ///< indices into the file's schema; empty: every column
  std::string dataset;
  uint64_t generation = 0;
  /// The global rows the file holds, in its order: ranges [held[2i],
  /// held[2i + 1]), each non-empty and after the one before.
  std::vector<uint64_t> held;
  /// The file's further segments, in its order: (fd, inode, size) triples.
  std::vector<uint64_t> segments = {};
  /// Per segment, the first included, where its rows lie in its file:
  /// (record batch, first row, rows) triples (a tier file holds many
  /// batches); empty: each segment is the one record batch of its file, whole.
  std::vector<uint64_t> batches = {};

  bool operator==(const SharedFileReply&) const = default;
  nlohmann::json ToJson() const;
  static arrow::Result<SharedFileReply> Parse(std::string_view body);
  static MessageSpec Spec();
};

/// Reply to "status" (also the status page's and /status's data).
struct StatusReply {
  std::vector<ClusterNode> nodes;
  std::vector<DatasetDescription> datasets;  ///< with slices_per_node
  std::vector<RetiredCopyReply> retired;
  std::vector<LoadProgressReply> loads;
  std::vector<RecentLoad> recent_loads;
  std::vector<JobStatus> jobs;
  bool ready = false;
  std::string reason;  ///< why not ready; empty when ready
  bool recovering = false;
  FollowStatus follow;
  std::string default_dataset;

  nlohmann::json ToJson() const;
  static arrow::Result<StatusReply> Parse(std::string_view body);
  static MessageSpec Spec();
};

}  // namespace icefloe
