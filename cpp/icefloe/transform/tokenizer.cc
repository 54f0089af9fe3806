#include "icefloe/transform/tokenizer.h"

#include <algorithm>

#include <arrow/builder.h>
#include <openssl/sha.h>

#include "icefloe/transform/hf_tokenizer.h"
#include "icefloe/transform/sentencepiece_tokenizer.h"

namespace icefloe::transform {

namespace {

bool LooksLikeJson(const std::string& bytes) {
  for (char c : bytes) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    return c == '{';
  }
  return false;
}

}  // namespace

arrow::Result<std::shared_ptr<const Tokenizer>> Tokenizer::Load(const std::string& bytes,
                                                                const std::string& location) {
  if (LooksLikeJson(bytes)) {
    ARROW_ASSIGN_OR_RAISE(auto t, HfTokenizer::Load(bytes, location));
    return std::shared_ptr<const Tokenizer>(std::move(t));
  }
  ARROW_ASSIGN_OR_RAISE(auto t, SentencePieceTokenizer::Load(bytes, location));
  return std::shared_ptr<const Tokenizer>(std::move(t));
}

// Each row: the framing's prefix, the text's ids cut to the room max_tokens
// leaves, the suffix; the whole never longer than max_tokens (a SentencePiece
// BOS is kept before an EOS when max_tokens leaves room for one only).
template <typename StringArray>
arrow::Status Tokenizer::EncodeAll(const StringArray& strings, const TokenizeOptions& options,
                                   arrow::ListBuilder* builder, arrow::Int32Builder* values) const {
  std::vector<int32_t> prefix, suffix, ids;
  Framing(options, &prefix, &suffix);
  const auto extra = static_cast<int64_t>(prefix.size() + suffix.size());
  for (int64_t i = 0; i < strings.length(); ++i) {
    if (strings.IsNull(i)) {
      ARROW_RETURN_NOT_OK(builder->AppendNull());
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
    ARROW_RETURN_NOT_OK(builder->Append());
    const int64_t total = static_cast<int64_t>(keep) + extra;
    const int64_t cap = options.max_tokens ? std::min(total, *options.max_tokens) : total;
    ARROW_RETURN_NOT_OK(values->Reserve(cap));
    int64_t written = 0;
    for (int32_t id : prefix) {
      if (written == cap) break;
      values->UnsafeAppend(id);
      ++written;
    }
    for (size_t k = 0; k < keep; ++k) values->UnsafeAppend(ids[k]);
    written += static_cast<int64_t>(keep);
    for (int32_t id : suffix) {
      if (written == cap) break;
      values->UnsafeAppend(id);
      ++written;
    }
  }
  return arrow::Status::OK();
}

arrow::Result<std::shared_ptr<arrow::Array>> Tokenizer::Encode(const arrow::Array& strings,
                                                               const TokenizeOptions& options,
                                                               arrow::MemoryPool* pool) const {
  auto values = std::make_shared<arrow::Int32Builder>(pool);
  arrow::ListBuilder builder(pool, values, arrow::list(arrow::int32()));
  ARROW_RETURN_NOT_OK(builder.Reserve(strings.length()));
  switch (strings.type_id()) {
    case arrow::Type::STRING:
      ARROW_RETURN_NOT_OK(EncodeAll(static_cast<const arrow::StringArray&>(strings), options,
                                    &builder, values.get()));
      break;
    case arrow::Type::LARGE_STRING:
      ARROW_RETURN_NOT_OK(EncodeAll(static_cast<const arrow::LargeStringArray&>(strings), options,
                                    &builder, values.get()));
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
