#include "icefloe/transform/pre_tokenizers.h"

#include <utf8proc.h>

#include "icefloe/transform/unicode.h"

namespace icefloe::transform::hf {

namespace {

using Pieces = std::vector<std::pair<std::pair<size_t, size_t>, bool>>;

// The library's Pattern for a character predicate: each character it
// accepts a match of its own, the text between them not matches.
template <typename Predicate>
Pieces CharMatches(std::string_view text, Predicate match) {
  Pieces pieces;
  size_t last = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t start = i;
    if (!match(unicode::Next(text, &i))) continue;
    if (last < start) pieces.push_back({{last, start}, false});
    pieces.push_back({{start, i}, true});
    last = i;
  }
  if (last < text.size()) pieces.push_back({{last, text.size()}, false});
  return pieces;
}

// Rust's char::is_numeric.
bool IsNumeric(int32_t cp) {
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

// The Punctuation pre-tokenizer's is_punc: ASCII punctuation or Unicode P*.
bool IsPunc(int32_t cp) {
  const bool ascii = (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) ||
                     (cp >= 0x5B && cp <= 0x60) || (cp >= 0x7B && cp <= 0x7E);
  return ascii || unicode::IsPunctuation(cp);
}

}  // namespace

arrow::Result<std::unique_ptr<DigitsPreTokenizer>> DigitsPreTokenizer::FromJson(JsonObject* o) {
  const Json* v = o->Find("individual_digits");
  if (v == nullptr || !v->is_boolean()) {
    return Refuse(o->PathOf("individual_digits"),
                  "must be true or false (the library requires it)");
  }
  ARROW_RETURN_NOT_OK(o->Done());
  return std::unique_ptr<DigitsPreTokenizer>(new DigitsPreTokenizer(v->get<bool>()));
}

arrow::Status DigitsPreTokenizer::Split(std::string_view in,
                                        std::vector<std::string>* words) const {
  SplitBy(in, CharMatches(in, IsNumeric),
          individual_ ? SplitBehavior::kIsolated : SplitBehavior::kContiguous, words);
  return arrow::Status::OK();
}

arrow::Result<std::unique_ptr<PunctuationPreTokenizer>> PunctuationPreTokenizer::FromJson(
    JsonObject* o) {
  SplitBehavior behavior = SplitBehavior::kIsolated;
  if (const Json* v = o->Find("behavior")) {
    static const std::pair<const char*, SplitBehavior> kBehaviors[] = {
        {"Removed", SplitBehavior::kRemoved},
        {"Isolated", SplitBehavior::kIsolated},
        {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
        {"MergedWithNext", SplitBehavior::kMergedWithNext},
        {"Contiguous", SplitBehavior::kContiguous}};
    bool known = false;
    for (const auto& [name, value] : kBehaviors) {
      if (v->is_string() && v->get<std::string>() == name) {
        behavior = value;
        known = true;
      }
    }
    if (!known) {
      return Refuse(o->PathOf("behavior"), v->dump(),
                    " is not Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous");
    }
  }
  ARROW_RETURN_NOT_OK(o->Done());
  return std::unique_ptr<PunctuationPreTokenizer>(new PunctuationPreTokenizer(behavior));
}

arrow::Status PunctuationPreTokenizer::Split(std::string_view in,
                                             std::vector<std::string>* words) const {
  SplitBy(in, CharMatches(in, IsPunc), behavior_, words);
  return arrow::Status::OK();
}

arrow::Status WhitespacePreTokenizer::Split(std::string_view in,
                                            std::vector<std::string>* words) const {
  // Each character is a word character, whitespace or other; a word is a
  // maximal run of one of the first and third kinds.
  enum Kind { kWord, kSpace, kOther };
  size_t start = 0;
  Kind run = kSpace;
  for (size_t i = 0; i < in.size();) {
    const size_t at = i;
    const int32_t cp = unicode::Next(in, &i);
    const Kind kind = unicode::IsWordCharacter(cp) ? kWord
                      : unicode::IsWhiteSpace(cp)  ? kSpace
                                                   : kOther;
    if (kind == run) continue;
    if (run != kSpace) words->emplace_back(in.substr(start, at - start));
    start = at;
    run = kind;
  }
  if (run != kSpace) words->emplace_back(in.substr(start));
  return arrow::Status::OK();
}

arrow::Status WhitespaceSplitPreTokenizer::Split(std::string_view in,
                                                 std::vector<std::string>* words) const {
  SplitBy(in, CharMatches(in, unicode::IsWhiteSpace), SplitBehavior::kRemoved, words);
  return arrow::Status::OK();
}

arrow::Result<std::unique_ptr<MetaspacePreTokenizer>> MetaspacePreTokenizer::FromJson(
    JsonObject* o) {
  std::unique_ptr<MetaspacePreTokenizer> m(new MetaspacePreTokenizer());
  m->path_ = o->path();
  ARROW_ASSIGN_OR_RAISE(m->replacement_, o->String("replacement"));
  size_t end = 0;
  if (m->replacement_.empty() || unicode::Next(m->replacement_, &end) < 0 ||
      end != m->replacement_.size()) {
    return Refuse(o->PathOf("replacement"), "must be one character");
  }
  if (const Json* scheme = o->Find("prepend_scheme")) {
    static const std::pair<const char*, Prepend> kSchemes[] = {
        {"always", Prepend::kAlways}, {"first", Prepend::kFirst}, {"never", Prepend::kNever}};
    bool known = false;
    for (const auto& [name, value] : kSchemes) {
      if (scheme->is_string() && scheme->get<std::string>() == name) {
        m->prepend_ = value;
        known = true;
      }
    }
    if (!known) {
      return Refuse(o->PathOf("prepend_scheme"), scheme->dump(),
                    " is not \"always\", \"first\" or \"never\"");
    }
  }
  ARROW_ASSIGN_OR_RAISE(bool add_prefix_space, o->Bool("add_prefix_space", true));
  if (!add_prefix_space && m->prepend_ != Prepend::kNever) {
    // It means "never", which the scheme (by default "always") contradicts.
    return Refuse(o->PathOf("add_prefix_space"),
                  "false without prepend_scheme \"never\" (the library refuses the file)");
  }
  ARROW_ASSIGN_OR_RAISE(m->split_, o->Bool("split", true));
  o->Ignore("str_rep");  // the replacement again, in files before prepend_scheme
  ARROW_RETURN_NOT_OK(o->Done());
  return m;
}

arrow::Status MetaspacePreTokenizer::Split(std::string_view in,
                                           std::vector<std::string>* words) const {
  return SplitAt(in, /*at_start=*/false, words);
}

arrow::Status MetaspacePreTokenizer::SplitAt(std::string_view in, bool at_start,
                                             std::vector<std::string>* words) const {
  std::string s;
  s.reserve(in.size() + replacement_.size() * 4);
  for (char c : in) {
    if (c == ' ') {
      s.append(replacement_);
    } else {
      s.push_back(c);
    }
  }
  const bool prepend = prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && at_start);
  if (prepend && s.compare(0, replacement_.size(), replacement_) != 0) s.insert(0, replacement_);
  if (!split_) {
    if (!s.empty()) words->push_back(std::move(s));
    return arrow::Status::OK();
  }
  int32_t rep = 0;
  {
    size_t i = 0;
    rep = unicode::Next(replacement_, &i);
  }
  SplitBy(s, CharMatches(s, [rep](int32_t cp) { return cp == rep; }),
          SplitBehavior::kMergedWithNext, words);
  return arrow::Status::OK();
}

}  // namespace icefloe::transform::hf
