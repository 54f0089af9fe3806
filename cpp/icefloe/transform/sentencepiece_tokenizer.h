// A SentencePiece `.model` (Debian's libsentencepiece, the C++ library behind
// the Python `sentencepiece` package): the ids of
// `SentencePieceProcessor.encode(text, add_bos=bos, add_eos=eos)`.
#pragma once

#include <memory>
#include <string>

#include <sentencepiece_processor.h>

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

 protected:
  arrow::Status EncodeText(std::string_view text, std::vector<int32_t>* ids) const override;
  void Framing(const TokenizeOptions& options, std::vector<int32_t>* prefix,
               std::vector<int32_t>* suffix) const override;

 private:
  explicit SentencePieceTokenizer(std::string location) : Tokenizer(std::move(location)) {}
  sentencepiece::SentencePieceProcessor processor_;
};

}  // namespace icefloe::transform
