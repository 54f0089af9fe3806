// The character-class pre-tokenizers of a tokenizer.json, as the
// `tokenizers` package defines them: `Digits`, `Punctuation`, `Whitespace`,
// `WhitespaceSplit` and `Metaspace` (SentencePiece's ▁ for spaces). The
// regex ones (Split, ByteLevel) are in regex_split.h, BERT's in bert.h.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "icefloe/transform/hf_components.h"
#include "icefloe/transform/regex_split.h"

namespace icefloe::transform::hf {

/// Numbers (general category Nd, Nl or No, as Rust's char::is_numeric)
/// split out: each digit a word with individual_digits, else each run.
class DigitsPreTokenizer final : public PreTokenizer {
 public:
  static arrow::Result<std::unique_ptr<DigitsPreTokenizer>> FromJson(JsonObject* o);
  arrow::Status Split(std::string_view in, std::vector<std::string>* words) const override;

 private:
  explicit DigitsPreTokenizer(bool individual) : individual_(individual) {}
  const bool individual_;
};

/// Punctuation (ASCII punctuation and Unicode P*) cut by `behavior`
/// (default Isolated), each mark on its own.
class PunctuationPreTokenizer final : public PreTokenizer {
 public:
  static arrow::Result<std::unique_ptr<PunctuationPreTokenizer>> FromJson(JsonObject* o);
  arrow::Status Split(std::string_view in, std::vector<std::string>* words) const override;

 private:
  explicit PunctuationPreTokenizer(SplitBehavior behavior) : behavior_(behavior) {}
  const SplitBehavior behavior_;
};

/// `Whitespace`: the matches of regex `\w+|[^\w\s]+` (Rust's regex crate,
/// Unicode classes): runs of word characters and runs of other
/// non-space characters; whitespace removed.
class WhitespacePreTokenizer final : public PreTokenizer {
 public:
  arrow::Status Split(std::string_view in, std::vector<std::string>* words) const override;
};

/// `WhitespaceSplit`: cut at whitespace (Unicode White_Space), removed.
class WhitespaceSplitPreTokenizer final : public PreTokenizer {
 public:
  arrow::Status Split(std::string_view in, std::vector<std::string>* words) const override;
};

/// `Metaspace`: each space (U+0020 only) made `replacement`; then
/// `replacement` put before a piece not starting with it (prepend_scheme
/// "always"; "first": only the piece where the text begins; "never": none);
/// then, with `split`, the piece cut before each `replacement`.
class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  /// Reads the section (`type` already checked), old files' forms too: an
  /// `add_prefix_space` of false means prepend_scheme "never" (and the
  /// library refuses it beside another scheme), `str_rep` is ignored.
  static arrow::Result<std::unique_ptr<MetaspacePreTokenizer>> FromJson(JsonObject* o);
  arrow::Status Split(std::string_view in, std::vector<std::string>* words) const override;
  arrow::Status SplitAt(std::string_view in, bool at_start,
                        std::vector<std::string>* words) const override;
  std::optional<std::string> AtStartPath() const override {
    if (prepend_ == Prepend::kFirst) return path_;
    return std::nullopt;
  }

 private:
  MetaspacePreTokenizer() = default;
  std::string replacement_;  ///< one character, UTF-8
  Prepend prepend_ = Prepend::kAlways;
  bool split_ = true;
  std::string path_;
};

}  // namespace icefloe::transform::hf
