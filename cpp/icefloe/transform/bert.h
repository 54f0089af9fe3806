// BERT's normalizer and pre-tokenizer, as the `tokenizers` package's
// `BertNormalizer` and `BertPreTokenizer` define them.
#pragma once

#include <functional>

#include "icefloe/transform/hf_components.h"

namespace icefloe::transform::hf {

/// clean_text: NUL, U+FFFD and control characters (Cc, Cf, Co; not tab, CR,
/// LF) removed, whitespace made a space; handle_chinese_chars: a space each
/// side of a CJK ideograph; strip_accents (default: as lowercase): NFD, then
/// nonspacing marks removed; lowercase: each character's full lowercase.
class BertNormalizer final : public Normalizer {
 public:
  BertNormalizer(bool clean_text, bool handle_chinese_chars, bool strip_accents, bool lowercase)
      : clean_text_(clean_text),
        handle_chinese_chars_(handle_chinese_chars),
        strip_accents_(strip_accents),
        lowercase_(lowercase) {}
  arrow::Status Normalize(std::string_view in, std::string* out) const override;

 private:
  const bool clean_text_;
  const bool handle_chinese_chars_;
  const bool strip_accents_;
  const bool lowercase_;
};

/// Words split at whitespace (removed) and punctuation (each mark a word):
/// Unicode P* and ASCII punctuation.
class BertPreTokenizer final : public PreTokenizer {
 public:
  arrow::Status Split(std::string_view in, std::vector<std::string>* words) const override;
  /// Calls `f` with each word of `in`, in order (a view into `in`).
  void ForEach(std::string_view in, const std::function<void(std::string_view)>& f) const;
};

}  // namespace icefloe::transform::hf
