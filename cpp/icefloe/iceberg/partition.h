// Partition specs and transforms.
//
// A partition spec derives each partition value from one source column with a
// transform (identity, bucket[N], truncate[W], year, month, day, hour, void).
// Manifests store those values per data file; the scan planner applies the
// same transforms to filter constants to prune files, so `Transform::Apply`
// must agree bit for bit with Iceberg Java and pyiceberg (bucket hashes follow
// the spec's appendix B; time transforms count whole units since 1970-01-01,
// rounding down for earlier instants).
//
// Everything here is pure: no I/O, no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>
#include <nlohmann/json_fwd.hpp>

#include "icefloe/iceberg/types.h"

namespace icefloe::iceberg {

/// A parsed partition transform.
struct Transform {
  enum Kind { kIdentity, kBucket, kTruncate, kYear, kMonth, kDay, kHour, kVoid };

  Kind kind = kIdentity;
  int32_t param = 0;  ///< N for bucket[N], W for truncate[W]; 0 otherwise.

  /// Iceberg's spelling: "identity", "bucket[16]", "truncate[4]", "day", ...
  std::string ToString() const;

  /// The type of the partition values this transform produces from `source`:
  /// identity, truncate and void keep the source type; bucket, year, month and
  /// hour give int; day gives date. Invalid when the transform does not accept
  /// the source type (e.g. bucket of a double, hour of a date).
  arrow::Result<TypePtr> ResultType(const Type& source) const;

  /// Applies the transform to a literal of its source type (`value.type`).
  /// Null in, null out; void always gives null. Invalid for a source type the
  /// transform does not accept.
  arrow::Result<Literal> Apply(const Literal& value) const;

  bool operator==(const Transform& other) const = default;
};

/// Parses a transform name. Invalid for a malformed parameter (bucket[0]),
/// NotImplemented for an unknown transform, naming it either way.
arrow::Result<Transform> ParseTransform(std::string_view text);

/// One field of a partition spec.
struct PartitionField {
  int32_t source_id = 0;  ///< the schema field the value is derived from
  int32_t field_id = 0;   ///< the partition field's own id (1000 and up)
  std::string name;
  Transform transform;
};

/// A partition spec: the ordered fields of the partition tuple.
struct PartitionSpec {
  int32_t spec_id = 0;
  std::vector<PartitionField> fields;

  /// True when no field produces a value (no fields, or only void ones).
  bool is_unpartitioned() const;

  /// The partition tuple's fields (optional, typed by each transform's
  /// ResultType) for data written with `schema`. KeyError when a source column
  /// is missing from it.
  arrow::Result<std::vector<NestedField>> PartitionType(const Schema& schema) const;
};

/// Parses a partition spec from metadata.json: an object {"spec-id", "fields"}
/// or, as v1 `partition-spec` and manifest metadata write it, a bare list of
/// fields. Fields without a "field-id" (v1) get 1000, 1001, ... in order.
arrow::Result<PartitionSpec> ParsePartitionSpec(const nlohmann::json& json);

/// Murmur3 x86 32-bit hash (seed 0) of `bytes`, as a signed Java int.
int32_t Murmur3Hash32(std::string_view bytes);

/// The 32-bit hash that Iceberg's bucket transform takes of a literal (spec
/// appendix B): int/long/date/time/timestamp* as an 8-byte little-endian long
/// (nanosecond timestamps first floored to microseconds), string as UTF-8,
/// binary/fixed/uuid as their bytes, decimal as the minimal big-endian two's
/// complement of the unscaled value. Invalid for boolean, float, double, null.
arrow::Result<int32_t> BucketHash(const Literal& value);

}  // namespace icefloe::iceberg
