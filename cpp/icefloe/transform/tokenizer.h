// Tokenization at load: a string column to list<int32> token ids. One
// Tokenizer concept, an implementation per kind of model file, recognised
// by its content:
// - a SentencePiece `.model` (sentencepiece_tokenizer.h): the ids of
//   `sentencepiece.SentencePieceProcessor.encode`;
// - a Hugging Face `tokenizer.json` (hf_tokenizer.h): the ids of
//   `tokenizers.Tokenizer.encode(text, add_special_tokens=...)`.
// Tokenizer::Encode frames each text's ids (special tokens around them) and
// cuts them to `max_tokens` the same way for every kind.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/array.h>
#include <arrow/memory_pool.h>
#include <arrow/result.h>

namespace icefloe::transform {

/// What one tokenize adds around a text's ids and where it cuts.
struct TokenizeOptions {
  bool bos = false;                   ///< SentencePiece: prepend the BOS id
  bool eos = false;                   ///< SentencePiece: append the EOS id
  bool special_tokens = true;         ///< tokenizer.json: its post-processor's special tokens
  std::optional<int64_t> max_tokens;  ///< special ids included; the text's ids are cut at the end
};

/// pad_to's two columns: ids padded to a fixed length and which are real.
struct PaddedIds {
  std::shared_ptr<arrow::Array> ids;   ///< fixed_size_list<int32, N>, pad ids after the row's
  std::shared_ptr<arrow::Array> mask;  ///< fixed_size_list<int8, N>: 1 for an id, 0 for a pad
};

/// A loaded model. Encode is const and safe to call from several threads at
/// once (no implementation keeps state between texts).
class Tokenizer {
 public:
  /// Parses a model file's bytes: a Hugging Face tokenizer.json (a JSON
  /// object with "model") or a serialized SentencePiece ModelProto. Invalid
  /// naming `location` (and, for JSON, the JSON path) when it is neither, or
  /// uses a component that is not supported. A model already parsed from
  /// the same bytes and location and still held is returned, not parsed
  /// again (a load's columns, the head's checks and loads side by side share
  /// one parse).
  static arrow::Result<std::shared_ptr<const Tokenizer>> Load(const std::string& bytes,
                                                              const std::string& location);
  virtual ~Tokenizer() = default;

  /// "sentencepiece" or "tokenizer.json <model type>" (e.g. "tokenizer.json WordPiece").
  virtual std::string kind() const = 0;
  virtual int32_t vocab_size() const = 0;
  /// The model's own pad id (a tokenizer.json's `padding.pad_id`, a
  /// SentencePiece pad piece); nullopt when it names none.
  virtual std::optional<int32_t> pad_id() const = 0;

  /// Invalid (naming the option) when `options` do not apply to this model:
  /// BOS/EOS the model lacks, bos/eos on a tokenizer.json, a `max_tokens`
  /// below the special ids a tokenizer.json adds.
  virtual arrow::Status Check(const TokenizeOptions& options) const = 0;

  /// Token ids of every string of `strings` (utf8 or large_utf8); a null
  /// string gives a null list. Buffers come from `pool`.
  arrow::Result<std::shared_ptr<arrow::Array>> Encode(const arrow::Array& strings,
                                                      const TokenizeOptions& options,
                                                      arrow::MemoryPool* pool) const;

  /// Encode's ids, each row followed by `pad_id` up to `pad_to` ids, and
  /// the mask of the real ids: `tokenizer(text, padding="max_length",
  /// max_length=pad_to, truncation=True)`'s input_ids and attention_mask
  /// when max_tokens is pad_to. Needs options.max_tokens <= pad_to. A null
  /// string gives a null row in both (all pad ids, mask 0, underneath).
  arrow::Result<PaddedIds> EncodePadded(const arrow::Array& strings, const TokenizeOptions& options,
                                        int32_t pad_to, int32_t pad_id,
                                        arrow::MemoryPool* pool) const;

  /// The ids of `text` alone, no framing, appended to `ids`: what the chat
  /// column tokenizes a rendered template with (add_special_tokens=False).
  arrow::Status EncodeUnframed(std::string_view text, std::vector<int32_t>* ids) const {
    return EncodeText(text, ids);
  }

  const std::string& location() const { return location_; }

 protected:
  friend class TokenizerTest;  // tokenizer_test.cc checks EncodeText's contract per kind
  explicit Tokenizer(std::string location) : location_(std::move(location)) {}

  /// The ids of `text` alone, appended to `ids` (what it holds is kept).
  virtual arrow::Status EncodeText(std::string_view text, std::vector<int32_t>* ids) const = 0;
  /// The ids set before and after every text's ids for `options`.
  virtual void Framing(const TokenizeOptions& options, std::vector<int32_t>* prefix,
                       std::vector<int32_t>* suffix) const = 0;

 private:
  /// Calls `row(i, ids)` for every row i of `strings` with its framed and
  /// cut ids (nullptr for a null string).
  template <typename StringArray, typename RowFn>
  arrow::Status ForEachRow(const StringArray& strings, const TokenizeOptions& options,
                           RowFn&& row) const;
  template <typename RowFn>
  arrow::Status ForEachRow(const arrow::Array& strings, const TokenizeOptions& options,
                           RowFn&& row) const;

  std::string location_;
};

/// Lower-case hex SHA-256 of `bytes` (a model's content identity).
std::string Sha256Hex(std::string_view bytes);

}  // namespace icefloe::transform
