// CopyKey: the identity of a cached copy. Loads with equal keys share one
// copy (under one name or several); a load whose key differs from the name's
// copy only in snapshot refreshes it (unchanged files keep their rows,
// refresh.h). A transform counts with the content of its models, not only
// their locations.
//
// The key travels as JSON text in the catalog records nodes keep for a head
// restart (catalog_record.h); ToText and FromText are that text, unchanged
// from the heads that compared it as text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>
#include <nlohmann/json.hpp>

#include "icefloe/iceberg/scan.h"
#include "icefloe/protocol/actions.h"

namespace icefloe {

struct CopyKey {
  std::string table;                ///< the table's UUID, or its metadata location without one
  std::optional<int64_t> snapshot;  ///< empty: the table has no snapshot
  std::vector<int32_t> projection;  ///< top-level field ids, in output order
  std::string filter;               ///< as the load gave it; empty: all rows
  int64_t batch_rows = 0;
  int32_t replication = 0;
  /// The load's TransformSpec::ToJson: as the load gave it; null: none.
  nlohmann::json transform;
  std::vector<std::string> model_sha256;  ///< with a transform: each tokenize model's SHA-256

  /// The key of a load of `request` planned as `plan`, with its transform's
  /// models as read (`model_sha256`).
  static CopyKey Of(const iceberg::ScanPlan& plan, const LoadRequest& request,
                    const std::vector<std::string>& model_sha256);

  bool operator==(const CopyKey& other) const = default;
  /// Whether both keys name copies of one table that differ at most in snapshot.
  bool SameButSnapshot(const CopyKey& other) const;

  /// The key as a JSON object: table, snapshot (-1: none), projection,
  /// filter, batch_rows, replication, and with a transform, transform and models.
  nlohmann::json ToJson() const;
  /// ToJson's text.
  std::string ToText() const;
  /// Parses ToText's text; Invalid naming the field (`what` names the key's
  /// place, e.g. "catalog record 'key'").
  static arrow::Result<CopyKey> FromText(std::string_view text, std::string_view what);
};

}  // namespace icefloe
