// Messages between the head and the data nodes (node.* actions and their
// replies, node.register), and the umbrella header for every JSON message
// (actions.h, descriptors.h, replies.h). docs/protocol.md describes each.
//
// A node load runs in the background on the node: node.load starts it and
// answers at once; node.load_status follows it (waiting a bounded time for a
// change); node.commit publishes it; node.evict drops or cancels it. So no
// call holds a gRPC thread for longer than its bounded wait.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>
#include <nlohmann/json.hpp>

#include "icefloe/common/row_range.h"
#include "icefloe/iceberg/data_file.h"
#include "icefloe/protocol/actions.h"
#include "icefloe/protocol/copy_state.h"
#include "icefloe/protocol/descriptors.h"
#include "icefloe/protocol/fields.h"
#include "icefloe/protocol/replies.h"
#include "icefloe/protocol/transform_spec.h"

namespace icefloe {

/// Longest node.load_status wait a node grants.
inline constexpr uint64_t kMaxLoadWaitMs = 10'000;

// --- node -> head ---------------------------------------------------------

/// A dataset a node holds (in NodeStatus).
struct NodeDatasetInfo {
  std::string name;
  uint64_t generation = 0;
  int64_t rows = 0;
  int64_t bytes = 0;
  std::vector<RowRange> ranges;  ///< global rows held, sorted
  /// Of those, the rows on the node's disk tier (sorted; none: all in memory).
  std::vector<RowRange> disk_ranges;
  /// Streams and loads holding the copy now (a replaced copy is freed once
  /// none read it).
  int64_t readers = 0;
  /// The head's catalog record of this copy (head/core/catalog_record.h), kept by
  /// the node for a restarted head; null when the head has sent none. Opaque
  /// to the node; only checked to be an object here.
  nlohmann::json record;

  nlohmann::json ToJson() const;
};

/// A load on a node (in NodeStatus and as node.load / node.load_status reply).
/// Its counters (iceberg::LoadCounters) are filled in once staged, over its tasks.
struct NodeLoadState : iceberg::LoadCounters {
  std::string dataset;
  uint64_t generation = 0;
  /// queued, loading, staged (done, waiting for node.commit), failed, or
  /// absent (the node has no load of this generation).
  LoadState state = LoadState::kAbsent;
  int64_t tasks_total = 0;
  int64_t tasks_done = 0;
  int64_t rows = 0;
  std::string error;  ///< failed: why
  /// failed: what kind of error ("invalid", "not_found", "out_of_memory",
  /// "io", "cancelled" or "other"), so the head answers with the same kind.
  std::string error_kind;
  std::vector<int64_t> task_rows;  ///< staged: exact rows per task, request order
  int64_t bytes = 0;               ///< staged: bytes held
  int64_t bytes_read = 0;          ///< staged: data file bytes read from storage

  bool finished() const { return state != LoadState::kQueued && state != LoadState::kLoading; }
  /// Records `st` (not OK) as this load's error.
  void SetError(const arrow::Status& st);
  /// The failed load's error as a status of its kind, prefixed by `context`.
  arrow::Status ErrorStatus(const std::string& context) const;
  nlohmann::json ToJson() const;
  static arrow::Result<NodeLoadState> FromJson(const nlohmann::json& j, std::string what);
  static MessageSpec Spec();
};

/// Reply to node.status; also the status inside node.register.
struct NodeStatus {
  std::string location;
  int64_t memory_limit_bytes = 0;  ///< 0: unlimited
  int64_t memory_used_bytes = 0;
  /// Of memory_limit_bytes, the most a load fills with rows before it writes
  /// them to the disk tier (NodeServer::RowMemory: the node's rule, which the
  /// head's placement uses as is). Absent (a node of an earlier version):
  /// the whole limit.
  std::optional<int64_t> row_memory_bytes;
  std::vector<NodeDatasetInfo> datasets;
  std::vector<NodeLoadState> loads;
  uint64_t staged = 0;
  /// The highest generation the node has seen for any dataset: a head
  /// numbers its loads above it, whatever its clock says.
  uint64_t newest_generation = 0;
  /// The node's disk tier (--disk-dir, --disk-limit): its budget (0: none)
  /// and the bytes its tier files hold.
  int64_t disk_limit_bytes = 0;
  int64_t disk_used_bytes = 0;
  /// Its read-ahead (readahead.h), since start: tier bytes streams read
  /// from RAM and waited for the disk to read; now: the fewest batches a
  /// tracked stream has in RAM ahead of it (the wire's name keeps the
  /// public word prefetch).
  int64_t tier_ram_bytes = 0;
  int64_t tier_disk_bytes = 0;
  int64_t prefetch_lead_batches = 0;

  nlohmann::json ToJson() const;
  static arrow::Result<NodeStatus> FromJson(const nlohmann::json& j, std::string what);
  static arrow::Result<NodeStatus> Parse(std::string_view body);
  static MessageSpec Spec();
};

/// Action "node.register" (node -> head, signed): a node announcing itself.
struct RegisterRequest {
  std::string location;
  NodeStatus status;

  nlohmann::json ToJson() const;
  static arrow::Result<RegisterRequest> Parse(std::string_view body);
  static MessageSpec Spec();
};

// --- head -> node ---------------------------------------------------------

/// One scan task as a node needs it: what to read and in which order.
struct TaskSpec {
  int64_t index = 0;  ///< position in the dataset's task order
  iceberg::ScanTask task;
  /// Refresh: the task's rows are not read but taken (zero-copy) from the
  /// copy named by NodeLoadRequest::reuse_dataset, where they are the
  /// `reuse_rows` rows from global id `reuse_start`. -1: read the task.
  int64_t reuse_rows = -1;
  uint64_t reuse_start = 0;
  bool reused() const { return reuse_rows >= 0; }
};

/// Action "node.load": read scan tasks into staged batches (in the background).
struct NodeLoadRequest {
  std::string dataset;
  uint64_t generation = 0;
  nlohmann::json schema;     ///< Iceberg schema JSON (rows are read with it); checked on parse
  std::string name_mapping;  ///< the table's schema.name-mapping.default, or empty
  std::vector<int32_t> projection;
  std::string filter;
  int64_t batch_rows = kDefaultBatchRows;
  std::vector<TaskSpec> tasks;
  /// Heal: more rows of a generation the node may already hold (decision 1 of
  /// docs/protocol.md); the commit adds them to that copy instead of replacing it.
  bool extend = false;
  /// The load's transform (empty: none), parsed with the request, and the
  /// SHA-256 (hex) of each tokenize's model as the head read it, in column
  /// order: a node that reads other model bytes refuses to load.
  std::optional<TransformSpec> transform;
  std::vector<std::string> model_sha256;
  /// Refresh: the copy (storage name and generation) this node holds whose
  /// rows the reused tasks take; empty when no task is reused.
  std::string reuse_dataset;
  uint64_t reuse_generation = 0;

  nlohmann::json ToJson() const;
  static arrow::Result<NodeLoadRequest> FromJson(const nlohmann::json& j);
  static arrow::Result<NodeLoadRequest> Parse(std::string_view body);
  static MessageSpec Spec();
};

/// Action "node.load_status": the state of a load, after waiting up to
/// wait_ms for it to finish.
struct NodeLoadStatusRequest {
  std::string dataset;
  uint64_t generation = 0;
  uint64_t wait_ms = 0;

  nlohmann::json ToJson() const;
  static arrow::Result<NodeLoadStatusRequest> Parse(std::string_view body);
  static MessageSpec Spec();
};

/// Action "node.commit": global row id of each task's first row; publish.
struct NodeCommit {
  std::string dataset;
  uint64_t generation = 0;
  std::vector<uint64_t> task_starts;  ///< same order as the load request's tasks

  nlohmann::json ToJson() const;
  static arrow::Result<NodeCommit> Parse(std::string_view body);
  static MessageSpec Spec();
};

struct NodeCommitResult {
  int64_t rows = 0;
  int64_t bytes = 0;

  nlohmann::json ToJson() const;
  static arrow::Result<NodeCommitResult> Parse(std::string_view body);
  static MessageSpec Spec();
};

/// Action "node.evict": drop a dataset's copy, staged load or running load
/// (every generation when generation is 0).
struct NodeEvict {
  std::string dataset;
  uint64_t generation = 0;
  /// Heal clean-up: drop only a staged or running load, never the published copy.
  bool staged_only = false;
  /// Rows the head's slice map does not place on this node (a restarted
  /// node's adopted copy, a copy healed around): drop the published copy
  /// only, and leave the generation open to a later heal onto this node.
  bool stray = false;

  nlohmann::json ToJson() const;
  static arrow::Result<NodeEvict> Parse(std::string_view body);
  static MessageSpec Spec();
};

struct NodeEvictResult {
  bool evicted = false;
  int64_t bytes = 0;

  nlohmann::json ToJson() const;
  static arrow::Result<NodeEvictResult> Parse(std::string_view body);
  static MessageSpec Spec();
};

/// Action "node.record": keep `record` (the head's catalog record, an
/// object) with the copy of `dataset` at `generation`, replacing the one
/// kept before. Refused (NotFound) when the node holds no such copy.
struct NodeRecordRequest {
  std::string dataset;
  uint64_t generation = 0;
  nlohmann::json record;

  nlohmann::json ToJson() const;
  static arrow::Result<NodeRecordRequest> Parse(std::string_view body);
  static MessageSpec Spec();
};

/// Every message's field list (docs, the Python client, tests).
std::vector<MessageSpec> AllMessageSpecs();

/// Parses `body` as the message named `message` ("load", "describe", "evict", "refresh",
/// "descriptor", "node.register", "node.status reply", "node.load",
/// "node.load_status", "node.load_status reply", "node.commit", "node.commit
/// reply", "node.evict", "node.evict reply", and the head's replies: "dataset
/// description", "load progress", "evict reply", "slice_map reply", "ok
/// reply", "status reply", "slice"); for tests and the fuzzer.
arrow::Status ParseMessage(std::string_view message, std::string_view body);

}  // namespace icefloe
