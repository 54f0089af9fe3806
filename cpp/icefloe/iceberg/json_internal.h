// Checked accessors for metadata.json objects, shared by the metadata and
// partition parsers. Each names the field and the object it belongs to
// (`what`, e.g. "snapshot 42") in its Invalid status, and never throws.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <arrow/result.h>
#include <arrow/status.h>
#include <nlohmann/json.hpp>

namespace icefloe::iceberg::internal {

/// The member `key` of `obj`, or nullptr when it is absent or JSON null.
inline const nlohmann::json* FindMember(const nlohmann::json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

/// The member `key` of `obj`; Invalid naming it when absent.
inline arrow::Result<const nlohmann::json*> RequiredMember(const nlohmann::json& obj,
                                                           std::string_view key,
                                                           std::string_view what) {
  const nlohmann::json* v = FindMember(obj, key);
  if (v == nullptr) {
    return arrow::Status::Invalid(what, ": missing required field '", key, "'");
  }
  return v;
}

inline arrow::Result<int64_t> AsInt64(const nlohmann::json& v, std::string_view key,
                                      std::string_view what) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() &&
        v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return arrow::Status::Invalid(what, ": field '", key, "' is out of range: ", v.dump());
    }
    return v.get<int64_t>();
  }
  return arrow::Status::Invalid(what, ": field '", key, "' is not an integer: ", v.dump());
}

inline arrow::Result<int32_t> AsInt32(const nlohmann::json& v, std::string_view key,
                                      std::string_view what) {
  ARROW_ASSIGN_OR_RAISE(int64_t x, AsInt64(v, key, what));
  if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max()) {
    return arrow::Status::Invalid(what, ": field '", key, "' is out of range: ", x);
  }
  return static_cast<int32_t>(x);
}

inline arrow::Result<std::string> AsString(const nlohmann::json& v, std::string_view key,
                                           std::string_view what) {
  if (!v.is_string()) {
    return arrow::Status::Invalid(what, ": field '", key, "' is not a string: ", v.dump());
  }
  return v.get<std::string>();
}

inline arrow::Result<int64_t> RequiredInt64(const nlohmann::json& obj, std::string_view key,
                                            std::string_view what) {
  ARROW_ASSIGN_OR_RAISE(const nlohmann::json* v, RequiredMember(obj, key, what));
  return AsInt64(*v, key, what);
}

inline arrow::Result<int32_t> RequiredInt32(const nlohmann::json& obj, std::string_view key,
                                            std::string_view what) {
  ARROW_ASSIGN_OR_RAISE(const nlohmann::json* v, RequiredMember(obj, key, what));
  return AsInt32(*v, key, what);
}

inline arrow::Result<std::string> RequiredString(const nlohmann::json& obj, std::string_view key,
                                                 std::string_view what) {
  ARROW_ASSIGN_OR_RAISE(const nlohmann::json* v, RequiredMember(obj, key, what));
  return AsString(*v, key, what);
}

inline arrow::Result<std::optional<int64_t>> OptionalInt64(const nlohmann::json& obj,
                                                           std::string_view key,
                                                           std::string_view what) {
  const nlohmann::json* v = FindMember(obj, key);
  if (v == nullptr) return std::nullopt;
  ARROW_ASSIGN_OR_RAISE(int64_t x, AsInt64(*v, key, what));
  return x;
}

inline arrow::Result<std::optional<int32_t>> OptionalInt32(const nlohmann::json& obj,
                                                           std::string_view key,
                                                           std::string_view what) {
  const nlohmann::json* v = FindMember(obj, key);
  if (v == nullptr) return std::nullopt;
  ARROW_ASSIGN_OR_RAISE(int32_t x, AsInt32(*v, key, what));
  return x;
}

/// A JSON object of strings as a map. Non-string values are kept as their JSON
/// text rather than rejected: summaries and properties are informational.
inline arrow::Result<std::map<std::string, std::string>> StringMap(const nlohmann::json& v,
                                                                   std::string_view key,
                                                                   std::string_view what) {
  if (!v.is_object()) {
    return arrow::Status::Invalid(what, ": field '", key, "' is not an object");
  }
  std::map<std::string, std::string> out;
  for (auto it = v.begin(); it != v.end(); ++it) {
    out[it.key()] = it->is_string() ? it->get<std::string>() : it->dump();
  }
  return out;
}

}  // namespace icefloe::iceberg::internal
