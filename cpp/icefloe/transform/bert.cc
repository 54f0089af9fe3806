#include "icefloe/transform/bert.h"

#include "icefloe/transform/unicode.h"

namespace icefloe::transform::hf {

namespace {

bool IsChineseChar(int32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

bool IsAsciiPunctuation(int32_t cp) {
  return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
         (cp >= 0x7B && cp <= 0x7E);
}

bool IsAscii(std::string_view s) {
  unsigned char any = 0;
  for (unsigned char c : s) any |= c;
  return any < 0x80;
}

}  // namespace

arrow::Status BertNormalizer::Normalize(std::string_view in, std::string* out) const {
  if (IsAscii(in)) {
    // ASCII has no accents, ideographs or multi-character lowercase: one
    // pass. Its controls (Cc) are dropped, tab, LF and CR made spaces.
    const size_t first = out->size();
    out->resize(first + in.size());
    char* o = out->data() + first;
    for (char ch : in) {
      auto c = static_cast<unsigned char>(ch);
      if (clean_text_ && (c < 0x20 || c == 0x7F)) {
        if (c != '\t' && c != '\n' && c != '\r') continue;
        c = ' ';
      }
      if (lowercase_ && c >= 'A' && c <= 'Z') c += 32;
      *o++ = static_cast<char>(c);
    }
    out->resize(static_cast<size_t>(o - out->data()));
    return arrow::Status::OK();
  }
  // Each stage over the whole piece, in the library's order: clean, CJK,
  // accents (NFD reorders marks across characters), lowercase.
  std::string a, b;
  std::string_view text = in;
  if (clean_text_ || handle_chinese_chars_) {
    a.reserve(in.size());
    for (size_t i = 0; i < in.size();) {
      int32_t cp = unicode::Next(in, &i);
      if (clean_text_) {
        if (cp == 0 || cp == 0xFFFD) continue;
        const bool tab_or_newline = cp == '\t' || cp == '\n' || cp == '\r';
        if (!tab_or_newline && unicode::IsOther(cp)) continue;
        if (tab_or_newline || unicode::IsWhiteSpace(cp)) cp = ' ';
      }
      if (handle_chinese_chars_ && IsChineseChar(cp)) {
        a.push_back(' ');
        unicode::Append(cp, &a);
        a.push_back(' ');
      } else {
        unicode::Append(cp, &a);
      }
    }
    text = a;
  }
  if (strip_accents_) {
    std::string nfd;
    unicode::AppendNfd(text, &nfd);
    b.reserve(nfd.size());
    for (size_t i = 0; i < nfd.size();) {
      const size_t start = i;
      const int32_t cp = unicode::Next(nfd, &i);
      if (!unicode::IsMarkNonspacing(cp)) b.append(nfd, start, i - start);
    }
    text = b;
  }
  if (!lowercase_) {
    out->append(text);
    return arrow::Status::OK();
  }
  for (size_t i = 0; i < text.size();) unicode::AppendLowercase(unicode::Next(text, &i), out);
  return arrow::Status::OK();
}

void BertPreTokenizer::ForEach(std::string_view in,
                               const std::function<void(std::string_view)>& f) const {
  size_t word = 0;  // start of the current word
  for (size_t i = 0; i < in.size();) {
    const size_t start = i;
    const int32_t cp = unicode::Next(in, &i);
    const bool space = unicode::IsWhiteSpace(cp);
    // Every ASCII mark of Unicode's P* is among the ASCII punctuation.
    if (!space && !IsAsciiPunctuation(cp) && (cp < 0x80 || !unicode::IsPunctuation(cp))) continue;
    if (start > word) f(in.substr(word, start - word));
    if (!space) f(in.substr(start, i - start));
    word = i;
  }
  if (in.size() > word) f(in.substr(word));
}

arrow::Status BertPreTokenizer::Split(std::string_view in, std::vector<std::string>* words) const {
  ForEach(in, [words](std::string_view w) { words->emplace_back(w); });
  return arrow::Status::OK();
}

}  // namespace icefloe::transform::hf
