// Values in Iceberg's JSON single-value serialization (v3 default values).
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "icefloe/iceberg/expr.h"
#include "icefloe/iceberg/expr_internal.h"

namespace icefloe::iceberg {

namespace {

using json = nlohmann::json;

std::optional<std::string> FromHex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  auto nibble = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
  };
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

}  // namespace

arrow::Result<Literal> LiteralFromJson(const Type& type, std::string_view json_text,
                                       std::string_view what) {
  const json v = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return arrow::Status::Invalid(what, ": ", json_text, " is not JSON");
  Literal out;
  out.type = type.id;
  out.scale = type.id == TypeId::kDecimal ? type.scale : 0;
  if (v.is_null()) return out;
  if (!type.is_primitive()) {
    return arrow::Status::NotImplemented(what, ": non-null value ", json_text, " for ",
                                         type.ToString());
  }
  auto mismatch = [&](std::string_view detail = {}) {
    return arrow::Status::Invalid(what, ": ", json_text, " is not a ", type.ToString(), " value",
                                  detail);
  };
  switch (type.id) {
    case TypeId::kBoolean:
      if (!v.is_boolean()) return mismatch();
      out.value = v.get<bool>();
      return out;
    case TypeId::kInt:
    case TypeId::kLong: {
      if (!v.is_number_integer()) return mismatch();
      if (v.is_number_unsigned() &&
          v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return mismatch(" (out of range)");
      }
      const int64_t i = v.get<int64_t>();
      if (type.id == TypeId::kInt &&
          (i < std::numeric_limits<int32_t>::min() || i > std::numeric_limits<int32_t>::max())) {
        return mismatch(" (out of range)");
      }
      out.value = i;
      return out;
    }
    case TypeId::kFloat:
    case TypeId::kDouble: {
      if (!v.is_number()) return mismatch();
      double d = v.get<double>();
      if (type.id == TypeId::kFloat) d = static_cast<double>(static_cast<float>(d));
      out.value = d;
      return out;
    }
    case TypeId::kBinary:
    case TypeId::kFixed: {
      if (!v.is_string()) return mismatch();
      auto bytes = FromHex(v.get<std::string>());
      if (!bytes) return mismatch(" (expected hex digits)");
      if (type.id == TypeId::kFixed && bytes->size() != static_cast<size_t>(type.length)) {
        return mismatch(" (wrong length)");
      }
      out.value = std::move(*bytes);
      return out;
    }
    default:
      break;
  }
  // Decimals, dates, times, timestamps, strings and UUIDs are JSON strings in
  // the forms filter literals use; coerce them the same way.
  if (!v.is_string()) return mismatch();
  ParsedLiteral parsed;
  parsed.kind =
      type.id == TypeId::kDecimal ? ParsedLiteral::Kind::kFloat : ParsedLiteral::Kind::kString;
  parsed.text = v.get<std::string>();
  auto coerced = internal::CoerceLiteral(parsed, type, what);
  if (!coerced.ok()) return mismatch();
  return coerced;
}

}  // namespace icefloe::iceberg
