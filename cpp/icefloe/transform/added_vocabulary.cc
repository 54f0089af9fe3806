#include "icefloe/transform/added_vocabulary.h"

#include <algorithm>
#include <cstring>

#include "icefloe/transform/unicode.h"

namespace icefloe::transform::hf {

namespace {

// The code point ending at `s.size()` (s valid UTF-8, not empty).
int32_t LastCodePoint(std::string_view s) {
  size_t start = s.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  return unicode::Next(s, &start);
}

int32_t FirstCodePoint(std::string_view s) {
  size_t i = 0;
  return unicode::Next(s, &i);
}

// Regex `\s*$`'s start: where the whitespace run ending `s` starts.
size_t SpaceLeftmostAtEnd(std::string_view s) {
  size_t end = s.size();
  while (end > 0 && unicode::IsWhiteSpace(LastCodePoint(s.substr(0, end)))) {
    --end;
    while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  }
  return end;
}

// Regex `^\s*`'s end: the length of the whitespace run starting `s`.
size_t SpaceRightmostAtStart(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t next = i;
    if (!unicode::IsWhiteSpace(unicode::Next(s, &next))) break;
    i = next;
  }
  return i;
}

}  // namespace

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens) {
  for (auto& t : tokens) sets_[t.normalized].tokens.push_back(std::move(t));
  for (auto& set : sets_) {
    for (size_t k = 0; k < set.tokens.size(); ++k) {
      const auto first = static_cast<unsigned char>(set.tokens[k].content[0]);
      set.by_first_byte[first].push_back(static_cast<int>(k));
    }
    for (int b = 0; b < 256; ++b) {
      if (set.by_first_byte[b].empty()) continue;
      set.only_first_byte = set.only_first_byte == -1 ? b : -2;
    }
    if (set.only_first_byte < 0) set.only_first_byte = -1;
    for (auto& bucket : set.by_first_byte) {
      std::stable_sort(bucket.begin(), bucket.end(), [&](int a, int b) {
        return set.tokens[a].content.size() > set.tokens[b].content.size();
      });
    }
  }
}

void AddedVocabulary::Split(std::string_view text, bool normalized, std::vector<Piece>* out) const {
  const MatchingSet& set = sets_[normalized];
  if (set.tokens.empty()) {
    out->push_back({text, -1});
    return;
  }
  size_t done = 0;  // the text before this is in `out`
  size_t pos = 0;   // where the next match is searched
  while (pos < text.size()) {
    if (set.only_first_byte >= 0) {  // Llama-3's 256 all start with '<': skip to the next
      const void* at = std::memchr(text.data() + pos, set.only_first_byte, text.size() - pos);
      if (at == nullptr) break;
      pos = static_cast<size_t>(static_cast<const char*>(at) - text.data());
    }
    const auto& bucket = set.by_first_byte[static_cast<unsigned char>(text[pos])];
    if (bucket.empty()) {  // the common case: no token starts with this byte
      ++pos;
      continue;
    }
    const AddedToken* match = nullptr;
    for (int k : bucket) {
      const std::string& c = set.tokens[k].content;
      if (text.compare(pos, c.size(), c) == 0) {
        match = &set.tokens[k];
        break;  // longest first
      }
    }
    if (match == nullptr) {
      ++pos;
      continue;
    }
    size_t start = pos;
    size_t stop = pos + match->content.size();
    pos = stop;
    if (match->single_word) {
      const bool word_before =
          start > 0 && unicode::IsWordCharacter(LastCodePoint(text.substr(0, start)));
      const bool word_after =
          stop < text.size() && unicode::IsWordCharacter(FirstCodePoint(text.substr(stop)));
      if (word_before || word_after) continue;
    }
    if (match->lstrip) start = std::max(SpaceLeftmostAtEnd(text.substr(0, start)), done);
    if (match->rstrip) stop += SpaceRightmostAtStart(text.substr(stop));
    if (done < start) out->push_back({text.substr(done, start - done), -1});
    out->push_back({text.substr(start, stop - start), match->id});
    done = stop;
  }
  if (done < text.size() || text.empty()) out->push_back({text.substr(done), -1});
}

}  // namespace icefloe::transform::hf
