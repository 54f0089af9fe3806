// Replies the head sends for client actions (docs/protocol.md, "Replies"),
// typed like the requests they answer (actions.h): each is a struct with one
// field table that writes it (ToJson), reads it back (Parse, Invalid naming
// the reply and field) and describes it (Spec, so the Python client checks
// every reply it decodes against the same list).
//
// Parts whose schema is large or owned elsewhere (a description's scan
// metrics and file runs, status's nodes, loads and jobs) are objects here:
// checked to be objects (or lists of them), not field by field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>
#include <nlohmann/json.hpp>

#include "icefloe/protocol/actions.h"
#include "icefloe/protocol/fields.h"

namespace icefloe {

/// One run of global rows `[start, stop)` and the nodes holding it (primary
/// first): an item of the describe and slice_map replies' `slices`.
struct ReplySlice {
  uint64_t start = 0;
  uint64_t stop = 0;
  std::vector<std::string> nodes;

  bool operator==(const ReplySlice&) const = default;
  nlohmann::json ToJson() const;
  static arrow::Result<ReplySlice> FromJson(const nlohmann::json& j, std::string what);
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
  nlohmann::json scan = nlohmann::json::object();  ///< the scan's metrics
  /// The load's transform; null: none (then `model_sha256` is not written).
  nlohmann::json transform;
  std::vector<std::string> model_sha256;
  std::optional<std::string> schema;       ///< base64 Arrow IPC of the cached columns
  std::optional<std::string> schema_text;  ///< the same, as text
  std::optional<std::string> error;
  nlohmann::json refresh;  ///< a refresh's diff (an object); null after a full load
  int64_t slices_missing = 0;
  int64_t replicas_missing = 0;
  std::optional<double> heal_seconds;
  std::optional<std::string> heal_error;
  /// describe: each data file's rows, {path, start, rows}; null: not sent.
  nlohmann::json files;
  /// describe: the slice map; absent: not sent.
  std::optional<std::vector<ReplySlice>> slices;
  /// status: how many slices each node holds, {location: count}; null: not sent.
  nlohmann::json slices_per_node;

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

/// Reply to "status" (also the status page's and /status's data).
struct StatusReply {
  nlohmann::json nodes = nlohmann::json::array();  ///< one object per node
  std::vector<DatasetDescription> datasets;        ///< with slices_per_node
  nlohmann::json retired = nlohmann::json::array();
  std::vector<LoadProgressReply> loads;
  nlohmann::json recent_loads = nlohmann::json::array();
  nlohmann::json jobs = nlohmann::json::array();
  bool ready = false;
  std::string reason;  ///< why not ready; empty when ready
  bool recovering = false;
  nlohmann::json follow = nlohmann::json::object();  ///< {period_s, datasets}
  std::string default_dataset;

  nlohmann::json ToJson() const;
  static arrow::Result<StatusReply> Parse(std::string_view body);
  static MessageSpec Spec();
};

}  // namespace icefloe
