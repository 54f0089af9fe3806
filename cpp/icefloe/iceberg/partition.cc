#include "icefloe/iceberg/partition.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "icefloe/iceberg/json_internal.h"

namespace icefloe::iceberg {

using json = nlohmann::json;

namespace {

constexpr int64_t kMicrosPerHour = 3600LL * 1000 * 1000;
constexpr int64_t kMicrosPerDay = 24 * kMicrosPerHour;

struct TransformName {
  const char* name;
  Transform::Kind kind;
};

constexpr TransformName kTransformNames[] = {
    {"identity", Transform::kIdentity}, {"bucket", Transform::kBucket},
    {"truncate", Transform::kTruncate}, {"year", Transform::kYear},
    {"month", Transform::kMonth},       {"day", Transform::kDay},
    {"hour", Transform::kHour},         {"void", Transform::kVoid},
};

const char* NameOf(Transform::Kind kind) {
  for (const auto& t : kTransformNames) {
    if (t.kind == kind) return t.name;
  }
  return "?";
}

bool HasParam(Transform::Kind kind) {
  return kind == Transform::kBucket || kind == Transform::kTruncate;
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

bool IsTimestamp(TypeId id) {
  return id == TypeId::kTimestamp || id == TypeId::kTimestampTz || id == TypeId::kTimestampNs ||
         id == TypeId::kTimestampTzNs;
}

bool IsNanos(TypeId id) { return id == TypeId::kTimestampNs || id == TypeId::kTimestampTzNs; }

bool Accepts(Transform::Kind kind, TypeId id) {
  switch (kind) {
    case Transform::kIdentity:
      return id < TypeId::kStruct;
    case Transform::kVoid:
      return true;
    case Transform::kBucket:
      return id == TypeId::kInt || id == TypeId::kLong || id == TypeId::kDecimal ||
             id == TypeId::kDate || id == TypeId::kTime || IsTimestamp(id) ||
             id == TypeId::kString || id == TypeId::kUuid || id == TypeId::kFixed ||
             id == TypeId::kBinary;
    case Transform::kTruncate:
      return id == TypeId::kInt || id == TypeId::kLong || id == TypeId::kDecimal ||
             id == TypeId::kString || id == TypeId::kBinary;
    case Transform::kYear:
    case Transform::kMonth:
    case Transform::kDay:
      return id == TypeId::kDate || IsTimestamp(id);
    case Transform::kHour:
      return IsTimestamp(id);
  }
  return false;
}

uint32_t RotateLeft(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

// Howard Hinnant's days_from_civil inverse: the proleptic Gregorian (year,
// month) of a day count since 1970-01-01.
void YearMonthFromDays(int64_t days, int64_t* year, int64_t* month) {
  int64_t z = days + 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  *month = mp < 10 ? mp + 3 : mp - 9;
  *year = yoe + era * 400 + (*month <= 2 ? 1 : 0);
}

// Minimal big-endian two's complement bytes, as Java's BigInteger.toByteArray().
std::string MinimalBigEndian(const arrow::Decimal128& value) {
  std::array<uint8_t, 16> le = value.ToBytes();
  std::string be(le.rbegin(), le.rend());
  size_t start = 0;
  while (start + 1 < be.size()) {
    auto b0 = static_cast<uint8_t>(be[start]);
    auto b1 = static_cast<uint8_t>(be[start + 1]);
    if ((b0 == 0x00 && (b1 & 0x80) == 0) || (b0 == 0xFF && (b1 & 0x80) != 0)) {
      ++start;
    } else {
      break;
    }
  }
  return be.substr(start);
}

std::string HashLong(int64_t v) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<char>(static_cast<uint64_t>(v) >> (8 * i));
  }
  return bytes;
}

// Keeps the first `width` code points of a UTF-8 string.
std::string TruncateUtf8(const std::string& s, int32_t width) {
  int32_t code_points = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    bool continuation = (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80;
    if (!continuation && code_points++ == width) return s.substr(0, i);
  }
  return s;
}

Literal IntLiteral(TypeId type, int64_t value) {
  Literal out;
  out.type = type;
  out.value = value;
  return out;
}

arrow::Result<int64_t> IntValue(const Literal& value, const Transform& t) {
  const auto* v = std::get_if<int64_t>(&value.value);
  if (v == nullptr) {
    return arrow::Status::Invalid("transform ", t.ToString(), ": literal ", value.ToString(),
                                  " is not an integer");
  }
  return *v;
}

arrow::Result<Literal> ApplyTruncate(const Transform& t, const Literal& value) {
  const int64_t w = t.param;
  Literal out = value;
  if (const auto* i = std::get_if<int64_t>(&value.value)) {
    out.value = *i - (((*i % w) + w) % w);
  } else if (const auto* s = std::get_if<std::string>(&value.value)) {
    if (value.type == TypeId::kString) {
      out.value = TruncateUtf8(*s, t.param);
    } else {
      out.value = s->substr(0, std::min<size_t>(s->size(), static_cast<size_t>(w)));
    }
  } else if (const auto* d = std::get_if<arrow::Decimal128>(&value.value)) {
    arrow::Decimal128 width(w);
    ARROW_ASSIGN_OR_RAISE(auto qr, d->Divide(width));
    ARROW_ASSIGN_OR_RAISE(auto qr2, arrow::Decimal128(qr.second + width).Divide(width));
    out.value = arrow::Decimal128(*d - qr2.second);
  } else {
    return arrow::Status::Invalid("transform ", t.ToString(), " cannot apply to ",
                                  value.ToString());
  }
  return out;
}

arrow::Result<Literal> ApplyTime(const Transform& t, const Literal& value) {
  ARROW_ASSIGN_OR_RAISE(int64_t v, IntValue(value, t));
  int64_t days;
  if (value.type == TypeId::kDate) {
    days = v;
  } else {
    int64_t micros = IsNanos(value.type) ? FloorDiv(v, 1000) : v;
    if (t.kind == Transform::kHour) {
      return IntLiteral(TypeId::kInt, FloorDiv(micros, kMicrosPerHour));
    }
    days = FloorDiv(micros, kMicrosPerDay);
  }
  if (t.kind == Transform::kDay) return IntLiteral(TypeId::kDate, days);
  int64_t year, month;
  YearMonthFromDays(days, &year, &month);
  if (t.kind == Transform::kYear) return IntLiteral(TypeId::kInt, year - 1970);
  return IntLiteral(TypeId::kInt, (year - 1970) * 12 + (month - 1));
}

arrow::Result<PartitionField> ParsePartitionField(const json& j, int32_t default_field_id) {
  using internal::FindMember;
  PartitionField f;
  const std::string what = "partition field";
  ARROW_ASSIGN_OR_RAISE(f.name, internal::RequiredString(j, "name", what));
  const std::string named = what + " '" + f.name + "'";
  if (const json* ids = FindMember(j, "source-ids"); ids != nullptr && !j.contains("source-id")) {
    if (!ids->is_array() || ids->size() != 1) {
      return arrow::Status::NotImplemented(named, ": multi-argument transforms are not supported");
    }
    ARROW_ASSIGN_OR_RAISE(f.source_id, internal::AsInt32((*ids)[0], "source-ids", named));
  } else {
    ARROW_ASSIGN_OR_RAISE(f.source_id, internal::RequiredInt32(j, "source-id", named));
  }
  ARROW_ASSIGN_OR_RAISE(auto field_id, internal::OptionalInt32(j, "field-id", named));
  f.field_id = field_id.value_or(default_field_id);
  ARROW_ASSIGN_OR_RAISE(std::string transform, internal::RequiredString(j, "transform", named));
  auto parsed = ParseTransform(transform);
  if (!parsed.ok()) {
    return parsed.status().WithMessage(named, ": ", parsed.status().message());
  }
  f.transform = *parsed;
  return f;
}

}  // namespace

std::string Transform::ToString() const {
  std::string s = NameOf(kind);
  if (HasParam(kind)) s += "[" + std::to_string(param) + "]";
  return s;
}

arrow::Result<Transform> ParseTransform(std::string_view text) {
  std::string_view name = text;
  std::string_view arg;
  if (auto open = text.find('['); open != std::string_view::npos) {
    if (text.back() != ']') {
      return arrow::Status::Invalid("malformed partition transform '", text, "'");
    }
    name = text.substr(0, open);
    arg = text.substr(open + 1, text.size() - open - 2);
  }
  for (const auto& t : kTransformNames) {
    if (name != t.name) continue;
    Transform out;
    out.kind = t.kind;
    if (!HasParam(t.kind)) {
      if (!arg.empty() || name.size() != text.size()) {
        return arrow::Status::Invalid("partition transform '", text, "' takes no parameter");
      }
      return out;
    }
    int64_t n = 0;
    bool digits = !arg.empty() && arg.size() <= 10;
    for (char c : arg) {
      if (c < '0' || c > '9') digits = false;
      if (digits) n = n * 10 + (c - '0');
    }
    if (!digits || n < 1 || n > std::numeric_limits<int32_t>::max()) {
      return arrow::Status::Invalid("partition transform '", text,
                                    "' needs a positive integer parameter");
    }
    out.param = static_cast<int32_t>(n);
    return out;
  }
  return arrow::Status::NotImplemented("unsupported partition transform '", text, "'");
}

arrow::Result<TypePtr> Transform::ResultType(const Type& source) const {
  if (!Accepts(kind, source.id)) {
    return arrow::Status::Invalid("partition transform ", ToString(), " cannot apply to ",
                                  source.ToString());
  }
  switch (kind) {
    case kBucket:
    case kYear:
    case kMonth:
    case kHour:
      return MakePrimitive(TypeId::kInt);
    case kDay:
      return MakePrimitive(TypeId::kDate);
    default:
      return std::make_shared<Type>(source);
  }
}

arrow::Result<Literal> Transform::Apply(const Literal& value) const {
  if (!Accepts(kind, value.type)) {
    return arrow::Status::Invalid("partition transform ", ToString(), " cannot apply to ",
                                  value.ToString());
  }
  if (kind == kVoid || value.is_null()) {
    Literal null;
    null.type = kind == kIdentity || kind == kTruncate || kind == kVoid ? value.type
                : kind == kDay                                          ? TypeId::kDate
                                                                        : TypeId::kInt;
    null.scale = value.scale;
    return null;
  }
  switch (kind) {
    case kIdentity:
      return value;
    case kBucket: {
      ARROW_ASSIGN_OR_RAISE(int32_t hash, BucketHash(value));
      return IntLiteral(TypeId::kInt, (hash & std::numeric_limits<int32_t>::max()) % param);
    }
    case kTruncate:
      return ApplyTruncate(*this, value);
    default:
      return ApplyTime(*this, value);
  }
}

bool PartitionSpec::is_unpartitioned() const {
  return std::all_of(fields.begin(), fields.end(),
                     [](const PartitionField& f) { return f.transform.kind == Transform::kVoid; });
}

arrow::Result<std::vector<NestedField>> PartitionSpec::PartitionType(const Schema& schema) const {
  std::vector<NestedField> out;
  for (const auto& f : fields) {
    const NestedField* source = schema.FindById(f.source_id);
    if (source == nullptr) {
      return arrow::Status::KeyError("partition field '", f.name, "' of spec ", spec_id,
                                     ": no source field ", f.source_id, " in schema ",
                                     schema.schema_id);
    }
    NestedField field;
    field.id = f.field_id;
    field.name = f.name;
    ARROW_ASSIGN_OR_RAISE(field.type, f.transform.ResultType(*source->type));
    out.push_back(std::move(field));
  }
  return out;
}

arrow::Result<PartitionSpec> ParsePartitionSpec(const json& j) {
  PartitionSpec spec;
  const json* fields = &j;
  if (j.is_object()) {
    ARROW_ASSIGN_OR_RAISE(spec.spec_id, internal::RequiredInt32(j, "spec-id", "partition spec"));
    ARROW_ASSIGN_OR_RAISE(fields, internal::RequiredMember(j, "fields", "partition spec"));
  }
  if (!fields->is_array()) {
    return arrow::Status::Invalid("partition spec ", spec.spec_id, ": fields are not a list");
  }
  int32_t next_field_id = 1000;  // v1 specs may omit field ids: Java assigns 1000, 1001, ...
  for (const auto& f : *fields) {
    auto field = ParsePartitionField(f, next_field_id);
    if (!field.ok()) {
      return field.status().WithMessage("partition spec ", spec.spec_id, ": ",
                                        field.status().message());
    }
    next_field_id = std::max(next_field_id, field->field_id) + 1;
    spec.fields.push_back(std::move(*field));
  }
  return spec;
}

int32_t Murmur3Hash32(std::string_view bytes) {
  constexpr uint32_t c1 = 0xcc9e2d51;
  constexpr uint32_t c2 = 0x1b873593;
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  uint32_t h = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    uint32_t k = static_cast<uint32_t>(data[i]) | (static_cast<uint32_t>(data[i + 1]) << 8) |
                 (static_cast<uint32_t>(data[i + 2]) << 16) |
                 (static_cast<uint32_t>(data[i + 3]) << 24);
    k *= c1;
    k = RotateLeft(k, 15);
    k *= c2;
    h ^= k;
    h = RotateLeft(h, 13);
    h = h * 5 + 0xe6546b64;
  }
  uint32_t k = 0;
  switch (n & 3) {
    case 3:
      k ^= static_cast<uint32_t>(data[i + 2]) << 16;
      [[fallthrough]];
    case 2:
      k ^= static_cast<uint32_t>(data[i + 1]) << 8;
      [[fallthrough]];
    case 1:
      k ^= static_cast<uint32_t>(data[i]);
      k *= c1;
      k = RotateLeft(k, 15);
      k *= c2;
      h ^= k;
  }
  h ^= static_cast<uint32_t>(n);
  h ^= h >> 16;
  h *= 0x85ebca6b;
  h ^= h >> 13;
  h *= 0xc2b2ae35;
  h ^= h >> 16;
  return static_cast<int32_t>(h);
}

arrow::Result<int32_t> BucketHash(const Literal& value) {
  if (!Accepts(Transform::kBucket, value.type) || value.is_null()) {
    return arrow::Status::Invalid("cannot bucket ", value.ToString());
  }
  if (const auto* i = std::get_if<int64_t>(&value.value)) {
    return Murmur3Hash32(HashLong(IsNanos(value.type) ? FloorDiv(*i, 1000) : *i));
  }
  if (const auto* s = std::get_if<std::string>(&value.value)) return Murmur3Hash32(*s);
  if (const auto* d = std::get_if<arrow::Decimal128>(&value.value)) {
    return Murmur3Hash32(MinimalBigEndian(*d));
  }
  return arrow::Status::Invalid("cannot bucket ", value.ToString());
}

}  // namespace icefloe::iceberg
