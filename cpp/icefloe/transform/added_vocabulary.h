// A tokenizer.json's `added_tokens`: split out of the text before the
// model sees it, as the `tokenizers` package's AddedVocabulary does. Tokens
// with `normalized: false` are matched in the raw text; the rest is then
// normalized piece by piece and the `normalized: true` tokens (their content
// normalized too) are matched in that. Matching is leftmost-longest over all
// tokens of a kind, left to right without overlaps; `single_word` drops a
// match with a word character beside it, `lstrip`/`rstrip` take the
// whitespace beside a match into it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace icefloe::transform::hf {

struct AddedToken {
  std::string content;  ///< as matched: normalized already for a normalized token
  int32_t id = -1;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  /// `tokens`' contents are unique and not empty.
  explicit AddedVocabulary(std::vector<AddedToken> tokens);

  /// A part of a split text: an added token's id, or text (id -1).
  struct Piece {
    std::string_view text;
    int32_t id = -1;
  };
  /// `text` cut at the matches of the tokens with `normalized` as given,
  /// appended to `out` (text pieces may be empty).
  void Split(std::string_view text, bool normalized, std::vector<Piece>* out) const;
  bool empty(bool normalized) const { return sets_[normalized].tokens.empty(); }

 private:
  struct MatchingSet {
    std::vector<AddedToken> tokens;
    std::array<std::vector<int>, 256> by_first_byte;  ///< token indexes, longest first
    int only_first_byte = -1;  ///< the byte every token starts with, if one (memchr finds it)
  };
  std::array<MatchingSet, 2> sets_;  // [normalized]
};

}  // namespace icefloe::transform::hf
