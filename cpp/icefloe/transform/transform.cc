#include "icefloe/transform/transform.h"

#include <algorithm>
#include <limits>
#include <set>

#include <arrow/array/concatenate.h>
#include <arrow/array/util.h>
#include <arrow/builder.h>
#include <arrow/compute/api_vector.h>
#include <arrow/compute/exec.h>

#include "icefloe/transform/value_expr.h"

namespace icefloe::transform {

namespace cp = arrow::compute;

namespace {

std::string Names(const arrow::Schema& schema) {
  std::string out;
  for (int i = 0; i < schema.num_fields(); ++i) {
    if (i > 0) out += ", ";
    if (i == 16) return out + "... (" + std::to_string(schema.num_fields()) + " columns)";
    out += schema.field(i)->name();
  }
  return out;
}

arrow::Status Unknown(const std::string& what, const std::string& column,
                      const arrow::Schema& input) {
  return arrow::Status::Invalid("transform: ", what, ": unknown column '", column,
                                "' (the loaded columns are: ", Names(input), ")");
}

// An expression as errors quote it: whole up to 80 bytes, else its start and
// its size (an expression may be 64 KB; an error does not echo it whole).
std::string Quoted(const std::string& expr) {
  constexpr size_t kShownBytes = 80;
  if (expr.size() <= kShownBytes) return "'" + expr + "'";
  size_t n = kShownBytes;
  while (n > 0 && (static_cast<unsigned char>(expr[n]) & 0xC0) == 0x80) --n;  // a UTF-8 start
  return "'" + expr.substr(0, n) + "...' (" + std::to_string(expr.size()) + " bytes)";
}

// pad_to's pad id: the model's own, else the spec's `pad_id`; both given
// and different is refused rather than one silently winning.
arrow::Result<int32_t> PadId(const TokenizeSpec& tok, const Tokenizer& tokenizer,
                             const std::string& what) {
  const std::optional<int32_t> own = tokenizer.pad_id();
  const char* where = tokenizer.kind() == "sentencepiece" ? "its pad piece" : "padding.pad_id";
  if (own && tok.pad_id && *tok.pad_id != *own) {
    return arrow::Status::Invalid("transform: ", what, ": 'pad_id' ", *tok.pad_id, " but '",
                                  tok.model, "' pads with ", *own, " (", where,
                                  "); leave 'pad_id' out or give ", *own);
  }
  if (own) return *own;
  // Any id, as the tokenizers package takes any (a pad token may be an added
  // token past the model's vocabulary).
  if (tok.pad_id) return static_cast<int32_t>(*tok.pad_id);  // <= INT32_MAX: checked by the spec
  return arrow::Status::Invalid("transform: ", what, ": 'pad_to' needs a pad id and '", tok.model,
                                "' names none (", where, "); give 'pad_id'");
}

}  // namespace

arrow::Result<std::vector<std::string>> InputColumns(const TransformSpec& spec) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  auto add = [&](const std::string& name) {
    if (seen.insert(name).second) out.push_back(name);
  };
  for (const auto& k : spec.keep) add(k);
  for (const auto& c : spec.columns) {
    if (c.tokenize) {
      add(c.tokenize->column);
      continue;
    }
    if (c.chat) {
      for (const auto* name :
           {&c.chat->messages, &c.chat->instruction, &c.chat->input, &c.chat->output}) {
        if (*name) add(**name);
      }
      continue;
    }
    auto parsed = ParseValueExpr(*c.expr);
    if (!parsed.ok()) {
      return arrow::Status::Invalid("transform: column '", c.name, "' (", Quoted(*c.expr),
                                    "): ", parsed.status().message());
    }
    for (const auto& name : ColumnsOf(*parsed)) add(name);
  }
  return out;
}

arrow::Result<std::shared_ptr<const Transform>> Transform::Make(
    const TransformSpec& spec, const std::shared_ptr<arrow::Schema>& input,
    const ModelReader& read_model, const std::vector<std::string>& expected_sha256) {
  ARROW_RETURN_NOT_OK(RegisterFunctions());
  auto t = std::shared_ptr<Transform>(new Transform());
  t->spec_ = spec;
  t->input_schema_ = input;
  arrow::FieldVector fields;
  for (const auto& k : spec.keep) {
    const int i = input->GetFieldIndex(k);
    if (i < 0) return Unknown("'keep'", k, *input);
    Column c;
    c.name = k;
    c.what = "keep '" + k + "'";
    c.source = i;
    fields.push_back(arrow::field(k, input->field(i)->type()));
    t->columns_.push_back(std::move(c));
  }
  // A model read, checked against the head's hash and parsed; its hash and
  // kind recorded in column order.
  auto load_model =
      [&](const std::string& location,
          const std::string& what) -> arrow::Result<std::shared_ptr<const Tokenizer>> {
    auto bytes = read_model(location);
    if (!bytes.ok()) {
      return arrow::Status::Invalid("transform: ", what, ": cannot read tokenizer model '",
                                    location, "': ", bytes.status().ToString());
    }
    std::string sha = Sha256Hex(*bytes);
    const size_t k = t->model_sha256_.size();
    if (k < expected_sha256.size() && expected_sha256[k] != sha) {
      return arrow::Status::Invalid("transform: ", what, ": tokenizer model '", location,
                                    "' changed since the load was planned (SHA-256 ", sha,
                                    ", the head read ", expected_sha256[k], ")");
    }
    auto tokenizer = Tokenizer::Load(*bytes, location);
    if (!tokenizer.ok()) {
      return arrow::Status::Invalid("transform: ", what, ": ", tokenizer.status().message());
    }
    t->model_kind_.push_back((*tokenizer)->kind());
    t->model_sha256_.push_back(std::move(sha));
    return std::move(*tokenizer);
  };
  for (const auto& spec_column : spec.columns) {
    Column c;
    c.name = spec_column.name;
    if (spec_column.chat) {
      const ChatSpec& chat = *spec_column.chat;
      c.what = "column '" + c.name + "' (chat '" + chat.template_name + "')";
      ARROW_ASSIGN_OR_RAISE(auto tokenizer, load_model(chat.model, c.what));
      ARROW_ASSIGN_OR_RAISE(
          c.chat, ChatColumn::Make(chat, *input, std::move(tokenizer), "transform: " + c.what));
      fields.push_back(arrow::field(c.name, arrow::list(arrow::int32())));
      fields.push_back(arrow::field(chat.labels, arrow::list(arrow::int32())));
      Column labels;
      labels.name = chat.labels;
      labels.what = "column '" + labels.name + "' (the labels of '" + c.name + "')";
      labels.labels = true;
      t->columns_.push_back(std::move(c));
      t->columns_.push_back(std::move(labels));
      continue;
    }
    if (spec_column.expr) {
      c.what = "column '" + c.name + "' (" + Quoted(*spec_column.expr) + ")";
      auto parsed = ParseValueExpr(*spec_column.expr);
      if (!parsed.ok()) {
        return arrow::Status::Invalid("transform: ", c.what, ": ", parsed.status().message());
      }
      for (const auto& name : ColumnsOf(*parsed)) {
        if (input->GetFieldIndex(name) < 0) return Unknown(c.what, name, *input);
      }
      auto bound = parsed->Bind(*input);
      if (!bound.ok()) {
        return arrow::Status::Invalid("transform: ", c.what, ": ", bound.status().ToString());
      }
      c.expr = std::move(*bound);
      fields.push_back(arrow::field(c.name, c.expr.type()->GetSharedPtr()));
    } else {
      const TokenizeSpec& tok = *spec_column.tokenize;
      c.what = "column '" + c.name + "' (tokenize '" + tok.column + "')";
      const int i = input->GetFieldIndex(tok.column);
      if (i < 0) return Unknown(c.what, tok.column, *input);
      const auto& type = *input->field(i)->type();
      if (type.id() != arrow::Type::STRING && type.id() != arrow::Type::LARGE_STRING) {
        return arrow::Status::Invalid("transform: ", c.what, ": tokenize needs a string column; '",
                                      tok.column, "' is ", type.ToString());
      }
      c.source = i;
      ARROW_ASSIGN_OR_RAISE(auto tokenizer, load_model(tok.model, c.what));
      const TokenizeOptions options{tok.bos, tok.eos, tok.special_tokens, tok.max_tokens};
      auto checked = tokenizer->Check(options);
      if (!checked.ok()) {
        return arrow::Status::Invalid("transform: ", c.what, ": ", checked.message());
      }
      c.tokenizer = std::move(tokenizer);
      c.tokenize = options;
      if (tok.pad_to) {
        ARROW_ASSIGN_OR_RAISE(c.pad_id, PadId(tok, *c.tokenizer, c.what));
        c.pad_to = static_cast<int32_t>(*tok.pad_to);  // <= kMaxTokens: checked by the spec
        fields.push_back(arrow::field(c.name, arrow::fixed_size_list(arrow::int32(), c.pad_to)));
        fields.push_back(
            arrow::field(tok.MaskName(), arrow::fixed_size_list(arrow::int8(), c.pad_to)));
        Column mask;
        mask.name = tok.MaskName();
        mask.what = "column '" + mask.name + "' (the mask of '" + c.name + "')";
        mask.mask = true;
        t->columns_.push_back(std::move(c));
        t->columns_.push_back(std::move(mask));
        continue;
      }
      fields.push_back(arrow::field(c.name, arrow::list(arrow::int32())));
    }
    t->columns_.push_back(std::move(c));
  }
  if (!expected_sha256.empty() && expected_sha256.size() != t->model_sha256_.size()) {
    return arrow::Status::Invalid("transform: ", expected_sha256.size(), " model hashes for ",
                                  t->model_sha256_.size(), " tokenize and chat columns");
  }
  t->columns_schema_ = arrow::schema(fields);
  t->output_schema_ = t->columns_schema_;
  if (spec.pack) ARROW_RETURN_NOT_OK(t->BindPack());
  return std::shared_ptr<const Transform>(std::move(t));
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> Transform::Apply(const arrow::RecordBatch& batch,
                                                                    arrow::MemoryPool* pool,
                                                                    int64_t* rows_dropped) const {
  cp::ExecContext ctx(pool);
  const cp::ExecBatch exec_batch(batch);
  arrow::ArrayVector out;
  std::shared_ptr<arrow::Array> mask;    // a pad_to column's, for the next column
  std::shared_ptr<arrow::Array> labels;  // a chat column's, for the next column
  std::vector<bool> keep;                // rows the chat columns keep; empty: all
  for (const Column& c : columns_) {
    arrow::Result<std::shared_ptr<arrow::Array>> column;
    if (c.mask) {
      column = std::move(mask);
    } else if (c.labels) {
      column = std::move(labels);
    } else if (c.chat) {
      auto chat = c.chat->Apply(batch, pool);
      if (chat.ok()) {
        column = std::move(chat->ids);
        labels = std::move(chat->labels);
        if (keep.empty()) {
          keep = std::move(chat->keep);
        } else {
          for (size_t i = 0; i < keep.size(); ++i) keep[i] = keep[i] && chat->keep[i];
        }
      } else {
        column = chat.status();
      }
    } else if (c.pad_to > 0) {
      auto padded =
          c.tokenizer->EncodePadded(*batch.column(c.source), c.tokenize, c.pad_to, c.pad_id, pool);
      if (padded.ok()) {
        column = std::move(padded->ids);
        mask = std::move(padded->mask);
      } else {
        column = padded.status();
      }
    } else if (c.tokenizer) {
      column = c.tokenizer->Encode(*batch.column(c.source), c.tokenize, pool);
    } else if (c.source >= 0) {
      column = batch.column(c.source);
    } else {
      auto datum = cp::ExecuteScalarExpression(c.expr, exec_batch, &ctx);
      if (!datum.ok()) {
        column = datum.status();
      } else if (datum->is_array()) {
        column = datum->make_array();
      } else if (datum->is_chunked_array()) {
        column = arrow::Concatenate(datum->chunked_array()->chunks(), pool);
      } else {
        column = arrow::MakeArrayFromScalar(*datum->scalar(), batch.num_rows(), pool);
      }
    }
    if (!column.ok()) {
      return column.status().WithMessage("transform: ", c.what, ": ", column.status().message());
    }
    out.push_back(std::move(*column));
  }
  auto result = arrow::RecordBatch::Make(columns_schema_, batch.num_rows(), std::move(out));
  const auto kept = std::count(keep.begin(), keep.end(), true);
  if (keep.empty() || kept == batch.num_rows()) return result;
  *rows_dropped += batch.num_rows() - kept;
  arrow::BooleanBuilder selection(pool);
  ARROW_RETURN_NOT_OK(selection.Reserve(batch.num_rows()));
  for (bool k : keep) selection.UnsafeAppend(k);
  ARROW_ASSIGN_OR_RAISE(auto filter, selection.Finish());
  ARROW_ASSIGN_OR_RAISE(auto filtered,
                        cp::Filter(result, filter, cp::FilterOptions::Defaults(), &ctx));
  return filtered.record_batch();
}

// Without pack: each batch transformed, row for row.
class Transform::RowStream : public Transform::TaskStream {
 public:
  RowStream(const Transform* t, arrow::MemoryPool* pool) : t_(t), pool_(pool) {}
  arrow::Status Add(const arrow::RecordBatch& batch,
                    std::vector<std::shared_ptr<arrow::RecordBatch>>* out) override {
    ARROW_ASSIGN_OR_RAISE(auto applied, t_->Apply(batch, pool_, &rows_dropped_));
    out->push_back(std::move(applied));
    return arrow::Status::OK();
  }
  arrow::Status Finish(std::vector<std::shared_ptr<arrow::RecordBatch>>*) override {
    return arrow::Status::OK();
  }

 private:
  const Transform* t_;
  arrow::MemoryPool* pool_;
};

std::unique_ptr<Transform::TaskStream> Transform::Stream(int64_t batch_rows,
                                                         arrow::MemoryPool* pool) const {
  if (spec_.pack) return MakePackStream(batch_rows, pool);
  return std::make_unique<RowStream>(this, pool);
}

arrow::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> Transform::ApplyTask(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches, int64_t batch_rows,
    arrow::MemoryPool* pool) const {
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  auto stream = Stream(batch_rows, pool);
  for (const auto& b : batches) ARROW_RETURN_NOT_OK(stream->Add(*b, &out));
  ARROW_RETURN_NOT_OK(stream->Finish(&out));
  return out;
}

}  // namespace icefloe::transform
