// The `chat` column (docs/transforms.md, "chat"): conversations or
// instruction rows rendered with a built-in template, tokenized, and
// labelled for supervised fine-tuning.
//
// A template is data (ChatTemplate: the text around each turn, the BOS, the
// end-of-turn token, the default system prompt, a few rules) that Render
// lays out; no template engine runs. Each built-in reproduces one real
// model's chat template exactly, as `transformers`' apply_chat_template
// renders it:
// - chatml: Qwen/Qwen2.5-7B-Instruct (its default system prompt when the
//   conversation has none);
// - llama3: meta-llama/Llama-3.1-8B-Instruct (BOS, the system header with
//   its knowledge and date lines, contents trimmed);
// - mistral: mistralai/Mistral-Nemo-Instruct-2407 (BOS, [INST] turns, the
//   system prompt inside the last user turn, roles alternating);
// - alpaca: the Stanford Alpaca prompt (torchtune's AlpacaToMessages text)
//   in the original Alpaca layout: prompt, response and the EOS the recipe
//   appends, as one text; the response and EOS trained.
// - llama3 over instruction columns: torchtune's layout, what its
//   alpaca_dataset feeds Llama-3 (AlpacaToMessages' user prompt and
//   assistant response through Llama3Tokenizer.tokenize_messages: no system
//   header, <|end_of_text|> after, the assistant message trained whole).
//
// The ids are the tokenizer run on the whole rendered text (equal to
// apply_chat_template(messages, tokenize=True)). The labels are found by
// prefix rendering, as SFT recipes do: a trained part of the text covers
// the tokens from those of the text before it to those of the text through
// its end.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <arrow/array.h>
#include <arrow/memory_pool.h>
#include <arrow/record_batch.h>
#include <arrow/result.h>
#include <arrow/type.h>

#include "icefloe/protocol/transform_spec.h"
#include "icefloe/transform/labels.h"
#include "icefloe/transform/tokenizer.h"

namespace icefloe::transform {

enum class Role { kSystem, kUser, kAssistant };

/// One message of a conversation (views into the batch's strings).
struct Turn {
  Role role;
  std::string_view content;
};

/// A built-in template, as data.
struct ChatTemplate {
  std::string_view name = {};
  std::string_view bos = {};  ///< text before everything ("" none)
  /// The leading system block: system_prefix + system prompt + system_suffix,
  /// written when the conversation opens with a system message, or always
  /// (with default_system) when system_always.
  std::string_view system_prefix = {}, system_suffix = {};
  std::string_view default_system = {};
  bool system_always = false;
  /// mistral: no system block; "[INST]" + system + "\n\n" + content of the
  /// last user turn.
  bool system_in_last_user = false;
  std::string_view system_separator = {};  ///< between system and user there
  bool trim = false;          ///< contents trimmed as Jinja's `trim` (Python str.strip())
  bool alternate = false;     ///< user, assistant, user, ... after the system message
  bool later_system = false;  ///< a later system message renders as a turn of its own
  /// A turn: prefix + content + suffix; the prefix's `{role}` is the role's name.
  std::string_view turn_prefix = {};
  std::string_view turn_suffix = {};
  /// The assistant's: assistant_prefix (not trained), then content_prefix,
  /// the content and end_of_turn (trained), then after_turn (not trained).
  std::string_view assistant_prefix = {};
  std::string_view content_prefix = {};
  std::string_view end_of_turn = {};
  std::string_view after_turn = {};
  /// Texts that must each be one token of the model (checked at bind).
  std::vector<std::string_view> special_tokens = {};
};

/// The built-in template `name`; nullptr when there is none.
const ChatTemplate* FindChatTemplate(std::string_view name);

/// A rendered example: its text and the byte ranges [begin, end) trained.
struct Rendered {
  std::string text;
  std::vector<std::pair<size_t, size_t>> trained;
};

/// Why a row is not rendered (each a counted drop; docs/transforms.md).
struct RenderRefusal {
  std::string reason;
};

/// Renders `turns` with `t`; the trained ranges are each assistant turn's
/// content_prefix, content and end_of_turn (train_on_all: the whole text). A refusal when
/// the template cannot render the turns (an empty conversation, a system
/// message after the first where the template has none, roles out of the
/// template's order, a system prompt and no user turn, a last turn not the
/// assistant's when training on it).
std::variant<Rendered, RenderRefusal> Render(const ChatTemplate& t, const std::vector<Turn>& turns,
                                             bool train_on_all);

/// alpaca: bos + the prompt (with or without input) + output + eos; trained:
/// output and eos (train_on_all: everything).
Rendered RenderAlpaca(std::string_view bos, std::string_view eos, std::string_view instruction,
                      std::string_view input, std::string_view output, bool train_on_all);

/// llama3 with instruction columns: torchtune's Llama3Tokenizer.tokenize_messages
/// of AlpacaToMessages' [user: the alpaca prompt, assistant: output], each
/// content stripped (Python's str.strip()): BOS, each message as
/// `<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>` (no
/// system header), then `<|end_of_text|>`. Trained: the assistant message
/// whole (train_on_all: both messages); BOS and EOS never.
Rendered RenderLlama3Instruction(std::string_view instruction, std::string_view input,
                                 std::string_view output, bool train_on_all);

/// A chat column bound to a table and a model: immutable, shared by a
/// load's reader threads.
class ChatColumn {
 public:
  /// Checks `spec` against `input` (the source columns exist with the
  /// types the template reads) and `tokenizer` (a tokenizer.json with each
  /// of the template's tokens as one token). Invalid starting with `what`.
  static arrow::Result<std::shared_ptr<const ChatColumn>> Make(
      const ChatSpec& spec, const arrow::Schema& input, std::shared_ptr<const Tokenizer> tokenizer,
      const std::string& what);

  /// ids and labels (list<int32> each, equal lengths per row) of every row
  /// of `batch`; `keep[i]` says whether row i is kept (the others, null in
  /// both, are to be dropped: refused by the template, or no trained token
  /// left after max_tokens). An unknown role is Invalid naming the row.
  struct Output {
    std::shared_ptr<arrow::Array> ids;
    std::shared_ptr<arrow::Array> labels;
    std::vector<bool> keep;
    int64_t dropped = 0;
  };
  arrow::Result<Output> Apply(const arrow::RecordBatch& batch, arrow::MemoryPool* pool) const;

 private:
  ChatColumn() = default;
  /// The ids and labels of one rendered example, cut to max_tokens.
  arrow::Status Encode(const Rendered& r, std::vector<int32_t>* ids,
                       std::vector<int32_t>* labels) const;
  /// Labels by prefix rendering, each trained part's prefixes tokenized
  /// from the template token before it: the text's pieces between those
  /// tokens once more, instead of the text before every part. False (labels
  /// untouched) unless the pieces' tokens are exactly the whole text's.
  bool LabelBySegments(const Rendered& r, const std::vector<int32_t>& ids,
                       std::vector<int32_t>* labels) const;
  /// Labels by prefix rendering, the text before each part tokenized whole.
  arrow::Status LabelByPrefixes(const Rendered& r, const std::vector<int32_t>& ids,
                                std::vector<int32_t>* labels) const;

  const ChatTemplate* template_ = nullptr;  ///< nullptr: alpaca
  /// llama3 over instruction columns (RenderLlama3Instruction): train_on
  /// all leaves BOS and EOS untrained, max_tokens ends the row with EOS.
  bool llama3_instruction_ = false;
  int32_t end_of_text_id_ = 0;  ///< llama3_instruction_: <|end_of_text|>
  std::shared_ptr<const Tokenizer> tokenizer_;
  bool train_on_all_ = false;
  int64_t max_tokens_ = 0;             ///< 0: no limit
  std::string bos_, eos_;              ///< alpaca
  std::vector<std::string> specials_;  ///< the template's tokens (alpaca: bos, eos)
  int messages_ = -1;                  ///< source column indexes
  std::string messages_name_;
  int instruction_ = -1, input_ = -1, output_ = -1;
};

}  // namespace icefloe::transform
