#include "icefloe/client/scatter.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>

namespace {

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

// Checks that a piece's source runs cover its rows, all below source_rows.
int32_t CheckSource(const IcefloeScatterPiece& piece) {
  if (piece.source_runs == nullptr) return kIcefloeScatterOk;
  if (piece.num_source_runs < 0 || piece.source_rows < 0) return kIcefloeScatterMalformed;
  int64_t covered = 0;
  for (int64_t k = 0; k < piece.num_source_runs; ++k) {
    const SourceRun run = ReadRun(piece.source_runs, k);
    const auto limit = static_cast<uint64_t>(piece.source_rows);
    if (run.first > limit || run.length > limit - run.first) return kIcefloeScatterOutsideSource;
    covered += run.length;
  }
  return covered == piece.rows ? kIcefloeScatterOk : kIcefloeScatterMalformed;
}

// Checks that the pieces name each of [0, span_rows) exactly once.
int32_t CheckPositions(int64_t span_rows, int32_t num_pieces, const IcefloeScatterPiece* pieces) {
  int64_t total = 0;
  for (int32_t p = 0; p < num_pieces; ++p) {
    const IcefloeScatterPiece& piece = pieces[p];
    if (piece.rows < 0 || piece.base < 0 || piece.num_runs < 0) return kIcefloeScatterMalformed;
    if (piece.positions == nullptr && piece.runs == nullptr && piece.num_runs > 0) {
      return kIcefloeScatterMalformed;
    }
    if (piece.source_runs == nullptr && piece.num_source_runs != 0) {
      return kIcefloeScatterMalformed;
    }
    if (const int32_t source = CheckSource(piece); source != kIcefloeScatterOk) return source;
    total += piece.rows;
  }
  if (total != span_rows) return kIcefloeScatterCount;
  std::unique_ptr<uint8_t[]> seen(new (std::nothrow) uint8_t[span_rows]());
  if (span_rows > 0 && seen == nullptr) return kIcefloeScatterNoMemory;
  for (int32_t p = 0; p < num_pieces; ++p) {
    const IcefloeScatterPiece& piece = pieces[p];
    if (piece.base > span_rows) return kIcefloeScatterOutside;
    const int64_t room = span_rows - piece.base;  // positions below it fit
    uint8_t* at = seen.get() + piece.base;
    if (piece.positions != nullptr) {
      uint8_t twice = 0;
      for (int64_t i = 0; i < piece.rows; ++i) {
        const int64_t pos = piece.positions[i];
        if (pos >= room) return kIcefloeScatterOutside;
        twice |= at[pos];
        at[pos] = 1;
      }
      if (twice) return kIcefloeScatterTwice;
      continue;
    }
    int64_t covered = 0;
    for (int64_t r = 0; r < piece.num_runs; ++r) {
      const int64_t offset = piece.runs[2 * r];
      const int64_t length = piece.runs[2 * r + 1];
      if (offset + length > room) return kIcefloeScatterOutside;
      if (std::memchr(at + offset, 1, static_cast<size_t>(length)) != nullptr) {
        return kIcefloeScatterTwice;
      }
      std::memset(at + offset, 1, static_cast<size_t>(length));
      covered += length;
    }
    if (covered != piece.rows) return kIcefloeScatterMalformed;
  }
  return kIcefloeScatterOk;
}

// The piece's rows [i, i + count) are the values at `in`; writes them to
// their positions (out already at the piece's base), running position runs
// from run `*run` with `*left` positions left in it.
template <typename T>
void PutTyped(T* out, const T* in, const IcefloeScatterPiece& piece, int64_t i, int64_t count,
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

// A value of kWidth bytes, copied whole.
template <int64_t kWidth>
struct Value {
  uint8_t bytes[kWidth];
};

template <typename T>
void ScatterAs(uint8_t* out, const uint8_t* in, const IcefloeScatterPiece& piece) {
  T* typed_out = reinterpret_cast<T*>(out);
  const T* typed_in = reinterpret_cast<const T*>(in);
  int64_t run = 0, left = 0, at = 0;
  if (piece.source_runs == nullptr) {
    PutTyped(typed_out, typed_in, piece, 0, piece.rows, &run, &left, &at);
    return;
  }
  // Runs of a large file are cache misses: ask for the runs kAhead ahead
  // while copying this one, so that many are in flight.
  constexpr int64_t kAhead = 8;
  constexpr int64_t kLine = 64;
  int64_t i = 0;
  for (int64_t k = 0; k < piece.num_source_runs; ++k) {
    if (k + kAhead < piece.num_source_runs) {
      const SourceRun ahead = ReadRun(piece.source_runs, k + kAhead);
      const auto* from = reinterpret_cast<const char*>(typed_in + ahead.first);
      const int64_t bytes = std::min<int64_t>(int64_t{ahead.length} * sizeof(T), 4 * kLine);
      for (int64_t b = 0; b < bytes; b += kLine) __builtin_prefetch(from + b);
    }
    const SourceRun source = ReadRun(piece.source_runs, k);
    PutTyped(typed_out, typed_in + source.first, piece, i, source.length, &run, &left, &at);
    i += source.length;
  }
}

// Any width: one value at a time.
void ScatterBytes(uint8_t* out, const uint8_t* in, int64_t width,
                  const IcefloeScatterPiece& piece) {
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
  if (piece.source_runs == nullptr) {
    for (int64_t i = 0; i < piece.rows; ++i) {
      std::memcpy(out + destination(i) * width, in + i * width, bytes);
    }
    return;
  }
  int64_t i = 0;
  for (int64_t k = 0; k < piece.num_source_runs; ++k) {
    const SourceRun source = ReadRun(piece.source_runs, k);
    const uint8_t* from = in + static_cast<int64_t>(source.first) * width;
    for (uint32_t j = 0; j < source.length; ++j, ++i) {
      std::memcpy(out + destination(i) * width, from + int64_t{j} * width, bytes);
    }
  }
}

// One column of one piece: its values to their positions (out already at
// base). Buffers from Arrow, the pools and the shared files are aligned to
// their value width, so the typed loops read and write whole values.
void ScatterColumn(uint8_t* out, const uint8_t* in, int64_t width,
                   const IcefloeScatterPiece& piece) {
  switch (width) {
    case 1:
      return ScatterAs<uint8_t>(out, in, piece);
    case 2:
      return ScatterAs<uint16_t>(out, in, piece);
    case 4:
      return ScatterAs<uint32_t>(out, in, piece);
    case 8:
      return ScatterAs<uint64_t>(out, in, piece);
    case 16:
      return ScatterAs<Value<16>>(out, in, piece);
    default:
      break;
  }
  ScatterBytes(out, in, width, piece);  // fixed-size binary, lists of values
}

}  // namespace

extern "C" int32_t icefloe_scatter(int64_t span_rows, int32_t num_columns, const int64_t* widths,
                                   uint8_t* const* out, int32_t num_pieces,
                                   const IcefloeScatterPiece* pieces) noexcept {
  if (span_rows < 0 || num_columns < 0 || num_pieces < 0) return kIcefloeScatterMalformed;
  for (int32_t c = 0; c < num_columns; ++c) {
    if (widths[c] <= 0) return kIcefloeScatterMalformed;
  }
  if (const int32_t checked = CheckPositions(span_rows, num_pieces, pieces);
      checked != kIcefloeScatterOk) {
    return checked;
  }
  for (int32_t c = 0; c < num_columns; ++c) {
    for (int32_t p = 0; p < num_pieces; ++p) {
      ScatterColumn(out[c] + pieces[p].base * widths[c], pieces[p].columns[c], widths[c],
                    pieces[p]);
    }
  }
  return kIcefloeScatterOk;
}
