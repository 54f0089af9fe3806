#include "icefloe/common/bytes.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

namespace icefloe {
namespace {

struct Suffix {
  std::string_view name;
  double multiplier;
};

constexpr std::array<Suffix, 13> kSuffixes = {{
    {"", 1.0},
    {"b", 1.0},
    {"k", 1024.0},
    {"kib", 1024.0},
    {"kb", 1e3},
    {"m", 1048576.0},
    {"mib", 1048576.0},
    {"mb", 1e6},
    {"g", 1073741824.0},
    {"gib", 1073741824.0},
    {"gb", 1e9},
    {"t", 1099511627776.0},
    {"tib", 1099511627776.0},
}};

}  // namespace

arrow::Result<int64_t> ParseByteSize(std::string_view text) {
  auto invalid = [&] {
    return arrow::Status::Invalid("invalid byte size '", text,
                                  "' (expected e.g. 512MiB, 8GiB, 1GB)");
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  if (i == 0) return invalid();
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + i, value);
  if (ec != std::errc() || ptr != text.data() + i || value < 0) return invalid();

  std::string suffix;
  for (char c : text.substr(i)) {
    if (c == ' ') continue;
    suffix.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  if (suffix == "tb") {
    value *= 1e12;
  } else {
    bool found = false;
    for (const auto& s : kSuffixes) {
      if (s.name == suffix) {
        value *= s.multiplier;
        found = true;
        break;
      }
    }
    if (!found) return invalid();
  }
  if (value >= static_cast<double>(std::numeric_limits<int64_t>::max())) return invalid();
  return static_cast<int64_t>(std::llround(value));
}

std::string FormatBytes(int64_t bytes) {
  static constexpr std::array<const char*, 5> kUnits = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (std::fabs(value) >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  if (unit == 0) {
    std::snprintf(buf, sizeof(buf), "%lld B", static_cast<long long>(bytes));
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f %s", value, kUnits[unit]);
  }
  return buf;
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

}  // namespace icefloe
