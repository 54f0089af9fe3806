// Tokenization with SentencePiece (Debian's libsentencepiece, the C++ library
// behind the Python `sentencepiece` package): a string column to list<int32>
// token ids, as `sentencepiece.SentencePieceProcessor.encode` gives them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <arrow/array.h>
#include <arrow/memory_pool.h>
#include <arrow/result.h>

namespace icefloe::transform {

/// What one tokenize adds around a text's ids and where it cuts.
struct TokenizeOptions {
  bool bos = false;
  bool eos = false;
  std::optional<int64_t> max_tokens;  ///< BOS/EOS included; the text's ids are cut at the end
};

/// A loaded model. Encode is const and safe to call from several threads at
/// once (SentencePieceProcessor::Encode is const and keeps no state).
class Tokenizer {
 public:
  /// Parses a serialized SentencePiece ModelProto (a `.model` file's bytes).
  /// Invalid naming `location` when the bytes are not one (a Hugging Face
  /// tokenizer.json gets its own message: not supported).
  static arrow::Result<std::shared_ptr<const Tokenizer>> Load(const std::string& bytes,
                                                              const std::string& location);
  ~Tokenizer();

  /// Token ids of every string of `strings` (utf8 or large_utf8); a null
  /// string gives a null list. Buffers come from `pool`.
  arrow::Result<std::shared_ptr<arrow::Array>> Encode(const arrow::Array& strings,
                                                      const TokenizeOptions& options,
                                                      arrow::MemoryPool* pool) const;

  int32_t bos_id() const;  ///< -1 when the model has none
  int32_t eos_id() const;  ///< -1 when the model has none
  int32_t vocab_size() const;
  const std::string& location() const { return location_; }

 private:
  Tokenizer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string location_;
};

/// Lower-case hex SHA-256 of `bytes` (a model's content identity).
std::string Sha256Hex(std::string_view bytes);

}  // namespace icefloe::transform
