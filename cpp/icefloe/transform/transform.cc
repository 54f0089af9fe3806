#include "icefloe/transform/transform.h"

#include <set>

#include <arrow/array/concatenate.h>
#include <arrow/array/util.h>
#include <arrow/builder.h>
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

bool IsTokenList(const arrow::DataType& type) {
  if (type.id() != arrow::Type::LIST && type.id() != arrow::Type::LARGE_LIST) return false;
  return type.field(0)->type()->id() == arrow::Type::INT32;
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
  for (const auto& spec_column : spec.columns) {
    Column c;
    c.name = spec_column.name;
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
      auto bytes = read_model(tok.model);
      if (!bytes.ok()) {
        return arrow::Status::Invalid("transform: ", c.what, ": cannot read tokenizer model '",
                                      tok.model, "': ", bytes.status().ToString());
      }
      std::string sha = Sha256Hex(*bytes);
      const size_t k = t->model_sha256_.size();
      if (k < expected_sha256.size() && expected_sha256[k] != sha) {
        return arrow::Status::Invalid("transform: ", c.what, ": tokenizer model '", tok.model,
                                      "' changed since the load was planned (SHA-256 ", sha,
                                      ", the head read ", expected_sha256[k], ")");
      }
      auto tokenizer = Tokenizer::Load(*bytes, tok.model);
      if (!tokenizer.ok()) {
        return arrow::Status::Invalid("transform: ", c.what, ": ", tokenizer.status().message());
      }
      if ((tok.bos && (*tokenizer)->bos_id() < 0) || (tok.eos && (*tokenizer)->eos_id() < 0)) {
        return arrow::Status::Invalid(
            "transform: ", c.what, ": tokenizer model '", tok.model, "' has no ",
            tok.bos && (*tokenizer)->bos_id() < 0 ? "BOS" : "EOS", " piece");
      }
      c.tokenizer = std::move(*tokenizer);
      c.tokenize = {tok.bos, tok.eos, tok.max_tokens};
      t->model_sha256_.push_back(std::move(sha));
      fields.push_back(arrow::field(c.name, arrow::list(arrow::int32())));
    }
    t->columns_.push_back(std::move(c));
  }
  if (!expected_sha256.empty() && expected_sha256.size() != t->model_sha256_.size()) {
    return arrow::Status::Invalid("transform: ", expected_sha256.size(), " model hashes for ",
                                  t->model_sha256_.size(), " tokenize columns");
  }
  t->columns_schema_ = arrow::schema(fields);
  t->output_schema_ = t->columns_schema_;
  if (spec.pack) {
    const PackSpec& p = *spec.pack;
    auto field = t->columns_schema_->GetFieldByName(p.column);
    if (!IsTokenList(*field->type())) {
      return arrow::Status::Invalid("transform: 'pack': column '", p.column,
                                    "' must hold token ids (list<int32>); it is ",
                                    field->type()->ToString());
    }
    const auto s = static_cast<int32_t>(p.seq_len);
    arrow::FieldVector packed = {
        arrow::field(p.column, arrow::fixed_size_list(arrow::int32(), s), false)};
    if (p.tail == "pad") {
      packed.push_back(
          arrow::field("attention_mask", arrow::fixed_size_list(arrow::int8(), s), false));
    }
    if (p.position_ids) {
      packed.push_back(
          arrow::field("position_ids", arrow::fixed_size_list(arrow::int32(), s), false));
    }
    std::set<std::string> names;
    for (const auto& f : packed) {
      if (!names.insert(f->name()).second) {
        return arrow::Status::Invalid("transform: 'pack': column '", p.column,
                                      "' clashes with the packed column of that name; rename it");
      }
    }
    t->output_schema_ = arrow::schema(packed);
  }
  return std::shared_ptr<const Transform>(std::move(t));
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> Transform::Apply(const arrow::RecordBatch& batch,
                                                                    arrow::MemoryPool* pool) const {
  cp::ExecContext ctx(pool);
  const cp::ExecBatch exec_batch(batch);
  arrow::ArrayVector out;
  for (const Column& c : columns_) {
    arrow::Result<std::shared_ptr<arrow::Array>> column;
    if (c.tokenizer) {
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
  return arrow::RecordBatch::Make(columns_schema_, batch.num_rows(), std::move(out));
}

arrow::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> Transform::ApplyTask(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches, int64_t batch_rows,
    arrow::MemoryPool* pool) const {
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  out.reserve(batches.size());
  for (const auto& b : batches) {
    ARROW_ASSIGN_OR_RAISE(auto applied, Apply(*b, pool));
    out.push_back(std::move(applied));
  }
  if (!spec_.pack) return out;
  return Pack(out, batch_rows, pool);
}

namespace {

template <typename ListArray>
void ForEachDocument(const arrow::Array& array,
                     const std::function<void(const int32_t*, int64_t)>& fn) {
  const auto& list = static_cast<const ListArray&>(array);
  const auto& values = static_cast<const arrow::Int32Array&>(*list.values());
  for (int64_t i = 0; i < list.length(); ++i) {
    if (list.IsNull(i)) continue;
    fn(values.raw_values() + list.value_offset(i), list.value_length(i));
  }
}

}  // namespace

arrow::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> Transform::Pack(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches, int64_t batch_rows,
    arrow::MemoryPool* pool) const {
  const PackSpec& p = *spec_.pack;
  const int column = columns_schema_->GetFieldIndex(p.column);
  auto each_document = [&](const std::function<void(const int32_t*, int64_t)>& fn) {
    for (const auto& b : batches) {
      const arrow::Array& a = *b->column(column);
      if (a.type_id() == arrow::Type::LIST) {
        ForEachDocument<arrow::ListArray>(a, fn);
      } else {
        ForEachDocument<arrow::LargeListArray>(a, fn);
      }
    }
  };
  // Tokens in the task (documents and separators), then how many rows.
  const int64_t sep = p.eos ? 1 : 0;
  int64_t total = 0;
  int64_t longest = 0;
  each_document([&](const int32_t*, int64_t n) {
    total += n + sep;
    longest = std::max(longest, n);
  });
  if (p.position_ids && longest + sep > std::numeric_limits<int32_t>::max()) {
    return arrow::Status::Invalid("transform: 'pack': a document of ", longest,
                                  " tokens has positions beyond int32 (position_ids)");
  }
  const int64_t s = p.seq_len;
  const int64_t rows = p.tail == "pad" ? (total + s - 1) / s : total / s;
  const int64_t kept = rows * s;

  arrow::Int32Builder ids(pool);
  arrow::Int8Builder mask(pool);
  arrow::Int32Builder positions(pool);
  const bool with_mask = p.tail == "pad";
  ARROW_RETURN_NOT_OK(ids.Reserve(kept));
  if (with_mask) ARROW_RETURN_NOT_OK(mask.Reserve(kept));
  if (p.position_ids) ARROW_RETURN_NOT_OK(positions.Reserve(kept));
  int64_t written = 0;
  auto put = [&](int32_t id, int32_t position) {
    if (written >= kept) return;
    ids.UnsafeAppend(id);
    if (with_mask) mask.UnsafeAppend(1);
    if (p.position_ids) positions.UnsafeAppend(position);
    ++written;
  };
  each_document([&](const int32_t* doc, int64_t n) {
    for (int64_t k = 0; k < n; ++k) put(doc[k], static_cast<int32_t>(k));  // < 2^31: checked above
    if (p.eos) put(static_cast<int32_t>(*p.eos), static_cast<int32_t>(n));
  });
  while (written < kept) {  // tail "pad"
    ids.UnsafeAppend(static_cast<int32_t>(p.pad));
    mask.UnsafeAppend(0);
    if (p.position_ids) positions.UnsafeAppend(0);
    ++written;
  }
  arrow::ArrayVector columns;
  auto fixed = [&](arrow::ArrayBuilder* b,
                   const std::shared_ptr<arrow::DataType>& type) -> arrow::Status {
    ARROW_ASSIGN_OR_RAISE(auto values, b->Finish());
    ARROW_ASSIGN_OR_RAISE(auto list, arrow::FixedSizeListArray::FromArrays(values, type));
    columns.push_back(std::move(list));
    return arrow::Status::OK();
  };
  // In output_schema_'s order: the ids, then the mask and the positions.
  int next_field = 0;
  ARROW_RETURN_NOT_OK(fixed(&ids, output_schema_->field(next_field++)->type()));
  if (with_mask) ARROW_RETURN_NOT_OK(fixed(&mask, output_schema_->field(next_field++)->type()));
  if (p.position_ids) {
    ARROW_RETURN_NOT_OK(fixed(&positions, output_schema_->field(next_field++)->type()));
  }
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  for (int64_t start = 0; start < rows; start += batch_rows) {
    const int64_t n = std::min(batch_rows, rows - start);
    arrow::ArrayVector slices;
    for (const auto& c : columns) slices.push_back(c->Slice(start, n));
    out.push_back(arrow::RecordBatch::Make(output_schema_, n, std::move(slices)));
  }
  return out;
}

}  // namespace icefloe::transform
