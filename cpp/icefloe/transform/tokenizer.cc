#include "icefloe/transform/tokenizer.h"

#include <vector>

#include <arrow/builder.h>
#include <openssl/sha.h>
#include <sentencepiece_processor.h>

namespace icefloe::transform {

struct Tokenizer::Impl {
  sentencepiece::SentencePieceProcessor processor;
};

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::~Tokenizer() = default;

namespace {

bool LooksLikeJson(const std::string& bytes) {
  for (char c : bytes) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    return c == '{';
  }
  return false;
}

template <typename StringArray>
arrow::Status EncodeAll(const sentencepiece::SentencePieceProcessor& sp, const StringArray& strings,
                        const TokenizeOptions& options, int32_t bos, int32_t eos,
                        arrow::ListBuilder* builder, arrow::Int32Builder* values,
                        const std::string& location) {
  std::vector<int> ids;
  const int64_t extra = (options.bos ? 1 : 0) + (options.eos ? 1 : 0);
  for (int64_t i = 0; i < strings.length(); ++i) {
    if (strings.IsNull(i)) {
      ARROW_RETURN_NOT_OK(builder->AppendNull());
      continue;
    }
    std::string_view text = strings.GetView(i);
    ids.clear();
    auto st = sp.Encode(text, &ids);
    if (!st.ok()) {
      return arrow::Status::Invalid("tokenizing row ", i, " with '", location,
                                    "': ", st.ToString());
    }
    size_t keep = ids.size();
    if (options.max_tokens) {
      const int64_t room = *options.max_tokens - extra;
      keep = room <= 0 ? 0 : std::min<size_t>(keep, static_cast<size_t>(room));
    }
    ARROW_RETURN_NOT_OK(builder->Append());
    const int64_t total = static_cast<int64_t>(keep) + extra;
    const int64_t cap = options.max_tokens ? std::min(total, *options.max_tokens) : total;
    ARROW_RETURN_NOT_OK(values->Reserve(cap));
    int64_t written = 0;
    if (options.bos && written < cap) {
      values->UnsafeAppend(bos);
      ++written;
    }
    for (size_t k = 0; k < keep; ++k) values->UnsafeAppend(static_cast<int32_t>(ids[k]));
    written += static_cast<int64_t>(keep);
    if (options.eos && written < cap) values->UnsafeAppend(eos);
  }
  return arrow::Status::OK();
}

}  // namespace

arrow::Result<std::shared_ptr<const Tokenizer>> Tokenizer::Load(const std::string& bytes,
                                                                const std::string& location) {
  if (LooksLikeJson(bytes)) {
    return arrow::Status::Invalid(
        "tokenizer model '", location,
        "' is JSON (a Hugging Face tokenizer.json?); only SentencePiece .model files are "
        "supported");
  }
  std::shared_ptr<Tokenizer> t(new Tokenizer());
  t->location_ = location;
  auto st = t->impl_->processor.LoadFromSerializedProto(bytes);
  if (!st.ok()) {
    return arrow::Status::Invalid("tokenizer model '", location,
                                  "' is not a SentencePiece model: ", st.ToString());
  }
  if (t->impl_->processor.GetPieceSize() <= 0) {
    return arrow::Status::Invalid("tokenizer model '", location, "' has no pieces");
  }
  return std::shared_ptr<const Tokenizer>(std::move(t));
}

int32_t Tokenizer::bos_id() const { return impl_->processor.bos_id(); }
int32_t Tokenizer::eos_id() const { return impl_->processor.eos_id(); }
int32_t Tokenizer::vocab_size() const { return impl_->processor.GetPieceSize(); }

arrow::Result<std::shared_ptr<arrow::Array>> Tokenizer::Encode(const arrow::Array& strings,
                                                               const TokenizeOptions& options,
                                                               arrow::MemoryPool* pool) const {
  auto values = std::make_shared<arrow::Int32Builder>(pool);
  arrow::ListBuilder builder(pool, values, arrow::list(arrow::int32()));
  ARROW_RETURN_NOT_OK(builder.Reserve(strings.length()));
  const auto& sp = impl_->processor;
  switch (strings.type_id()) {
    case arrow::Type::STRING:
      ARROW_RETURN_NOT_OK(EncodeAll(sp, static_cast<const arrow::StringArray&>(strings), options,
                                    bos_id(), eos_id(), &builder, values.get(), location_));
      break;
    case arrow::Type::LARGE_STRING:
      ARROW_RETURN_NOT_OK(EncodeAll(sp, static_cast<const arrow::LargeStringArray&>(strings),
                                    options, bos_id(), eos_id(), &builder, values.get(),
                                    location_));
      break;
    default:
      return arrow::Status::TypeError("tokenize needs a string column, got ",
                                      strings.type()->ToString());
  }
  return builder.Finish();
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
