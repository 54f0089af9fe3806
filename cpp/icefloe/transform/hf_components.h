// The stages of a Hugging Face tokenizer.json's encode, as interfaces, and
// the factories that read each from its JSON section (hf_components.cc).
// An implementation is const after construction and safe to share across
// threads. Text is UTF-8 throughout, checked valid before the first stage.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <arrow/result.h>

#include "icefloe/transform/hf_json.h"

namespace icefloe::transform::hf {

/// A vocabulary: token → id, looked up by string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

/// Reads a `vocab` object of token → id at `path`: ids 0..N-1, each once
/// (Invalid naming the hole or the duplicate).
arrow::Result<Vocab> ReadVocab(const Json& j, const std::string& path);

/// `normalizer`: rewrites a piece of text (lowercase, accents, ...).
class Normalizer {
 public:
  virtual ~Normalizer() = default;
  /// `in` normalized, appended to `out`. Fails only where a regex search
  /// does (Oniguruma's retry limit).
  virtual arrow::Status Normalize(std::string_view in, std::string* out) const = 0;
};

/// `pre_tokenizer`: cuts a normalized piece into words.
class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  /// The words of `in`, in order, appended to `words` (none empty). A stage
  /// may rewrite its words (ByteLevel maps bytes to characters). Fails only
  /// where a regex search does (Oniguruma's retry limit).
  virtual arrow::Status Split(std::string_view in, std::vector<std::string>* words) const = 0;
  /// Split, told whether `in` begins where the text does (the library's
  /// original offset 0: no added token or removed character before it).
  /// Only Metaspace with prepend_scheme "first" tells the two apart.
  virtual arrow::Status SplitAt(std::string_view in, bool at_start,
                                std::vector<std::string>* words) const {
    (void)at_start;
    return Split(in, words);
  }
  /// The JSON path of a stage that asks SplitAt's `at_start` (Metaspace with
  /// prepend_scheme "first"), if any.
  virtual std::optional<std::string> AtStartPath() const { return std::nullopt; }
};

/// `model`: a word to token ids.
class Model {
 public:
  virtual ~Model() = default;
  /// The ids of `word` (not empty), appended to `ids`.
  virtual void Tokenize(std::string_view word, std::vector<int32_t>* ids) const = 0;
  /// Tokenize of each of `words` (none empty), in order. A model may look
  /// its tables up for all of them at once (memory loads overlapped rather
  /// than one after another); the default takes them one by one.
  virtual void TokenizeWords(std::span<const std::string_view> words,
                             std::vector<int32_t>* ids) const {
    for (std::string_view w : words) Tokenize(w, ids);
  }
  virtual std::optional<int32_t> TokenToId(std::string_view token) const = 0;
  virtual int32_t vocab_size() const = 0;
  virtual std::string type() const = 0;
};

/// Each reads its section at `path`; null (or absent) gives nullptr for the
/// optional stages. Invalid naming the JSON path for anything not supported.
arrow::Result<std::unique_ptr<Normalizer>> NormalizerFromJson(const Json* j,
                                                              const std::string& path);
arrow::Result<std::unique_ptr<PreTokenizer>> PreTokenizerFromJson(const Json* j,
                                                                  const std::string& path);
arrow::Result<std::unique_ptr<Model>> ModelFromJson(const Json& j, const std::string& path);

}  // namespace icefloe::transform::hf
