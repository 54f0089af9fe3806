// The `Unigram` model of a tokenizer.json (SentencePiece unigram files:
// T5, ALBERT, XLNet and the like, as the `tokenizers` package encodes them):
// the Viterbi path over the vocabulary's pieces that maximizes the sum of
// their scores; a character no one-character piece covers is the unk
// piece (score: the lowest score minus 10), consecutive unk pieces fused
// into one; a fused or unknown piece is its bytes as <0xXX> tokens with
// byte_fallback (where all are in the vocabulary), else the unk token.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "icefloe/transform/hf_components.h"

namespace icefloe::transform::hf {

class Unigram final : public Model {
 public:
  /// Reads the section (`type` already checked): `vocab` a list of
  /// [piece, score], pieces not empty and each once; `unk_id` required (the
  /// library fails on any character outside the vocabulary without one).
  static arrow::Result<std::unique_ptr<Unigram>> FromJson(JsonObject* o);

  void Tokenize(std::string_view word, std::vector<int32_t>* ids) const override;
  std::optional<int32_t> TokenToId(std::string_view token) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(scores_.size()); }
  std::string type() const override { return "Unigram"; }

 private:
  Unigram() = default;
  /// The id of the piece `word[start, start + len)` or -1.
  int32_t Find(std::string_view word, size_t start, size_t len) const;

  Vocab vocab_;
  std::vector<double> scores_;  ///< by id
  std::vector<bool> lengths_;   ///< [n]: some piece is n bytes long
  int32_t unk_id_ = -1;
  double unk_score_ = 0;
  bool byte_fallback_ = false;
  std::array<int32_t, 256> byte_ids_{};  ///< <0xXX>'s ids; -1 where one is missing
};

}  // namespace icefloe::transform::hf
