#include "icefloe/transform/wordpiece.h"

#include <limits>
#include <string>

#include "icefloe/transform/unicode.h"

namespace icefloe::transform::hf {

arrow::Result<std::unique_ptr<WordPiece>> WordPiece::FromJson(JsonObject* o) {
  std::unique_ptr<WordPiece> m(new WordPiece());
  ARROW_RETURN_NOT_OK(o->Require({"max_input_chars_per_word"}));
  const Json* vocab = o->Find("vocab");
  if (vocab == nullptr) return Refuse(o->PathOf("vocab"), "missing");
  ARROW_ASSIGN_OR_RAISE(m->vocab_, ReadVocab(*vocab, o->PathOf("vocab")));
  ARROW_ASSIGN_OR_RAISE(std::string unk, o->String("unk_token"));
  auto it = m->vocab_.find(unk);
  if (it == m->vocab_.end()) {
    return Refuse(o->PathOf("unk_token"), "'", unk, "' is not in the vocabulary");
  }
  m->unk_id_ = it->second;
  ARROW_ASSIGN_OR_RAISE(m->prefix_, o->String("continuing_subword_prefix"));
  ARROW_ASSIGN_OR_RAISE(m->max_chars_, o->Int("max_input_chars_per_word", 0,
                                              std::numeric_limits<int64_t>::max(), 100));
  ARROW_RETURN_NOT_OK(o->Done());
  m->tokens_.Reserve(m->vocab_.size());
  for (const auto& [token, id] : m->vocab_) {
    if (!m->tokens_.Insert(token, id)) {
      return Refuse(o->PathOf("vocab"), "holds more than 4 GiB of token bytes");
    }
  }
  return m;
}

std::optional<int32_t> WordPiece::TokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

// Words repeat: the thread's cache answers most of them.
void WordPiece::Tokenize(std::string_view word, std::vector<int32_t>* ids) const {
  WordCache::Tokenize(
      cache_owner_, word, ids,
      [this](std::string_view w, std::vector<int32_t>* out) { TokenizeUncached(w, out); });
}

void WordPiece::TokenizeUncached(std::string_view word, std::vector<int32_t>* ids) const {
  int64_t chars = 0;
  for (unsigned char c : word) chars += (c & 0xC0) != 0x80;
  if (chars > max_chars_) {
    ids->push_back(unk_id_);
    return;
  }
  const size_t first = ids->size();
  // The prefix then the rest of the word: each candidate continuation is a
  // prefix of it, looked up without a copy.
  thread_local std::string rest;
  for (size_t start = 0; start < word.size();) {
    std::string_view text = word.substr(start);
    size_t skip = 0;  // bytes of `text` before the candidate's own
    if (start > 0) {
      rest.assign(prefix_).append(text);
      text = rest;
      skip = prefix_.size();
    }
    size_t end = word.size();
    int32_t found = -1;
    while (start < end) {
      found = tokens_.Find(text.substr(0, skip + end - start));
      if (found >= 0) break;
      do --end;  // one character shorter
      while (end > start && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80);
    }
    if (found < 0) {
      ids->resize(first);
      ids->push_back(unk_id_);
      return;
    }
    ids->push_back(found);
    start = end;
  }
}

}  // namespace icefloe::transform::hf
