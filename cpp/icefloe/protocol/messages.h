// The JSON bodies of icefloe's Flight actions and CMD descriptors.
//
// Every body is a JSON object with a "v" (version) field; unknown fields are
// ignored and missing optional ones take defaults, so old clients keep working.
// Decoders return Invalid naming the offending field. See docs/protocol.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>
#include <nlohmann/json.hpp>

#include "icefloe/iceberg/data_file.h"

namespace icefloe {

inline constexpr int kProtocolVersion = 1;
inline constexpr int64_t kDefaultBatchRows = 64 * 1024;

/// Parses a JSON object body, checking "v". Invalid naming `what` otherwise.
arrow::Result<nlohmann::json> ParseBody(std::string_view body, std::string_view what);

// --- client -> head -------------------------------------------------------

/// Action "load".
struct LoadRequest {
  std::string name;
  std::string source;  ///< metadata.json location or table directory
  std::optional<int64_t> snapshot_id;
  std::optional<std::string> ref;
  std::optional<int64_t> as_of_ms;
  std::vector<std::string> columns;
  std::string filter;
  int64_t batch_rows = kDefaultBatchRows;
  int32_t replication = 1;

  nlohmann::json ToJson() const;
  static arrow::Result<LoadRequest> FromJson(const nlohmann::json& j);
};

/// GetFlightInfo CMD descriptor {"v":1,"kind":"range","dataset":..,"start":..,"stop":..}.
struct RangeCommand {
  std::string dataset;
  uint64_t start = 0;
  std::optional<uint64_t> stop;  ///< empty = to the end
};
arrow::Result<RangeCommand> ParseRangeCommand(const nlohmann::json& j);

// --- head -> node ---------------------------------------------------------

/// One scan task as a node needs it: what to read and in which order.
struct TaskSpec {
  int64_t index = 0;  ///< position in the dataset's task order
  iceberg::ScanTask task;
};

/// Action "node.load": phase one of a load. The node reads its tasks into
/// staged batches and answers with exact row counts per task.
struct NodeLoadRequest {
  std::string dataset;
  uint64_t generation = 0;
  nlohmann::json schema;     ///< Iceberg schema JSON (rows are read with it)
  std::string name_mapping;  ///< the table's schema.name-mapping.default, or empty
  std::vector<int32_t> projection;
  std::string filter;
  int64_t batch_rows = kDefaultBatchRows;
  std::vector<TaskSpec> tasks;

  nlohmann::json ToJson() const;
  static arrow::Result<NodeLoadRequest> FromJson(const nlohmann::json& j);
};

struct NodeLoadResult {
  std::vector<int64_t> task_rows;  ///< exact rows per task, same order as the request
  int64_t bytes = 0;
};

/// Action "node.commit": phase two. Global row id of each task's first row.
struct NodeCommit {
  std::string dataset;
  uint64_t generation = 0;
  std::vector<uint64_t> task_starts;  ///< same order as the load request's tasks
};

/// Action "node.evict": drop a dataset (all generations when generation is 0).
struct NodeEvict {
  std::string dataset;
  uint64_t generation = 0;
};

nlohmann::json DataFileToJson(const iceberg::DataFile& file);
arrow::Result<iceberg::DataFile> DataFileFromJson(const nlohmann::json& j);

}  // namespace icefloe
