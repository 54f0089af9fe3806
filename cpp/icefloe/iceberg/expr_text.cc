// The SQL spelling of filters: names, constants and nodes.
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "icefloe/iceberg/expr_internal.h"

namespace icefloe::iceberg::internal {

namespace {

constexpr int64_t kSecondsPerDay = 86400;
constexpr int64_t kNanosPerSecond = 1000000000;
constexpr int64_t kMicrosPerSecond = 1000000;

// Howard Hinnant's civil_from_days (proleptic Gregorian).
struct Civil {
  int64_t year, month, day;
};

Civil CivilFromDays(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t d = doy - (153 * mp + 2) / 5 + 1;
  const int64_t m = mp < 10 ? mp + 3 : mp - 9;
  return {yoe + era * 400 + (m <= 2), m, d};
}

}  // namespace

std::string QuoteString(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

bool IsReservedWord(std::string_view word) {
  static constexpr std::string_view kReserved[] = {"AND",  "OR",   "NOT",     "IN",   "IS",
                                                   "NULL", "LIKE", "BETWEEN", "TRUE", "FALSE"};
  for (std::string_view r : kReserved) {
    if (r.size() != word.size()) continue;
    bool same = true;
    for (size_t i = 0; i < r.size() && same; ++i) {
      same = r[i] == (word[i] >= 'a' && word[i] <= 'z' ? word[i] - 'a' + 'A' : word[i]);
    }
    if (same) return true;
  }
  return false;
}

std::string QuoteColumn(std::string_view name) {
  // Bare: parts of [A-Za-z_][A-Za-z0-9_]* (or later parts of digits) joined by dots.
  bool bare = !name.empty() && !IsReservedWord(name);
  bool part_start = true;
  for (size_t i = 0; i < name.size() && bare; ++i) {
    char c = name[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                 static_cast<unsigned char>(c) >= 0x80;
    bool digit = c >= '0' && c <= '9';
    if (c == '.') {
      bare = !part_start && i + 1 < name.size();
      part_start = true;
    } else {
      bare = alpha || (digit && !(part_start && i == 0));
      part_start = false;
    }
  }
  if (bare) return std::string(name);
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

namespace {

std::string FormatDate(int64_t days) {
  Civil c = CivilFromDays(days);
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%04lld-%02lld-%02lld", static_cast<long long>(c.year),
                static_cast<long long>(c.month), static_cast<long long>(c.day));
  return buf;
}

// Time of day from a sub-second count; `digits` is 6 (micros) or 9 (nanos).
std::string FormatTimeOfDay(int64_t units, int digits) {
  const int64_t per_second = digits == 9 ? kNanosPerSecond : kMicrosPerSecond;
  int64_t seconds = units / per_second, fraction = units % per_second;
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%02lld:%02lld:%02lld", static_cast<long long>(seconds / 3600),
                static_cast<long long>(seconds / 60 % 60), static_cast<long long>(seconds % 60));
  std::string out = buf;
  if (fraction != 0) {
    std::snprintf(buf, sizeof(buf), ".%0*lld", digits, static_cast<long long>(fraction));
    out += buf;
  }
  return out;
}

std::string FormatTimestamp(int64_t value, TypeId id) {
  const bool nanos = id == TypeId::kTimestampNs || id == TypeId::kTimestampTzNs;
  const int64_t per_day = kSecondsPerDay * (nanos ? kNanosPerSecond : kMicrosPerSecond);
  int64_t days = value / per_day, of_day = value % per_day;
  if (of_day < 0) {
    of_day += per_day;
    --days;
  }
  std::string out = FormatDate(days) + " " + FormatTimeOfDay(of_day, nanos ? 9 : 6);
  if (id == TypeId::kTimestampTz || id == TypeId::kTimestampTzNs) out += "+00:00";
  return out;
}

std::string FormatUuid(const std::string& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    auto b = static_cast<unsigned char>(bytes[i]);
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::string FormatDouble(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  std::array<char, 64> buf;
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return ec == std::errc() ? std::string(buf.data(), end) : std::to_string(v);
}

}  // namespace

std::string FormatLiteral(const Literal& literal, const Type* type) {
  if (literal.is_null()) return "NULL";
  const TypeId id = type ? type->id : literal.type;
  if (const auto* i = std::get_if<int64_t>(&literal.value)) {
    switch (id) {
      case TypeId::kDate:
        return "DATE '" + FormatDate(*i) + "'";
      case TypeId::kTime:
        return QuoteString(FormatTimeOfDay(*i, 6));
      case TypeId::kTimestamp:
      case TypeId::kTimestampTz:
      case TypeId::kTimestampNs:
      case TypeId::kTimestampTzNs:
        return "TIMESTAMP '" + FormatTimestamp(*i, id) + "'";
      default:
        return std::to_string(*i);
    }
  }
  if (const auto* d = std::get_if<double>(&literal.value)) return FormatDouble(*d);
  if (const auto* b = std::get_if<bool>(&literal.value)) return *b ? "TRUE" : "FALSE";
  if (const auto* s = std::get_if<std::string>(&literal.value)) {
    return QuoteString(id == TypeId::kUuid && s->size() == 16 ? FormatUuid(*s) : *s);
  }
  return std::get<arrow::Decimal128>(literal.value).ToString(literal.scale);
}

}  // namespace icefloe::iceberg::internal

namespace icefloe::iceberg {

const char* OpName(ExprOp op) {
  switch (op) {
    case ExprOp::kTrue:
      return "TRUE";
    case ExprOp::kFalse:
      return "FALSE";
    case ExprOp::kAnd:
      return "AND";
    case ExprOp::kOr:
      return "OR";
    case ExprOp::kNot:
      return "NOT";
    case ExprOp::kEq:
      return "=";
    case ExprOp::kNe:
      return "!=";
    case ExprOp::kLt:
      return "<";
    case ExprOp::kLe:
      return "<=";
    case ExprOp::kGt:
      return ">";
    case ExprOp::kGe:
      return ">=";
    case ExprOp::kIn:
      return "IN";
    case ExprOp::kNotIn:
      return "NOT IN";
    case ExprOp::kIsNull:
      return "IS NULL";
    case ExprOp::kNotNull:
      return "IS NOT NULL";
    case ExprOp::kIsNan:
      return "IS NAN";
    case ExprOp::kNotNan:
      return "IS NOT NAN";
    case ExprOp::kStartsWith:
      return "LIKE";
    case ExprOp::kNotStartsWith:
      return "NOT LIKE";
  }
  return "?";
}

std::string ParsedLiteral::ToString() const {
  switch (kind) {
    case Kind::kString:
      return internal::QuoteString(text);
    case Kind::kBoolean:
      return text == "true" ? "TRUE" : "FALSE";
    case Kind::kDate:
      return "DATE " + internal::QuoteString(text);
    case Kind::kTimestamp:
      return "TIMESTAMP " + internal::QuoteString(text);
    default:
      return text;
  }
}

namespace internal {

std::string FormatNode(ExprOp op, const std::string& column,
                       const std::vector<std::string>& literals,
                       const std::vector<std::string>& children) {
  auto join = [](const std::vector<std::string>& parts, const char* sep) {
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
    return out;
  };
  switch (op) {
    case ExprOp::kTrue:
    case ExprOp::kFalse:
      return OpName(op);
    case ExprOp::kAnd:
      return "(" + join(children, " AND ") + ")";
    case ExprOp::kOr:
      return "(" + join(children, " OR ") + ")";
    case ExprOp::kNot:
      return "(NOT " + join(children, "") + ")";
    case ExprOp::kIn:
    case ExprOp::kNotIn:
      return column + " " + OpName(op) + " (" + join(literals, ", ") + ")";
    case ExprOp::kIsNull:
    case ExprOp::kNotNull:
    case ExprOp::kIsNan:
    case ExprOp::kNotNan:
      return column + " " + OpName(op);
    default:
      return column + " " + OpName(op) + " " + join(literals, ", ");
  }
}

}  // namespace internal
}  // namespace icefloe::iceberg
