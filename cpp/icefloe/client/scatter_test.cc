#include "icefloe/client/scatter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

namespace {

// A span of `rows` positions shuffled among `pieces` pieces; each piece holds
// its rows in a random order with u32 positions, or (runs) in position order
// as runs. Column 0 is u32 (the position times 3), column 1 is 12 bytes.
struct Span {
  std::vector<std::vector<uint32_t>> positions;
  std::vector<std::vector<uint32_t>> runs;
  std::vector<std::vector<uint32_t>> narrow;
  std::vector<std::vector<uint8_t>> wide;
  std::vector<std::vector<const uint8_t*>> columns;
  std::vector<IcefloeScatterPiece> pieces;
};

constexpr int64_t kWide = 12;

IcefloeScatterPiece Piece(const uint32_t* positions, const uint32_t* runs, int64_t num_runs,
                          int64_t rows, int64_t base, const uint8_t* const* columns) {
  IcefloeScatterPiece piece{};
  piece.positions = positions;
  piece.runs = runs;
  piece.num_runs = num_runs;
  piece.rows = rows;
  piece.base = base;
  piece.columns = columns;
  return piece;
}

uint8_t WideByte(uint32_t pos, int64_t k) { return static_cast<uint8_t>(pos * 7 + k); }

Span MakeSpan(uint32_t rows, int num_pieces, bool runs, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> order(rows);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), rng);
  Span span;
  span.positions.resize(num_pieces);
  for (uint32_t i = 0; i < rows; ++i) span.positions[rng() % num_pieces].push_back(order[i]);
  span.runs.resize(num_pieces);
  for (int p = 0; p < num_pieces; ++p) {
    auto& pos = span.positions[p];
    if (runs) {
      std::sort(pos.begin(), pos.end());
      for (size_t i = 0; i < pos.size(); ++i) {
        auto& r = span.runs[p];
        if (!r.empty() && r[r.size() - 2] + r.back() == pos[i]) {
          ++r.back();
        } else {
          r.insert(r.end(), {pos[i], 1});
        }
      }
    }
    std::vector<uint32_t> narrow;
    std::vector<uint8_t> wide;
    for (uint32_t q : pos) {
      narrow.push_back(q * 3);
      for (int64_t k = 0; k < kWide; ++k) wide.push_back(WideByte(q, k));
    }
    span.narrow.push_back(std::move(narrow));
    span.wide.push_back(std::move(wide));
  }
  for (int p = 0; p < num_pieces; ++p) {
    span.columns.push_back(
        {reinterpret_cast<const uint8_t*>(span.narrow[p].data()), span.wide[p].data()});
  }
  for (int p = 0; p < num_pieces; ++p) {
    IcefloeScatterPiece piece{};
    piece.rows = static_cast<int64_t>(span.positions[p].size());
    if (runs) {
      piece.runs = span.runs[p].data();
      piece.num_runs = static_cast<int64_t>(span.runs[p].size() / 2);
    } else {
      piece.positions = span.positions[p].data();
    }
    piece.columns = span.columns[p].data();
    span.pieces.push_back(piece);
  }
  return span;
}

int32_t Scatter(uint32_t rows, Span& span, std::vector<uint32_t>& narrow,
                std::vector<uint8_t>& wide) {
  narrow.assign(rows, 0xFFFFFFFFu);
  wide.assign(rows * kWide, 0);
  const int64_t widths[] = {4, kWide};
  uint8_t* out[] = {reinterpret_cast<uint8_t*>(narrow.data()), wide.data()};
  return icefloe_scatter(rows, 2, widths, out, static_cast<int32_t>(span.pieces.size()),
                         span.pieces.data());
}

TEST(Scatter, PutsEveryRowOfEveryPieceAtItsPosition) {
  for (bool runs : {false, true}) {
    for (int num_pieces : {1, 2, 5}) {
      const uint32_t rows = 1000;
      Span span = MakeSpan(rows, num_pieces, runs, 7 + num_pieces);
      std::vector<uint32_t> narrow;
      std::vector<uint8_t> wide;
      ASSERT_EQ(Scatter(rows, span, narrow, wide), kIcefloeScatterOk);
      for (uint32_t q = 0; q < rows; ++q) {
        ASSERT_EQ(narrow[q], q * 3) << "runs=" << runs << " pieces=" << num_pieces;
        for (int64_t k = 0; k < kWide; ++k) ASSERT_EQ(wide[q * kWide + k], WideByte(q, k));
      }
    }
  }
}

TEST(Scatter, CountsPositionsFromEachPiecesBase) {
  // Two pieces of one batch each: positions 0..1 of batch 1 start at base 2.
  const uint32_t first[] = {1, 0}, second[] = {1, 0};
  const uint32_t a[] = {10, 11}, b[] = {20, 21};
  const uint8_t* ca[] = {reinterpret_cast<const uint8_t*>(a)};
  const uint8_t* cb[] = {reinterpret_cast<const uint8_t*>(b)};
  const IcefloeScatterPiece pieces[] = {Piece(first, nullptr, 0, 2, 0, ca),
                                        Piece(second, nullptr, 0, 2, 2, cb)};
  uint32_t out[4] = {};
  uint8_t* outs[] = {reinterpret_cast<uint8_t*>(out)};
  const int64_t widths[] = {4};
  ASSERT_EQ(icefloe_scatter(4, 1, widths, outs, 2, pieces), kIcefloeScatterOk);
  EXPECT_EQ(std::vector<uint32_t>(out, out + 4), (std::vector<uint32_t>{11, 10, 21, 20}));
}

TEST(Scatter, RefusesPiecesThatDoNotFillTheSpanOnceAndWritesNothing) {
  const uint32_t values[] = {1, 2, 3};
  const uint8_t* columns[] = {reinterpret_cast<const uint8_t*>(values)};
  const int64_t widths[] = {4};
  auto run = [&](std::vector<IcefloeScatterPiece> pieces, int64_t span_rows) {
    uint32_t out[4] = {9, 9, 9, 9};
    uint8_t* outs[] = {reinterpret_cast<uint8_t*>(out)};
    const int32_t result = icefloe_scatter(span_rows, 1, widths, outs,
                                           static_cast<int32_t>(pieces.size()), pieces.data());
    EXPECT_EQ(std::count(out, out + 4, 9u), 4) << "wrote despite result " << result;
    return result;
  };
  const uint32_t twice[] = {0, 2, 0}, outside[] = {0, 1, 3};
  EXPECT_EQ(run({Piece(twice, nullptr, 0, 3, 0, columns)}, 3), kIcefloeScatterTwice);
  EXPECT_EQ(run({Piece(outside, nullptr, 0, 3, 0, columns)}, 3), kIcefloeScatterOutside);
  EXPECT_EQ(run({Piece(twice, nullptr, 0, 3, 0, columns)}, 4), kIcefloeScatterCount);
  const uint32_t ok[] = {0, 1, 2};
  EXPECT_EQ(run({Piece(ok, nullptr, 0, 3, 1, columns)}, 3), kIcefloeScatterOutside);  // past base
  const uint32_t short_runs[] = {0, 2}, overlapping[] = {0, 2, 1, 1};
  EXPECT_EQ(run({Piece(nullptr, short_runs, 1, 3, 0, columns)}, 3), kIcefloeScatterMalformed);
  EXPECT_EQ(run({Piece(nullptr, overlapping, 2, 3, 0, columns)}, 3), kIcefloeScatterTwice);
  EXPECT_EQ(run({Piece(nullptr, nullptr, 1, 3, 0, columns)}, 3), kIcefloeScatterMalformed);
  const uint32_t far_run[] = {2, 2};
  EXPECT_EQ(run({Piece(nullptr, far_run, 1, 2, 0, columns)}, 2), kIcefloeScatterOutside);
}

// Packed 12-byte source runs, as a node sends them.
std::vector<uint8_t> SourceRuns(const std::vector<std::pair<uint64_t, uint32_t>>& runs) {
  std::vector<uint8_t> out(12 * runs.size());
  for (size_t k = 0; k < runs.size(); ++k) {
    std::memcpy(out.data() + 12 * k, &runs[k].first, 8);
    std::memcpy(out.data() + 12 * k + 8, &runs[k].second, 4);
  }
  return out;
}

TEST(Scatter, TakesAPieceByReferenceFromItsSourceRuns) {
  // A "file" of 100 rows: u32 row * 5 and 12 bytes of WideByte(row, k).
  std::vector<uint32_t> narrow(100);
  std::vector<uint8_t> wide(100 * kWide);
  for (uint32_t r = 0; r < 100; ++r) {
    narrow[r] = r * 5;
    for (int64_t k = 0; k < kWide; ++k) wide[r * kWide + k] = WideByte(r, k);
  }
  const uint8_t* columns[] = {reinterpret_cast<const uint8_t*>(narrow.data()), wide.data()};
  const std::vector<uint8_t> source = SourceRuns({{10, 3}, {50, 2}});  // rows 10 11 12 50 51
  const std::vector<uint32_t> rows = {10, 11, 12, 50, 51};
  const uint32_t positions[] = {4, 0, 3, 1, 2};
  const uint32_t runs[] = {3, 2, 0, 3};  // positions 3 4 0 1 2
  for (bool as_runs : {false, true}) {
    IcefloeScatterPiece piece{};
    if (as_runs) {
      piece.runs = runs;
      piece.num_runs = 2;
    } else {
      piece.positions = positions;
    }
    piece.rows = 5;
    piece.columns = columns;
    piece.source_runs = source.data();
    piece.num_source_runs = 2;
    piece.source_rows = 100;
    std::vector<uint32_t> out(5);
    std::vector<uint8_t> out_wide(5 * kWide);
    uint8_t* outs[] = {reinterpret_cast<uint8_t*>(out.data()), out_wide.data()};
    const int64_t widths[] = {4, kWide};
    ASSERT_EQ(icefloe_scatter(5, 2, widths, outs, 1, &piece), kIcefloeScatterOk);
    for (size_t i = 0; i < rows.size(); ++i) {
      const uint32_t at = as_runs ? (i < 2 ? 3 + i : i - 2) : positions[i];
      EXPECT_EQ(out[at], rows[i] * 5) << "row " << i << " runs=" << as_runs;
      for (int64_t k = 0; k < kWide; ++k) EXPECT_EQ(out_wide[at * kWide + k], WideByte(rows[i], k));
    }
    piece.source_rows = 51;  // row 51 is past the file
    EXPECT_EQ(icefloe_scatter(5, 2, widths, outs, 1, &piece), kIcefloeScatterOutsideSource);
    piece.source_rows = 100;
    piece.num_source_runs = 1;  // 3 rows named for a piece of 5
    EXPECT_EQ(icefloe_scatter(5, 2, widths, outs, 1, &piece), kIcefloeScatterMalformed);
  }
}

}  // namespace
