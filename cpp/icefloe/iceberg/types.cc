#include "icefloe/iceberg/types.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <unordered_map>

#include <arrow/scalar.h>
#include <arrow/type.h>
#include <arrow/util/key_value_metadata.h>
#include <nlohmann/json.hpp>

namespace icefloe::iceberg {

using json = nlohmann::json;

namespace {

struct PrimitiveName {
  const char* name;
  TypeId id;
};

constexpr PrimitiveName kPrimitives[] = {
    {"boolean", TypeId::kBoolean},
    {"int", TypeId::kInt},
    {"long", TypeId::kLong},
    {"float", TypeId::kFloat},
    {"double", TypeId::kDouble},
    {"date", TypeId::kDate},
    {"time", TypeId::kTime},
    {"timestamp", TypeId::kTimestamp},
    {"timestamptz", TypeId::kTimestampTz},
    {"timestamp_ns", TypeId::kTimestampNs},
    {"timestamptz_ns", TypeId::kTimestampTzNs},
    {"string", TypeId::kString},
    {"uuid", TypeId::kUuid},
    {"binary", TypeId::kBinary},
};

const char* PrimitiveNameOf(TypeId id) {
  for (const auto& p : kPrimitives) {
    if (p.id == id) return p.name;
  }
  return "?";
}

arrow::Result<const json*> Member(const json& obj, const char* key, const char* what) {
  if (!obj.is_object() || !obj.contains(key)) {
    return arrow::Status::Invalid("Iceberg ", what, " is missing '", key, "'");
  }
  return &obj.at(key);
}

arrow::Result<int32_t> IntMember(const json& obj, const char* key, const char* what) {
  ARROW_ASSIGN_OR_RAISE(const json* v, Member(obj, key, what));
  if (!v->is_number_integer() ||
      (v->is_number_unsigned() ? v->get<uint64_t>() > INT32_MAX
                               : v->get<int64_t>() < INT32_MIN || v->get<int64_t>() > INT32_MAX)) {
    return arrow::Status::Invalid("Iceberg ", what, ": '", key, "' is not a 32-bit integer");
  }
  return static_cast<int32_t>(v->get<int64_t>());
}

// An optional boolean member (absent: `fallback`); never throws.
arrow::Result<bool> BoolMember(const json& obj, const char* key, bool fallback, const char* what) {
  if (!obj.is_object() || !obj.contains(key)) return fallback;
  const bool* b = obj.at(key).get_ptr<const bool*>();
  if (b == nullptr)
    return arrow::Status::Invalid("Iceberg ", what, ": '", key, "' is not a boolean");
  return *b;
}

// Nested types deeper than this are refused (bounds the parser's recursion).
constexpr int kMaxTypeDepth = 32;
thread_local int type_depth = 0;

arrow::Result<NestedField> ParseField(const json& obj) {
  NestedField f;
  ARROW_ASSIGN_OR_RAISE(f.id, IntMember(obj, "id", "field"));
  ARROW_ASSIGN_OR_RAISE(const json* name, Member(obj, "name", "field"));
  if (!name->is_string())
    return arrow::Status::Invalid("Iceberg field ", f.id, ": name is not a string");
  f.name = name->get<std::string>();
  if (obj.contains("required") && obj["required"].is_boolean())
    f.required = obj["required"].get<bool>();
  ARROW_ASSIGN_OR_RAISE(const json* type, Member(obj, "type", "field"));
  auto parsed = ParseType(*type);
  if (!parsed.ok())
    return parsed.status().WithMessage("field '", f.name, "': ", parsed.status().message());
  f.type = *parsed;
  if (obj.contains("doc") && obj["doc"].is_string()) f.doc = obj["doc"].get<std::string>();
  // v3 default values; write-default only matters to writers.
  if (auto d = obj.find("initial-default"); d != obj.end() && !d->is_null()) {
    f.initial_default = d->dump();
  }
  return f;
}

void VisitFields(const std::vector<NestedField>& fields,
                 const std::function<void(const NestedField&)>& fn) {
  for (const auto& f : fields) {
    fn(f);
    if (f.type && f.type->is_nested()) VisitFields(f.type->fields, fn);
  }
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

const NestedField* FindInFields(const std::vector<NestedField>& fields, std::string_view name) {
  for (const auto& f : fields) {
    if (f.name == name) return &f;
  }
  for (const auto& f : fields) {
    if (EqualsIgnoreCase(f.name, name)) return &f;
  }
  return nullptr;
}

}  // namespace

TypePtr MakePrimitive(TypeId id) {
  auto t = std::make_shared<Type>();
  t->id = id;
  return t;
}

TypePtr MakeDecimal(int32_t precision, int32_t scale) {
  auto t = std::make_shared<Type>();
  t->id = TypeId::kDecimal;
  t->precision = precision;
  t->scale = scale;
  return t;
}

TypePtr MakeFixed(int32_t length) {
  auto t = std::make_shared<Type>();
  t->id = TypeId::kFixed;
  t->length = length;
  return t;
}

std::string Type::ToString() const {
  switch (id) {
    case TypeId::kDecimal:
      return "decimal(" + std::to_string(precision) + "," + std::to_string(scale) + ")";
    case TypeId::kFixed:
      return "fixed[" + std::to_string(length) + "]";
    case TypeId::kStruct: {
      std::string s = "struct<";
      for (size_t i = 0; i < fields.size(); ++i) {
        if (i) s += ", ";
        s += fields[i].name + ": " + fields[i].type->ToString();
      }
      return s + ">";
    }
    case TypeId::kList:
      return "list<" + fields[0].type->ToString() + ">";
    case TypeId::kMap:
      return "map<" + fields[0].type->ToString() + ", " + fields[1].type->ToString() + ">";
    default:
      return PrimitiveNameOf(id);
  }
}

arrow::Result<TypePtr> ParseTypeAt(const json& j);  // ParseType below one level of nesting

arrow::Result<TypePtr> ParseType(const json& j) {
  if (type_depth >= kMaxTypeDepth) {
    return arrow::Status::Invalid("Iceberg type nested deeper than ", kMaxTypeDepth, " levels");
  }
  ++type_depth;
  auto t = ParseTypeAt(j);
  --type_depth;
  return t;
}

arrow::Result<TypePtr> ParseTypeAt(const json& j) {
  if (j.is_string()) {
    std::string s = j.get<std::string>();
    for (const auto& p : kPrimitives) {
      if (s == p.name) return MakePrimitive(p.id);
    }
    int a = 0, b = 0;
    char tail = 0;
    if (std::sscanf(s.c_str(), "decimal(%d,%d%c", &a, &b, &tail) == 3 && tail == ')') {
      if (a < 1 || a > 38 || b < 0 || b > a) {
        return arrow::Status::Invalid("unsupported Iceberg type '", s, "' (precision 1..38)");
      }
      return MakeDecimal(a, b);
    }
    if (std::sscanf(s.c_str(), " decimal ( %d , %d %c", &a, &b, &tail) == 3 && tail == ')') {
      return MakeDecimal(a, b);
    }
    if (std::sscanf(s.c_str(), "fixed[%d%c", &a, &tail) == 2 && tail == ']' && a > 0) {
      return MakeFixed(a);
    }
    return arrow::Status::NotImplemented("unsupported Iceberg type '", s, "'");
  }
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return arrow::Status::Invalid("Iceberg type is neither a name nor an object: ", j.dump());
  }
  const std::string kind = j["type"].get<std::string>();
  auto t = std::make_shared<Type>();
  if (kind == "struct") {
    t->id = TypeId::kStruct;
    ARROW_ASSIGN_OR_RAISE(const json* fields, Member(j, "fields", "struct"));
    if (!fields->is_array())
      return arrow::Status::Invalid("Iceberg struct: 'fields' is not a list");
    for (const auto& f : *fields) {
      ARROW_ASSIGN_OR_RAISE(auto field, ParseField(f));
      t->fields.push_back(std::move(field));
    }
  } else if (kind == "list") {
    t->id = TypeId::kList;
    NestedField e;
    e.name = "element";
    ARROW_ASSIGN_OR_RAISE(e.id, IntMember(j, "element-id", "list"));
    ARROW_ASSIGN_OR_RAISE(const json* et, Member(j, "element", "list"));
    ARROW_ASSIGN_OR_RAISE(e.type, ParseType(*et));
    ARROW_ASSIGN_OR_RAISE(e.required, BoolMember(j, "element-required", false, "list"));
    t->fields.push_back(std::move(e));
  } else if (kind == "map") {
    t->id = TypeId::kMap;
    NestedField k, v;
    k.name = "key";
    v.name = "value";
    ARROW_ASSIGN_OR_RAISE(k.id, IntMember(j, "key-id", "map"));
    ARROW_ASSIGN_OR_RAISE(v.id, IntMember(j, "value-id", "map"));
    ARROW_ASSIGN_OR_RAISE(const json* kt, Member(j, "key", "map"));
    ARROW_ASSIGN_OR_RAISE(const json* vt, Member(j, "value", "map"));
    ARROW_ASSIGN_OR_RAISE(k.type, ParseType(*kt));
    ARROW_ASSIGN_OR_RAISE(v.type, ParseType(*vt));
    k.required = true;
    ARROW_ASSIGN_OR_RAISE(v.required, BoolMember(j, "value-required", false, "map"));
    t->fields.push_back(std::move(k));
    t->fields.push_back(std::move(v));
  } else {
    return arrow::Status::NotImplemented("unsupported Iceberg type '", kind, "'");
  }
  return t;
}

arrow::Result<Schema> ParseSchema(const json& j) {
  Schema schema;
  if (!j.is_object()) return arrow::Status::Invalid("Iceberg schema is not an object");
  schema.schema_id = 0;
  if (j.contains("schema-id")) {
    ARROW_ASSIGN_OR_RAISE(schema.schema_id, IntMember(j, "schema-id", "schema"));
  }
  ARROW_ASSIGN_OR_RAISE(TypePtr type, ParseType(j));
  if (type->id != TypeId::kStruct) return arrow::Status::Invalid("Iceberg schema is not a struct");
  schema.fields = type->fields;
  if (j.contains("identifier-field-ids") && j["identifier-field-ids"].is_array()) {
    for (const auto& id : j["identifier-field-ids"]) {
      ARROW_ASSIGN_OR_RAISE(int32_t v, IntMember(json{{"id", id}}, "id", "identifier-field-ids"));
      schema.identifier_field_ids.push_back(v);
    }
  }
  return schema;
}

json TypeToJson(const Type& type) {
  switch (type.id) {
    case TypeId::kStruct: {
      json fields = json::array();
      for (const auto& f : type.fields) {
        json jf = {{"id", f.id},
                   {"name", f.name},
                   {"required", f.required},
                   {"type", TypeToJson(*f.type)}};
        if (!f.doc.empty()) jf["doc"] = f.doc;
        if (!f.initial_default.empty()) {
          jf["initial-default"] = json::parse(f.initial_default, nullptr, false);
        }
        fields.push_back(std::move(jf));
      }
      return {{"type", "struct"}, {"fields", std::move(fields)}};
    }
    case TypeId::kList:
      return {{"type", "list"},
              {"element-id", type.fields[0].id},
              {"element", TypeToJson(*type.fields[0].type)},
              {"element-required", type.fields[0].required}};
    case TypeId::kMap:
      return {{"type", "map"},
              {"key-id", type.fields[0].id},
              {"key", TypeToJson(*type.fields[0].type)},
              {"value-id", type.fields[1].id},
              {"value", TypeToJson(*type.fields[1].type)},
              {"value-required", type.fields[1].required}};
    default:
      return type.ToString();
  }
}

json SchemaToJson(const Schema& schema) {
  Type root;
  root.id = TypeId::kStruct;
  root.fields = schema.fields;
  json j = TypeToJson(root);
  j["schema-id"] = schema.schema_id;
  if (!schema.identifier_field_ids.empty()) j["identifier-field-ids"] = schema.identifier_field_ids;
  return j;
}

const NestedField* Schema::FindById(int32_t id) const {
  const NestedField* found = nullptr;
  VisitFields(fields, [&](const NestedField& f) {
    if (f.id == id && found == nullptr) found = &f;
  });
  return found;
}

const NestedField* Schema::FindByName(std::string_view name) const {
  if (const NestedField* f = FindInFields(fields, name)) return f;
  const std::vector<NestedField>* scope = &fields;
  const NestedField* current = nullptr;
  size_t pos = 0;
  while (pos <= name.size()) {
    size_t dot = name.find('.', pos);
    std::string_view part = name.substr(pos, dot == std::string_view::npos ? name.npos : dot - pos);
    current = FindInFields(*scope, part);
    if (current == nullptr) return nullptr;
    if (dot == std::string_view::npos) return current;
    if (!current->type || current->type->id != TypeId::kStruct) return nullptr;
    scope = &current->type->fields;
    pos = dot + 1;
  }
  return nullptr;
}

std::vector<int32_t> Schema::AllFieldIds() const {
  std::vector<int32_t> ids;
  VisitFields(fields, [&](const NestedField& f) { ids.push_back(f.id); });
  return ids;
}

arrow::Result<std::shared_ptr<arrow::DataType>> ToArrowType(const Type& type) {
  switch (type.id) {
    case TypeId::kBoolean:
      return arrow::boolean();
    case TypeId::kInt:
      return arrow::int32();
    case TypeId::kLong:
      return arrow::int64();
    case TypeId::kFloat:
      return arrow::float32();
    case TypeId::kDouble:
      return arrow::float64();
    case TypeId::kDecimal:
      return arrow::decimal128(type.precision, type.scale);
    case TypeId::kDate:
      return arrow::date32();
    case TypeId::kTime:
      return arrow::time64(arrow::TimeUnit::MICRO);
    case TypeId::kTimestamp:
      return arrow::timestamp(arrow::TimeUnit::MICRO);
    case TypeId::kTimestampTz:
      return arrow::timestamp(arrow::TimeUnit::MICRO, "UTC");
    case TypeId::kTimestampNs:
      return arrow::timestamp(arrow::TimeUnit::NANO);
    case TypeId::kTimestampTzNs:
      return arrow::timestamp(arrow::TimeUnit::NANO, "UTC");
    case TypeId::kString:
      return arrow::utf8();
    case TypeId::kUuid:
      return arrow::fixed_size_binary(16);
    case TypeId::kFixed:
      return arrow::fixed_size_binary(type.length);
    case TypeId::kBinary:
      return arrow::binary();
    case TypeId::kStruct: {
      arrow::FieldVector children;
      for (const auto& f : type.fields) {
        ARROW_ASSIGN_OR_RAISE(auto child, ToArrowField(f));
        children.push_back(std::move(child));
      }
      return arrow::struct_(children);
    }
    case TypeId::kList: {
      ARROW_ASSIGN_OR_RAISE(auto element, ToArrowField(type.fields[0]));
      return arrow::list(element);
    }
    case TypeId::kMap: {
      ARROW_ASSIGN_OR_RAISE(auto key, ToArrowField(type.fields[0]));
      ARROW_ASSIGN_OR_RAISE(auto value, ToArrowField(type.fields[1]));
      return std::make_shared<arrow::MapType>(key->WithNullable(false), value);
    }
  }
  return arrow::Status::NotImplemented("Iceberg type ", type.ToString());
}

arrow::Result<std::shared_ptr<arrow::Field>> ToArrowField(const NestedField& field) {
  ARROW_ASSIGN_OR_RAISE(auto type, ToArrowType(*field.type));
  auto metadata = arrow::key_value_metadata({"PARQUET:field_id"}, {std::to_string(field.id)});
  return arrow::field(field.name, std::move(type), !field.required, std::move(metadata));
}

arrow::Result<std::shared_ptr<arrow::Schema>> ToArrowSchema(const Schema& schema,
                                                            const std::vector<int32_t>* field_ids) {
  arrow::FieldVector out;
  if (field_ids == nullptr) {
    for (const auto& f : schema.fields) {
      ARROW_ASSIGN_OR_RAISE(auto af, ToArrowField(f));
      out.push_back(std::move(af));
    }
  } else {
    for (int32_t id : *field_ids) {
      const NestedField* f = schema.FindById(id);
      if (f == nullptr)
        return arrow::Status::KeyError("no field with id ", id, " in schema ", schema.schema_id);
      ARROW_ASSIGN_OR_RAISE(auto af, ToArrowField(*f));
      out.push_back(std::move(af));
    }
  }
  return arrow::schema(std::move(out));
}

std::string Literal::ToString() const {
  return std::visit(
      [this](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return "null";
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) {
          return std::to_string(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return "'" + v + "'";
        } else {
          return v.ToString(scale);
        }
      },
      value);
}

namespace {

template <typename T>
int Cmp(const T& a, const T& b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

}  // namespace

arrow::Result<int> CompareLiterals(const Literal& a, const Literal& b) {
  if (a.is_null() || b.is_null()) return arrow::Status::Invalid("cannot compare null literals");
  const auto* ai = std::get_if<int64_t>(&a.value);
  const auto* bi = std::get_if<int64_t>(&b.value);
  const auto* ad = std::get_if<double>(&a.value);
  const auto* bd = std::get_if<double>(&b.value);
  if (ai && bi) return Cmp(*ai, *bi);
  if ((ai || ad) && (bi || bd)) {
    double x = ai ? static_cast<double>(*ai) : *ad;
    double y = bi ? static_cast<double>(*bi) : *bd;
    return Cmp(x, y);
  }
  const auto* as = std::get_if<std::string>(&a.value);
  const auto* bs = std::get_if<std::string>(&b.value);
  if (as && bs) {
    // Unsigned bytewise order, as Iceberg orders strings (UTF-8) and binary.
    int c = std::memcmp(as->data(), bs->data(), std::min(as->size(), bs->size()));
    if (c != 0) return c < 0 ? -1 : 1;
    return Cmp(as->size(), bs->size());
  }
  const auto* ab = std::get_if<bool>(&a.value);
  const auto* bb = std::get_if<bool>(&b.value);
  if (ab && bb) return Cmp(*ab, *bb);
  const auto* adec = std::get_if<arrow::Decimal128>(&a.value);
  const auto* bdec = std::get_if<arrow::Decimal128>(&b.value);
  if (adec && bdec) {
    arrow::Decimal128 x = *adec, y = *bdec;
    if (a.scale < b.scale) {
      ARROW_ASSIGN_OR_RAISE(x, x.Rescale(a.scale, b.scale));
    } else if (b.scale < a.scale) {
      ARROW_ASSIGN_OR_RAISE(y, y.Rescale(b.scale, a.scale));
    }
    return Cmp(x, y);
  }
  return arrow::Status::Invalid("cannot compare ", a.ToString(), " with ", b.ToString());
}

arrow::Result<std::shared_ptr<arrow::Scalar>> ToArrowScalar(const Literal& literal,
                                                            const Type& type) {
  ARROW_ASSIGN_OR_RAISE(auto arrow_type, ToArrowType(type));
  if (literal.is_null()) return arrow::MakeNullScalar(arrow_type);
  if (const auto* b = std::get_if<bool>(&literal.value)) {
    return arrow::MakeScalar(arrow_type, *b);
  }
  if (const auto* i = std::get_if<int64_t>(&literal.value)) {
    if (type.id == TypeId::kFloat || type.id == TypeId::kDouble) {
      return arrow::MakeScalar(arrow_type, static_cast<double>(*i));
    }
    return arrow::MakeScalar(arrow_type, *i);
  }
  if (const auto* d = std::get_if<double>(&literal.value)) {
    return arrow::MakeScalar(arrow_type, *d);
  }
  if (const auto* s = std::get_if<std::string>(&literal.value)) {
    switch (type.id) {
      case TypeId::kString:
        return std::make_shared<arrow::StringScalar>(*s);
      case TypeId::kBinary:
        return std::make_shared<arrow::BinaryScalar>(arrow::Buffer::FromString(*s));
      default:
        return std::make_shared<arrow::FixedSizeBinaryScalar>(arrow::Buffer::FromString(*s),
                                                              arrow_type);
    }
  }
  const auto& dec = std::get<arrow::Decimal128>(literal.value);
  ARROW_ASSIGN_OR_RAISE(auto rescaled, dec.Rescale(literal.scale, type.scale));
  return std::make_shared<arrow::Decimal128Scalar>(rescaled, arrow_type);
}

}  // namespace icefloe::iceberg
