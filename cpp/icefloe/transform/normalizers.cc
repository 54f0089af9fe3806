#include "icefloe/transform/normalizers.h"

#include <utf8proc.h>

#include "icefloe/transform/unicode.h"

namespace icefloe::transform::hf {

namespace {

// The unicode-normalization crate's is_combining_mark: General_Category M.
bool IsMark(int32_t cp) {
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
      return true;
    default:
      return false;
  }
}

// A boolean the library requires (a missing one fails its load).
arrow::Result<bool> RequiredBool(JsonObject* o, const std::string& field) {
  const Json* v = o->Find(field);
  if (v == nullptr) return Refuse(o->PathOf(field), "missing (true or false is needed)");
  if (!v->is_boolean()) return Refuse(o->PathOf(field), "must be true or false, got ", v->dump());
  return v->get<bool>();
}

// The `pattern` of `o`: {"String": literal} or {"Regex": Oniguruma pattern},
// compiled as the library compiles it.
arrow::Result<std::unique_ptr<Regex>> PatternFromJson(JsonObject* o) {
  const std::string path = o->PathOf("pattern");
  const Json* pattern = o->Find("pattern");
  if (pattern == nullptr || !pattern->is_object() || pattern->size() != 1 ||
      !pattern->begin().value().is_string() ||
      (pattern->begin().key() != "String" && pattern->begin().key() != "Regex")) {
    return Refuse(path, "must be {\"String\": ...} or {\"Regex\": ...}");
  }
  const std::string kind = pattern->begin().key();
  const std::string text = pattern->begin().value().get<std::string>();
  if (kind == "Regex") return Regex::Compile(text, path + ".Regex");
  // regex::escape's meta characters, escaped as the library escapes them
  // before compiling the literal with Oniguruma.
  std::string escaped;
  for (char c : text) {
    if (std::string_view("\\.+*?()|[]{}^$#&-~").find(c) != std::string_view::npos) {
      escaped.push_back('\\');
    }
    escaped.push_back(c);
  }
  return Regex::Compile(escaped, path + ".String");
}

// A string field the library requires, valid UTF-8.
arrow::Result<std::string> Text(JsonObject* o, const std::string& field) {
  ARROW_ASSIGN_OR_RAISE(std::string s, o->String(field));
  if (!unicode::IsValid(s)) return Refuse(o->PathOf(field), "is not valid UTF-8");
  return s;
}

}  // namespace

arrow::Status LowercaseNormalizer::Normalize(std::string_view in, std::string* out) const {
  for (size_t i = 0; i < in.size();) unicode::AppendLowercase(unicode::Next(in, &i), out);
  return arrow::Status::OK();
}

arrow::Result<std::unique_ptr<StripNormalizer>> StripNormalizer::FromJson(JsonObject* o) {
  ARROW_ASSIGN_OR_RAISE(bool left, RequiredBool(o, "strip_left"));
  ARROW_ASSIGN_OR_RAISE(bool right, RequiredBool(o, "strip_right"));
  ARROW_RETURN_NOT_OK(o->Done());
  return std::unique_ptr<StripNormalizer>(new StripNormalizer(left, right));
}

arrow::Status StripNormalizer::Normalize(std::string_view in, std::string* out) const {
  size_t start = 0, end = in.size();
  if (left_) {
    while (start < end) {
      size_t next = start;
      if (!unicode::IsWhiteSpace(unicode::Next(in, &next))) break;
      start = next;
    }
  }
  if (right_) {
    while (end > start) {
      size_t first = end - 1;  // the last character's first byte
      while (first > start && (static_cast<unsigned char>(in[first]) & 0xC0) == 0x80) --first;
      size_t next = first;
      if (!unicode::IsWhiteSpace(unicode::Next(in, &next))) break;
      end = first;
    }
  }
  out->append(in.substr(start, end - start));
  return arrow::Status::OK();
}

arrow::Status StripAccentsNormalizer::Normalize(std::string_view in, std::string* out) const {
  for (size_t i = 0; i < in.size();) {
    const size_t start = i;
    if (!IsMark(unicode::Next(in, &i))) out->append(in.substr(start, i - start));
  }
  return arrow::Status::OK();
}

arrow::Result<std::unique_ptr<ReplaceNormalizer>> ReplaceNormalizer::FromJson(JsonObject* o) {
  std::unique_ptr<ReplaceNormalizer> r(new ReplaceNormalizer());
  ARROW_ASSIGN_OR_RAISE(r->regex_, PatternFromJson(o));
  ARROW_ASSIGN_OR_RAISE(r->content_, Text(o, "content"));
  ARROW_RETURN_NOT_OK(o->Done());
  return r;
}

arrow::Status ReplaceNormalizer::Normalize(std::string_view in, std::string* out) const {
  std::vector<std::pair<size_t, size_t>> matches;
  ARROW_RETURN_NOT_OK(regex_->FindAll(in, &matches));
  size_t done = 0;
  for (auto [start, end] : matches) {
    out->append(in.substr(done, start - done)).append(content_);
    done = end;
  }
  out->append(in.substr(done));
  return arrow::Status::OK();
}

arrow::Result<std::unique_ptr<PrependNormalizer>> PrependNormalizer::FromJson(JsonObject* o) {
  ARROW_ASSIGN_OR_RAISE(std::string prepend, Text(o, "prepend"));
  ARROW_RETURN_NOT_OK(o->Done());
  return std::unique_ptr<PrependNormalizer>(new PrependNormalizer(std::move(prepend)));
}

arrow::Status PrependNormalizer::Normalize(std::string_view in, std::string* out) const {
  if (!in.empty()) out->append(prepend_);
  out->append(in);
  return arrow::Status::OK();
}

}  // namespace icefloe::transform::hf
