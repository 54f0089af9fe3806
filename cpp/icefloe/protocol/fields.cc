#include "icefloe/protocol/fields.h"

#include <algorithm>

namespace icefloe {

using json = nlohmann::json;

namespace {

// Deepest nesting of [ and { outside strings; stops counting past `limit`.
int NestingDepth(std::string_view body, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

const FieldSpec kVersion = Uint("v", kOptional, Values(1, kProtocolVersion));

std::string Excerpt(const json& v) {
  std::string s = Dump(v);
  constexpr size_t kMax = 64;
  if (s.size() > kMax) s = s.substr(0, kMax) + "...";
  return s;
}

std::string Range(const Bounds& b) {
  if (b.max == std::numeric_limits<uint64_t>::max()) return "at least " + std::to_string(b.min);
  return std::to_string(b.min) + ".." + std::to_string(b.max);
}

bool InBounds(int64_t v, const Bounds& b) {
  return v >= b.min && (v < 0 || static_cast<uint64_t>(v) <= b.max);
}
bool InBounds(uint64_t v, const Bounds& b) {
  return (b.min <= 0 || v >= static_cast<uint64_t>(b.min)) && v <= b.max;
}

}  // namespace

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

arrow::Result<json> ParseJsonObject(std::string_view body, std::string_view what) {
  if (body.size() > kMaxBodyBytes) {
    return arrow::Status::Invalid(what, ": body of ", body.size(), " bytes is larger than ",
                                  kMaxBodyBytes);
  }
  if (NestingDepth(body, kMaxJsonDepth) > kMaxJsonDepth) {
    return arrow::Status::Invalid(what, ": JSON nested deeper than ", kMaxJsonDepth, " levels");
  }
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return arrow::Status::Invalid(what, ": body is not valid JSON");
  if (!j.is_object()) return arrow::Status::Invalid(what, ": body is not a JSON object");
  JsonFields in(j, std::string(what));
  ARROW_ASSIGN_OR_RAISE(const json* v, in.Find(kVersion));
  if (v != nullptr) {
    auto version = in.Uint(*v, kVersion);
    if (!version.ok()) {
      return arrow::Status::Invalid(what, ": 'v' is an unsupported version: ", Excerpt(*v),
                                    " (this server speaks 1..", kProtocolVersion, ")");
    }
  }
  return j;
}

std::string_view FieldTypeName(FieldType type) {
  switch (type) {
    case FieldType::kString:
      return "string";
    case FieldType::kInt:
      return "int";
    case FieldType::kUint:
      return "uint";
    case FieldType::kBool:
      return "bool";
    case FieldType::kNumber:
      return "number";
    case FieldType::kStringList:
      return "string_list";
    case FieldType::kIntList:
      return "int_list";
    case FieldType::kUintList:
      return "uint_list";
    case FieldType::kObject:
      return "object";
    case FieldType::kList:
      return "object_list";
  }
  return "unknown";
}

json SpecToJson(const MessageSpec& spec) {
  json fields = json::array();
  for (const FieldSpec& f : spec.fields) {
    json j = {{"name", f.name}, {"type", FieldTypeName(f.type)}, {"required", f.required}};
    if (f.type != FieldType::kBool && f.type != FieldType::kObject && f.type != FieldType::kList) {
      j["min"] = f.value.min;
      j["max"] = f.value.max;
    }
    if (f.type == FieldType::kStringList || f.type == FieldType::kIntList ||
        f.type == FieldType::kUintList || f.type == FieldType::kList) {
      j["min_items"] = f.count.min;
      j["max_items"] = f.count.max;
    }
    if (!f.choices.empty()) {
      json choices = json::array();
      for (auto c : f.choices) choices.push_back(c);
      j["choices"] = choices;
    }
    if (!f.message.empty()) j["message"] = f.message;
    fields.push_back(std::move(j));
  }
  return {{"message", spec.name}, {"fields", fields}};
}

arrow::Status JsonFields::Bad(const FieldSpec& spec, std::string_view rule, const json& got,
                              std::optional<size_t> index) const {
  std::string field = "'" + std::string(spec.name) + "'";
  if (index) field += "[" + std::to_string(*index) + "]";
  return arrow::Status::Invalid(what_, ": ", field, " must be ", rule, "; got ", Excerpt(got));
}

arrow::Result<const json*> JsonFields::Find(const FieldSpec& spec) const {
  if (object_.is_object()) {
    auto it = object_.find(spec.name);
    if (it != object_.end()) return &*it;  // null included: it is no value of any field
  }
  if (spec.required) return arrow::Status::Invalid(what_, ": missing '", spec.name, "'");
  return nullptr;
}

arrow::Status JsonFields::CheckString(const std::string& s, const FieldSpec& spec, const json& v,
                                      std::optional<size_t> index) const {
  if (!InBounds(static_cast<uint64_t>(s.size()), spec.value)) {
    return Bad(spec, "a string of " + Range(spec.value) + " bytes", v, index);
  }
  if (!spec.choices.empty() &&
      std::find(spec.choices.begin(), spec.choices.end(), s) == spec.choices.end()) {
    std::string rule = "one of";
    for (size_t i = 0; i < spec.choices.size(); ++i) {
      rule += (i ? ", \"" : " \"") + std::string(spec.choices[i]) + "\"";
    }
    return Bad(spec, rule, v, index);
  }
  return arrow::Status::OK();
}

arrow::Result<std::string> JsonFields::String(const json& v, const FieldSpec& spec,
                                              std::optional<size_t> index) const {
  const std::string* s = v.get_ptr<const std::string*>();
  if (s == nullptr) return Bad(spec, "a string", v, index);
  ARROW_RETURN_NOT_OK(CheckString(*s, spec, v, index));
  return *s;
}

arrow::Result<int64_t> JsonFields::Int(const json& v, const FieldSpec& spec,
                                       std::optional<size_t> index) const {
  const std::string rule = "an integer in " + Range(spec.value);
  if (const auto* u = v.get_ptr<const json::number_unsigned_t*>()) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        !InBounds(static_cast<int64_t>(*u), spec.value)) {
      return Bad(spec, rule, v, index);
    }
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = v.get_ptr<const json::number_integer_t*>()) {
    if (!InBounds(static_cast<int64_t>(*i), spec.value)) return Bad(spec, rule, v, index);
    return static_cast<int64_t>(*i);
  }
  return Bad(spec, rule, v, index);
}

arrow::Result<uint64_t> JsonFields::Uint(const json& v, const FieldSpec& spec,
                                         std::optional<size_t> index) const {
  const std::string rule = "an integer in " + Range(spec.value);
  if (const auto* u = v.get_ptr<const json::number_unsigned_t*>()) {
    if (!InBounds(static_cast<uint64_t>(*u), spec.value)) return Bad(spec, rule, v, index);
    return static_cast<uint64_t>(*u);
  }
  if (const auto* i = v.get_ptr<const json::number_integer_t*>()) {
    if (*i < 0 || !InBounds(static_cast<uint64_t>(*i), spec.value)) {
      return Bad(spec, rule, v, index);
    }
    return static_cast<uint64_t>(*i);
  }
  return Bad(spec, rule, v, index);
}

arrow::Result<bool> JsonFields::Bool(const json& v, const FieldSpec& spec) const {
  const bool* b = v.get_ptr<const bool*>();
  if (b == nullptr) return Bad(spec, "true or false", v);
  return *b;
}

arrow::Result<double> JsonFields::Number(const json& v, const FieldSpec& spec) const {
  if (!v.is_number()) return Bad(spec, "a number in " + Range(spec.value), v);
  const double x = v.get<double>();
  if (!(x >= static_cast<double>(spec.value.min) && x <= static_cast<double>(spec.value.max))) {
    return Bad(spec, "a number in " + Range(spec.value), v);
  }
  return x;
}

arrow::Result<const json*> JsonFields::List(const json& v, const FieldSpec& spec) const {
  if (!v.is_array()) return Bad(spec, "a list", v);
  if (!InBounds(static_cast<uint64_t>(v.size()), spec.count)) {
    return arrow::Status::Invalid(what_, ": '", spec.name, "' must have ", Range(spec.count),
                                  " items; got ", v.size());
  }
  return &v;
}

arrow::Result<const json*> JsonFields::Object(const json& v, const FieldSpec& spec) const {
  if (!v.is_object()) return Bad(spec, "an object", v);
  return &v;
}

}  // namespace icefloe
