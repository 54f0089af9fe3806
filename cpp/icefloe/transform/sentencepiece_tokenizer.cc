#include "icefloe/transform/sentencepiece_tokenizer.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace icefloe::transform {

namespace {

// The protobuf wire format, enough to read a ModelProto's fields and write
// the two derived models (sentencepiece_model.proto's field numbers).
struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  std::string_view raw;    // the whole field, key included
  uint64_t varint = 0;     // wire type 0
  std::string_view bytes;  // wire type 2 (the value), 1 and 5 (its bytes)
};

bool ReadVarint(std::string_view* s, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && !s->empty(); shift += 7) {
    const auto b = static_cast<uint8_t>(s->front());
    s->remove_prefix(1);
    *v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// The fields of a message; false where the bytes are not one.
bool ReadFields(std::string_view s, std::vector<Field>* out) {
  while (!s.empty()) {
    const char* start = s.data();
    uint64_t key = 0;
    if (!ReadVarint(&s, &key)) return false;
    Field f;
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire = static_cast<uint32_t>(key & 7);
    uint64_t n = 0;
    switch (f.wire) {
      case 0:
        if (!ReadVarint(&s, &f.varint)) return false;
        break;
      case 1:
      case 5:
        n = f.wire == 1 ? 8 : 4;
        if (s.size() < n) return false;
        f.bytes = s.substr(0, n);
        s.remove_prefix(n);
        break;
      case 2:
        if (!ReadVarint(&s, &n) || n > s.size()) return false;
        f.bytes = s.substr(0, n);
        s.remove_prefix(n);
        break;
      default:
        return false;
    }
    f.raw = std::string_view(start, static_cast<size_t>(s.data() - start));
    out->push_back(f);
  }
  return true;
}

void PutVarint(std::string* out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out->push_back(static_cast<char>(v | 0x80));
  out->push_back(static_cast<char>(v));
}
void PutInt(std::string* out, uint32_t number, uint64_t v) {
  PutVarint(out, static_cast<uint64_t>(number) << 3);
  PutVarint(out, v);
}
void PutBytes(std::string* out, uint32_t number, std::string_view bytes) {
  PutVarint(out, (static_cast<uint64_t>(number) << 3) | 2);
  PutVarint(out, bytes.size());
  out->append(bytes);
}

// ModelProto.SentencePiece: piece (1), score (2, float), type (3).
std::string Piece(std::string_view piece, int type) {
  std::string out;
  PutBytes(&out, 1, piece);
  PutInt(&out, 3, static_cast<uint64_t>(type));
  return out;
}

constexpr std::string_view kBoundary = "\xE2\x96\x81";  // U+2581, the escaped space
enum PieceType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5 };
enum ModelType { kBpe = 2, kWord = 3 };

// The normalizing processor fuses a run of unknown words into one piece by
// appending each to the piece so far: quadratic in the run's length. Known
// words cut English into short runs; text of only unknown words (random
// two-character words) costs 0.020 s for 64 KiB against the library's whole
// path's 0.017 s, but 0.34 s against 0.074 s for 256 KiB. Past 64 KiB a text
// goes to the library whole, which is linear.
constexpr size_t kByWordMaxBytes = 64 * 1024;

// ModelProto.pieces' piece (1), score (2, a float) and type (3, NORMAL when absent).
bool ReadPiece(const Field& f, std::string_view* piece, uint64_t* type, float* score = nullptr) {
  std::vector<Field> sub;
  if (f.wire != 2 || !ReadFields(f.bytes, &sub)) return false;
  for (const Field& p : sub) {
    if (p.number == 1 && p.wire == 2) *piece = p.bytes;
    if (p.number == 3 && p.wire == 0) *type = p.varint;
    if (p.number == 2 && p.wire == 5 && score != nullptr) std::memcpy(score, p.bytes.data(), 4);
  }
  return true;
}

// The library's bpe::Model symbols and merge candidates (a symbol's bytes
// within the word, its neighbours; a candidate's merged piece's score and
// byte length, by which the library tells a stale one).
struct SpmSymbol {
  size_t start;
  size_t len;  // 0 once merged into the symbol on its left
  int prev;
  int next;
};
struct SpmPair {
  float score;
  int left;
  int right;
  size_t size;
  // The library's agenda pops the highest score, then the leftmost.
  bool operator<(const SpmPair& o) const {
    return score < o.score || (score == o.score && left > o.left);
  }
};

// Whether the serialized model is a BPE whose merges never cross a word
// boundary: no user-defined symbols, no normal or unused piece with U+2581
// past its first byte, U+2581 alone a normal piece (so that a word never
// starts with an unknown that the library would fuse with the previous
// word's), whitespace as a prefix.
bool EncodesByWord(const std::vector<Field>& model) {
  bool bpe = false, boundary_known = false;
  for (const Field& f : model) {
    std::vector<Field> sub;
    if (f.wire == 2 && f.number == 2 && !ReadFields(f.bytes, &sub)) {
      return false;
    }
    if (f.number == 2) {  // trainer_spec: model_type (3), treat_whitespace_as_suffix (24)
      for (const Field& t : sub) {
        if (t.number == 3 && t.wire == 0) bpe = t.varint == kBpe;
        if (t.number == 24 && t.wire == 0 && t.varint != 0) return false;
      }
    } else if (f.number == 1) {
      std::string_view piece;
      uint64_t type = kNormal;
      if (!ReadPiece(f, &piece, &type)) return false;
      if (type == kUserDefined) return false;
      if (type == kNormal || type == kUnused) {
        if (piece.find(kBoundary, 1) != std::string_view::npos) return false;
        boundary_known = boundary_known || (type == kNormal && piece == kBoundary);
      }
    }
  }
  return bpe && boundary_known;
}

}  // namespace

arrow::Result<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Load(
    const std::string& bytes, const std::string& location) {
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer(location));
  auto st = t->processor_.LoadFromSerializedProto(bytes);
  if (!st.ok()) {
    return arrow::Status::Invalid("tokenizer model '", location,
                                  "' is not a SentencePiece model: ", st.ToString());
  }
  if (t->processor_.GetPieceSize() <= 0) {
    return arrow::Status::Invalid("tokenizer model '", location, "' has no pieces");
  }
  ARROW_RETURN_NOT_OK(t->PrepareWords(bytes));
  return t;
}

arrow::Status SentencePieceTokenizer::PrepareWords(const std::string& bytes) {
  std::vector<Field> model;
  if (!ReadFields(bytes, &model) || !EncodesByWord(model)) return arrow::Status::OK();
  // normalizer_: the model's normalizer_spec (3) over a WORD model of
  // <unk>, <s>, </s> and the model's normal pieces that start a word: its
  // pieces are the words of the normalized text (a run of unknown words
  // fused into one; the known ones keep such runs, and their cost, short).
  // words_: the model without its normalizer (3), self-test (4) and
  // denormalizer (5), under an identity normalizer that adds no prefix and
  // leaves whitespace alone.
  std::string normalizer, words;
  for (const Field& f : model) {
    if (f.number == 3) normalizer.append(f.raw);
    if (f.number != 3 && f.number != 4 && f.number != 5) words.append(f.raw);
  }
  PutBytes(&normalizer, 1, Piece("<unk>", kUnknown));
  PutBytes(&normalizer, 1, Piece("<s>", kControl));
  PutBytes(&normalizer, 1, Piece("</s>", kControl));
  for (const Field& f : model) {
    std::string_view piece;
    uint64_t type = kNormal;
    if (f.number == 1 && ReadPiece(f, &piece, &type) && type == kNormal &&
        piece.substr(0, kBoundary.size()) == kBoundary) {
      PutBytes(&normalizer, 1, Piece(piece, kNormal));
    }
  }
  std::string trainer;
  PutInt(&trainer, 3, kWord);
  PutBytes(&normalizer, 2, trainer);
  std::string identity;
  PutBytes(&identity, 1, "identity");
  PutInt(&identity, 3, 0);  // add_dummy_prefix
  PutInt(&identity, 4, 0);  // remove_extra_whitespaces
  PutInt(&identity, 5, 0);  // escape_whitespaces
  PutBytes(&words, 3, identity);
  // The library took the model whole; where it refuses a derived one, the
  // model stays on that whole path (exact, only slower).
  by_word_ = normalizer_.LoadFromSerializedProto(normalizer).ok() &&
             words_.LoadFromSerializedProto(words).ok();
  // The merges of a word whose characters are all normal pieces, here:
  // without unused pieces (which the library splits again after merging).
  size_t n = 0;
  for (const Field& f : model) n += f.number == 1;
  pieces_.Reserve(n);
  scores_.assign(n, 0.0f);
  merges_here_ = by_word_;
  int32_t id = 0;
  for (const Field& f : model) {
    if (f.number != 1) continue;
    std::string_view piece;
    uint64_t type = kNormal;
    float score = 0.0f;
    if (!ReadPiece(f, &piece, &type, &score) || type == kUnused ||
        (type == kNormal && !pieces_.Insert(piece, id))) {
      merges_here_ = false;
    }
    scores_[id++] = score;
  }
  return arrow::Status::OK();
}

bool SentencePieceTokenizer::MergeWord(std::string_view word, std::vector<int32_t>* ids) const {
  thread_local std::vector<SpmSymbol> symbols;
  thread_local std::vector<SpmPair> agenda;
  symbols.clear();
  agenda.clear();
  for (size_t i = 0; i < word.size();) {
    // The library's OneCharLen: the length its lead byte gives.
    const auto lead = static_cast<unsigned char>(word[i]);
    const size_t len =
        std::min<size_t>(word.size() - i, "\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[lead >> 4]);
    if (pieces_.Find(word.substr(i, len)) < 0) return false;  // an unknown: the library's path
    const int n = static_cast<int>(symbols.size());
    symbols.push_back({i, len, n - 1, i + len < word.size() ? n + 1 : -1});
    i += len;
  }
  auto add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const size_t size = symbols[left].len + symbols[right].len;
    const int32_t id = pieces_.Find(word.substr(symbols[left].start, size));
    if (id < 0) return;
    agenda.push_back({scores_[id], left, right, size});
    std::push_heap(agenda.begin(), agenda.end());
  };
  for (size_t i = 1; i < symbols.size(); ++i) add(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!agenda.empty()) {
    std::pop_heap(agenda.begin(), agenda.end());
    const SpmPair top = agenda.back();
    agenda.pop_back();
    SpmSymbol& left = symbols[top.left];
    SpmSymbol& right = symbols[top.right];
    if (left.len == 0 || right.len == 0 || left.len + right.len != top.size) continue;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    add(left.prev, top.left);
    add(top.left, left.next);
  }
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    ids->push_back(pieces_.Find(word.substr(symbols[i].start, symbols[i].len)));
  }
  return true;
}

arrow::Status SentencePieceTokenizer::EncodeByWord(std::string_view text,
                                                   std::vector<int32_t>* ids) const {
  thread_local std::vector<std::string> pieces;
  thread_local std::string normalized;
  thread_local std::vector<int> word_ids;
  pieces.clear();
  auto st = normalizer_.Encode(text, &pieces);
  if (!st.ok()) return arrow::Status::Invalid(st.ToString());
  normalized.clear();
  for (const std::string& p : pieces) normalized.append(p);
  hf::WordCache& cache = hf::WordCache::For(cache_owner_);
  const std::string_view all(normalized);
  size_t start = 0;
  while (start < all.size()) {
    const size_t next = all.find(kBoundary, start + 1);
    const std::string_view word = all.substr(start, next - start);
    start = next == std::string_view::npos ? all.size() : next;
    const uint64_t h = hf::HashBytes(word);
    if (cache.Find(word, h, ids)) continue;
    word_ids.clear();
    if (!merges_here_ || !MergeWord(word, &word_ids)) {
      word_ids.clear();
      st = words_.Encode(word, &word_ids);
      if (!st.ok()) return arrow::Status::Invalid(st.ToString());
    }
    cache.Put(word, h, word_ids.data(), word_ids.size());
    ids->insert(ids->end(), word_ids.begin(), word_ids.end());
  }
  return arrow::Status::OK();
}

arrow::Status SentencePieceTokenizer::Check(const TokenizeOptions& options) const {
  if ((options.bos && processor_.bos_id() < 0) || (options.eos && processor_.eos_id() < 0)) {
    return arrow::Status::Invalid("tokenizer model '", location(), "' has no ",
                                  options.bos && processor_.bos_id() < 0 ? "BOS" : "EOS", " piece");
  }
  if (!options.special_tokens) {
    return arrow::Status::Invalid("'special_tokens' is for a tokenizer.json; '", location(),
                                  "' is a SentencePiece model: use 'bos' and 'eos'");
  }
  return arrow::Status::OK();
}

arrow::Status SentencePieceTokenizer::EncodeText(std::string_view text,
                                                 std::vector<int32_t>* ids) const {
  static_assert(std::is_same_v<int, int32_t>);  // Encode's std::vector<int>
  if (by_word_ && text.size() <= kByWordMaxBytes) return EncodeByWord(text, ids);
  // The processor's Encode replaces its output: encode straight into `ids`
  // only when there is nothing to keep (the common case), else append.
  if (ids->empty()) {
    auto st = processor_.Encode(text, ids);
    if (!st.ok()) return arrow::Status::Invalid(st.ToString());
    return arrow::Status::OK();
  }
  std::vector<int> own;
  auto st = processor_.Encode(text, &own);
  if (!st.ok()) return arrow::Status::Invalid(st.ToString());
  ids->insert(ids->end(), own.begin(), own.end());
  return arrow::Status::OK();
}

void SentencePieceTokenizer::Framing(const TokenizeOptions& options, std::vector<int32_t>* prefix,
                                     std::vector<int32_t>* suffix) const {
  if (options.bos) prefix->push_back(processor_.bos_id());
  if (options.eos) suffix->push_back(processor_.eos_id());
}

}  // namespace icefloe::transform
