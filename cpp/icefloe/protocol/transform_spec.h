// The `transform` of a load (docs/transforms.md): what the data nodes make of
// each batch they load, declared as data.
//
// A spec lists the output columns: source columns passed through (`keep`),
// columns computed by an expression over the loaded columns (`expr`, the
// filter language plus arithmetic and Arrow compute functions), string
// columns tokenized into token ids (`tokenize`, a SentencePiece model or a
// Hugging Face tokenizer.json) and conversations or instruction rows
// rendered with a chat template and tokenized, with their training labels
// (`chat`). An optional `pack` then cuts token columns (several aligned ones
// together: input_ids, labels) into rows of exactly `seq_len` tokens. This
// file only parses and checks the spec's shape (every field typed and
// bounded, names unique, exactly one of expr/tokenize/chat per column);
// binding it to a table schema and running it is transform/transform.h.
//
// A process parses a spec once, where the message that carries it is
// decoded (load, node.load, a dataset description: their field tables hold
// it as std::optional<TransformSpec>, fields.h MessageOf), and hands the
// typed value on. On the wire it stays the JSON the client gave.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <nlohmann/json.hpp>

#include "icefloe/protocol/fields.h"

namespace icefloe {

/// Most output columns of one transform.
inline constexpr size_t kMaxTransformColumns = 256;
/// Longest packed row (tokens).
inline constexpr int64_t kMaxSeqLen = int64_t{1} << 20;
/// Longest token list a tokenize may be truncated to.
inline constexpr int64_t kMaxTokens = int64_t{1} << 24;

/// `tokenize`: a string column to list<int32> token ids.
struct TokenizeSpec {
  std::string column;  ///< the source string column
  /// A SentencePiece .model or a Hugging Face tokenizer.json: local path,
  /// file:// or s3:// (as the table)
  std::string model;
  bool bos = false;  ///< SentencePiece: prepend the model's BOS id
  bool eos = false;  ///< SentencePiece: append the model's EOS id
  /// tokenizer.json: its post-processor's special tokens ([CLS] ... [SEP])
  bool special_tokens = true;
  /// At most this many ids per row, special ids included: the text's ids are
  /// cut at the end, then the special ids added. Absent: no limit.
  std::optional<int64_t> max_tokens;
  /// Every row padded to exactly this many ids (fixed_size_list<int32, N>)
  /// with the pad id, plus a `mask` column (fixed_size_list<int8, N>: 1 for
  /// an id, 0 for padding). Needs max_tokens <= pad_to.
  std::optional<int64_t> pad_to;
  /// The pad id where the model names none (tokenizer.json: its `padding`
  /// section; SentencePiece: its pad piece).
  std::optional<int64_t> pad_id;
  /// pad_to's mask column; absent: "attention_mask".
  std::optional<std::string> mask;

  /// The mask column's name (with pad_to).
  std::string MaskName() const { return mask.value_or("attention_mask"); }

  bool operator==(const TokenizeSpec&) const = default;
};

/// `chat`: rows rendered with a built-in template (transform/chat.h), the
/// rendered text tokenized whole, and a labels column: the ids where the
/// model is trained, -100 elsewhere. Source: a `messages` column
/// (list<struct<role: string, content: string>>) for the chat templates, or
/// `instruction`/`input`/`output` columns for `alpaca`.
struct ChatSpec {
  std::string template_name;  ///< "template": chatml, llama3, mistral or alpaca
  std::optional<std::string> messages;
  std::optional<std::string> instruction;
  std::optional<std::string> input;  ///< alpaca: optional (no input: the no-input prompt)
  std::optional<std::string> output;
  std::string model;                   ///< a tokenizer.json, located as tokenize's `model`
  std::string labels = "labels";       ///< the labels column's name
  std::string train_on = "assistant";  ///< "assistant" (alpaca: the response) or "all"
  /// Ids and labels cut at the end to this many; a row left without a
  /// trained token is dropped (and counted). Absent: no limit.
  std::optional<int64_t> max_tokens;
  /// alpaca: the token texts around each example (the model's BOS, and the
  /// EOS the recipe appends, trained with the response). Chat templates name
  /// their own.
  std::optional<std::string> bos;
  std::optional<std::string> eos;

  bool operator==(const ChatSpec&) const = default;
};

/// One output column: exactly one of `expr`, `tokenize` and `chat`.
struct TransformColumn {
  std::string name;
  std::optional<std::string> expr;
  std::optional<TokenizeSpec> tokenize;
  std::optional<ChatSpec> chat;

  bool operator==(const TransformColumn&) const = default;
};

/// `pack`: documents (rows) of aligned token columns laid end to end and cut
/// together into rows of exactly `seq_len` tokens, within each scan task
/// (transform/pack.h). The packed columns are then the only output columns.
struct PackSpec {
  std::string column;  ///< the one-column form: `columns` [column]
  /// Aligned list<int32> output columns (equal lengths per row), packed
  /// together: input_ids, labels, a mask.
  std::vector<std::string> columns;
  int64_t seq_len = 0;
  std::optional<int64_t> eos;  ///< separator id appended after each document (one column only)
  std::string tail = "drop";   ///< concat: a last partial row "drop"ped or "pad"ded
  int64_t pad = 0;             ///< the pad id of every packed column but the labels
  bool position_ids = false;   ///< add `position_ids`: each token's position in its document
  /// The labels column among `columns`: each document's first label set to
  /// -100, padding -100. Absent: "labels" when `columns` names it.
  std::optional<std::string> labels;
  /// A document longer than seq_len: "split" across rows or "drop"ped (counted).
  std::string overlong = "split";
  /// "concat": documents end to end, cut anywhere; "ffd": first-fit
  /// decreasing, whole documents into rows padded to seq_len.
  std::string strategy = "concat";

  /// The packed columns: `columns`, or [column].
  std::vector<std::string> Columns() const {
    return columns.empty() ? std::vector<std::string>{column} : columns;
  }
  /// The labels column, if any.
  std::optional<std::string> LabelsColumn() const;
  /// Whether rows may hold padding (and the copy an attention_mask).
  bool Pads() const { return tail == "pad" || strategy == "ffd"; }

  bool operator==(const PackSpec&) const = default;
};

struct TransformSpec {
  std::vector<std::string> keep;  ///< source columns passed through, first
  std::vector<TransformColumn> columns;
  std::optional<PackSpec> pack;

  /// Equal when both go on the wire as the same JSON (ToJson): a spec that
  /// spells out a default ("bos": false) differs from one that leaves it
  /// out, as loads compared their specs before they were typed (a load joins
  /// a running one, and copies are shared, only on equal specs).
  bool operator==(const TransformSpec& other) const;

  /// Output column names in order: keep, then columns, each pad_to column
  /// followed by its mask and each chat column by its labels (without pack).
  std::vector<std::string> OutputNames() const;
  /// Every tokenize's and chat's model location, in column order.
  std::vector<std::string> ModelLocations() const;

  /// The spec as JSON. A spec FromJson read, its members unchanged since, is
  /// the object it was read from, as the client gave it: what describe
  /// echoes, node.load carries and copy keys hold (catalog records), byte for
  /// byte as before specs were typed. Any other spec is its canonical JSON:
  /// every field, less the optional ones at their defaults.
  nlohmann::json ToJson() const;

  /// OK, or Invalid naming the first member of the JSON this spec was read
  /// from that is no field of its object ("transform: 'columns'[0].tokenize:
  /// unknown field 'pad_too' (fields: ...)"). A load refuses such a spec: a
  /// misspelt option would make another copy than the one asked for. FromJson
  /// itself reads past unknown members, as every message does, so that specs
  /// in catalog records and node.load stay readable. A spec built in code has
  /// none.
  arrow::Status CheckKnownFields() const;

  /// Checks the shape of `j` (an object); Invalid naming the field
  /// ("transform: 'columns'[1].tokenize: 'model' must be ...").
  static arrow::Result<TransformSpec> FromJson(const nlohmann::json& j);
  static MessageSpec Spec();

 private:
  nlohmann::json Canonical() const;

  nlohmann::json given_;    // the object FromJson read; null: built in code
  nlohmann::json read_as_;  // Canonical() when read: tells whether members changed since
};

}  // namespace icefloe
