// The small normalizers of a tokenizer.json, as the `tokenizers` package
// defines them: `Lowercase`, `Strip`, `StripAccents`, `Replace` and
// `Prepend` (BertNormalizer is in bert.h, the Unicode normal forms in
// hf_components.cc).
#pragma once

#include <memory>
#include <string>

#include "icefloe/transform/hf_components.h"
#include "icefloe/transform/regex_split.h"

namespace icefloe::transform::hf {

/// Each character's full lowercase (Rust's char::to_lowercase: no
/// context, so a final sigma is σ).
class LowercaseNormalizer final : public Normalizer {
 public:
  arrow::Status Normalize(std::string_view in, std::string* out) const override;
};

/// The whitespace (Unicode White_Space) at the left and/or the right end
/// removed.
class StripNormalizer final : public Normalizer {
 public:
  /// Reads the section (`type` already checked): `strip_left` and
  /// `strip_right` are required, as the library requires them.
  static arrow::Result<std::unique_ptr<StripNormalizer>> FromJson(JsonObject* o);
  arrow::Status Normalize(std::string_view in, std::string* out) const override;

 private:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  const bool left_;
  const bool right_;
};

/// Every combining mark (general category Mn, Mc or Me) removed; nothing
/// decomposed first (files put NFD or NFKD before it).
class StripAccentsNormalizer final : public Normalizer {
 public:
  arrow::Status Normalize(std::string_view in, std::string* out) const override;
};

/// Every match of a pattern (a literal string or an Oniguruma regex, as the
/// library compiles both) replaced by `content`, taken literally (no `$1`
/// group expansion, as the library's 0.23 gives it).
class ReplaceNormalizer final : public Normalizer {
 public:
  static arrow::Result<std::unique_ptr<ReplaceNormalizer>> FromJson(JsonObject* o);
  arrow::Status Normalize(std::string_view in, std::string* out) const override;

 private:
  ReplaceNormalizer() = default;
  std::unique_ptr<Regex> regex_;
  std::string content_;
};

/// `prepend` put before a text that is not empty.
class PrependNormalizer final : public Normalizer {
 public:
  static arrow::Result<std::unique_ptr<PrependNormalizer>> FromJson(JsonObject* o);
  arrow::Status Normalize(std::string_view in, std::string* out) const override;

 private:
  explicit PrependNormalizer(std::string prepend) : prepend_(std::move(prepend)) {}
  const std::string prepend_;
};

}  // namespace icefloe::transform::hf
