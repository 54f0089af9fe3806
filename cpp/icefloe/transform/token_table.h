// Flat open-addressing hash tables for the models' hot lookups: a token's
// bytes to its id (TokenTable), a pair of ids to a merge (PairTable). Built
// once at load, then const and safe to share across threads. They answer
// what the std::unordered_map they are built from answers, with one probe
// sequence in one array (and the keys' bytes in one arena) instead of a
// bucket, a node and a heap string per lookup.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace icefloe::transform::hf {

/// 64-bit hash of a short byte string (8 bytes at a time, multiply-mix).
inline uint64_t HashBytes(std::string_view s) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = s.size() * kMul;
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  if (i < s.size()) {
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, s.size() - i);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  return (h ^ (h >> 32)) * kMul;
}

/// Byte string → int32 id; keys unique.
class TokenTable {
 public:
  /// Sized for `n` keys (at most half full).
  void Reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }
  /// Adds `key` (not already present; Reserve first); false, adding
  /// nothing, when the keys' bytes would pass 4 GiB.
  [[nodiscard]] bool Insert(std::string_view key, int32_t id) {
    if (arena_.size() + key.size() > UINT32_MAX) return false;
    const uint64_t h = HashBytes(key);
    size_t i = h & mask_;
    while (slots_[i].id >= 0) i = (i + 1) & mask_;
    slots_[i] = {static_cast<uint32_t>(h >> 32), static_cast<uint32_t>(arena_.size()),
                 static_cast<uint32_t>(key.size()), id};
    arena_.append(key);
    return true;
  }
  /// Starts loading the first slot a key of hash `h` (HashBytes) probes.
  void Prefetch(uint64_t h) const { __builtin_prefetch(&slots_[h & mask_]); }
  /// The id of `key`, or -1.
  int32_t Find(std::string_view key) const { return Find(key, HashBytes(key)); }
  /// The same, given HashBytes(key).
  int32_t Find(std::string_view key, uint64_t h) const {
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.tag == tag && s.len == key.size() &&
          std::memcmp(arena_.data() + s.offset, key.data(), key.size()) == 0) {
        return s.id;
      }
    }
  }

 private:
  struct Slot {
    uint32_t tag = 0;  ///< the hash's high half
    uint32_t offset = 0;
    uint32_t len = 0;
    int32_t id = -1;  ///< -1: empty
  };
  std::vector<Slot> slots_{16};
  size_t mask_ = 15;
  std::string arena_;
};

/// (id, id) → (rank, id) of a merge; keys unique.
class PairTable {
 public:
  struct Value {
    uint32_t rank;
    int32_t id;
  };
  void Reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    slots_.assign(cap, Slot{});
    shift_ = 64;
    for (size_t c = cap; c > 1; c >>= 1) --shift_;
    mask_ = cap - 1;
  }
  /// Sets the value of (a, b), replacing an earlier one.
  void Set(int32_t a, int32_t b, Value v) {
    const uint64_t key = Key(a, b);
    size_t i = Index(key);
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
    slots_[i] = {key, v};
  }
  /// Starts loading the first slot (a, b) probes.
  void Prefetch(int32_t a, int32_t b) const { __builtin_prefetch(&slots_[Index(Key(a, b))]); }
  /// The merge of (a, b), or null.
  const Value* Find(int32_t a, int32_t b) const {
    const uint64_t key = Key(a, b);
    for (size_t i = Index(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;  // ids are >= 0: never a key
  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  size_t Index(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  struct Slot {
    uint64_t key = kEmpty;
    Value value{0, -1};
  };
  std::vector<Slot> slots_{16};
  int shift_ = 60;
  size_t mask_ = 15;
};

}  // namespace icefloe::transform::hf

namespace icefloe::transform::hf {

/// A model's recent words and their ids, per thread: a 2-way set-associative
/// table of one cache line an entry, for words of up to kMaxWord bytes that
/// give up to kMaxIds ids (the common words of a text; 2 MiB a thread that
/// tokenizes). Two ways keep both of two frequent words whose hashes share a
/// set (a direct-mapped table of the same size missed twice as often on
/// English text). Tokenize is a function of the word alone, so an entry
/// found is the answer. A thread's table serves one model at a time: it is
/// cleared when another model uses it.
class WordCache {
 public:
  static constexpr size_t kMaxWord = 22;
  static constexpr size_t kMaxIds = 8;
  static constexpr size_t kSets = 16384;

  /// The calling thread's table, cleared first when `owner` (a model's
  /// serial, see NextOwner) is not the one it last served.
  static WordCache& For(uint64_t owner) {
    thread_local WordCache cache;
    if (cache.owner_ != owner) {
      cache.entries_.assign(2 * kSets, Entry{});
      cache.owner_ = owner;
    }
    return cache;
  }
  /// A serial for a model, never reused (0 is none).
  static uint64_t NextOwner() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
  }

  /// Appends `word`'s ids to `ids`: from the calling thread's cache for
  /// `owner`, else from `uncached(word, ids)`, whose ids are then cached.
  template <typename Uncached>
  static void Tokenize(uint64_t owner, std::string_view word, std::vector<int32_t>* ids,
                       const Uncached& uncached) {
    if (word.size() > kMaxWord) return uncached(word, ids);
    For(owner).Tokenize(word, HashBytes(word), ids, uncached);
  }
  /// The same, on this table, for `word` of hash `h` (HashBytes).
  template <typename Uncached>
  void Tokenize(std::string_view word, uint64_t h, std::vector<int32_t>* ids,
                const Uncached& uncached) {
    if (Find(word, h, ids)) return;
    const size_t first = ids->size();
    uncached(word, ids);
    Put(word, h, ids->data() + first, ids->size() - first);
  }

  /// Starts loading the set of hash `h` into the CPU's cache, so that a
  /// Find a little later does not wait on memory.
  void Prefetch(uint64_t h) const {
    const Entry* set = &entries_[2 * (h & (kSets - 1))];
    __builtin_prefetch(set);
    __builtin_prefetch(set + 1);
  }
  /// Appends the ids of `word` (hash `h`) to `ids` when it is cached.
  bool Find(std::string_view word, uint64_t h, std::vector<int32_t>* ids) const {
    const Entry* e = Lookup(word, h);
    if (e == nullptr) return false;
    ids->insert(ids->end(), e->ids, e->ids + e->count);
    return true;
  }
  /// Caches `ids` as `word`'s (hash `h`) when both fit an entry: first in
  /// its set, the set's first entry moving to second (and its second
  /// dropped).
  void Put(std::string_view word, uint64_t h, const int32_t* ids, size_t count) {
    if (word.size() > kMaxWord || count > kMaxIds) return;
    Entry* set = &entries_[2 * (h & (kSets - 1))];
    set[1] = set[0];
    Entry& e = set[0];
    e.hash = h;
    e.len = static_cast<uint8_t>(word.size());
    e.count = static_cast<uint8_t>(count);
    std::memcpy(e.word, word.data(), word.size());
    std::memcpy(e.ids, ids, count * sizeof(int32_t));
  }

 private:
  struct alignas(64) Entry {
    uint64_t hash = 0;
    uint8_t len = 0xFF;  ///< 0xFF: empty (no word is that long here)
    uint8_t count = 0;
    char word[kMaxWord];
    int32_t ids[kMaxIds];
  };
  static_assert(sizeof(Entry) == 64);
  const Entry* Lookup(std::string_view word, uint64_t h) const {
    if (word.size() > kMaxWord) return nullptr;
    const Entry* set = &entries_[2 * (h & (kSets - 1))];
    for (const Entry* e = set; e != set + 2; ++e) {
      if (e->hash == h && e->len == word.size() &&
          std::memcmp(e->word, word.data(), word.size()) == 0) {
        return e;
      }
    }
    return nullptr;
  }
  uint64_t owner_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace icefloe::transform::hf
