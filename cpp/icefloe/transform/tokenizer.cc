#include "icefloe/transform/tokenizer.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include <arrow/buffer_builder.h>
#include <arrow/builder.h>
#include <openssl/sha.h>

#include "icefloe/transform/hf_tokenizer.h"
#include "icefloe/transform/sentencepiece_tokenizer.h"

namespace icefloe::transform {

namespace {

// JSON (an object, or anything else a tokenizer.json refusal should name,
// a list or a byte-order mark before it), else SentencePiece: a serialized
// ModelProto starts with neither (as a protobuf tag, '{' and '[' open groups).
bool LooksLikeJson(const std::string& bytes) {
  if (bytes.starts_with("\xEF\xBB\xBF")) return true;
  for (char c : bytes) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    return c == '{' || c == '[';
  }
  return false;
}

}  // namespace

namespace {

arrow::Result<std::shared_ptr<const Tokenizer>> Parse(const std::string& bytes,
                                                      const std::string& location) {
  if (LooksLikeJson(bytes)) {
    ARROW_ASSIGN_OR_RAISE(auto t, HfTokenizer::Load(bytes, location));
    return std::shared_ptr<const Tokenizer>(std::move(t));
  }
  ARROW_ASSIGN_OR_RAISE(auto t, SentencePieceTokenizer::Load(bytes, location));
  return std::shared_ptr<const Tokenizer>(std::move(t));
}

// The models parsed and still in use, by (SHA-256, location): a load whose
// columns name one model (a packed copy's input_ids and labels), the head's
// check of a load and the loads running beside it share one parse (a
// tokenizer.json of Llama-3's size takes seconds). Weak references: a model
// lives as long as a transform holds it; expired entries are dropped as the
// map is used, so it holds at most the models in use plus kMaxExpired.
class ParsedModels {
 public:
  std::shared_ptr<const Tokenizer> Find(const std::pair<std::string, std::string>& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = models_.find(key);
    return it == models_.end() ? nullptr : it->second.lock();
  }

  // `parsed`, or the model another thread parsed and kept meanwhile.
  std::shared_ptr<const Tokenizer> Keep(std::pair<std::string, std::string> key,
                                        std::shared_ptr<const Tokenizer> parsed) {
    std::lock_guard<std::mutex> lock(mu_);
    if (models_.size() >= kMaxExpired)
      std::erase_if(models_, [](const auto& e) { return e.second.expired(); });
    auto& kept = models_[std::move(key)];
    if (auto other = kept.lock()) return other;
    kept = parsed;
    return parsed;
  }

 private:
  static constexpr size_t kMaxExpired = 16;
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::weak_ptr<const Tokenizer>> models_;
};

ParsedModels& Parsed() {
  static ParsedModels* models = new ParsedModels();  // never destroyed: no exit-order race
  return *models;
}

}  // namespace

arrow::Result<std::shared_ptr<const Tokenizer>> Tokenizer::Load(const std::string& bytes,
                                                                const std::string& location) {
  std::pair<std::string, std::string> key{Sha256Hex(bytes), location};
  if (auto kept = Parsed().Find(key)) return kept;
  ARROW_ASSIGN_OR_RAISE(auto parsed, Parse(bytes, location));
  return Parsed().Keep(std::move(key), std::move(parsed));
}

// Each row: the framing's prefix, the text's ids cut to the room max_tokens
// leaves, the suffix; the whole never longer than max_tokens (a SentencePiece
// BOS is kept before an EOS when max_tokens leaves room for one only).
template <typename StringArray, typename RowFn>
arrow::Status Tokenizer::ForEachRow(const StringArray& strings, const TokenizeOptions& options,
                                    RowFn&& row) const {
  std::vector<int32_t> prefix, suffix, ids, framed;
  Framing(options, &prefix, &suffix);
  const auto extra = static_cast<int64_t>(prefix.size() + suffix.size());
  for (int64_t i = 0; i < strings.length(); ++i) {
    if (strings.IsNull(i)) {
      ARROW_RETURN_NOT_OK(row(i, nullptr));
      continue;
    }
    ids.clear();
    auto st = EncodeText(strings.GetView(i), &ids);
    if (!st.ok()) {
      return arrow::Status::Invalid("tokenizing row ", i, " with '", location_,
                                    "': ", st.message());
    }
    size_t keep = ids.size();
    if (options.max_tokens) {
      const int64_t room = *options.max_tokens - extra;
      keep = room <= 0 ? 0 : std::min<size_t>(keep, static_cast<size_t>(room));
    }
    framed.assign(prefix.begin(), prefix.end());
    framed.insert(framed.end(), ids.begin(), ids.begin() + static_cast<ptrdiff_t>(keep));
    framed.insert(framed.end(), suffix.begin(), suffix.end());
    if (options.max_tokens && static_cast<int64_t>(framed.size()) > *options.max_tokens) {
      framed.resize(static_cast<size_t>(*options.max_tokens));
    }
    ARROW_RETURN_NOT_OK(row(i, &framed));
  }
  return arrow::Status::OK();
}

template <typename RowFn>
arrow::Status Tokenizer::ForEachRow(const arrow::Array& strings, const TokenizeOptions& options,
                                    RowFn&& row) const {
  switch (strings.type_id()) {
    case arrow::Type::STRING:
      return ForEachRow(static_cast<const arrow::StringArray&>(strings), options, row);
    case arrow::Type::LARGE_STRING:
      return ForEachRow(static_cast<const arrow::LargeStringArray&>(strings), options, row);
    default:
      return arrow::Status::TypeError("tokenize needs a string column, got ",
                                      strings.type()->ToString());
  }
}

arrow::Result<std::shared_ptr<arrow::Array>> Tokenizer::Encode(const arrow::Array& strings,
                                                               const TokenizeOptions& options,
                                                               arrow::MemoryPool* pool) const {
  auto values = std::make_shared<arrow::Int32Builder>(pool);
  arrow::ListBuilder builder(pool, values, arrow::list(arrow::int32()));
  ARROW_RETURN_NOT_OK(builder.Reserve(strings.length()));
  ARROW_RETURN_NOT_OK(
      ForEachRow(strings, options, [&](int64_t, const std::vector<int32_t>* ids) -> arrow::Status {
        if (ids == nullptr) return builder.AppendNull();
        ARROW_RETURN_NOT_OK(builder.Append());
        return values->AppendValues(ids->data(), static_cast<int64_t>(ids->size()));
      }));
  return builder.Finish();
}

arrow::Result<PaddedIds> Tokenizer::EncodePadded(const arrow::Array& strings,
                                                 const TokenizeOptions& options, int32_t pad_to,
                                                 int32_t pad_id, arrow::MemoryPool* pool) const {
  if (pad_to <= 0 || !options.max_tokens || *options.max_tokens > pad_to) {
    return arrow::Status::Invalid("pad_to ", pad_to, " needs max_tokens of at most ", pad_to);
  }
  const int64_t rows = strings.length();
  arrow::TypedBufferBuilder<int32_t> values(pool);
  arrow::TypedBufferBuilder<int8_t> mask(pool);
  arrow::TypedBufferBuilder<bool> valid(pool);
  ARROW_RETURN_NOT_OK(values.Reserve(rows * pad_to));
  ARROW_RETURN_NOT_OK(mask.Reserve(rows * pad_to));
  ARROW_RETURN_NOT_OK(valid.Reserve(rows));
  ARROW_RETURN_NOT_OK(
      ForEachRow(strings, options, [&](int64_t, const std::vector<int32_t>* ids) -> arrow::Status {
        const int64_t n = ids == nullptr ? 0 : static_cast<int64_t>(ids->size());
        valid.UnsafeAppend(ids != nullptr);
        if (n > pad_to) return arrow::Status::Invalid("a row of ", n, " ids, more than pad_to");
        if (n > 0) values.UnsafeAppend(ids->data(), n);
        values.UnsafeAppend(pad_to - n, pad_id);
        mask.UnsafeAppend(n, int8_t{1});
        mask.UnsafeAppend(pad_to - n, int8_t{0});
        return arrow::Status::OK();
      }));
  const int64_t nulls = valid.false_count();
  ARROW_ASSIGN_OR_RAISE(auto bitmap, valid.Finish());
  if (nulls == 0) bitmap = nullptr;
  const int64_t length = rows * pad_to;
  ARROW_ASSIGN_OR_RAISE(auto id_buffer, values.Finish());
  ARROW_ASSIGN_OR_RAISE(auto mask_buffer, mask.Finish());
  auto flat_ids = std::make_shared<arrow::Int32Array>(length, std::move(id_buffer));
  auto flat_mask = std::make_shared<arrow::Int8Array>(length, std::move(mask_buffer));
  PaddedIds out;
  out.ids = std::make_shared<arrow::FixedSizeListArray>(
      arrow::fixed_size_list(arrow::int32(), pad_to), rows, flat_ids, bitmap, nulls);
  out.mask = std::make_shared<arrow::FixedSizeListArray>(
      arrow::fixed_size_list(arrow::int8(), pad_to), rows, flat_mask, bitmap, nulls);
  return out;
}

std::string Sha256Hex(std::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace icefloe::transform
