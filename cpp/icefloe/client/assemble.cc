#include "icefloe/client/assemble.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

constexpr int kMaxDepth = 64;  // nesting of a column's type (Arrow IPC allows 64)

struct SourceRun {
  uint64_t first;
  uint32_t length;
};

SourceRun ReadRun(const uint8_t* runs, int64_t k) {
  SourceRun run;
  std::memcpy(&run.first, runs + 12 * k, sizeof run.first);  // packed: unaligned
  std::memcpy(&run.length, runs + 12 * k + 8, sizeof run.length);
  return run;
}

// A result code and, for the codes that name a column, the message.
struct Outcome {
  int32_t code = kIcefloeAssembleOk;
  std::string message;
  bool ok() const { return code == kIcefloeAssembleOk; }
};

Outcome Fail(int32_t code, std::string message = {}) { return {code, std::move(message)}; }

// --- Checking the positions ---------------------------------------------------

}  // namespace

struct IcefloeFile {
  std::vector<ArrowArray> segments;  // owned: released by icefloe_file_free
  std::vector<int64_t> starts;       // segment k: the file's rows [starts[k], starts[k + 1])
  int64_t rows() const { return starts.back(); }
};

namespace {

// The rows a piece's source runs may name: its batch's, or its file's.
int64_t SourceRows(const IcefloeAssemblePiece& piece) {
  return piece.file != nullptr ? piece.file->rows() : piece.batch->length;
}

// Checks that a piece's source runs cover its rows, all inside its batch (or file).
int32_t CheckSource(const IcefloeAssemblePiece& piece) {
  const int64_t batch_rows = SourceRows(piece);
  if (piece.file != nullptr && piece.source_runs == nullptr) return kIcefloeAssembleMalformed;
  if (piece.source_runs == nullptr) {
    if (piece.num_source_runs != 0) return kIcefloeAssembleMalformed;
    return batch_rows == piece.rows ? kIcefloeAssembleOk : kIcefloeAssembleMalformed;
  }
  if (piece.num_source_runs < 0) return kIcefloeAssembleMalformed;
  int64_t covered = 0;
  const auto limit = static_cast<uint64_t>(batch_rows);
  for (int64_t k = 0; k < piece.num_source_runs; ++k) {
    const SourceRun run = ReadRun(piece.source_runs, k);
    if (run.first > limit || run.length > limit - run.first) return kIcefloeAssembleOutsideSource;
    covered += run.length;
  }
  return covered == piece.rows ? kIcefloeAssembleOk : kIcefloeAssembleMalformed;
}

// Checks that the pieces name each of [0, rows) exactly once.
int32_t CheckPositions(int64_t rows, int32_t num_pieces, const IcefloeAssemblePiece* pieces) {
  int64_t total = 0;
  for (int32_t p = 0; p < num_pieces; ++p) {
    const IcefloeAssemblePiece& piece = pieces[p];
    if (piece.rows < 0 || piece.base < 0 || piece.num_runs < 0 || SourceRows(piece) < 0) {
      return kIcefloeAssembleMalformed;
    }
    if (piece.positions == nullptr && piece.runs == nullptr && piece.num_runs > 0) {
      return kIcefloeAssembleMalformed;
    }
    if (const int32_t source = CheckSource(piece); source != kIcefloeAssembleOk) return source;
    total += piece.rows;
  }
  if (total != rows) return kIcefloeAssembleCount;
  std::unique_ptr<uint8_t[]> seen(new (std::nothrow) uint8_t[rows]());
  if (rows > 0 && seen == nullptr) return kIcefloeAssembleNoMemory;
  for (int32_t p = 0; p < num_pieces; ++p) {
    const IcefloeAssemblePiece& piece = pieces[p];
    if (piece.base > rows) return kIcefloeAssembleOutside;
    const int64_t room = rows - piece.base;  // positions below it fit
    uint8_t* at = seen.get() + piece.base;
    if (piece.positions != nullptr) {
      uint8_t twice = 0;
      for (int64_t i = 0; i < piece.rows; ++i) {
        const int64_t pos = piece.positions[i];
        if (pos >= room) return kIcefloeAssembleOutside;
        twice |= at[pos];
        at[pos] = 1;
      }
      if (twice) return kIcefloeAssembleTwice;
      continue;
    }
    int64_t covered = 0;
    for (int64_t r = 0; r < piece.num_runs; ++r) {
      const int64_t offset = piece.runs[2 * r];
      const int64_t length = piece.runs[2 * r + 1];
      if (offset + length > room) return kIcefloeAssembleOutside;
      if (std::memchr(at + offset, 1, static_cast<size_t>(length)) != nullptr) {
        return kIcefloeAssembleTwice;
      }
      std::memset(at + offset, 1, static_cast<size_t>(length));
      covered += length;
    }
    if (covered != piece.rows) return kIcefloeAssembleMalformed;
  }
  return kIcefloeAssembleOk;
}

// --- The batch's runs, in position order --------------------------------------

// `length` rows of input `piece` (the array a run reads: a piece's batch or
// a segment of its file) land at consecutive positions: the input's rows
// `row`.., which are rows `piece_row`.. of piece `owner` (for the inverse).
struct Run {
  int64_t row;
  int64_t length;
  int64_t piece_row;
  int32_t piece;
  int32_t owner = 0;
};

// Rows [row, row + length) of input `input`: a run of a piece's rows in the
// one array that holds them.
struct Src {
  int64_t row;
  int64_t length;
  int32_t input;
};

// Every piece's rows as runs of the arrays that hold them (`inputs`: each
// piece's batch, then each file's segments once), in the piece's order:
// piece p's are srcs[first[p] .. first[p + 1]). A source run that crosses
// segments of a file is cut where they meet.
struct Sources {
  std::vector<const ArrowArray*> inputs;
  std::vector<int64_t> struct_offsets;  // each input's own offset (the record batch's)
  std::vector<Src> srcs;
  std::vector<size_t> first;
  const Src* of(int32_t p) const { return srcs.data() + first[static_cast<size_t>(p)]; }
  int64_t count(int32_t p) const {
    return static_cast<int64_t>(first[static_cast<size_t>(p) + 1] - first[static_cast<size_t>(p)]);
  }
};

// Sources of pieces that passed CheckPositions (their source runs lie in
// their batch or file).
Sources Resolve(int32_t num_pieces, const IcefloeAssemblePiece* pieces) {
  Sources out;
  std::vector<std::pair<const IcefloeFile*, int32_t>> files;  // each file's first input
  for (int32_t p = 0; p < num_pieces; ++p) {
    const IcefloeAssemblePiece& piece = pieces[p];
    if (piece.batch == nullptr) continue;
    out.inputs.push_back(piece.batch);
    out.struct_offsets.push_back(piece.batch->offset);
  }
  out.first.push_back(0);
  int32_t own = 0;  // the next piece batch's input
  for (int32_t p = 0; p < num_pieces; ++p) {
    const IcefloeAssemblePiece& piece = pieces[p];
    if (piece.file == nullptr) {
      const int32_t input = own++;
      if (piece.source_runs == nullptr && piece.rows > 0) {
        out.srcs.push_back({0, piece.rows, input});
      }
      for (int64_t k = 0; piece.source_runs != nullptr && k < piece.num_source_runs; ++k) {
        const SourceRun run = ReadRun(piece.source_runs, k);
        if (run.length > 0)
          out.srcs.push_back({static_cast<int64_t>(run.first), run.length, input});
      }
      out.first.push_back(out.srcs.size());
      continue;
    }
    const IcefloeFile& file = *piece.file;
    auto known =
        std::find_if(files.begin(), files.end(), [&](const auto& f) { return f.first == &file; });
    int32_t base = 0;
    if (known != files.end()) {
      base = known->second;
    } else {
      base = static_cast<int32_t>(out.inputs.size());
      files.emplace_back(&file, base);
      for (const ArrowArray& segment : file.segments) {
        out.inputs.push_back(&segment);
        out.struct_offsets.push_back(segment.offset);
      }
    }
    const auto& starts = file.starts;
    for (int64_t k = 0; k < piece.num_source_runs; ++k) {
      const SourceRun run = ReadRun(piece.source_runs, k);
      auto row = static_cast<int64_t>(run.first);
      int64_t left = run.length;
      // The last segment starting at or before the row (empty ones skipped).
      auto at = std::upper_bound(starts.begin(), starts.end(), row) - 1;
      while (left > 0) {
        const auto segment = static_cast<int32_t>(at - starts.begin());
        const int64_t n = std::min<int64_t>(left, *(at + 1) - row);
        out.srcs.push_back({row - *at, n, base + segment});
        row += n;
        left -= n;
        at = std::upper_bound(at, starts.end(), row) - 1;
      }
    }
    out.first.push_back(out.srcs.size());
  }
  return out;
}

// The runs of the batch in position order (CheckPositions passed). A piece's
// runs are split where its sources break, and consecutive positions are
// merged into one run.
bool OrderRuns(int64_t rows, int32_t num_pieces, const IcefloeAssemblePiece* pieces,
               const Sources& sources, std::vector<Run>* ordered) {
  std::vector<Run> runs;
  std::vector<int64_t> starts;
  // The piece's rows are visited in order: a cursor walks its sources.
  const Src* src = nullptr;
  int64_t before = 0;
  auto add = [&](int64_t at, int64_t piece_row, int64_t length, int32_t p) {
    while (length > 0) {  // the piece's rows piece_row.. -> its inputs' rows
      const Src& s = *src;
      const int64_t into = piece_row - before;
      if (into >= s.length) {  // CheckSource: the sources cover the rows
        before += s.length;
        ++src;
        continue;
      }
      const int64_t n = std::min<int64_t>(length, s.length - into);
      starts.push_back(at);
      runs.push_back({s.row + into, n, piece_row, s.input, p});
      at += n;
      piece_row += n;
      length -= n;
    }
  };
  for (int32_t p = 0; p < num_pieces; ++p) {
    const IcefloeAssemblePiece& piece = pieces[p];
    src = sources.of(p);
    before = 0;
    if (piece.positions != nullptr) {
      int64_t i = 0;
      while (i < piece.rows) {
        int64_t j = i + 1;
        while (j < piece.rows && piece.positions[j] == piece.positions[j - 1] + 1) ++j;
        add(piece.base + piece.positions[i], i, j - i, p);
        i = j;
      }
      continue;
    }
    int64_t i = 0;
    for (int64_t r = 0; r < piece.num_runs; ++r) {
      const int64_t length = piece.runs[2 * r + 1];
      if (length > 0) add(piece.base + piece.runs[2 * r], i, length, p);
      i += length;
    }
  }
  // Every position is covered once: index the runs by where they start.
  std::unique_ptr<uint32_t[]> at(new (std::nothrow) uint32_t[rows]);
  if (rows > 0 && at == nullptr) return false;
  for (size_t k = 0; k < runs.size(); ++k) at[starts[k]] = static_cast<uint32_t>(k);
  ordered->clear();
  ordered->reserve(runs.size());
  for (int64_t pos = 0; pos < rows;) {
    const Run& run = runs[at[pos]];
    ordered->push_back(run);
    pos += run.length;
  }
  return true;
}

// --- Output arrays --------------------------------------------------------------

// What an output array owns; freed by its release callback.
struct Owned {
  std::vector<void*> memory;
  std::vector<const void*> buffers;
  std::vector<ArrowArray*> children;
};

void Release(ArrowArray* array) {
  auto* owned = static_cast<Owned*>(array->private_data);
  for (ArrowArray* child : owned->children) {
    if (child->release != nullptr) child->release(child);
    delete child;
  }
  for (void* m : owned->memory) std::free(m);
  delete owned;
  array->release = nullptr;
}

// An empty output array of `length` rows with `n_buffers` (null) buffers.
bool Start(ArrowArray* out, int64_t length, int64_t n_buffers) {
  auto* owned = new (std::nothrow) Owned;
  if (owned == nullptr) return false;
  owned->buffers.assign(static_cast<size_t>(n_buffers), nullptr);
  *out = ArrowArray{length, 0, 0, n_buffers, 0, nullptr, nullptr, nullptr, Release, owned};
  out->buffers = owned->buffers.data();
  return true;
}

Owned* OwnedOf(ArrowArray* out) { return static_cast<Owned*>(out->private_data); }

// A new 64-byte aligned buffer of `bytes` (rounded up to 64) as buffer i;
// zeroed when `zero` (bitmaps: bits are set one run at a time). Every other
// buffer is written whole before the array is handed out.
uint8_t* NewBuffer(ArrowArray* out, int64_t i, int64_t bytes, bool zero = false) {
  const size_t size = (static_cast<size_t>(std::max<int64_t>(bytes, 1)) + 63) & ~size_t{63};
  void* memory = nullptr;
  if (posix_memalign(&memory, 64, size) != 0) return nullptr;
  if (zero) std::memset(memory, 0, size);
  Owned* owned = OwnedOf(out);
  owned->memory.push_back(memory);
  owned->buffers[static_cast<size_t>(i)] = memory;
  return static_cast<uint8_t*>(memory);
}

ArrowArray* NewChild(ArrowArray* out) {
  auto* child = new (std::nothrow) ArrowArray{};
  if (child == nullptr) return nullptr;
  Owned* owned = OwnedOf(out);
  owned->children.push_back(child);
  out->children = owned->children.data();
  out->n_children = static_cast<int64_t>(owned->children.size());
  return child;
}

// --- Bits -----------------------------------------------------------------------

bool GetBit(const uint8_t* bits, int64_t i) { return (bits[i >> 3] >> (i & 7)) & 1; }

void SetBit(uint8_t* bits, int64_t i, bool v) {
  bits[i >> 3] = static_cast<uint8_t>((bits[i >> 3] & ~(1u << (i & 7))) | (unsigned{v} << (i & 7)));
}

// Copies n bits from src at bit s to dst at bit d (dst's other bits kept).
void CopyBits(const uint8_t* src, int64_t s, uint8_t* dst, int64_t d, int64_t n) {
  for (; n > 0 && (d & 7) != 0; ++s, ++d, --n) SetBit(dst, d, GetBit(src, s));
  const int64_t bytes = n >> 3;
  const int shift = static_cast<int>(s & 7);
  const uint8_t* from = src + (s >> 3);
  uint8_t* to = dst + (d >> 3);
  if (shift == 0) {
    std::memcpy(to, from, static_cast<size_t>(bytes));
  } else {
    for (int64_t b = 0; b < bytes; ++b) {
      to[b] = static_cast<uint8_t>((from[b] >> shift) | (from[b + 1] << (8 - shift)));
    }
  }
  s += bytes * 8;
  d += bytes * 8;
  n -= bytes * 8;
  for (; n > 0; ++s, ++d, --n) SetBit(dst, d, GetBit(src, s));
}

void SetBits(uint8_t* dst, int64_t d, int64_t n) {
  for (; n > 0 && (d & 7) != 0; ++d, --n) SetBit(dst, d, true);
  std::memset(dst + (d >> 3), 0xff, static_cast<size_t>(n >> 3));
  d += n & ~int64_t{7};
  for (n &= 7; n > 0; ++d, --n) SetBit(dst, d, true);
}

int64_t CountSet(const uint8_t* bits, int64_t n) {
  int64_t set = 0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    uint64_t word;
    std::memcpy(&word, bits + (i >> 3), sizeof word);
    set += __builtin_popcountll(word);
  }
  for (; i < n; ++i) set += GetBit(bits, i);
  return set;
}

// --- Scattering fixed-width values ----------------------------------------------
//
// When the runs are short (positions sent one per row, as the sample shuffle
// sends them), gathering run by run costs a lookup per value; a top-level
// fixed-width column is then written piece by piece instead: each piece's
// values read in order, each written to its position.

// The piece's rows [i, i + count) are the values at `in`; writes them to
// their positions (out already at the piece's base), running position runs
// from run `*run` with `*left` positions left in it.
template <typename T>
void PutTyped(T* out, const T* in, const IcefloeAssemblePiece& piece, int64_t i, int64_t count,
              int64_t* run, int64_t* left, int64_t* at) {
  if (piece.positions != nullptr) {
    const uint32_t* positions = piece.positions + i;
    for (int64_t k = 0; k < count; ++k) out[positions[k]] = in[k];
    return;
  }
  while (count > 0) {
    if (*left == 0) {
      *at = piece.runs[2 * *run];
      *left = piece.runs[2 * *run + 1];
      ++*run;
      continue;
    }
    const int64_t n = std::min(count, *left);
    std::memcpy(out + *at, in, static_cast<size_t>(n) * sizeof(T));
    in += n;
    *at += n;
    *left -= n;
    count -= n;
  }
}

template <int64_t kWidth>
struct Value {
  uint8_t bytes[kWidth];
};

// `in`: each input's values at its row 0; the piece's rows are `srcs`.
template <typename T>
void ScatterAs(uint8_t* out, const uint8_t* const* in, const IcefloeAssemblePiece& piece,
               const Src* srcs, int64_t num_srcs) {
  T* typed_out = reinterpret_cast<T*>(out);
  int64_t run = 0, left = 0, at = 0;
  // Runs of a large file are cache misses: ask for the runs kAhead ahead
  // while copying this one, so that many are in flight.
  constexpr int64_t kAhead = 8;
  constexpr int64_t kLine = 64;
  int64_t i = 0;
  for (int64_t k = 0; k < num_srcs; ++k) {
    if (k + kAhead < num_srcs) {
      const Src& ahead = srcs[k + kAhead];
      const auto* from =
          reinterpret_cast<const char*>(reinterpret_cast<const T*>(in[ahead.input]) + ahead.row);
      const int64_t bytes = std::min<int64_t>(ahead.length * int64_t{sizeof(T)}, 4 * kLine);
      for (int64_t b = 0; b < bytes; b += kLine) __builtin_prefetch(from + b);
    }
    const Src& source = srcs[k];
    PutTyped(typed_out, reinterpret_cast<const T*>(in[source.input]) + source.row, piece, i,
             source.length, &run, &left, &at);
    i += source.length;
  }
}

// Asks for the first bytes of a piece's first kAheadRuns sources (`in`: each
// input's values at row 0, `width` bytes each). ScatterAs asks for runs
// kAheadRuns ahead within a piece; a piece of few runs would start with none
// in flight, so the caller asks for the next piece's first runs while it
// copies this one.
constexpr int64_t kAheadRuns = 8;

void PrefetchFirstRuns(const uint8_t* const* in, int64_t width, const Src* srcs, int64_t num_srcs) {
  const int64_t n = std::min<int64_t>(num_srcs, kAheadRuns);
  for (int64_t k = 0; k < n; ++k) {
    const auto* from = reinterpret_cast<const char*>(in[srcs[k].input] + srcs[k].row * width);
    const int64_t bytes = std::min<int64_t>(srcs[k].length * width, 256);
    for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(from + b);
  }
}

// Any width: one value at a time.
void ScatterBytes(uint8_t* out, const uint8_t* const* in, int64_t width,
                  const IcefloeAssemblePiece& piece, const Src* srcs, int64_t num_srcs) {
  int64_t run = 0, left = 0, at = 0;
  auto destination = [&](int64_t i) -> int64_t {
    if (piece.positions != nullptr) return piece.positions[i];
    while (left == 0) {  // CheckPositions: the runs cover the rows exactly
      at = piece.runs[2 * run];
      left = piece.runs[2 * run + 1];
      ++run;
    }
    --left;
    return at++;
  };
  const auto bytes = static_cast<size_t>(width);
  int64_t i = 0;
  for (int64_t k = 0; k < num_srcs; ++k) {
    const uint8_t* from = in[srcs[k].input] + srcs[k].row * width;
    for (int64_t j = 0; j < srcs[k].length; ++j, ++i) {
      std::memcpy(out + destination(i) * width, from + j * width, bytes);
    }
  }
}

// One piece's values of one column to their positions (out at its base).
void ScatterColumn(uint8_t* out, const uint8_t* const* in, int64_t width,
                   const IcefloeAssemblePiece& piece, const Src* srcs, int64_t num_srcs) {
  switch (width) {
    case 1:
      return ScatterAs<uint8_t>(out, in, piece, srcs, num_srcs);
    case 2:
      return ScatterAs<uint16_t>(out, in, piece, srcs, num_srcs);
    case 4:
      return ScatterAs<uint32_t>(out, in, piece, srcs, num_srcs);
    case 8:
      return ScatterAs<uint64_t>(out, in, piece, srcs, num_srcs);
    case 16:
      return ScatterAs<Value<16>>(out, in, piece, srcs, num_srcs);
    default:
      return ScatterBytes(out, in, width, piece, srcs, num_srcs);
  }
}

// --- Columns --------------------------------------------------------------------

enum class Layout { kNull, kBool, kFixed, kBinary, kList, kFixedList, kStruct, kUnsupported };

struct Type {
  Layout layout = Layout::kUnsupported;
  int64_t width = 0;        // kFixed: bytes per value; kFixedList: values per list
  bool large = false;       // kBinary, kList: 64-bit offsets
  int64_t n_buffers = 0;    // as the C Data Interface lays the type out
  int64_t n_children = -1;  // -1: the schema's
};

int64_t ParseWidth(std::string_view digits) {
  int64_t v = 0;
  if (digits.empty() || digits.size() > 9) return 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return 0;
    v = v * 10 + (c - '0');
  }
  return v;
}

Type TypeOf(const ArrowSchema& schema) {
  const std::string_view f = schema.format != nullptr ? schema.format : "";
  if (schema.dictionary != nullptr) return {};
  auto fixed = [](int64_t width) { return Type{Layout::kFixed, width, false, 2, 0}; };
  if (f.size() == 1) {
    switch (f[0]) {
      case 'n':
        return {Layout::kNull, 0, false, 0, 0};
      case 'b':
        return {Layout::kBool, 0, false, 2, 0};
      case 'c':
      case 'C':
        return fixed(1);
      case 's':
      case 'S':
      case 'e':
        return fixed(2);
      case 'i':
      case 'I':
      case 'f':
        return fixed(4);
      case 'l':
      case 'L':
      case 'g':
        return fixed(8);
      case 'z':
      case 'u':
        return {Layout::kBinary, 0, false, 3, 0};
      case 'Z':
      case 'U':
        return {Layout::kBinary, 0, true, 3, 0};
      default:
        return {};
    }
  }
  if (f == "tdD" || f == "tts" || f == "ttm" || f == "tiM") return fixed(4);
  if (f == "tdm" || f == "ttu" || f == "ttn" || f == "tiD") return fixed(8);
  if (f == "tin") return fixed(16);
  if (f.size() >= 4 && (f.substr(0, 2) == "ts" || f.substr(0, 2) == "tD") && f[3] == ':') {
    return fixed(8);  // timestamps (with a zone after the colon), durations
  }
  if (f.size() == 3 && f.substr(0, 2) == "tD") return fixed(8);
  if (f.substr(0, 2) == "w:") {
    const int64_t width = ParseWidth(f.substr(2));
    return width > 0 ? fixed(width) : Type{};
  }
  if (f.substr(0, 2) == "d:") {
    // d:precision,scale[,bitwidth]; 128 bits unless given.
    const size_t first = f.find(',');
    const size_t second = first == std::string_view::npos ? first : f.find(',', first + 1);
    if (second == std::string_view::npos) return fixed(16);
    const int64_t bits = ParseWidth(f.substr(second + 1));
    return bits == 32 || bits == 64 || bits == 128 || bits == 256 ? fixed(bits / 8) : Type{};
  }
  if (f == "+l" || f == "+m") return {Layout::kList, 0, false, 2, 1};
  if (f == "+L") return {Layout::kList, 0, true, 2, 1};
  if (f == "+s") return {Layout::kStruct, 0, false, 1, -1};
  if (f.substr(0, 3) == "+w:") {
    const int64_t size = ParseWidth(f.substr(3));
    return size > 0 ? Type{Layout::kFixedList, size, false, 1, 1} : Type{};
  }
  return {};  // views, unions, run-end encoding, ...
}

std::string Named(const std::string& path, const ArrowSchema& schema) {
  const std::string name = schema.name != nullptr ? schema.name : "";
  return path.empty() ? name : path + "." + name;
}

// Whether any input may hold nulls (a null count of -1 is unknown).
bool AnyNulls(const std::vector<const ArrowArray*>& inputs) {
  for (const ArrowArray* a : inputs) {
    if (a->null_count != 0 && a->n_buffers > 0 && a->buffers[0] != nullptr) return true;
  }
  return false;
}

template <typename Offset>
const Offset* Offsets(const ArrowArray* a) {
  return static_cast<const Offset*>(a->buffers[1]);
}

// The pieces and their sources, for a top-level column whose runs are short
// enough that scattering each piece's values beats gathering run by run.
struct Scatter {
  const IcefloeAssemblePiece* pieces = nullptr;
  int32_t num_pieces = 0;
  const Sources* sources = nullptr;
};

// Per input, the end of the rows `runs` read from it (the input must be at
// least that long).
std::vector<int64_t> Needed(size_t num_inputs, const std::vector<Run>& runs) {
  std::vector<int64_t> need(num_inputs, 0);
  for (const Run& run : runs) {
    int64_t& n = need[static_cast<size_t>(run.piece)];
    n = std::max(n, run.row + run.length);
  }
  return need;
}

// Builds `out` (length rows) from `runs` of the inputs (one per piece), each
// run's `row` counted before the input's own offset; `need`: per input, the
// rows it must have (Needed(runs), or more).
Outcome Gather(const ArrowSchema& schema, const std::vector<const ArrowArray*>& inputs,
               const std::vector<Run>& runs, const std::vector<int64_t>& need, int64_t length,
               ArrowArray* out, const std::string& path, int depth, Scatter scatter = {});

// The batch's offsets (buffer 1 of `out`) for `runs` of the inputs', each
// run's checked to stay within its array's values ([lo, hi) as
// `bounds(array)` gives them) and never to go backwards. `*values` gets each
// run's values as a run (its first value, how many): the bytes of a string
// column, the child rows of a list.
template <typename Offset, typename Bounds>
Outcome JoinOffsets(const std::vector<const ArrowArray*>& inputs, const std::vector<Run>& runs,
                    ArrowArray* out, const std::string& path, Bounds bounds,
                    std::vector<Run>* values, int64_t* total) {
  auto* offsets = reinterpret_cast<Offset*>(
      NewBuffer(out, 1, (out->length + 1) * static_cast<int64_t>(sizeof(Offset))));
  if (offsets == nullptr) return Fail(kIcefloeAssembleNoMemory);
  values->reserve(runs.size());
  int64_t at = 0, k = 0;
  for (const Run& run : runs) {
    const ArrowArray* a = inputs[static_cast<size_t>(run.piece)];
    const Offset* in = Offsets<Offset>(a) + a->offset + run.row;
    const auto [lo, hi] = bounds(a);
    if (in[0] < lo || in[run.length] > hi) {
      return Fail(kIcefloeAssembleBadOffsets,
                  "column '" + path + "': a piece's offsets point past its values");
    }
    for (int64_t i = 0; i < run.length; ++i) {
      if (in[i + 1] < in[i]) {
        return Fail(kIcefloeAssembleBadOffsets,
                    "column '" + path + "': a piece's offsets go backwards");
      }
      offsets[k + i] = static_cast<Offset>(at + (in[i] - in[0]));
    }
    const int64_t n = in[run.length] - in[0];
    if (n > 0) values->push_back({in[0], n, 0, run.piece});
    at += n;
    if (at > std::numeric_limits<Offset>::max()) {
      return Fail(kIcefloeAssembleBadOffsets,
                  "column '" + path + "': the batch's values do not fit 32-bit offsets");
    }
    k += run.length;
  }
  offsets[k] = static_cast<Offset>(at);
  *total = at;
  return {};
}

template <typename Offset>
Outcome GatherBinary(const std::vector<const ArrowArray*>& inputs, const std::vector<Run>& runs,
                     ArrowArray* out, const std::string& path) {
  // The array's first and last offsets bound its values (Arrow's basic
  // validation checked them against the values buffer).
  auto bounds = [](const ArrowArray* a) {
    const Offset* all = Offsets<Offset>(a) + a->offset;
    return std::pair<int64_t, int64_t>(all[0], all[a->length]);
  };
  std::vector<Run> values;
  int64_t total = 0;
  Outcome joined = JoinOffsets<Offset>(inputs, runs, out, path, bounds, &values, &total);
  if (!joined.ok()) return joined;
  uint8_t* bytes = NewBuffer(out, 2, total);
  if (bytes == nullptr) return Fail(kIcefloeAssembleNoMemory);
  for (const Run& v : values) {
    const auto* data =
        static_cast<const uint8_t*>(inputs[static_cast<size_t>(v.piece)]->buffers[2]);
    std::memcpy(bytes, data + v.row, static_cast<size_t>(v.length));
    bytes += v.length;
  }
  return {};
}

template <typename Offset>
Outcome GatherList(const ArrowSchema& schema, const std::vector<const ArrowArray*>& inputs,
                   const std::vector<Run>& runs, ArrowArray* out, const std::string& path,
                   int depth) {
  auto bounds = [](const ArrowArray* a) {
    return std::pair<int64_t, int64_t>(0, a->children[0]->length);
  };
  std::vector<Run> child_runs;
  int64_t total = 0;
  Outcome joined = JoinOffsets<Offset>(inputs, runs, out, path, bounds, &child_runs, &total);
  if (!joined.ok()) return joined;
  std::vector<const ArrowArray*> children;
  for (const ArrowArray* a : inputs) children.push_back(a->children[0]);
  ArrowArray* child = NewChild(out);
  if (child == nullptr) return Fail(kIcefloeAssembleNoMemory);
  return Gather(*schema.children[0], children, child_runs, Needed(children.size(), child_runs),
                total, child, path, depth + 1);
}

// A batch of this many bytes or more is built by two threads, half the
// columns each (the caller's and a helper): reading rows from many places is
// memory latency, and a second core has its own misses in flight.
constexpr int64_t kParallelBytes = int64_t{1} << 20;

struct Columns {
  const std::function<void(int64_t)>* build;
  int64_t begin, end;
};

void* BuildRange(void* arg) {
  const auto* columns = static_cast<const Columns*>(arg);
  for (int64_t c = columns->begin; c < columns->end; ++c) (*columns->build)(c);
  return nullptr;
}

// Builds every column of a batch of `length` rows (`build(c)`), on two
// threads when it is large; on one when a thread cannot be started.
void BuildColumns(const ArrowSchema& schema, int64_t length,
                  const std::function<void(int64_t)>& build) {
  const int64_t n = schema.n_children;
  std::vector<int64_t> ends;  // bytes of columns 0..c, roughly (8 a row unless fixed)
  int64_t bytes = 0;
  for (int64_t c = 0; c < n; ++c) {
    const Type type = TypeOf(*schema.children[c]);
    bytes += length * (type.layout == Layout::kFixed ? type.width : 8);
    ends.push_back(bytes);
  }
  Columns all{&build, 0, n};
  if (n < 2 || bytes < kParallelBytes) {
    BuildRange(&all);
    return;
  }
  const int64_t half = std::lower_bound(ends.begin(), ends.end(), bytes / 2) - ends.begin() + 1;
  Columns mine{&build, 0, std::min(half, n - 1)};
  Columns theirs{&build, mine.end, n};
  pthread_t helper;
  if (pthread_create(&helper, nullptr, BuildRange, &theirs) != 0) {
    BuildRange(&all);
    return;
  }
  BuildRange(&mine);
  pthread_join(helper, nullptr);  // it writes into this batch's columns
}

Outcome Gather(const ArrowSchema& schema, const std::vector<const ArrowArray*>& inputs,
               const std::vector<Run>& runs, const std::vector<int64_t>& need, int64_t length,
               ArrowArray* out, const std::string& parent, int depth, Scatter scatter) {
  const std::string path = depth == 0 ? std::string() : Named(parent, schema);
  if (depth > kMaxDepth) return Fail(kIcefloeAssembleMalformed, "column '" + path + "'");
  const Type type = TypeOf(schema);
  if (type.layout == Layout::kUnsupported) {
    const std::string format = schema.format != nullptr ? schema.format : "";
    return Fail(kIcefloeAssembleUnsupported,
                "column '" + path + "' (format '" + format +
                    (schema.dictionary != nullptr ? "', dictionary" : "'") + ")");
  }
  const int64_t n_children = type.n_children < 0 ? schema.n_children : type.n_children;
  if (schema.n_children != n_children)
    return Fail(kIcefloeAssembleMalformed, "column '" + path + "'");
  for (const ArrowArray* a : inputs) {
    // A null column's validity buffer may be exported or not.
    const bool buffers_match = type.layout == Layout::kNull
                                   ? a == nullptr || a->n_buffers <= 1
                                   : a == nullptr || a->n_buffers == type.n_buffers;
    if (a == nullptr || !buffers_match || a->n_children != n_children || a->offset < 0 ||
        a->length < 0) {
      return Fail(kIcefloeAssembleMalformed,
                  "column '" + path + "': a piece's array does not match the schema");
    }
    for (int64_t c = 0; c < n_children; ++c) {
      if (a->children[c] == nullptr)
        return Fail(kIcefloeAssembleMalformed, "column '" + path + "'");
    }
  }
  for (size_t p = 0; p < inputs.size(); ++p) {
    if (inputs[p]->length < need[p]) {
      return Fail(kIcefloeAssembleMalformed,
                  "column '" + path + "': a piece's array is shorter than its rows");
    }
  }
  if (!Start(out, length, type.n_buffers)) return Fail(kIcefloeAssembleNoMemory);
  if (type.layout == Layout::kNull) {
    out->null_count = length;
    return {};
  }
  // Validity: only when some piece has nulls.
  if (AnyNulls(inputs)) {
    uint8_t* bits = NewBuffer(out, 0, (length + 7) / 8, /*zero=*/true);
    if (bits == nullptr) return Fail(kIcefloeAssembleNoMemory);
    int64_t k = 0;
    for (const Run& run : runs) {
      const ArrowArray* a = inputs[static_cast<size_t>(run.piece)];
      const auto* in = static_cast<const uint8_t*>(a->buffers[0]);
      if (in == nullptr) {
        SetBits(bits, k, run.length);
      } else {
        CopyBits(in, a->offset + run.row, bits, k, run.length);
      }
      k += run.length;
    }
    out->null_count = length - CountSet(bits, length);
  }
  switch (type.layout) {
    case Layout::kBool: {
      uint8_t* bits = NewBuffer(out, 1, (length + 7) / 8, /*zero=*/true);
      if (bits == nullptr) return Fail(kIcefloeAssembleNoMemory);
      int64_t k = 0;
      for (const Run& run : runs) {
        const ArrowArray* a = inputs[static_cast<size_t>(run.piece)];
        CopyBits(static_cast<const uint8_t*>(a->buffers[1]), a->offset + run.row, bits, k,
                 run.length);
        k += run.length;
      }
      return {};
    }
    case Layout::kFixed: {
      const int64_t w = type.width;
      uint8_t* values = NewBuffer(out, 1, length * w);
      if (values == nullptr) return Fail(kIcefloeAssembleNoMemory);
      if (scatter.pieces != nullptr) {
        // An input's row r is this column's row (record batch's offset) +
        // r (`need` covers the input's rows).
        const Sources& sources = *scatter.sources;
        std::vector<const uint8_t*> in(inputs.size());
        for (size_t i = 0; i < inputs.size(); ++i) {
          const ArrowArray* a = inputs[i];
          in[i] = static_cast<const uint8_t*>(a->buffers[1]) +
                  (a->offset + sources.struct_offsets[i]) * w;
        }
        for (int32_t p = 0; p < scatter.num_pieces; ++p) {
          const IcefloeAssemblePiece& piece = scatter.pieces[p];
          if (p + 1 < scatter.num_pieces) {
            PrefetchFirstRuns(in.data(), w, sources.of(p + 1), sources.count(p + 1));
          }
          ScatterColumn(values + piece.base * w, in.data(), w, piece, sources.of(p),
                        sources.count(p));
        }
        return {};
      }
      uint8_t* to = values;
      for (const Run& run : runs) {
        const ArrowArray* a = inputs[static_cast<size_t>(run.piece)];
        const auto* from = static_cast<const uint8_t*>(a->buffers[1]) + (a->offset + run.row) * w;
        if (run.length == 1 && w == 4) {
          std::memcpy(to, from, 4);
        } else if (run.length == 1 && w == 8) {
          std::memcpy(to, from, 8);
        } else {
          std::memcpy(to, from, static_cast<size_t>(run.length * w));
        }
        to += run.length * w;
      }
      return {};
    }
    case Layout::kBinary:
      return type.large ? GatherBinary<int64_t>(inputs, runs, out, path)
                        : GatherBinary<int32_t>(inputs, runs, out, path);
    case Layout::kList:
      return type.large ? GatherList<int64_t>(schema, inputs, runs, out, path, depth)
                        : GatherList<int32_t>(schema, inputs, runs, out, path, depth);
    case Layout::kFixedList: {
      const int64_t size = type.width;
      std::vector<Run> child_runs;
      child_runs.reserve(runs.size());
      for (const Run& run : runs) {
        const ArrowArray* a = inputs[static_cast<size_t>(run.piece)];
        child_runs.push_back({(a->offset + run.row) * size, run.length * size, 0, run.piece});
      }
      std::vector<const ArrowArray*> children;
      for (const ArrowArray* a : inputs) children.push_back(a->children[0]);
      ArrowArray* child = NewChild(out);
      if (child == nullptr) return Fail(kIcefloeAssembleNoMemory);
      return Gather(*schema.children[0], children, child_runs, Needed(children.size(), child_runs),
                    length * size, child, path, depth + 1);
    }
    case Layout::kStruct: {
      // A child's rows are the struct's, shifted by the struct's offset.
      std::vector<Run> child_runs = runs;
      for (Run& run : child_runs) run.row += inputs[static_cast<size_t>(run.piece)]->offset;
      std::vector<int64_t> child_need = need;
      for (size_t p = 0; p < inputs.size(); ++p) child_need[p] += inputs[p]->offset;
      std::vector<ArrowArray*> built(static_cast<size_t>(n_children));
      for (ArrowArray*& child : built) {
        child = NewChild(out);
        if (child == nullptr) return Fail(kIcefloeAssembleNoMemory);
      }
      std::vector<Outcome> outcomes(static_cast<size_t>(n_children));
      const std::function<void(int64_t)> build = [&](int64_t c) {
        std::vector<const ArrowArray*> children;
        for (const ArrowArray* a : inputs) children.push_back(a->children[c]);
        outcomes[static_cast<size_t>(c)] = Gather(
            *schema.children[c], children, child_runs, child_need, length,
            built[static_cast<size_t>(c)], path, depth + 1, depth == 0 ? scatter : Scatter{});
      };
      if (depth == 0) {
        BuildColumns(schema, length, build);
      } else {
        for (int64_t c = 0; c < n_children; ++c) build(c);
      }
      for (const Outcome& done : outcomes) {
        if (!done.ok()) return done;
      }
      return {};
    }
    default:
      return Fail(kIcefloeAssembleUnsupported, "column '" + path + "'");
  }
}

// Whether every column of the batch is fixed-width without nulls in any
// input (so scattering builds them all).
bool AllScattered(const ArrowSchema& schema, const std::vector<const ArrowArray*>& inputs) {
  for (int64_t c = 0; c < schema.n_children; ++c) {
    if (TypeOf(*schema.children[c]).layout != Layout::kFixed) return false;
    for (const ArrowArray* batch : inputs) {
      if (c >= batch->n_children || batch->children[c] == nullptr) return false;  // Gather says
      const ArrowArray* a = batch->children[c];
      if (a->null_count != 0 && a->n_buffers > 0 && a->buffers[0] != nullptr) return false;
    }
  }
  return true;
}

void ReleaseInputs(int32_t num_pieces, const IcefloeAssemblePiece* pieces) {
  for (int32_t p = 0; p < num_pieces; ++p) {
    ArrowArray* a = pieces[p].batch;
    if (a != nullptr && a->release != nullptr) a->release(a);
  }
}

void WriteError(const Outcome& outcome, char* error, int64_t error_size) {
  if (error == nullptr || error_size <= 0) return;
  std::snprintf(error, static_cast<size_t>(error_size), "%s", outcome.message.c_str());
}

}  // namespace

extern "C" int32_t icefloe_assemble(int64_t rows, const ArrowSchema* schema, int32_t num_pieces,
                                    const IcefloeAssemblePiece* pieces, ArrowArray* out,
                                    int64_t* inverse, char* error, int64_t error_size) noexcept {
  if (error != nullptr && error_size > 0) error[0] = '\0';
  Outcome outcome;
  if (rows < 0 || num_pieces < 0 || schema == nullptr || out == nullptr ||
      (num_pieces > 0 && pieces == nullptr)) {
    return kIcefloeAssembleMalformed;  // nothing to release
  }
  for (int32_t p = 0; p < num_pieces; ++p) {
    const IcefloeAssemblePiece& piece = pieces[p];
    const bool batch = piece.batch != nullptr && piece.batch->release != nullptr;
    if (piece.file != nullptr ? piece.batch != nullptr : !batch) {  // one or the other
      ReleaseInputs(num_pieces, pieces);
      return kIcefloeAssembleMalformed;
    }
  }
  if (const int32_t checked = CheckPositions(rows, num_pieces, pieces);
      checked != kIcefloeAssembleOk) {
    ReleaseInputs(num_pieces, pieces);
    return checked;
  }
  // Runs of 4 rows or fewer on average (positions sent one per row, as the
  // sample shuffle and takes send them): the top-level fixed-width columns
  // are scattered piece by piece, each piece's positions read once per
  // column, rather than gathered run by run. When every column is such and
  // no inverse is asked for, the runs in position order are not needed.
  int64_t estimate = 0;
  for (int32_t p = 0; p < num_pieces; ++p) {
    const IcefloeAssemblePiece& piece = pieces[p];
    if (piece.positions == nullptr) {
      estimate += piece.num_runs;
      continue;
    }
    for (int64_t i = 0; i < piece.rows; ++i) {
      estimate += i == 0 || piece.positions[i] != piece.positions[i - 1] + 1;
    }
  }
  const Sources sources = Resolve(num_pieces, pieces);
  Scatter scatter;
  if (estimate * 4 > rows) scatter = {pieces, num_pieces, &sources};
  std::vector<Run> runs;
  if (scatter.pieces == nullptr || inverse != nullptr || !AllScattered(*schema, sources.inputs)) {
    if (!OrderRuns(rows, num_pieces, pieces, sources, &runs)) {
      ReleaseInputs(num_pieces, pieces);
      return kIcefloeAssembleNoMemory;
    }
  }
  if (inverse != nullptr) {
    std::vector<int64_t> first(static_cast<size_t>(num_pieces) + 1, 0);
    for (int32_t p = 0; p < num_pieces; ++p) first[p + 1] = first[p] + pieces[p].rows;
    int64_t k = 0;
    for (const Run& run : runs) {
      for (int64_t i = 0; i < run.length; ++i) inverse[k++] = first[run.owner] + run.piece_row + i;
    }
  }
  // Each input is read at most to its end (CheckSource checked the source
  // runs against the piece's batch or file).
  std::vector<int64_t> need;
  for (const ArrowArray* a : sources.inputs) need.push_back(a->length);
  ArrowArray built{};
  outcome = Gather(*schema, sources.inputs, runs, need, rows, &built, "", 0, scatter);
  ReleaseInputs(num_pieces, pieces);
  if (!outcome.ok()) {
    if (built.release != nullptr) built.release(&built);
    WriteError(outcome, error, error_size);
    return outcome.code;
  }
  *out = built;
  return kIcefloeAssembleOk;
}

extern "C" IcefloeFile* icefloe_file_new(int32_t num_segments, ArrowArray* segments) noexcept {
  if (num_segments < 0 || (num_segments > 0 && segments == nullptr)) return nullptr;
  auto release_all = [&] {
    for (int32_t k = 0; k < num_segments; ++k) {
      if (segments[k].release != nullptr) segments[k].release(&segments[k]);
    }
  };
  auto* file = new (std::nothrow) IcefloeFile;
  bool ok = file != nullptr;
  for (int32_t k = 0; ok && k < num_segments; ++k) {
    ok = segments[k].release != nullptr && segments[k].length >= 0;
  }
  if (ok) {
    file->segments.resize(static_cast<size_t>(num_segments));
    file->starts.assign(static_cast<size_t>(num_segments) + 1, 0);
  }
  if (!ok) {
    release_all();
    delete file;
    return nullptr;
  }
  for (int32_t k = 0; k < num_segments; ++k) {
    file->segments[static_cast<size_t>(k)] = segments[k];  // moved: the source no longer owns it
    segments[k].release = nullptr;
    file->starts[static_cast<size_t>(k) + 1] =
        file->starts[static_cast<size_t>(k)] + segments[k].length;
  }
  return file;
}

extern "C" void icefloe_file_free(IcefloeFile* file) noexcept {
  if (file == nullptr) return;
  for (ArrowArray& segment : file->segments) {
    if (segment.release != nullptr) segment.release(&segment);
  }
  delete file;
}

extern "C" int64_t icefloe_file_rows(const IcefloeFile* file) noexcept {
  return file == nullptr ? 0 : file->rows();
}
