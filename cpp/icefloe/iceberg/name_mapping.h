// Name mapping: field ids for data files written without them.
//
// Files that were not written by an Iceberg writer (Hive tables migrated in
// place, Parquet registered with `add_files`) carry no Parquet field ids. The
// table property `schema.name-mapping.default` (spec: "Column Projection")
// maps the names such files use to field ids: a JSON list of
// {"field-id": N, "names": [...], "fields": [...]}, nested for structs, lists
// ("element") and maps ("key", "value"). A file column whose name is not in
// the mapping has no id and is not read; several names may map to one id (a
// column renamed after the files were written).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>

namespace icefloe::iceberg {

/// The table property that holds the mapping.
inline constexpr std::string_view kNameMappingProperty = "schema.name-mapping.default";

/// One entry of a name mapping, with the entries of its nested fields.
struct MappedField {
  std::optional<int32_t> field_id;  ///< absent: the names map to no field
  std::vector<std::string> names;
  std::vector<MappedField> fields;
};

/// A parsed name mapping: the top-level entries.
struct NameMapping {
  std::vector<MappedField> fields;

  /// The entry among `level` that lists `name` (exact, case-sensitive), or nullptr.
  static const MappedField* Find(const std::vector<MappedField>& level, std::string_view name);
};

/// Parses the property's JSON text. Invalid naming the property and the
/// problem (not a list, an entry without "names", a non-integer "field-id").
arrow::Result<NameMapping> ParseNameMapping(std::string_view json_text);

}  // namespace icefloe::iceberg
