// AvroValue: typed access and record field lookup.
#include <limits>

#include "icefloe/iceberg/avro.h"

namespace icefloe::iceberg {
namespace {

// What As<T> accepts, for error messages.
template <typename T>
constexpr std::string_view kWanted = "";
template <>
constexpr std::string_view kWanted<bool> = "boolean";
template <>
constexpr std::string_view kWanted<int32_t> = "int";
template <>
constexpr std::string_view kWanted<int64_t> = "int or long";
template <>
constexpr std::string_view kWanted<float> = "float";
template <>
constexpr std::string_view kWanted<double> = "float or double";
template <>
constexpr std::string_view kWanted<std::string_view> = "string, bytes or fixed";
template <>
constexpr std::string_view kWanted<const AvroValue*> = "non-null value";
template <>
constexpr std::string_view kWanted<const AvroRecord*> = "record";
template <>
constexpr std::string_view kWanted<const AvroArray*> = "array";
template <>
constexpr std::string_view kWanted<const AvroMap*> = "map";

// The value as T, or nullopt when its type does not convert.
template <typename T>
std::optional<T> Convert(const AvroValue& v) {
  const auto& s = v.storage();
  if constexpr (std::is_same_v<T, bool>) {
    if (auto* p = std::get_if<bool>(&s)) return *p;
  } else if constexpr (std::is_same_v<T, int32_t>) {
    auto* p = std::get_if<int64_t>(&s);
    if (p && v.type() == AvroType::kInt) return static_cast<int32_t>(*p);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    if (auto* p = std::get_if<int64_t>(&s)) return *p;
  } else if constexpr (std::is_same_v<T, float>) {
    if (auto* p = std::get_if<float>(&s)) return *p;
  } else if constexpr (std::is_same_v<T, double>) {
    if (auto* p = std::get_if<double>(&s)) return *p;
    if (auto* p = std::get_if<float>(&s)) return static_cast<double>(*p);
  } else if constexpr (std::is_same_v<T, std::string_view>) {
    if (auto* p = std::get_if<std::string>(&s)) return std::string_view(*p);
  } else if constexpr (std::is_same_v<T, const AvroValue*>) {
    if (!v.is_null()) return &v;
  } else if constexpr (std::is_same_v<T, const AvroRecord*>) {
    if (auto* p = v.record()) return p;
  } else if constexpr (std::is_same_v<T, const AvroArray*>) {
    if (auto* p = v.array()) return p;
  } else if constexpr (std::is_same_v<T, const AvroMap*>) {
    if (auto* p = v.map()) return p;
  } else {
    static_assert(!sizeof(T), "unsupported AvroValue::As type");
  }
  return std::nullopt;
}

std::string RecordName(const AvroValue& v) {
  const AvroRecord* r = v.record();
  if (r == nullptr || r->schema == nullptr || r->schema->name.empty()) return "record";
  return "record '" + r->schema->name + "'";
}

std::string DescribeField(const AvroValue& record, int index) {
  const AvroField& f = record.record()->schema->fields[index];
  std::string out = "field '" + f.name + "'";
  if (f.field_id) out += " (id " + std::to_string(*f.field_id) + ")";
  return out + " of " + RecordName(record);
}

// The field's index in `record`, -1 when absent; Invalid when `record` is not a record.
template <typename Key>
arrow::Result<int> LookUp(const AvroValue& record, Key key) {
  const AvroRecord* r = record.record();
  if (r == nullptr || r->schema == nullptr) {
    return arrow::Status::Invalid("Avro field lookup on a ", AvroTypeName(record.type()),
                                  ", not a record");
  }
  int i = r->schema->FieldIndex(key);
  if (i >= static_cast<int>(r->fields.size())) i = -1;  // a hand-made value missing fields
  return i;
}

template <typename T, typename Key>
arrow::Result<std::optional<T>> GetField(const AvroValue& record, Key key, bool optional) {
  ARROW_ASSIGN_OR_RAISE(int i, LookUp(record, key));
  if (i < 0) {
    if (optional) return std::nullopt;
    if constexpr (std::is_same_v<Key, int32_t>) {
      return arrow::Status::Invalid(RecordName(record), " has no field with id ", key);
    } else {
      return arrow::Status::Invalid(RecordName(record), " has no field named '", key, "'");
    }
  }
  const AvroValue& v = record.record()->fields[i];
  if (v.is_null() && optional) return std::nullopt;
  ARROW_ASSIGN_OR_RAISE(T out, v.As<T>(DescribeField(record, i)));
  return out;
}

}  // namespace

template <typename T>
arrow::Result<T> AvroValue::As(std::string_view what) const {
  if (std::optional<T> out = Convert<T>(*this)) return *out;
  if (is_null()) return arrow::Status::Invalid(what, " is null, expected ", kWanted<T>);
  return arrow::Status::Invalid(what, " is ", AvroTypeName(type_), ", expected ", kWanted<T>);
}

const AvroValue* AvroValue::FindField(int32_t field_id) const {
  auto i = LookUp(*this, field_id);
  return i.ok() && *i >= 0 ? &record()->fields[*i] : nullptr;
}

const AvroValue* AvroValue::FindField(std::string_view name) const {
  auto i = LookUp(*this, name);
  return i.ok() && *i >= 0 ? &record()->fields[*i] : nullptr;
}

template <typename T>
arrow::Result<T> AvroValue::Get(int32_t field_id) const {
  ARROW_ASSIGN_OR_RAISE(std::optional<T> out, GetField<T>(*this, field_id, false));
  return *out;
}

template <typename T>
arrow::Result<T> AvroValue::Get(std::string_view name) const {
  ARROW_ASSIGN_OR_RAISE(std::optional<T> out, GetField<T>(*this, name, false));
  return *out;
}

template <typename T>
arrow::Result<std::optional<T>> AvroValue::GetOptional(int32_t field_id) const {
  return GetField<T>(*this, field_id, true);
}

template <typename T>
arrow::Result<std::optional<T>> AvroValue::GetOptional(std::string_view name) const {
  return GetField<T>(*this, name, true);
}

#define ICEFLOE_AVRO_INSTANTIATE(T)                                                  \
  template arrow::Result<T> AvroValue::As<T>(std::string_view) const;                \
  template arrow::Result<T> AvroValue::Get<T>(int32_t) const;                        \
  template arrow::Result<T> AvroValue::Get<T>(std::string_view) const;               \
  template arrow::Result<std::optional<T>> AvroValue::GetOptional<T>(int32_t) const; \
  template arrow::Result<std::optional<T>> AvroValue::GetOptional<T>(std::string_view) const;

ICEFLOE_AVRO_INSTANTIATE(bool)
ICEFLOE_AVRO_INSTANTIATE(int32_t)
ICEFLOE_AVRO_INSTANTIATE(int64_t)
ICEFLOE_AVRO_INSTANTIATE(float)
ICEFLOE_AVRO_INSTANTIATE(double)
ICEFLOE_AVRO_INSTANTIATE(std::string_view)
ICEFLOE_AVRO_INSTANTIATE(const AvroValue*)
ICEFLOE_AVRO_INSTANTIATE(const AvroRecord*)
ICEFLOE_AVRO_INSTANTIATE(const AvroArray*)
ICEFLOE_AVRO_INSTANTIATE(const AvroMap*)

#undef ICEFLOE_AVRO_INSTANTIATE

}  // namespace icefloe::iceberg
