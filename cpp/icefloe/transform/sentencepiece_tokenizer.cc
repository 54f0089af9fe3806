#include "icefloe/transform/sentencepiece_tokenizer.h"

#include <type_traits>

namespace icefloe::transform {

arrow::Result<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Load(
    const std::string& bytes, const std::string& location) {
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer(location));
  auto st = t->processor_.LoadFromSerializedProto(bytes);
  if (!st.ok()) {
    return arrow::Status::Invalid("tokenizer model '", location,
                                  "' is not a SentencePiece model: ", st.ToString());
  }
  if (t->processor_.GetPieceSize() <= 0) {
    return arrow::Status::Invalid("tokenizer model '", location, "' has no pieces");
  }
  return t;
}

arrow::Status SentencePieceTokenizer::Check(const TokenizeOptions& options) const {
  if ((options.bos && processor_.bos_id() < 0) || (options.eos && processor_.eos_id() < 0)) {
    return arrow::Status::Invalid("tokenizer model '", location(), "' has no ",
                                  options.bos && processor_.bos_id() < 0 ? "BOS" : "EOS", " piece");
  }
  if (!options.special_tokens) {
    return arrow::Status::Invalid("'special_tokens' is for a tokenizer.json; '", location(),
                                  "' is a SentencePiece model: use 'bos' and 'eos'");
  }
  return arrow::Status::OK();
}

arrow::Status SentencePieceTokenizer::EncodeText(std::string_view text,
                                                 std::vector<int32_t>* ids) const {
  static_assert(std::is_same_v<int, int32_t>);  // Encode's std::vector<int>
  // The processor's Encode replaces its output: encode straight into `ids`
  // only when there is nothing to keep (the common case), else append.
  if (ids->empty()) {
    auto st = processor_.Encode(text, ids);
    if (!st.ok()) return arrow::Status::Invalid(st.ToString());
    return arrow::Status::OK();
  }
  std::vector<int> own;
  auto st = processor_.Encode(text, &own);
  if (!st.ok()) return arrow::Status::Invalid(st.ToString());
  ids->insert(ids->end(), own.begin(), own.end());
  return arrow::Status::OK();
}

void SentencePieceTokenizer::Framing(const TokenizeOptions& options, std::vector<int32_t>* prefix,
                                     std::vector<int32_t>* suffix) const {
  if (options.bos) prefix->push_back(processor_.bos_id());
  if (options.eos) suffix->push_back(processor_.eos_id());
}

}  // namespace icefloe::transform
