// Constants from filter text: date/time parsing and coercion to column types.
#include <charconv>
#include <cmath>
#include <limits>

#include "icefloe/iceberg/expr_internal.h"

namespace icefloe::iceberg::internal {

namespace {

constexpr int64_t kSecondsPerDay = 86400;
constexpr int64_t kNanosPerSecond = 1000000000;
constexpr int64_t kMicrosPerSecond = 1000000;

// Howard Hinnant's days_from_civil (proleptic Gregorian).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

bool IsLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int64_t DaysInMonth(int64_t y, int64_t m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m - 1];
}

// Reads exactly `n` digits at `*pos`, advancing it.
std::optional<int64_t> Digits(std::string_view s, size_t* pos, size_t n) {
  if (*pos + n > s.size()) return std::nullopt;
  int64_t v = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[*pos + i];
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  *pos += n;
  return v;
}

bool Expect(std::string_view s, size_t* pos, char c) {
  if (*pos >= s.size() || s[*pos] != c) return false;
  ++*pos;
  return true;
}

std::optional<int64_t> DatePart(std::string_view s, size_t* pos) {
  auto y = Digits(s, pos, 4);
  if (!y || !Expect(s, pos, '-')) return std::nullopt;
  auto m = Digits(s, pos, 2);
  if (!m || *m < 1 || *m > 12 || !Expect(s, pos, '-')) return std::nullopt;
  auto d = Digits(s, pos, 2);
  if (!d || *d < 1 || *d > DaysInMonth(*y, *m)) return std::nullopt;
  return DaysFromCivil(*y, *m, *d);
}

// HH:MM:SS[.f{1,max_digits}] -> nanos of day; the digit count goes to *digits.
std::optional<int64_t> TimePart(std::string_view s, size_t* pos, size_t max_digits, int* digits) {
  auto h = Digits(s, pos, 2);
  if (!h || *h > 23 || !Expect(s, pos, ':')) return std::nullopt;
  auto mi = Digits(s, pos, 2);
  if (!mi || *mi > 59 || !Expect(s, pos, ':')) return std::nullopt;
  auto sec = Digits(s, pos, 2);
  if (!sec || *sec > 59) return std::nullopt;
  int64_t nanos = ((*h * 60 + *mi) * 60 + *sec) * kNanosPerSecond;
  *digits = 0;
  if (*pos < s.size() && s[*pos] == '.') {
    ++*pos;
    int64_t scale = kNanosPerSecond;
    while (*pos < s.size() && s[*pos] >= '0' && s[*pos] <= '9') {
      if (static_cast<size_t>(*digits) == max_digits) return std::nullopt;
      scale /= 10;
      nanos += (s[*pos] - '0') * scale;
      ++*digits;
      ++*pos;
    }
    if (*digits == 0) return std::nullopt;
  }
  return nanos;
}

const char* KindName(ParsedLiteral::Kind kind) {
  switch (kind) {
    case ParsedLiteral::Kind::kInteger:
      return "integer";
    case ParsedLiteral::Kind::kFloat:
      return "float";
    case ParsedLiteral::Kind::kString:
      return "string";
    case ParsedLiteral::Kind::kBoolean:
      return "boolean";
    case ParsedLiteral::Kind::kDate:
      return "DATE";
    case ParsedLiteral::Kind::kTimestamp:
      return "TIMESTAMP";
  }
  return "?";
}

// The error for a literal that does not fit a column; `why` ends the sentence.
arrow::Status Mismatch(const ParsedLiteral& lit, const Type& type, std::string_view column,
                       std::string_view why = {}) {
  if (why.empty()) {
    return arrow::Status::Invalid("cannot compare ", type.ToString(), " column '", column,
                                  "' with ", KindName(lit.kind), " literal ", lit.ToString(),
                                  " at position ", lit.position);
  }
  return arrow::Status::Invalid(KindName(lit.kind), " literal ", lit.ToString(), " at position ",
                                lit.position, " ", why, " for ", type.ToString(), " column '",
                                column, "'");
}

// "+1." -> "1.0", "-.5" -> "-0.5": the forms from_chars and Decimal128 read.
std::string CanonicalNumber(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+' && i == 0) continue;
    const bool digit_before = i > 0 && text[i - 1] >= '0' && text[i - 1] <= '9';
    const bool digit_after = i + 1 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '9';
    if (c == '.' && !digit_before) out += '0';
    out += c;
    if (c == '.' && !digit_after) out += '0';
  }
  return out;
}

arrow::Result<Literal> CoerceNumber(const ParsedLiteral& lit, const Type& type,
                                    std::string_view column) {
  Literal out;
  out.type = type.id;
  const std::string canonical = CanonicalNumber(lit.text);
  std::string_view text = canonical;
  if (type.id == TypeId::kInt || type.id == TypeId::kLong) {
    if (lit.kind != ParsedLiteral::Kind::kInteger) return Mismatch(lit, type, column);
    int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    bool fits = ec == std::errc() && end == text.data() + text.size();
    if (fits && type.id == TypeId::kInt) {
      fits = v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
    }
    if (!fits) return Mismatch(lit, type, column, "is out of range");
    out.value = v;
    return out;
  }
  if (type.id == TypeId::kFloat || type.id == TypeId::kDouble) {
    double v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) {
      return Mismatch(lit, type, column, "is out of range");
    }
    if (type.id == TypeId::kFloat) {
      // Compare as the column does: a float32 value against a float32 constant.
      if (std::fabs(v) > std::numeric_limits<float>::max()) {
        return Mismatch(lit, type, column, "is out of range");
      }
      v = static_cast<double>(static_cast<float>(v));
    }
    out.value = v;
    return out;
  }
  // Decimal: exact, at the column's scale.
  arrow::Decimal128 v;
  int32_t precision = 0, scale = 0;
  if (!arrow::Decimal128::FromString(text, &v, &precision, &scale).ok()) {
    // The lexer let only numbers through: this one has more than 38 digits.
    return Mismatch(lit, type, column, "is out of range");
  }
  auto rescaled = v.Rescale(scale, type.scale);
  if (!rescaled.ok() && scale > type.scale) {
    return Mismatch(lit, type, column,
                    "has more than " + std::to_string(type.scale) + " digits after the point");
  }
  if (!rescaled.ok() || !rescaled->FitsInPrecision(type.precision)) {
    return Mismatch(lit, type, column, "is out of range");
  }
  out.value = *rescaled;
  out.scale = type.scale;
  return out;
}

arrow::Result<Literal> CoerceTimestamp(const ParsedLiteral& lit, const Type& type,
                                       std::string_view column) {
  const bool nanos = type.id == TypeId::kTimestampNs || type.id == TypeId::kTimestampTzNs;
  const bool utc = type.id == TypeId::kTimestampTz || type.id == TypeId::kTimestampTzNs;
  std::optional<TimestampText> ts;
  if (lit.kind == ParsedLiteral::Kind::kDate) {
    if (auto days = ParseDateText(lit.text)) ts = TimestampText{*days, 0, 0, false, 0};
  } else if (lit.kind == ParsedLiteral::Kind::kString ||
             lit.kind == ParsedLiteral::Kind::kTimestamp) {
    ts = ParseTimestampText(lit.text, /*allow_date_only=*/true);
  } else {
    return Mismatch(lit, type, column);
  }
  if (!ts) {
    return Mismatch(lit, type, column, "is not a timestamp 'YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM]'");
  }
  if (ts->fraction_digits > (nanos ? 9 : 6)) {
    return Mismatch(lit, type, column, "has more fractional digits than the column keeps");
  }
  if (ts->offset_seconds != 0 && !utc) {
    return Mismatch(lit, type, column, "has a time-zone offset, which needs a timestamptz column");
  }
  const int64_t per_second = nanos ? kNanosPerSecond : kMicrosPerSecond;
  const int64_t of_day = nanos ? ts->nanos_of_day : ts->nanos_of_day / 1000;
  int64_t value = 0;
  if (__builtin_mul_overflow(ts->days, kSecondsPerDay * per_second, &value) ||
      __builtin_add_overflow(value, of_day, &value) ||
      __builtin_sub_overflow(value, int64_t{ts->offset_seconds} * per_second, &value)) {
    return Mismatch(lit, type, column, "is out of range");
  }
  Literal out;
  out.type = type.id;
  out.value = value;
  return out;
}

std::optional<std::string> ParseUuid(std::string_view s) {
  if (s.size() != 36) return std::nullopt;
  std::string bytes;
  int high = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return std::nullopt;
      continue;
    }
    int v = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (v < 0) return std::nullopt;
    if (high < 0) {
      high = v;
    } else {
      bytes.push_back(static_cast<char>(high * 16 + v));
      high = -1;
    }
  }
  return bytes;
}

arrow::Result<Literal> CoerceText(const ParsedLiteral& lit, const Type& type,
                                  std::string_view column) {
  Literal out;
  out.type = type.id;
  if (lit.kind != ParsedLiteral::Kind::kString) return Mismatch(lit, type, column);
  switch (type.id) {
    case TypeId::kString:
    case TypeId::kBinary:
      out.value = lit.text;
      return out;
    case TypeId::kFixed:
      if (lit.text.size() != static_cast<size_t>(type.length)) {
        return Mismatch(lit, type, column,
                        "does not have exactly " + std::to_string(type.length) + " bytes");
      }
      out.value = lit.text;
      return out;
    case TypeId::kUuid: {
      auto bytes = ParseUuid(lit.text);
      if (!bytes) return Mismatch(lit, type, column, "is not a UUID (8-4-4-4-12 hex digits)");
      out.value = std::move(*bytes);
      return out;
    }
    case TypeId::kTime: {
      auto micros = ParseTimeText(lit.text);
      if (!micros) return Mismatch(lit, type, column, "is not a time 'HH:MM:SS[.ffffff]'");
      out.value = *micros;
      return out;
    }
    default:
      return Mismatch(lit, type, column);
  }
}

}  // namespace

std::optional<int64_t> ParseDateText(std::string_view text) {
  size_t pos = 0;
  auto days = DatePart(text, &pos);
  if (!days || pos != text.size()) return std::nullopt;
  return days;
}

std::optional<TimestampText> ParseTimestampText(std::string_view text, bool allow_date_only) {
  TimestampText ts;
  size_t pos = 0;
  auto days = DatePart(text, &pos);
  if (!days) return std::nullopt;
  ts.days = *days;
  if (pos == text.size()) {
    if (!allow_date_only) return std::nullopt;
    return ts;
  }
  if (text[pos] != ' ' && text[pos] != 'T' && text[pos] != 't') return std::nullopt;
  ++pos;
  auto nanos = TimePart(text, &pos, 9, &ts.fraction_digits);
  if (!nanos) return std::nullopt;
  ts.nanos_of_day = *nanos;
  if (pos == text.size()) return ts;
  ts.has_offset = true;
  if (text[pos] == 'Z' || text[pos] == 'z') {
    return pos + 1 == text.size() ? std::optional<TimestampText>(ts) : std::nullopt;
  }
  if (text[pos] != '+' && text[pos] != '-') return std::nullopt;
  const int sign = text[pos] == '-' ? -1 : 1;
  ++pos;
  auto oh = Digits(text, &pos, 2);
  if (!oh || *oh > 18 || !Expect(text, &pos, ':')) return std::nullopt;
  auto om = Digits(text, &pos, 2);
  if (!om || *om > 59 || pos != text.size()) return std::nullopt;
  ts.offset_seconds = static_cast<int32_t>(sign * (*oh * 3600 + *om * 60));
  return ts;
}

std::optional<int64_t> ParseTimeText(std::string_view text) {
  size_t pos = 0;
  int digits = 0;
  auto nanos = TimePart(text, &pos, 6, &digits);
  if (!nanos || pos != text.size()) return std::nullopt;
  return *nanos / 1000;
}

arrow::Result<Literal> CoerceLiteral(const ParsedLiteral& lit, const Type& type,
                                     std::string_view column) {
  using Kind = ParsedLiteral::Kind;
  switch (type.id) {
    case TypeId::kBoolean: {
      if (lit.kind != Kind::kBoolean) return Mismatch(lit, type, column);
      Literal out;
      out.type = type.id;
      out.value = lit.text == "true";
      return out;
    }
    case TypeId::kInt:
    case TypeId::kLong:
    case TypeId::kFloat:
    case TypeId::kDouble:
    case TypeId::kDecimal:
      if (lit.kind != Kind::kInteger && lit.kind != Kind::kFloat) {
        return Mismatch(lit, type, column);
      }
      return CoerceNumber(lit, type, column);
    case TypeId::kDate: {
      if (lit.kind != Kind::kDate && lit.kind != Kind::kString) return Mismatch(lit, type, column);
      auto days = ParseDateText(lit.text);
      if (!days) return Mismatch(lit, type, column, "is not a date 'YYYY-MM-DD'");
      Literal out;
      out.type = type.id;
      out.value = *days;
      return out;
    }
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
    case TypeId::kTimestampNs:
    case TypeId::kTimestampTzNs:
      return CoerceTimestamp(lit, type, column);
    case TypeId::kTime:
    case TypeId::kString:
    case TypeId::kUuid:
    case TypeId::kFixed:
    case TypeId::kBinary:
      return CoerceText(lit, type, column);
    case TypeId::kStruct:
    case TypeId::kList:
    case TypeId::kMap:
      break;
  }
  return Mismatch(lit, type, column);
}

}  // namespace icefloe::iceberg::internal
