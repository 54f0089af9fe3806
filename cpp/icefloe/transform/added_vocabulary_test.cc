#include "icefloe/transform/added_vocabulary.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace icefloe::transform::hf {
namespace {

std::vector<std::pair<std::string, int32_t>> SplitOf(const AddedVocabulary& added,
                                                     std::string_view text) {
  std::vector<AddedVocabulary::Piece> pieces;
  added.Split(text, /*normalized=*/false, &pieces);
  std::vector<std::pair<std::string, int32_t>> out;
  for (const auto& p : pieces) out.emplace_back(std::string(p.text), p.id);
  return out;
}

AddedVocabulary Tokens(std::vector<std::pair<std::string, int32_t>> contents) {
  std::vector<AddedToken> tokens;
  for (auto& [content, id] : contents) {
    AddedToken t;
    t.content = content;
    t.id = id;
    t.normalized = false;
    tokens.push_back(std::move(t));
  }
  return AddedVocabulary(std::move(tokens));
}

// Tokens that all start with one byte (Llama-3's '<'): that byte where no
// token follows is text, the longest token is taken where several match.
TEST(AddedVocabularyTest, TokensOfOneFirstByteSplitTheTextWhereTheyMatch) {
  const AddedVocabulary added = Tokens({{"<s>", 1}, {"<s>x", 2}, {"</s>", 3}});
  using Want = std::vector<std::pair<std::string, int32_t>>;
  EXPECT_EQ(SplitOf(added, "a < b <s> c</s><s>x<"),
            (Want{{"a < b ", -1}, {"<s>", 1}, {" c", -1}, {"</s>", 3}, {"<s>x", 2}, {"<", -1}}));
  EXPECT_EQ(SplitOf(added, "no token here"), (Want{{"no token here", -1}}));
  EXPECT_EQ(SplitOf(added, "<<s>"), (Want{{"<", -1}, {"<s>", 1}}));
}

// Tokens of several first bytes, the same.
TEST(AddedVocabularyTest, TokensOfSeveralFirstBytesSplitTheTextWhereTheyMatch) {
  const AddedVocabulary added = Tokens({{"[CLS]", 1}, {"<s>", 2}});
  using Want = std::vector<std::pair<std::string, int32_t>>;
  EXPECT_EQ(SplitOf(added, "a [CLS]<s>b [ <"),
            (Want{{"a ", -1}, {"[CLS]", 1}, {"<s>", 2}, {"b [ <", -1}}));
}

}  // namespace
}  // namespace icefloe::transform::hf
