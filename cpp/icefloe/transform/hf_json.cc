#include "icefloe/transform/hf_json.h"

#include <cstdint>

namespace icefloe::transform::hf {

arrow::Result<JsonObject> JsonObject::Of(const Json& j, std::string path) {
  if (!j.is_object()) return Refuse(path, "must be an object, got ", j.type_name());
  return JsonObject(j, std::move(path));
}

const Json* JsonObject::Find(const std::string& field) {
  seen_.insert(field);
  auto it = j_->find(field);
  if (it == j_->end() || it->is_null()) return nullptr;
  return &*it;
}

arrow::Result<std::string> JsonObject::String(const std::string& field) {
  const Json* v = Find(field);
  if (v == nullptr) return Refuse(PathOf(field), "missing (a string is needed)");
  if (!v->is_string()) return Refuse(PathOf(field), "must be a string, got ", v->type_name());
  return v->get<std::string>();
}

arrow::Result<bool> JsonObject::Bool(const std::string& field, bool absent) {
  const Json* v = Find(field);
  if (v == nullptr) return absent;
  if (!v->is_boolean()) return Refuse(PathOf(field), "must be true or false, got ", v->dump());
  return v->get<bool>();
}

arrow::Result<std::optional<bool>> JsonObject::OptionalBool(const std::string& field) {
  const Json* v = Find(field);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return Refuse(PathOf(field), "must be true, false or null");
  return std::optional<bool>(v->get<bool>());
}

arrow::Result<int64_t> JsonObject::Int(const std::string& field, int64_t min, int64_t max,
                                       std::optional<int64_t> absent) {
  const Json* v = Find(field);
  if (v == nullptr) {
    if (absent) return *absent;
    return Refuse(PathOf(field), "missing (an integer is needed)");
  }
  if (!v->is_number_integer()) return Refuse(PathOf(field), "must be an integer, got ", v->dump());
  const bool huge =
      v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
  if (huge || v->get<int64_t>() < min || v->get<int64_t>() > max) {
    return Refuse(PathOf(field), v->dump(), " is out of range [", min, ", ", max, "]");
  }
  return v->get<int64_t>();
}

arrow::Status JsonObject::Require(std::initializer_list<const char*> fields) const {
  for (const char* field : fields) {
    const auto it = j_->find(field);
    if (it == j_->end() || it->is_null()) {
      return Refuse(PathOf(field), "missing (the tokenizers library needs it)");
    }
  }
  return arrow::Status::OK();
}

arrow::Status JsonObject::Done() const {
  for (const auto& [key, value] : j_->items()) {
    if (!seen_.count(key)) return Refuse(PathOf(key), "option not supported");
  }
  return arrow::Status::OK();
}

arrow::Result<std::string> TypeOf(JsonObject* o) { return o->String("type"); }

std::optional<size_t> NestedDeeperThan(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, a quote among them
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) return i;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return std::nullopt;
}

}  // namespace icefloe::transform::hf
