// A SentencePiece `.model` (Debian's libsentencepiece, the C++ library behind
// the Python `sentencepiece` package): the ids of
// `SentencePieceProcessor.encode(text, add_bos=bos, add_eos=eos)`.
//
// A BPE model whose pieces never hold a word boundary (U+2581 past their
// first byte) is encoded a word at a time, each word's ids from the thread's
// word cache: a BPE merge never crosses a boundary there, so the words' ids
// are the text's. The library still does all of it, in two processors built
// from the model: one that only normalizes (the model's normalizer over a
// WORD model with no pieces) and one that runs the model's BPE on a
// normalized word (an identity normalizer). Other models, and BPE models with
// user-defined symbols (matched across words), go to the library whole, as
// do texts over 64 KiB (the normalizing processor's cost grows with the
// square of a run of unknown words).
#pragma once

#include <memory>
#include <string>

#include <sentencepiece_processor.h>

#include "icefloe/transform/token_table.h"
#include "icefloe/transform/tokenizer.h"

namespace icefloe::transform {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  /// Parses a serialized ModelProto; Invalid naming `location` when the
  /// bytes are not one.
  static arrow::Result<std::unique_ptr<SentencePieceTokenizer>> Load(const std::string& bytes,
                                                                     const std::string& location);

  std::string kind() const override { return "sentencepiece"; }
  int32_t vocab_size() const override { return processor_.GetPieceSize(); }
  std::optional<int32_t> pad_id() const override {
    const int id = processor_.pad_id();  // -1: the model has no pad piece
    return id < 0 ? std::nullopt : std::optional<int32_t>(id);
  }
  arrow::Status Check(const TokenizeOptions& options) const override;
  /// Whether texts are encoded a word at a time (see the top of this file).
  bool encodes_by_word() const { return by_word_; }

 protected:
  arrow::Status EncodeText(std::string_view text, std::vector<int32_t>* ids) const override;
  void Framing(const TokenizeOptions& options, std::vector<int32_t>* prefix,
               std::vector<int32_t>* suffix) const override;

 private:
  explicit SentencePieceTokenizer(std::string location) : Tokenizer(std::move(location)) {}
  /// Builds normalizer_ and words_ when the model can be encoded by word.
  arrow::Status PrepareWords(const std::string& bytes);
  /// by_word_: the ids of `text`, appended, a normalized word at a time.
  arrow::Status EncodeByWord(std::string_view text, std::vector<int32_t>* ids) const;

  sentencepiece::SentencePieceProcessor processor_;
  bool by_word_ = false;
  sentencepiece::SentencePieceProcessor normalizer_;  ///< by_word_: normalizes only
  sentencepiece::SentencePieceProcessor words_;       ///< by_word_: BPE of a normalized word
  /// The library's BPE of a normalized word, here; false (ids untouched)
  /// when a character of it is not a normal piece (the library's path).
  bool MergeWord(std::string_view word, std::vector<int32_t>* ids) const;
  bool merges_here_ = false;   ///< by_word_ and no unused pieces: MergeWord
  hf::TokenTable pieces_;      ///< the normal pieces' ids
  std::vector<float> scores_;  ///< by id
  const uint64_t cache_owner_ = hf::WordCache::NextOwner();
};

}  // namespace icefloe::transform
