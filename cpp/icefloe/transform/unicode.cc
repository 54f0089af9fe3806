#include "icefloe/transform/unicode.h"

#include <cstring>
#include <vector>

#include <utf8proc.h>

namespace icefloe::transform::unicode {

int32_t Next(std::string_view s, size_t* i) {
  const auto c = static_cast<unsigned char>(s[*i]);
  if (c < 0x80) {
    ++*i;
    return c;
  }
  utf8proc_int32_t cp = -1;
  const utf8proc_ssize_t n =
      utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + *i),
                       static_cast<utf8proc_ssize_t>(s.size() - *i), &cp);
  if (n <= 0) {
    ++*i;
    return -1;
  }
  *i += static_cast<size_t>(n);
  return cp;
}

void Append(int32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
    return;
  }
  utf8proc_uint8_t buf[4];
  const utf8proc_ssize_t n = utf8proc_encode_char(cp, buf);
  out->append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

bool IsValid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (i + 8 <= s.size()) {  // eight ASCII bytes at a time
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      if ((w & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    if (Next(s, &i) < 0) return false;
  }
  return true;
}

bool IsWhiteSpace(int32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20;
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool IsOther(int32_t cp) {
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CO:
      return true;
    default:
      return false;
  }
}

bool IsPunctuation(int32_t cp) {
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

bool IsMarkNonspacing(int32_t cp) { return utf8proc_category(cp) == UTF8PROC_CATEGORY_MN; }

bool IsWordCharacter(int32_t cp) {
  if (cp == 0x200C || cp == 0x200D) return true;  // Join_Control
  // Other_Alphabetic symbols: circled and squared Latin letters.
  if ((cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
      (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189)) {
    return true;
  }
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

void AppendLowercase(int32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    return;
  }
  if (cp == 0x130) {  // the one unconditional multi-character lowercase (SpecialCasing)
    out->append("i\xCC\x87");
    return;
  }
  Append(utf8proc_tolower(cp), out);
}

void AppendNfd(std::string_view s, std::string* out) {
  thread_local std::vector<utf8proc_int32_t> buffer;
  if (buffer.size() < s.size() * 4 + 16) buffer.resize(s.size() * 4 + 16);
  const auto* in = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  const auto options = static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE);
  utf8proc_ssize_t n =
      utf8proc_decompose(in, static_cast<utf8proc_ssize_t>(s.size()), buffer.data(),
                         static_cast<utf8proc_ssize_t>(buffer.size()), options);
  if (n > static_cast<utf8proc_ssize_t>(buffer.size())) {
    buffer.resize(static_cast<size_t>(n));
    n = utf8proc_decompose(in, static_cast<utf8proc_ssize_t>(s.size()), buffer.data(), n, options);
  }
  for (utf8proc_ssize_t k = 0; k < n; ++k) Append(buffer[k], out);
}

void AppendNormalForm(std::string_view s, NormalForm form, std::string* out) {
  int options = UTF8PROC_STABLE;
  if (form == NormalForm::kNfc || form == NormalForm::kNfkc) {
    options |= UTF8PROC_COMPOSE;
  } else {
    options |= UTF8PROC_DECOMPOSE;
  }
  if (form == NormalForm::kNfkc || form == NormalForm::kNfkd) options |= UTF8PROC_COMPAT;
  const auto o = static_cast<utf8proc_option_t>(options);
  thread_local std::vector<utf8proc_int32_t> buffer;
  if (buffer.size() < s.size() * 4 + 16) buffer.resize(s.size() * 4 + 16);
  const auto* in = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  const auto size = static_cast<utf8proc_ssize_t>(s.size());
  utf8proc_ssize_t n =
      utf8proc_decompose(in, size, buffer.data(), static_cast<utf8proc_ssize_t>(buffer.size()), o);
  if (n > static_cast<utf8proc_ssize_t>(buffer.size())) {
    buffer.resize(static_cast<size_t>(n));
    n = utf8proc_decompose(in, size, buffer.data(), n, o);
  }
  if (n < 0) {  // not valid UTF-8: checked before the first stage, so never
    out->append(s);
    return;
  }
  n = utf8proc_normalize_utf32(buffer.data(), n, o);
  for (utf8proc_ssize_t k = 0; k < n; ++k) Append(buffer[k], out);
}

}  // namespace icefloe::transform::unicode
