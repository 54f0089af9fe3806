// Actions a client sends the head (DoAction bodies), docs/protocol.md.
//
// Each message parses from and serializes to a JSON object through one field
// table (fields.h); Parse errors are Invalid naming the message and field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <nlohmann/json.hpp>

#include "icefloe/protocol/fields.h"
#include "icefloe/protocol/transform_spec.h"

namespace icefloe {

inline constexpr int64_t kDefaultBatchRows = 64 * 1024;
inline constexpr int64_t kMaxBatchRows = int64_t{1} << 24;

/// Action "load": cache an Iceberg table as dataset `name`.
struct LoadRequest {
  std::string name;    ///< letters, digits and - _ . /; 1..200 bytes
  std::string source;  ///< metadata.json location or table directory
  std::optional<int64_t> snapshot_id;
  std::optional<std::string> ref;
  std::optional<int64_t> as_of_ms;
  std::vector<std::string> columns;  ///< empty: all columns
  std::string filter;                ///< empty: all rows
  int64_t batch_rows = kDefaultBatchRows;
  int32_t replication = 1;
  /// The transform (docs/transforms.md), parsed with the request; empty:
  /// the table's columns as they are.
  std::optional<TransformSpec> transform;

  bool operator==(const LoadRequest&) const = default;
  nlohmann::json ToJson() const;
  static arrow::Result<LoadRequest> FromJson(const nlohmann::json& j);
  /// A client's load body: FromJson, and a transform naming a field its
  /// spec does not know is refused (TransformSpec::CheckKnownFields).
  static arrow::Result<LoadRequest> Parse(std::string_view body);
  static MessageSpec Spec();
};

/// Actions "describe", "evict" and "refresh": one dataset by name.
struct NameRequest {
  std::string name;

  nlohmann::json ToJson() const;
  /// `action` names the message in errors.
  static arrow::Result<NameRequest> Parse(std::string_view body, std::string_view action);
  static MessageSpec Spec(std::string_view action);
};

/// The `slice_map` action: a dataset's slices and a read grant, for the
/// columns asked for (none: every column; the grant then names no projection),
/// of the copy at `generation` (empty: the current one; a replaced copy while
/// the head keeps it for its readers, docs/protocol.md "Refresh").
struct SliceMapRequest {
  std::string name;
  std::vector<std::string> columns;
  std::optional<uint64_t> generation;

  nlohmann::json ToJson() const;
  static arrow::Result<SliceMapRequest> Parse(std::string_view body);
  static MessageSpec Spec();
};

/// The dataset-name rule of `load` (also for names nodes store data under).
arrow::Status CheckDatasetName(std::string_view name, std::string_view what);

}  // namespace icefloe
