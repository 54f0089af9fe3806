#include "icefloe/iceberg/name_mapping.h"

#include <limits>

#include <nlohmann/json.hpp>

namespace icefloe::iceberg {

namespace {

using json = nlohmann::json;

arrow::Status Bad(const std::string& path, std::string_view why) {
  return arrow::Status::Invalid(kNameMappingProperty, ": ", path.empty() ? "" : path + ": ", why);
}

arrow::Result<std::vector<MappedField>> ParseLevel(const json& list, const std::string& path,
                                                   int depth) {
  // Schemas nest far less; the bound keeps hostile input from exhausting the stack.
  if (depth > 64) return Bad(path, "nested more than 64 levels");
  if (!list.is_array()) return Bad(path, "is not a JSON list");
  std::vector<MappedField> out;
  for (const json& entry : list) {
    if (!entry.is_object()) return Bad(path, "an entry is not a JSON object");
    MappedField field;
    auto names = entry.find("names");
    if (names == entry.end() || !names->is_array())
      return Bad(path, "an entry has no 'names' list");
    for (const json& name : *names) {
      if (!name.is_string()) return Bad(path, "a name is not a string");
      field.names.push_back(name.get<std::string>());
    }
    const std::string here =
        path + (path.empty() ? "" : ".") + (field.names.empty() ? "?" : field.names.front());
    auto id = entry.find("field-id");
    if (id != entry.end() && !id->is_null()) {
      if (!id->is_number_integer() || id->get<int64_t>() < 0 ||
          id->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return Bad(here, "'field-id' is not a field id");
      }
      field.field_id = id->get<int32_t>();
    }
    auto fields = entry.find("fields");
    if (fields != entry.end() && !fields->is_null()) {
      ARROW_ASSIGN_OR_RAISE(field.fields, ParseLevel(*fields, here, depth + 1));
    }
    out.push_back(std::move(field));
  }
  return out;
}

}  // namespace

const MappedField* NameMapping::Find(const std::vector<MappedField>& level, std::string_view name) {
  for (const auto& field : level) {
    for (const auto& n : field.names) {
      if (n == name) return &field;
    }
  }
  return nullptr;
}

arrow::Result<NameMapping> ParseNameMapping(std::string_view json_text) {
  json parsed = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Bad("", "is not valid JSON");
  NameMapping mapping;
  ARROW_ASSIGN_OR_RAISE(mapping.fields, ParseLevel(parsed, "", 0));
  return mapping;
}

}  // namespace icefloe::iceberg
