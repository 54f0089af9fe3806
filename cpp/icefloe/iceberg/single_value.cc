// Iceberg's single-value binary serialization (spec appendix D).
#include <array>
#include <cstdint>
#include <cstring>
#include <string>

#include <arrow/util/endian.h>

#include "icefloe/iceberg/types.h"

namespace icefloe::iceberg {

namespace {

template <typename T>
T ReadLE(std::string_view bytes) {
  T v;
  std::memcpy(&v, bytes.data(), sizeof(T));
  return v;
}

}  // namespace

arrow::Result<Literal> DecodeSingleValue(const Type& type, std::string_view bytes) {
  Literal lit;
  lit.type = type.id;
  auto need = [&](size_t n) -> arrow::Status {
    if (bytes.size() != n) {
      return arrow::Status::Invalid("Iceberg ", type.ToString(), " bound has ", bytes.size(),
                                    " bytes, expected ", n);
    }
    return arrow::Status::OK();
  };
  switch (type.id) {
    case TypeId::kBoolean:
      ARROW_RETURN_NOT_OK(need(1));
      lit.value = bytes[0] != 0;
      return lit;
    case TypeId::kInt:
    case TypeId::kDate:
      // Iceberg may promote int->long: a long column's old files keep 4-byte bounds.
      if (bytes.size() == 8) {
        lit.value = ReadLE<int64_t>(bytes);
        return lit;
      }
      ARROW_RETURN_NOT_OK(need(4));
      lit.value = static_cast<int64_t>(ReadLE<int32_t>(bytes));
      return lit;
    case TypeId::kLong:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
    case TypeId::kTimestampNs:
    case TypeId::kTimestampTzNs:
      if (bytes.size() == 4) {
        lit.value = static_cast<int64_t>(ReadLE<int32_t>(bytes));
        return lit;
      }
      ARROW_RETURN_NOT_OK(need(8));
      lit.value = ReadLE<int64_t>(bytes);
      return lit;
    case TypeId::kFloat:
      if (bytes.size() == 8) {
        lit.value = ReadLE<double>(bytes);
        return lit;
      }
      ARROW_RETURN_NOT_OK(need(4));
      lit.value = static_cast<double>(ReadLE<float>(bytes));
      return lit;
    case TypeId::kDouble:
      if (bytes.size() == 4) {  // promoted from float
        lit.value = static_cast<double>(ReadLE<float>(bytes));
        return lit;
      }
      ARROW_RETURN_NOT_OK(need(8));
      lit.value = ReadLE<double>(bytes);
      return lit;
    case TypeId::kString:
    case TypeId::kBinary:
    case TypeId::kFixed:
    case TypeId::kUuid:
      lit.value = std::string(bytes);
      return lit;
    case TypeId::kDecimal: {
      if (bytes.empty() || bytes.size() > 16) {
        return arrow::Status::Invalid("Iceberg decimal bound has ", bytes.size(), " bytes");
      }
      ARROW_ASSIGN_OR_RAISE(
          auto d, arrow::Decimal128::FromBigEndian(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                   static_cast<int32_t>(bytes.size())));
      lit.value = d;
      lit.scale = type.scale;
      return lit;
    }
    default:
      return arrow::Status::NotImplemented("no single-value form for Iceberg ", type.ToString());
  }
}

namespace {

template <typename T>
void PutLE(std::string* out, T v) {
  v = arrow::bit_util::ToLittleEndian(v);
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

}  // namespace

arrow::Result<std::string> EncodeSingleValue(const Literal& literal, const Type& type) {
  if (literal.is_null()) {
    return arrow::Status::Invalid("a null ", type.ToString(), " has no single-value form");
  }
  std::string out;
  const auto* i = std::get_if<int64_t>(&literal.value);
  const auto* d = std::get_if<double>(&literal.value);
  switch (type.id) {
    case TypeId::kBoolean:
      if (const auto* b = std::get_if<bool>(&literal.value)) {
        out.push_back(*b ? 1 : 0);
        return out;
      }
      break;
    case TypeId::kInt:
    case TypeId::kDate:
      if (i && *i >= INT32_MIN && *i <= INT32_MAX) {
        PutLE(&out, static_cast<int32_t>(*i));
        return out;
      }
      break;
    case TypeId::kLong:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
    case TypeId::kTimestampNs:
    case TypeId::kTimestampTzNs:
      if (i) {
        PutLE(&out, *i);
        return out;
      }
      break;
    case TypeId::kFloat:
      if (d) {
        PutLE(&out, static_cast<float>(*d));
        return out;
      }
      break;
    case TypeId::kDouble:
      if (d) {
        PutLE(&out, *d);
        return out;
      }
      break;
    case TypeId::kString:
    case TypeId::kBinary:
    case TypeId::kFixed:
    case TypeId::kUuid:
      if (const auto* s = std::get_if<std::string>(&literal.value)) return *s;
      break;
    case TypeId::kDecimal:
      if (const auto* dec = std::get_if<arrow::Decimal128>(&literal.value)) {
        ARROW_ASSIGN_OR_RAISE(auto rescaled, dec->Rescale(literal.scale, type.scale));
        const std::array<uint8_t, 16> bytes = rescaled.ToBytes();  // little-endian
        // The minimal big-endian two's complement: drop redundant sign bytes.
        int n = 16;
        const uint8_t sign = (bytes[15] & 0x80) ? 0xFF : 0x00;
        while (n > 1 && bytes[n - 1] == sign && ((bytes[n - 2] & 0x80) == (sign & 0x80))) --n;
        for (int k = n - 1; k >= 0; --k) out.push_back(static_cast<char>(bytes[k]));
        return out;
      }
      break;
    default:
      return arrow::Status::NotImplemented("no single-value form for Iceberg ", type.ToString());
  }
  return arrow::Status::Invalid("literal ", literal.ToString(), " is not a ", type.ToString());
}

}  // namespace icefloe::iceberg
