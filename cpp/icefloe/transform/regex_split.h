// The regex pre-tokenizers of a tokenizer.json: `Split` (a pattern, cut by
// one of the library's five behaviors, optionally inverted) and `ByteLevel`
// (GPT-2's regex, then each byte of a word as one character of the 256 that
// GPT-2 maps bytes to). Regexes run on Oniguruma, the engine the
// `tokenizers` package compiles them with (its default syntax, UTF-8), so a
// pattern matches here exactly what it matches there.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "icefloe/transform/hf_components.h"

namespace icefloe::transform::hf {

/// An Oniguruma regex; const after Compile and safe to share across threads.
class Regex {
 public:
  /// Invalid naming `path` and Oniguruma's message when it refuses `pattern`.
  static arrow::Result<std::unique_ptr<Regex>> Compile(const std::string& pattern,
                                                       const std::string& path);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  /// The (start, end) byte ranges of the matches in `text`, left to right,
  /// as the onig crate's find_iter gives them (an empty match right after
  /// the previous match skipped). Fails where Oniguruma's search does.
  arrow::Status FindAll(std::string_view text,
                        std::vector<std::pair<size_t, size_t>>* matches) const;
  /// The same matches, each given to `f(start, end)` as found.
  template <typename F>
  arrow::Status ForEachMatch(std::string_view text, F&& f) const;

 private:
  explicit Regex(void* regex) : regex_(regex) {}
  void* regex_;  // regex_t*
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class SplitPreTokenizer final : public PreTokenizer {
 public:
  /// Reads the section (`type` already checked).
  static arrow::Result<std::unique_ptr<SplitPreTokenizer>> FromJson(JsonObject* o);
  arrow::Status Split(std::string_view in, std::vector<std::string>* words) const override;

 private:
  SplitPreTokenizer() = default;
  std::unique_ptr<Regex> regex_;
  SplitBehavior behavior_ = SplitBehavior::kRemoved;
  bool invert_ = false;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  static arrow::Result<std::unique_ptr<ByteLevelPreTokenizer>> FromJson(JsonObject* o);
  arrow::Status Split(std::string_view in, std::vector<std::string>* words) const override;

 private:
  ByteLevelPreTokenizer() = default;
  std::unique_ptr<Regex> regex_;  ///< GPT-2's; null when use_regex is false
  bool add_prefix_space_ = true;
};

/// The words and byte mapping of the byte-level pre-tokenizers the models
/// ship, visited in place: the words the pre-tokenizer at that JSON would
/// give (the same regex, the same cuts, the same bytes), without a string
/// per word. Recognises GPT-2's `ByteLevel` (use_regex) and Llama-3's and
/// Qwen2's `Sequence` of a non-inverted `Isolated` `Split` then a
/// `ByteLevel` without regex or prefix space; anything else stays on the
/// general path.
class ByteLevelWords {
 public:
  /// Null when `j` (a pre_tokenizer section read already) is none of those.
  static arrow::Result<std::unique_ptr<ByteLevelWords>> FromJson(const Json* j,
                                                                 const std::string& path);
  /// Most words in one run (a run's bytes are at most twice its words' in `in`).
  static constexpr size_t kRunWords = 64;
  /// Calls `f` with the words of `in`, in order, up to kRunWords at a time
  /// (views valid during the call), so that a model can look several up at
  /// once.
  arrow::Status ForEachRun(std::string_view in,
                           const std::function<void(std::span<const std::string_view>)>& f) const;

 private:
  ByteLevelWords() = default;
  std::unique_ptr<Regex> regex_;
  bool add_prefix_space_ = false;
};

/// `pieces` (byte ranges of `text`, each with whether it is a match) cut as
/// `behavior` says, the non-empty words appended to `words`.
void SplitBy(std::string_view text, std::vector<std::pair<std::pair<size_t, size_t>, bool>> pieces,
             SplitBehavior behavior, std::vector<std::string>* words);

}  // namespace icefloe::transform::hf
