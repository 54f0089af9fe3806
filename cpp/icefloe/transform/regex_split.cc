#include "icefloe/transform/regex_split.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <mutex>
#include <optional>

#include <oniguruma.h>

#include "icefloe/transform/unicode.h"

namespace icefloe::transform::hf {

namespace {

// The ByteLevel pre-tokenizer's regex (the `tokenizers` package's, GPT-2's).
constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

regex_t* Onig(void* p) { return static_cast<regex_t*>(p); }

void InitializeOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

// GPT-2's bytes_to_unicode: the printable Latin-1 bytes stand for
// themselves, the other 68 for U+0100 onwards; each as UTF-8.
const std::array<std::string, 256>& ByteChars() {
  static const std::array<std::string, 256> chars = [] {
    std::array<std::string, 256> out;
    int32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      unicode::Append(printable ? b : next++, &out[b]);
    }
    return out;
  }();
  return chars;
}

// Oniguruma's pattern for the literal `s`: every ASCII punctuation mark escaped.
std::string EscapeLiteral(const std::string& s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u) && u > ' ') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

using Pieces = std::vector<std::pair<std::pair<size_t, size_t>, bool>>;

// The library's Pattern::find_matches: the text cut at the matches, each
// piece with whether it is one.
arrow::Status FindMatches(const Regex& regex, std::string_view text, bool invert, Pieces* pieces) {
  std::vector<std::pair<size_t, size_t>> matches;
  ARROW_RETURN_NOT_OK(regex.FindAll(text, &matches));
  size_t prev = 0;
  for (auto [start, end] : matches) {
    if (prev != start) pieces->push_back({{prev, start}, invert});
    pieces->push_back({{start, end}, !invert});
    prev = end;
  }
  if (prev != text.size()) pieces->push_back({{prev, text.size()}, invert});
  return arrow::Status::OK();
}

}  // namespace

arrow::Result<std::unique_ptr<Regex>> Regex::Compile(const std::string& pattern,
                                                     const std::string& path) {
  InitializeOnce();
  regex_t* regex = nullptr;
  OnigErrorInfo info;
  const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
  const int r = onig_new(&regex, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                         ONIG_SYNTAX_DEFAULT, &info);
  if (r != ONIG_NORMAL) {
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, r, &info);
    return Refuse(path, "Oniguruma refuses the pattern: ", reinterpret_cast<char*>(message));
  }
  return std::unique_ptr<Regex>(new Regex(regex));
}

Regex::~Regex() { onig_free(Onig(regex_)); }

namespace {

// One region per thread, reused by every search (Oniguruma grows it as needed).
OnigRegion* ThreadRegion() {
  struct Owned {
    OnigRegion* region = onig_region_new();
    ~Owned() { onig_region_free(region, 1); }
  };
  thread_local Owned owned;
  return owned.region;
}

}  // namespace

template <typename F>
arrow::Status Regex::ForEachMatch(std::string_view text, F&& f) const {
  OnigRegion* region = ThreadRegion();
  const auto* s = reinterpret_cast<const OnigUChar*>(text.data());
  const OnigUChar* end = s + text.size();
  size_t last_end = 0;
  std::optional<size_t> last_match_end;
  while (last_end <= text.size()) {  // (onig_search clears the region itself)
    const int r = onig_search(Onig(regex_), s, end, s + last_end, end, region, ONIG_OPTION_NONE);
    if (r == ONIG_MISMATCH) break;
    if (r < 0) {
      OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
      onig_error_code_to_str(message, r);
      return arrow::Status::Invalid("regex search failed: ", reinterpret_cast<char*>(message));
    }
    const auto start = static_cast<size_t>(region->beg[0]);
    const auto stop = static_cast<size_t>(region->end[0]);
    if (start == stop && last_match_end == stop) {  // no empty match right after a match
      if (last_end < text.size()) {
        unicode::Next(text, &last_end);
      } else {
        ++last_end;
      }
      continue;
    }
    last_end = stop;
    last_match_end = stop;
    f(start, stop);
  }
  return arrow::Status::OK();
}

arrow::Status Regex::FindAll(std::string_view text,
                             std::vector<std::pair<size_t, size_t>>* matches) const {
  return ForEachMatch(text, [&](size_t start, size_t stop) { matches->emplace_back(start, stop); });
}

void SplitBy(std::string_view text, Pieces pieces, SplitBehavior behavior,
             std::vector<std::string>* words) {
  // (range, removed), as NormalizedString::split computes them.
  Pieces cut;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      cut = std::move(pieces);
      break;
    case SplitBehavior::kIsolated:
      for (auto& [range, match] : pieces) cut.push_back({range, false});
      break;
    case SplitBehavior::kContiguous: {
      bool previous = false;
      for (auto& [range, match] : pieces) {
        if (match == previous && !cut.empty()) {
          cut.back().first.second = range.second;
        } else {
          cut.push_back({range, false});
        }
        previous = match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool previous = false;
      for (auto& [range, match] : pieces) {
        if (match && !previous && !cut.empty()) {
          cut.back().first.second = range.second;
        } else {
          cut.push_back({range, false});
        }
        previous = match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous = false;
      for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
        auto& [range, match] = *it;
        if (match && !previous && !cut.empty()) {
          cut.back().first.first = range.first;
        } else {
          cut.push_back({range, false});
        }
        previous = match;
      }
      std::reverse(cut.begin(), cut.end());
      break;
    }
  }
  for (auto& [range, removed] : cut) {
    if (!removed && range.second > range.first) {
      words->emplace_back(text.substr(range.first, range.second - range.first));
    }
  }
}

arrow::Result<std::unique_ptr<SplitPreTokenizer>> SplitPreTokenizer::FromJson(JsonObject* o) {
  std::unique_ptr<SplitPreTokenizer> s(new SplitPreTokenizer());
  ARROW_RETURN_NOT_OK(o->Require({"pattern", "behavior", "invert"}));
  const std::string pattern_path = o->PathOf("pattern");
  const Json* pattern = o->Find("pattern");
  if (pattern == nullptr || !pattern->is_object() || pattern->size() != 1 ||
      !pattern->begin().value().is_string() ||
      (pattern->begin().key() != "String" && pattern->begin().key() != "Regex")) {
    return Refuse(pattern_path, "must be {\"String\": ...} or {\"Regex\": ...}");
  }
  const std::string kind = pattern->begin().key();
  const std::string text = pattern->begin().value().get<std::string>();
  ARROW_ASSIGN_OR_RAISE(s->regex_, Regex::Compile(kind == "String" ? EscapeLiteral(text) : text,
                                                  pattern_path + "." + kind));
  ARROW_ASSIGN_OR_RAISE(std::string behavior, o->String("behavior"));
  static const std::pair<const char*, SplitBehavior> kBehaviors[] = {
      {"Removed", SplitBehavior::kRemoved},
      {"Isolated", SplitBehavior::kIsolated},
      {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
      {"MergedWithNext", SplitBehavior::kMergedWithNext},
      {"Contiguous", SplitBehavior::kContiguous}};
  bool known = false;
  for (const auto& [name, value] : kBehaviors) {
    if (behavior == name) {
      s->behavior_ = value;
      known = true;
    }
  }
  if (!known) {
    return Refuse(o->PathOf("behavior"), "'", behavior,
                  "' is not Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous");
  }
  ARROW_ASSIGN_OR_RAISE(s->invert_, o->Bool("invert", false));
  ARROW_RETURN_NOT_OK(o->Done());
  return s;
}

arrow::Status SplitPreTokenizer::Split(std::string_view in, std::vector<std::string>* words) const {
  if (in.empty()) return arrow::Status::OK();
  Pieces pieces;
  ARROW_RETURN_NOT_OK(FindMatches(*regex_, in, invert_, &pieces));
  SplitBy(in, std::move(pieces), behavior_, words);
  return arrow::Status::OK();
}

arrow::Result<std::unique_ptr<ByteLevelPreTokenizer>> ByteLevelPreTokenizer::FromJson(
    JsonObject* o) {
  std::unique_ptr<ByteLevelPreTokenizer> b(new ByteLevelPreTokenizer());
  ARROW_RETURN_NOT_OK(o->Require({"add_prefix_space", "trim_offsets"}));
  ARROW_ASSIGN_OR_RAISE(b->add_prefix_space_, o->Bool("add_prefix_space", true));
  ARROW_RETURN_NOT_OK(o->Bool("trim_offsets", true).status());  // offsets only
  ARROW_ASSIGN_OR_RAISE(bool use_regex, o->Bool("use_regex", true));
  if (use_regex) {
    ARROW_ASSIGN_OR_RAISE(b->regex_, Regex::Compile(kGpt2Pattern, o->path()));
  }
  ARROW_RETURN_NOT_OK(o->Done());
  return b;
}

arrow::Status ByteLevelPreTokenizer::Split(std::string_view in,
                                           std::vector<std::string>* words) const {
  if (in.empty()) return arrow::Status::OK();
  std::string prefixed;
  if (add_prefix_space_ && in[0] != ' ') {
    prefixed.reserve(in.size() + 1);
    prefixed.append(" ").append(in);
    in = prefixed;
  }
  const size_t first = words->size();
  if (regex_) {
    Pieces pieces;
    ARROW_RETURN_NOT_OK(FindMatches(*regex_, in, false, &pieces));
    SplitBy(in, std::move(pieces), SplitBehavior::kIsolated, words);
  } else {
    words->emplace_back(in);
  }
  const auto& chars = ByteChars();
  std::string mapped;
  for (size_t i = first; i < words->size(); ++i) {
    mapped.clear();
    for (unsigned char c : (*words)[i]) mapped.append(chars[c]);
    (*words)[i].swap(mapped);
  }
  return arrow::Status::OK();
}

}  // namespace icefloe::transform::hf

namespace icefloe::transform::hf {

namespace {

// A JSON field, or `absent` when it is missing (the section was checked when read).
bool BoolOr(const Json& j, const char* field, bool absent) {
  auto it = j.find(field);
  return it == j.end() || !it->is_boolean() ? absent : it->get<bool>();
}

// GPT-2's byte characters as (bytes, length), for appending without a string each.
struct ByteChar {
  char bytes[2];
  uint8_t len;
};

const std::array<ByteChar, 256>& ByteCharTable() {
  static const std::array<ByteChar, 256> table = [] {
    std::array<ByteChar, 256> out{};
    const auto& chars = ByteChars();
    for (int b = 0; b < 256; ++b) {
      out[b].len = static_cast<uint8_t>(chars[b].size());  // 1 or 2 (below U+0800)
      for (size_t k = 0; k < chars[b].size(); ++k) out[b].bytes[k] = chars[b][k];
    }
    return out;
  }();
  return table;
}

}  // namespace

arrow::Result<std::unique_ptr<ByteLevelWords>> ByteLevelWords::FromJson(const Json* j,
                                                                        const std::string& path) {
  if (j == nullptr || !j->is_object()) return nullptr;
  const std::string type = j->value("type", "");
  std::unique_ptr<ByteLevelWords> w(new ByteLevelWords());
  if (type == "ByteLevel") {
    if (!BoolOr(*j, "use_regex", true)) return nullptr;
    w->add_prefix_space_ = BoolOr(*j, "add_prefix_space", true);
    ARROW_ASSIGN_OR_RAISE(w->regex_, Regex::Compile(kGpt2Pattern, path));
    return w;
  }
  if (type != "Sequence") return nullptr;
  auto list = j->find("pretokenizers");
  if (list == j->end() || !list->is_array() || list->size() != 2) return nullptr;
  const Json& split = (*list)[0];
  const Json& bytes = (*list)[1];
  if (!split.is_object() || !bytes.is_object() || split.value("type", "") != "Split" ||
      bytes.value("type", "") != "ByteLevel" || BoolOr(bytes, "use_regex", true) ||
      BoolOr(bytes, "add_prefix_space", true) || split.value("behavior", "") != "Isolated" ||
      BoolOr(split, "invert", false)) {
    return nullptr;
  }
  auto pattern = split.find("pattern");
  if (pattern == split.end() || !pattern->is_object() || pattern->size() != 1 ||
      !pattern->begin().value().is_string()) {
    return nullptr;
  }
  const std::string kind = pattern->begin().key();
  const std::string text = pattern->begin().value().get<std::string>();
  if (kind != "String" && kind != "Regex") return nullptr;
  ARROW_ASSIGN_OR_RAISE(w->regex_, Regex::Compile(kind == "String" ? EscapeLiteral(text) : text,
                                                  path + ".pretokenizers[0].pattern." + kind));
  return w;
}

// Isolated: every match and every stretch between matches is a word (the
// empty ones dropped); each then mapped byte by byte.
arrow::Status ByteLevelWords::ForEachRun(
    std::string_view in, const std::function<void(std::span<const std::string_view>)>& f) const {
  if (in.empty()) return arrow::Status::OK();
  // Per thread, reused: the run's mapped bytes, where each word ends in
  // them, and the words' views (made once the bytes stop moving).
  thread_local std::string prefixed, mapped;
  thread_local std::vector<size_t> ends;
  thread_local std::vector<std::string_view> words;
  if (add_prefix_space_ && in[0] != ' ') {
    prefixed.assign(" ").append(in);
    in = prefixed;
  }
  mapped.clear();
  ends.clear();
  auto flush = [&] {
    words.clear();
    size_t start = 0;
    for (size_t end : ends) {
      words.emplace_back(mapped.data() + start, end - start);
      start = end;
    }
    f(words);
    mapped.clear();
    ends.clear();
  };
  const auto& table = ByteCharTable();
  auto emit = [&](size_t start, size_t stop) {
    if (stop <= start) return;
    const size_t at = mapped.size();
    mapped.resize(at + 2 * (stop - start));
    char* out = mapped.data() + at;
    for (size_t i = start; i < stop; ++i) {
      const ByteChar& c = table[static_cast<unsigned char>(in[i])];
      out[0] = c.bytes[0];
      out[1] = c.bytes[1];
      out += c.len;
    }
    mapped.resize(static_cast<size_t>(out - mapped.data()));
    ends.push_back(mapped.size());
    if (ends.size() == kRunWords) flush();
  };
  size_t prev = 0;
  ARROW_RETURN_NOT_OK(regex_->ForEachMatch(in, [&](size_t start, size_t stop) {
    emit(prev, start);
    emit(start, stop);
    prev = stop;
  }));
  emit(prev, in.size());
  if (!ends.empty()) flush();
  return arrow::Status::OK();
}

}  // namespace icefloe::transform::hf
