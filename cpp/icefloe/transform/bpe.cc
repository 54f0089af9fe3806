#include "icefloe/transform/bpe.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "icefloe/transform/unicode.h"

namespace icefloe::transform::hf {

namespace {

// A string field that may be null or absent.
arrow::Result<std::optional<std::string>> OptionalString(JsonObject* o, const std::string& field) {
  const Json* v = o->Find(field);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return Refuse(o->PathOf(field), "must be a string or null");
  return std::optional<std::string>(v->get<std::string>());
}

// One symbol of a word being merged (the library's Symbol): a token id,
// its neighbours' indexes (-1 at the ends), its length in bytes (0 once
// merged into the symbol on its left).
struct Symbol {
  int32_t id;
  int64_t prev;
  int64_t next;
  size_t len;
};

struct Candidate {
  uint32_t rank;
  int32_t id;
  size_t pos;
  // A max-heap pops the largest: the lowest rank, then the leftmost.
  bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

void Add(std::vector<Symbol>* word, int32_t id, size_t len) {
  const auto n = static_cast<int64_t>(word->size());
  if (!word->empty()) word->back().next = n;
  word->push_back({id, n - 1, -1, len});
}

// Per thread, reused from word to word: no allocation once grown.
struct Scratch {
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::string piece;
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

}  // namespace

arrow::Result<std::unique_ptr<Bpe>> Bpe::FromJson(JsonObject* o) {
  std::unique_ptr<Bpe> m(new Bpe());
  if (const Json* dropout = o->Find("dropout")) {
    if (!dropout->is_number() || dropout->get<double>() != 0.0) {
      return Refuse(o->PathOf("dropout"), dropout->dump(),
                    ": BPE dropout is random; only null (or 0) is supported");
    }
  }
  const Json* vocab = o->Find("vocab");
  if (vocab == nullptr) return Refuse(o->PathOf("vocab"), "missing");
  ARROW_ASSIGN_OR_RAISE(m->vocab_, ReadVocab(*vocab, o->PathOf("vocab")));
  ARROW_ASSIGN_OR_RAISE(auto unk, OptionalString(o, "unk_token"));
  if (unk) {
    auto it = m->vocab_.find(*unk);
    if (it == m->vocab_.end()) {
      return Refuse(o->PathOf("unk_token"), "'", *unk, "' is not in the vocabulary");
    }
    m->unk_id_ = it->second;
  }
  ARROW_ASSIGN_OR_RAISE(auto prefix, OptionalString(o, "continuing_subword_prefix"));
  ARROW_ASSIGN_OR_RAISE(auto suffix, OptionalString(o, "end_of_word_suffix"));
  m->prefix_ = prefix.value_or("");
  m->suffix_ = suffix.value_or("");
  ARROW_ASSIGN_OR_RAISE(m->fuse_unk_, o->Bool("fuse_unk", false));
  ARROW_ASSIGN_OR_RAISE(m->byte_fallback_, o->Bool("byte_fallback", false));
  ARROW_ASSIGN_OR_RAISE(m->ignore_merges_, o->Bool("ignore_merges", false));
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = m->vocab_.find(std::string_view(name));
    m->byte_ids_[b] = it == m->vocab_.end() ? -1 : it->second;
  }

  const std::string merges_path = o->PathOf("merges");
  const Json* merges = o->Find("merges");
  if (merges == nullptr) return Refuse(merges_path, "missing");
  if (!merges->is_array()) return Refuse(merges_path, "must be a list");
  if (merges->size() > std::numeric_limits<uint32_t>::max()) {
    return Refuse(merges_path, merges->size(), " merges, more than the library ranks");
  }
  m->merges_.Reserve(merges->size());
  std::string merged;
  for (size_t i = 0; i < merges->size(); ++i) {
    const std::string at = merges_path + "[" + std::to_string(i) + "]";
    const Json& merge = (*merges)[i];
    std::string a, b;
    if (merge.is_string() != (*merges)[0].is_string()) {
      return Refuse(at, "mixes \"a b\" strings and [\"a\", \"b\"] pairs");
    }
    if (merge.is_string()) {  // "a b": exactly one space
      const auto text = merge.get<std::string>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        return Refuse(at, "'", text, "' is not two tokens separated by one space");
      }
      a = text.substr(0, space);
      b = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      a = merge[0].get<std::string>();
      b = merge[1].get<std::string>();
    } else {
      return Refuse(at, "must be \"a b\" or [\"a\", \"b\"], got ", merge.dump());
    }
    auto ia = m->vocab_.find(a), ib = m->vocab_.find(b);
    if (ia == m->vocab_.end() || ib == m->vocab_.end()) {
      return Refuse(at, "token '", ia == m->vocab_.end() ? a : b, "' is not in the vocabulary");
    }
    if (b.size() < m->prefix_.size() || !unicode::IsValid(b.substr(m->prefix_.size()))) {
      // The library cuts the prefix's length off `b` (and panics where it cannot).
      return Refuse(at, "token '", b,
                    "' does not continue a word: the continuing_subword_prefix's ",
                    m->prefix_.size(), " bytes cannot be cut off it");
    }
    merged.assign(a).append(b, m->prefix_.size());
    auto in = m->vocab_.find(merged);
    if (in == m->vocab_.end()) {
      return Refuse(at, "the merged token '", merged, "' is not in the vocabulary");
    }
    // A pair given twice takes its last rank, as the library's map does.
    m->merges_.Set(ia->second, ib->second, Merge{static_cast<uint32_t>(i), in->second});
  }
  ARROW_RETURN_NOT_OK(o->Done());
  if (m->prefix_.empty() && m->suffix_.empty()) {
    m->char_ids_.assign(0x800, -1);
    std::string c;
    for (int32_t cp = 0; cp < 0x800; ++cp) {
      c.clear();
      unicode::Append(cp, &c);
      if (auto it = m->vocab_.find(c); it != m->vocab_.end()) m->char_ids_[cp] = it->second;
    }
  }
  m->tokens_.Reserve(m->vocab_.size());
  for (const auto& [token, id] : m->vocab_) {
    if (!m->tokens_.Insert(token, id)) {
      return Refuse(o->PathOf("vocab"), "holds more than 4 GiB of token bytes");
    }
  }
  return m;
}

std::optional<int32_t> Bpe::TokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

int32_t Bpe::CharId(std::string_view word, size_t start, size_t len, int32_t cp) const {
  if (cp >= 0 && static_cast<size_t>(cp) < char_ids_.size()) return char_ids_[cp];
  const bool first = start == 0, last = start + len == word.size();
  if ((prefix_.empty() || first) && (suffix_.empty() || !last)) {
    return tokens_.Find(word.substr(start, len));
  }
  std::string& piece = ThreadScratch().piece;
  piece.clear();
  if (!first) piece.append(prefix_);
  piece.append(word.substr(start, len));
  if (last) piece.append(suffix_);
  return tokens_.Find(piece);
}

// Words repeat: the thread's cache answers most of them (a line of memory
// instead of the vocabulary's and the merges' tables).
void Bpe::Tokenize(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  WordCache::Tokenize(
      cache_owner_, word, ids,
      [this](std::string_view w, std::vector<int32_t>* out) { TokenizeUncached(w, out); });
}

// Two passes over the words, so that their loads from memory overlap: each
// word's cache set and vocabulary slot are fetched together (the slot for
// the few that miss the cache: prefetching it for all was faster than a
// pass to find those), then each word's ids are appended in order.
void Bpe::TokenizeWords(std::span<const std::string_view> words, std::vector<int32_t>* ids) const {
  WordCache& cache = WordCache::For(cache_owner_);
  thread_local std::vector<uint64_t> hashes;
  hashes.resize(words.size());
  for (size_t i = 0; i < words.size(); ++i) {
    hashes[i] = HashBytes(words[i]);
    cache.Prefetch(hashes[i]);
    tokens_.Prefetch(hashes[i]);
  }
  auto uncached = [&](std::string_view w, std::vector<int32_t>* out) { TokenizeUncached(w, out); };
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i].size() > WordCache::kMaxWord) {
      TokenizeUncached(words[i], ids);
    } else {
      cache.Tokenize(words[i], hashes[i], ids, uncached);
    }
  }
}

void Bpe::TokenizeUncached(std::string_view word, std::vector<int32_t>* ids) const {
  if (ignore_merges_) {
    if (const int32_t id = tokens_.Find(word); id >= 0) {
      ids->push_back(id);
      return;
    }
  }
  // The library's merge_word: a symbol per character.
  Scratch& scratch = ThreadScratch();
  std::vector<Symbol>& symbols = scratch.symbols;
  symbols.clear();
  size_t unk_len = 0;  // bytes of a pending unknown (0: none)
  for (size_t i = 0; i < word.size();) {
    const size_t start = i;
    const int32_t cp = unicode::Next(word, &i);
    const size_t len = i - start;
    if (const int32_t id = CharId(word, start, len, cp); id >= 0) {
      if (unk_len > 0) Add(&symbols, unk_id_, unk_len);
      unk_len = 0;
      Add(&symbols, id, len);
      continue;
    }
    if (byte_fallback_) {
      // The bytes of the piece the library looked up: the character with its prefix and suffix.
      const std::string_view before = start > 0 ? std::string_view(prefix_) : std::string_view();
      const std::string_view after =
          i == word.size() ? std::string_view(suffix_) : std::string_view();
      const std::string_view parts[] = {before, word.substr(start, len), after};
      bool all = true;
      for (std::string_view part : parts) {
        for (unsigned char c : part) all = all && byte_ids_[c] >= 0;
      }
      if (all) {
        // The library adds these without flushing a pending unknown first.
        for (std::string_view part : parts) {
          for (unsigned char c : part) Add(&symbols, byte_ids_[c], 1);
        }
        continue;
      }
    }
    if (unk_id_ < 0) continue;  // no unk token: the character is dropped
    if (unk_len > 0 && !fuse_unk_) {
      Add(&symbols, unk_id_, unk_len);
      unk_len = 0;
    }
    unk_len += len;
  }
  if (unk_len > 0) Add(&symbols, unk_id_, unk_len);

  // The library's merge_all.
  std::vector<Candidate>& heap = scratch.heap;
  heap.clear();
  for (size_t p = 0; p + 1 < symbols.size(); ++p) {  // the pairs' slots, fetched together
    merges_.Prefetch(symbols[p].id, symbols[p + 1].id);
  }
  for (size_t p = 0; p + 1 < symbols.size(); ++p) {
    if (const Merge* m = FindMerge(symbols[p].id, symbols[p + 1].id)) {
      heap.push_back({m->rank, m->id, p});
    }
  }
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& current = symbols[top.pos];
    if (current.len == 0 || current.next == -1) continue;
    const auto next_pos = static_cast<size_t>(current.next);
    const Symbol right = symbols[next_pos];
    const Merge* m = FindMerge(current.id, right.id);
    if (m == nullptr || m->id != top.id) continue;  // a stale candidate
    current.id = top.id;
    current.len += right.len;
    current.next = right.next;
    symbols[next_pos].len = 0;
    if (right.next >= 0)
      symbols[static_cast<size_t>(right.next)].prev = static_cast<int64_t>(top.pos);
    // The two new pairs' slots, fetched together.
    if (current.prev >= 0) merges_.Prefetch(symbols[static_cast<size_t>(current.prev)].id, top.id);
    if (current.next >= 0) merges_.Prefetch(top.id, symbols[static_cast<size_t>(current.next)].id);
    if (current.prev >= 0) {
      const auto prev = static_cast<size_t>(current.prev);
      if (const Merge* pm = FindMerge(symbols[prev].id, current.id)) {
        heap.push_back({pm->rank, pm->id, prev});
        std::push_heap(heap.begin(), heap.end());
      }
    }
    if (current.next >= 0) {
      if (const Merge* nm = FindMerge(current.id, symbols[static_cast<size_t>(current.next)].id)) {
        heap.push_back({nm->rank, nm->id, top.pos});
        std::push_heap(heap.begin(), heap.end());
      }
    }
  }
  for (const Symbol& s : symbols) {
    if (s.len != 0) ids->push_back(s.id);
  }
}

}  // namespace icefloe::transform::hf
