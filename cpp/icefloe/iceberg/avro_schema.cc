// Avro schema JSON -> AvroSchema tree.
#include <algorithm>
#include <limits>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "icefloe/iceberg/avro.h"

namespace icefloe::iceberg {

std::string_view AvroTypeName(AvroType type) {
  switch (type) {
    case AvroType::kNull:
      return "null";
    case AvroType::kBoolean:
      return "boolean";
    case AvroType::kInt:
      return "int";
    case AvroType::kLong:
      return "long";
    case AvroType::kFloat:
      return "float";
    case AvroType::kDouble:
      return "double";
    case AvroType::kBytes:
      return "bytes";
    case AvroType::kString:
      return "string";
    case AvroType::kFixed:
      return "fixed";
    case AvroType::kEnum:
      return "enum";
    case AvroType::kArray:
      return "array";
    case AvroType::kMap:
      return "map";
    case AvroType::kRecord:
      return "record";
    case AvroType::kUnion:
      return "union";
  }
  return "unknown";
}

int AvroSchema::FieldIndex(int32_t field_id) const {
  for (size_t i = 0; i < fields.size(); ++i) {
    if (fields[i].field_id == field_id) return static_cast<int>(i);
  }
  return -1;
}

int AvroSchema::FieldIndex(std::string_view name) const {
  for (size_t i = 0; i < fields.size(); ++i) {
    if (fields[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int AvroSchema::NullableBranch() const {
  if (type != AvroType::kUnion || branches.size() != 2) return -1;
  const bool null0 = branches[0]->type == AvroType::kNull;
  const bool null1 = branches[1]->type == AvroType::kNull;
  if (null0 == null1) return -1;
  return null0 ? 1 : 0;
}

namespace {

using json = nlohmann::json;
using SchemaPtr = std::shared_ptr<const AvroSchema>;

std::optional<AvroType> PrimitiveType(std::string_view name) {
  static const std::pair<std::string_view, AvroType> kPrimitives[] = {
      {"null", AvroType::kNull},   {"boolean", AvroType::kBoolean}, {"int", AvroType::kInt},
      {"long", AvroType::kLong},   {"float", AvroType::kFloat},     {"double", AvroType::kDouble},
      {"bytes", AvroType::kBytes}, {"string", AvroType::kString},
  };
  for (const auto& [n, t] : kPrimitives) {
    if (n == name) return t;
  }
  return std::nullopt;
}

int64_t PrimitiveMinBytes(AvroType type) {
  switch (type) {
    case AvroType::kNull:
      return 0;
    case AvroType::kFloat:
      return 4;
    case AvroType::kDouble:
      return 8;
    default:
      return 1;  // boolean byte, varint, or a length varint
  }
}

// JSON text for error messages, cut short.
std::string Snippet(const json& j) {
  std::string text = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() <= 80 ? text : text.substr(0, 77) + "...";
}

// Attributes with a meaning of their own; the rest go to AvroSchema::attributes.
bool IsReservedAttribute(std::string_view key) {
  static const std::set<std::string_view> kReserved = {
      "type",    "name", "namespace", "fields",      "symbols",    "items",  "values",  "size",
      "aliases", "doc",  "default",   "logicalType", "element-id", "key-id", "value-id"};
  return kReserved.count(key) != 0;
}

class SchemaParser {
 public:
  arrow::Result<SchemaPtr> Parse(const json& j, const std::string& ns, int depth) {
    if (depth > kMaxAvroSchemaDepth) {
      return Error("schema nested deeper than ", kMaxAvroSchemaDepth, " levels");
    }
    if (j.is_string()) return ParseName(j.get_ref<const std::string&>(), ns);
    if (j.is_array()) return ParseUnion(j, ns, depth);
    if (!j.is_object())
      return Error("a schema must be a string, array or object, got ", Snippet(j));
    auto type_it = j.find("type");
    if (type_it == j.end()) return Error("schema object without \"type\"");
    if (!type_it->is_string()) {
      // {"type": {...}} or {"type": [...]}: the attributes of the wrapper are not kept.
      return Parse(*type_it, ns, depth + 1);
    }
    const std::string& type = type_it->get_ref<const std::string&>();
    std::shared_ptr<AvroSchema> node;
    if (auto primitive = PrimitiveType(type)) {
      node = std::make_shared<AvroSchema>();
      node->type = *primitive;
      node->min_encoded_bytes = PrimitiveMinBytes(*primitive);
    } else if (type == "record" || type == "error") {
      ARROW_ASSIGN_OR_RAISE(node, ParseRecord(j, ns, depth));
    } else if (type == "enum") {
      ARROW_ASSIGN_OR_RAISE(node, ParseEnum(j, ns));
    } else if (type == "fixed") {
      ARROW_ASSIGN_OR_RAISE(node, ParseFixed(j, ns));
    } else if (type == "array") {
      ARROW_ASSIGN_OR_RAISE(node, ParseArray(j, ns, depth));
    } else if (type == "map") {
      ARROW_ASSIGN_OR_RAISE(node, ParseMap(j, ns, depth));
    } else {
      return ParseName(type, ns);  // {"type": "SomeRecord"}: a reference
    }
    ARROW_RETURN_NOT_OK(ParseAttributes(j, node.get()));
    return node;
  }

 private:
  template <typename... Args>
  static arrow::Status Error(Args&&... args) {
    return arrow::Status::Invalid("invalid Avro schema: ", std::forward<Args>(args)...);
  }

  arrow::Result<SchemaPtr> ParseName(const std::string& name, const std::string& ns) {
    if (auto primitive = PrimitiveType(name)) {
      auto node = std::make_shared<AvroSchema>();
      node->type = *primitive;
      node->min_encoded_bytes = PrimitiveMinBytes(*primitive);
      return node;
    }
    const std::string full = FullName(name, ns);
    for (const std::string* candidate : {&full, &name}) {
      auto it = named_.find(*candidate);
      if (it != named_.end()) return it->second;
      if (in_progress_.count(*candidate)) {
        return Error("recursive type '", *candidate, "' is not supported");
      }
    }
    return Error("unknown type name '", name, "'");
  }

  static std::string FullName(const std::string& name, const std::string& ns) {
    if (name.find('.') != std::string::npos || ns.empty()) return name;
    return ns + "." + name;
  }

  // Full name and namespace of a named type; registers it as being defined.
  arrow::Result<std::pair<std::string, std::string>> BeginNamed(const json& j,
                                                                const std::string& ns) {
    auto name_it = j.find("name");
    if (name_it == j.end() || !name_it->is_string()) {
      return Error(j.value("type", "named type"), " without a string \"name\"");
    }
    const std::string& name = name_it->get_ref<const std::string&>();
    std::string own_ns = ns;
    auto ns_it = j.find("namespace");
    if (ns_it != j.end() && ns_it->is_string()) own_ns = ns_it->get<std::string>();
    std::string full = FullName(name, own_ns);
    if (auto dot = full.rfind('.'); dot != std::string::npos) own_ns = full.substr(0, dot);
    if (named_.count(full) || in_progress_.count(full)) {
      return Error("type '", full, "' is defined twice");
    }
    in_progress_.insert(full);
    return std::make_pair(full, own_ns);
  }

  void EndNamed(const std::string& full, SchemaPtr node) {
    in_progress_.erase(full);
    named_.emplace(full, std::move(node));
  }

  arrow::Result<std::shared_ptr<AvroSchema>> ParseRecord(const json& j, const std::string& ns,
                                                         int depth) {
    ARROW_ASSIGN_OR_RAISE(auto names, BeginNamed(j, ns));
    auto node = std::make_shared<AvroSchema>();
    node->type = AvroType::kRecord;
    node->name = names.first;
    auto fields_it = j.find("fields");
    if (fields_it == j.end() || !fields_it->is_array()) {
      return Error("record '", node->name, "' without a \"fields\" array");
    }
    for (const json& f : *fields_it) {
      if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("type")) {
        return Error("record '", node->name, "' has a field without a name or type");
      }
      AvroField field;
      field.name = f["name"].get<std::string>();
      ARROW_ASSIGN_OR_RAISE(field.schema, Parse(f["type"], names.second, depth + 1));
      ARROW_ASSIGN_OR_RAISE(field.field_id, OptionalId(f, "field-id"));
      node->min_encoded_bytes =
          SaturatingAdd(node->min_encoded_bytes, field.schema->min_encoded_bytes);
      node->fields.push_back(std::move(field));
    }
    EndNamed(names.first, node);
    return node;
  }

  arrow::Result<std::shared_ptr<AvroSchema>> ParseEnum(const json& j, const std::string& ns) {
    ARROW_ASSIGN_OR_RAISE(auto names, BeginNamed(j, ns));
    auto node = std::make_shared<AvroSchema>();
    node->type = AvroType::kEnum;
    node->name = names.first;
    node->min_encoded_bytes = 1;
    auto symbols_it = j.find("symbols");
    if (symbols_it == j.end() || !symbols_it->is_array()) {
      return Error("enum '", node->name, "' without a \"symbols\" array");
    }
    for (const json& s : *symbols_it) {
      if (!s.is_string()) return Error("enum '", node->name, "' has a non-string symbol");
      node->symbols.push_back(s.get<std::string>());
    }
    EndNamed(names.first, node);
    return node;
  }

  arrow::Result<std::shared_ptr<AvroSchema>> ParseFixed(const json& j, const std::string& ns) {
    ARROW_ASSIGN_OR_RAISE(auto names, BeginNamed(j, ns));
    auto node = std::make_shared<AvroSchema>();
    node->type = AvroType::kFixed;
    node->name = names.first;
    auto size_it = j.find("size");
    if (size_it == j.end() || !size_it->is_number_integer() || size_it->get<int64_t>() < 0 ||
        size_it->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return Error("fixed '", node->name, "' without a valid \"size\"");
    }
    node->fixed_size = static_cast<int32_t>(size_it->get<int64_t>());
    node->min_encoded_bytes = node->fixed_size;
    EndNamed(names.first, node);
    return node;
  }

  arrow::Result<std::shared_ptr<AvroSchema>> ParseArray(const json& j, const std::string& ns,
                                                        int depth) {
    auto items_it = j.find("items");
    if (items_it == j.end()) return Error("array without \"items\"");
    auto node = std::make_shared<AvroSchema>();
    node->type = AvroType::kArray;
    node->min_encoded_bytes = 1;  // the terminating zero count
    ARROW_ASSIGN_OR_RAISE(node->items, Parse(*items_it, ns, depth + 1));
    ARROW_ASSIGN_OR_RAISE(node->element_id, OptionalId(j, "element-id"));
    return node;
  }

  arrow::Result<std::shared_ptr<AvroSchema>> ParseMap(const json& j, const std::string& ns,
                                                      int depth) {
    auto values_it = j.find("values");
    if (values_it == j.end()) return Error("map without \"values\"");
    auto node = std::make_shared<AvroSchema>();
    node->type = AvroType::kMap;
    node->min_encoded_bytes = 1;
    ARROW_ASSIGN_OR_RAISE(node->values, Parse(*values_it, ns, depth + 1));
    ARROW_ASSIGN_OR_RAISE(node->key_id, OptionalId(j, "key-id"));
    ARROW_ASSIGN_OR_RAISE(node->value_id, OptionalId(j, "value-id"));
    return node;
  }

  arrow::Result<SchemaPtr> ParseUnion(const json& j, const std::string& ns, int depth) {
    auto node = std::make_shared<AvroSchema>();
    node->type = AvroType::kUnion;
    int64_t min_branch = std::numeric_limits<int64_t>::max();
    for (const json& b : j) {
      ARROW_ASSIGN_OR_RAISE(auto branch, Parse(b, ns, depth + 1));
      if (branch->type == AvroType::kUnion) return Error("a union directly inside a union");
      min_branch = std::min(min_branch, branch->min_encoded_bytes);
      node->branches.push_back(std::move(branch));
    }
    if (node->branches.empty()) return Error("empty union");
    node->min_encoded_bytes = SaturatingAdd(1, min_branch);
    return node;
  }

  static arrow::Result<std::optional<int32_t>> OptionalId(const json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    if (!it->is_number_integer() || it->get<int64_t>() < std::numeric_limits<int32_t>::min() ||
        it->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return Error("\"", key, "\" is not a 32-bit integer: ", Snippet(*it));
    }
    return static_cast<int32_t>(it->get<int64_t>());
  }

  static arrow::Status ParseAttributes(const json& j, AvroSchema* node) {
    for (const auto& [key, value] : j.items()) {
      if (key == "logicalType") {
        if (value.is_string()) node->logical_type = value.get<std::string>();
      } else if (!IsReservedAttribute(key)) {
        node->attributes[key] = value.is_string()
                                    ? value.get<std::string>()
                                    : value.dump(-1, ' ', false, json::error_handler_t::replace);
      }
    }
    return arrow::Status::OK();
  }

  static int64_t SaturatingAdd(int64_t a, int64_t b) {
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    return a > kMax - b ? kMax : a + b;
  }

  std::unordered_map<std::string, SchemaPtr> named_;
  std::set<std::string> in_progress_;
};

}  // namespace

arrow::Result<std::shared_ptr<const AvroSchema>> ParseAvroSchema(std::string_view text) {
  json j = json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return arrow::Status::Invalid("invalid Avro schema: malformed JSON");
  try {
    SchemaParser parser;
    return parser.Parse(j, "", 1);
  } catch (const json::exception& e) {
    // Every access above checks the JSON type first; this is a safety net.
    return arrow::Status::Invalid("invalid Avro schema: ", e.what());
  }
}

}  // namespace icefloe::iceberg
