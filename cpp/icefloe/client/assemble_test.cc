#include "icefloe/client/assemble.h"
#include "icefloe/client/assemble_testing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using icefloe_testing::Batch;
using icefloe_testing::MakeBatch;
using icefloe_testing::released;
using icefloe_testing::Schema;

// Checks that `out` is the table's rows 0..rows-1 in order.
void ExpectTable(const ArrowArray& out, uint32_t rows) {
  ASSERT_EQ(out.length, rows);
  ASSERT_EQ(out.n_children, 3);
  const ArrowArray& id = *out.children[0];
  const ArrowArray& name = *out.children[1];
  const ArrowArray& toks = *out.children[2];
  const auto* ids = static_cast<const int32_t*>(id.buffers[1]);
  const auto* valid = static_cast<const uint8_t*>(name.buffers[0]);
  const auto* name_offsets = static_cast<const int32_t*>(name.buffers[1]);
  const auto* chars = static_cast<const char*>(name.buffers[2]);
  const auto* tok_offsets = static_cast<const int32_t*>(toks.buffers[1]);
  const auto* tok_values = static_cast<const int32_t*>(toks.children[0]->buffers[1]);
  int64_t nulls = 0;
  for (uint32_t r = 0; r < rows; ++r) {
    ASSERT_EQ(ids[r], static_cast<int32_t>(r * 3)) << r;
    const bool is_valid = (valid[r / 8] >> (r % 8)) & 1;
    ASSERT_EQ(is_valid, r % 5 != 0) << r;
    nulls += !is_valid;
    const std::string s(chars + name_offsets[r],
                        static_cast<size_t>(name_offsets[r + 1] - name_offsets[r]));
    if (is_valid) {
      ASSERT_EQ(s, "row " + std::to_string(r));
    }
    ASSERT_EQ(tok_offsets[r + 1] - tok_offsets[r], static_cast<int32_t>(r % 4)) << r;
    for (int32_t k = 0; k < tok_offsets[r + 1] - tok_offsets[r]; ++k) {
      ASSERT_EQ(tok_values[tok_offsets[r] + k], static_cast<int32_t>(r) + k);
    }
  }
  EXPECT_EQ(name.null_count, nulls);
  EXPECT_EQ(id.null_count, 0);
}

// The table's `rows` positions dealt at random to `num_pieces` pieces: each
// piece's rows in a random order (positions), or in position order (runs).
struct Split {
  std::vector<std::vector<uint32_t>> positions;
  std::vector<std::vector<uint32_t>> runs;
  std::vector<std::unique_ptr<Batch>> batches;
  std::vector<IcefloeAssemblePiece> pieces;
};

Split MakeSplit(uint32_t rows, int num_pieces, bool runs, uint32_t seed) {
  std::mt19937 rng(seed);
  Split split;
  split.positions.resize(static_cast<size_t>(num_pieces));
  split.runs.resize(static_cast<size_t>(num_pieces));
  for (uint32_t r = 0; r < rows; ++r) split.positions[rng() % num_pieces].push_back(r);
  for (int p = 0; p < num_pieces; ++p) {
    auto& pos = split.positions[static_cast<size_t>(p)];
    if (runs) {
      for (uint32_t r : pos) {
        auto& rr = split.runs[static_cast<size_t>(p)];
        if (!rr.empty() && rr[rr.size() - 2] + rr.back() == r) {
          ++rr.back();
        } else {
          rr.insert(rr.end(), {r, 1});
        }
      }
    } else {
      std::shuffle(pos.begin(), pos.end(), rng);
    }
    split.batches.push_back(MakeBatch(pos));
    IcefloeAssemblePiece piece{};
    piece.batch = &split.batches.back()->array;
    piece.rows = static_cast<int64_t>(pos.size());
    if (runs) {
      piece.runs = split.runs[static_cast<size_t>(p)].data();
      piece.num_runs = static_cast<int64_t>(split.runs[static_cast<size_t>(p)].size() / 2);
    } else {
      piece.positions = pos.data();
    }
    split.pieces.push_back(piece);
  }
  return split;
}

int32_t Assemble(int64_t rows, std::vector<IcefloeAssemblePiece>& pieces, ArrowArray* out,
                 int64_t* inverse = nullptr, std::string* error = nullptr) {
  static Schema schema;
  char text[256];
  const int32_t code = icefloe_assemble(rows, &schema.batch, static_cast<int32_t>(pieces.size()),
                                        pieces.data(), out, inverse, text, sizeof text);
  if (error != nullptr) *error = text;
  return code;
}

TEST(Assemble, BuildsEveryColumnFromPiecesOfPositionsOrRuns) {
  for (bool runs : {false, true}) {
    for (int num_pieces : {1, 2, 5}) {
      for (uint32_t rows : {0u, 1u, 37u, 4096u}) {
        Split split = MakeSplit(rows, num_pieces, runs, rows + num_pieces);
        released = 0;
        ArrowArray out{};
        ASSERT_EQ(Assemble(rows, split.pieces, &out), kIcefloeAssembleOk)
            << runs << " " << num_pieces << " " << rows;
        EXPECT_EQ(released, num_pieces);  // every input, once
        ExpectTable(out, rows);
        out.release(&out);
        EXPECT_EQ(out.release, nullptr);
      }
    }
  }
}

TEST(Assemble, BuildsALargeBatchOnTwoThreadsTheSame) {
  // 200,000 rows: over the 1 MiB from which half the columns go to a helper.
  for (bool runs : {false, true}) {
    Split split = MakeSplit(200000, 3, runs, 7);
    ArrowArray out{};
    ASSERT_EQ(Assemble(200000, split.pieces, &out), kIcefloeAssembleOk);
    ExpectTable(out, 200000);
    out.release(&out);
  }
}

TEST(Assemble, CountsPositionsFromEachPiecesBase) {
  // Rows 0..9 as one piece at base 0 and rows 10..19 as one at base 10,
  // both numbering their positions from 0.
  std::vector<uint32_t> first(10), second(10), local(10);
  std::iota(first.begin(), first.end(), 0u);
  std::iota(second.begin(), second.end(), 10u);
  std::iota(local.begin(), local.end(), 0u);
  auto a = MakeBatch(first), b = MakeBatch(second);
  std::vector<IcefloeAssemblePiece> pieces(2);
  pieces[0] = {&a->array, local.data(), nullptr, 0, 10, 0, nullptr, 0, nullptr};
  pieces[1] = {&b->array, local.data(), nullptr, 0, 10, 10, nullptr, 0, nullptr};
  ArrowArray out{};
  ASSERT_EQ(Assemble(20, pieces, &out), kIcefloeAssembleOk);
  ExpectTable(out, 20);
  out.release(&out);
}

TEST(Assemble, TakesAPieceByReferenceFromItsSourceRuns) {
  // The "file" holds rows 0..99 in reverse; the piece names its rows 90..99
  // then 0..89 of it, each to the position that is its table row.
  std::vector<uint32_t> reversed(100);
  for (uint32_t i = 0; i < 100; ++i) reversed[i] = 99 - i;
  auto file = MakeBatch(reversed);
  std::vector<uint8_t> source(24);
  const uint64_t firsts[2] = {90, 0};
  const uint32_t lengths[2] = {10, 90};
  for (int k = 0; k < 2; ++k) {
    std::memcpy(source.data() + 12 * k, &firsts[k], 8);
    std::memcpy(source.data() + 12 * k + 8, &lengths[k], 4);
  }
  std::vector<uint32_t> positions;
  for (uint32_t i = 90; i < 100; ++i) positions.push_back(99 - i);
  for (uint32_t i = 0; i < 90; ++i) positions.push_back(99 - i);
  std::vector<IcefloeAssemblePiece> pieces = {
      {&file->array, positions.data(), nullptr, 0, 100, 0, source.data(), 2, nullptr}};
  ArrowArray out{};
  std::vector<int64_t> inverse(100);
  ASSERT_EQ(Assemble(100, pieces, &out, inverse.data()), kIcefloeAssembleOk);
  ExpectTable(out, 100);
  // The inverse: the piece's row at each position.
  for (uint32_t pos = 0; pos < 100; ++pos) {
    EXPECT_EQ(positions[static_cast<size_t>(inverse[pos])], pos);
  }
  out.release(&out);
}

// Packed source runs (u64 first row, u32 length), as a node sends them.
std::vector<uint8_t> SourceBytes(const std::vector<std::pair<uint64_t, uint32_t>>& runs) {
  std::vector<uint8_t> bytes(12 * runs.size());
  for (size_t k = 0; k < runs.size(); ++k) {
    std::memcpy(bytes.data() + 12 * k, &runs[k].first, 8);
    std::memcpy(bytes.data() + 12 * k + 8, &runs[k].second, 4);
  }
  return bytes;
}

// A node's file of segments (one empty) holding the table's rows 0..99 in
// a scrambled order, as icefloe_file_new holds it.
struct SegmentedFile {
  std::vector<uint32_t> order;  // the file's rows: table row order[i] at file row i
  std::vector<std::unique_ptr<icefloe_testing::Batch>> segments;
  IcefloeFile* file = nullptr;

  explicit SegmentedFile(uint32_t seed) : order(100) {
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), std::mt19937(seed));
    std::vector<ArrowArray> arrays;
    uint32_t at = 0;
    for (uint32_t size : {7u, 30u, 0u, 1u, 41u, 21u}) {
      segments.push_back(
          MakeBatch(std::vector<uint32_t>(order.begin() + at, order.begin() + at + size)));
      arrays.push_back(segments.back()->array);
      at += size;
    }
    file = icefloe_file_new(static_cast<int32_t>(arrays.size()), arrays.data());
    for (const ArrowArray& a : arrays) EXPECT_EQ(a.release, nullptr);  // moved in
  }
  ~SegmentedFile() { icefloe_file_free(file); }
};

TEST(Assemble, TakesAPieceAcrossTheSegmentsOfAFileInOneCall) {
  // Two pieces name the file's rows in runs that cross segments (one
  // crosses four, past the empty one), a third carries its rows; positions
  // at random (the scatter) or in order (runs), with the inverse or not.
  for (bool runs : {false, true}) {
    for (bool with_inverse : {false, true}) {
      SegmentedFile f(runs + 2 * with_inverse);
      ASSERT_NE(f.file, nullptr);
      EXPECT_EQ(icefloe_file_rows(f.file), 100);
      const std::vector<std::vector<std::pair<uint64_t, uint32_t>>> named = {
          {{5, 40}, {90, 3}}, {{45, 2}, {60, 30}, {93, 7}, {47, 3}}};
      std::vector<std::vector<uint8_t>> sources;
      std::vector<std::vector<uint32_t>> positions;  // each piece's rows' table rows
      for (const auto& piece_runs : named) {
        sources.push_back(SourceBytes(piece_runs));
        positions.emplace_back();
        for (const auto& [first, length] : piece_runs) {
          for (uint32_t i = 0; i < length; ++i) positions.back().push_back(f.order[first + i]);
        }
      }
      std::vector<uint32_t> carried(f.order.begin(), f.order.begin() + 5);
      for (uint32_t r : {50u, 51u, 52u, 53u, 54u, 55u, 56u, 57u, 58u, 59u}) {
        carried.push_back(f.order[r]);
      }
      std::sort(carried.begin(), carried.end());  // the same in both layouts
      auto batch = MakeBatch(carried);
      positions.push_back(carried);
      std::vector<std::vector<uint32_t>> position_runs(positions.size());
      std::vector<IcefloeAssemblePiece> pieces;
      for (size_t p = 0; p < positions.size(); ++p) {
        IcefloeAssemblePiece piece{};
        piece.rows = static_cast<int64_t>(positions[p].size());
        if (p < 2) {
          piece.file = f.file;
          piece.source_runs = sources[p].data();
          piece.num_source_runs = static_cast<int64_t>(named[p].size());
        } else {
          piece.batch = &batch->array;
        }
        if (runs) {  // the same rows, each piece's sorted: one run per row at most
          std::sort(positions[p].begin(), positions[p].end());
          for (uint32_t r : positions[p]) position_runs[p].insert(position_runs[p].end(), {r, 1});
          piece.runs = position_runs[p].data();
          piece.num_runs = piece.rows;
        } else {
          piece.positions = positions[p].data();
        }
        pieces.push_back(piece);
      }
      if (runs) {  // sorted positions need their rows in that order: carried only
        pieces.erase(pieces.begin(), pieces.begin() + 2);
        std::vector<uint32_t> rest;
        for (uint32_t r = 0; r < 100; ++r) {
          if (std::find(carried.begin(), carried.end(), r) == carried.end()) rest.push_back(r);
        }
        // The rest as one piece of the file, its source runs one row each in
        // table order (crossing segments from run to run).
        std::vector<std::pair<uint64_t, uint32_t>> each;
        for (uint32_t r : rest) {
          each.push_back({static_cast<uint64_t>(std::find(f.order.begin(), f.order.end(), r) -
                                                f.order.begin()),
                          1});
        }
        sources.push_back(SourceBytes(each));
        position_runs.push_back({});
        for (uint32_t r : rest) position_runs.back().insert(position_runs.back().end(), {r, 1});
        IcefloeAssemblePiece piece{};
        piece.file = f.file;
        piece.rows = static_cast<int64_t>(rest.size());
        piece.source_runs = sources.back().data();
        piece.num_source_runs = piece.rows;
        piece.runs = position_runs.back().data();
        piece.num_runs = piece.rows;
        pieces.push_back(piece);
      }
      released = 0;
      ArrowArray out{};
      std::vector<int64_t> inverse(100, -1);
      ASSERT_EQ(Assemble(100, pieces, &out, with_inverse ? inverse.data() : nullptr),
                kIcefloeAssembleOk)
          << runs << with_inverse;
      EXPECT_EQ(released, 1);  // the carried piece's batch; the file's segments are the file's
      ExpectTable(out, 100);
      out.release(&out);
      if (with_inverse) {
        for (int64_t pos = 0; pos < 100; ++pos) EXPECT_GE(inverse[pos], 0) << pos;
      }
    }
  }
}

TEST(Assemble, RefusesAFilePieceOutsideItsFileOrWithABatchToo) {
  SegmentedFile f(9);
  const std::vector<uint8_t> outside = SourceBytes({{98, 3}});  // rows 98..100 of 100
  std::vector<uint32_t> positions = {0, 1, 2};
  IcefloeAssemblePiece piece{};
  piece.file = f.file;
  piece.positions = positions.data();
  piece.rows = 3;
  piece.source_runs = outside.data();
  piece.num_source_runs = 1;
  std::vector<IcefloeAssemblePiece> pieces = {piece};
  ArrowArray out{};
  EXPECT_EQ(Assemble(3, pieces, &out), kIcefloeAssembleOutsideSource);
  const std::vector<uint8_t> inside = SourceBytes({{97, 3}});
  pieces[0].source_runs = inside.data();
  auto batch = MakeBatch({1, 2, 3});
  pieces[0].batch = &batch->array;  // a file and a batch: which?
  released = 0;
  EXPECT_EQ(Assemble(3, pieces, &out), kIcefloeAssembleMalformed);
  EXPECT_EQ(released, 1);
  pieces[0].batch = nullptr;
  pieces[0].source_runs = nullptr;  // a file piece names its rows
  pieces[0].num_source_runs = 0;
  EXPECT_EQ(Assemble(3, pieces, &out), kIcefloeAssembleMalformed);
  pieces[0].source_runs = inside.data();
  pieces[0].num_source_runs = 1;
  ASSERT_EQ(Assemble(3, pieces, &out), kIcefloeAssembleOk);  // the file is still whole
  out.release(&out);
  EXPECT_EQ(icefloe_file_new(-1, nullptr), nullptr);
}

TEST(Assemble, HonoursTheOffsetsOfSlicedArrays) {
  // A batch whose struct starts at row 3 of columns that start at row 2 of
  // their buffers: the piece's rows are the table's rows 5..14.
  std::vector<uint32_t> all(20);
  std::iota(all.begin(), all.end(), 0u);
  auto b = MakeBatch(all);
  b->array.offset = 3;
  b->array.length = 10;
  for (ArrowArray* c : b->columns) {
    c->offset = 2;
    c->length -= 2;
  }
  std::vector<IcefloeAssemblePiece> pieces = {
      {&b->array, nullptr, nullptr, 1, 10, 0, nullptr, 0, nullptr}};
  std::vector<uint32_t> run = {0, 10};
  pieces[0].runs = run.data();
  ArrowArray out{};
  ASSERT_EQ(Assemble(10, pieces, &out), kIcefloeAssembleOk);
  const int32_t* ids = static_cast<const int32_t*>(out.children[0]->buffers[1]);
  const auto* valid = static_cast<const uint8_t*>(out.children[1]->buffers[0]);
  const int32_t* tok_offsets = static_cast<const int32_t*>(out.children[2]->buffers[1]);
  for (int r = 0; r < 10; ++r) {
    EXPECT_EQ(ids[r], (r + 5) * 3);
    EXPECT_EQ((valid[r / 8] >> (r % 8)) & 1, (r + 5) % 5 != 0);
    EXPECT_EQ(tok_offsets[r + 1] - tok_offsets[r], (r + 5) % 4);
  }
  out.release(&out);
  // The same rows reversed, by positions (one row a run: the fixed-width
  // columns go by the per-piece scatter).
  auto again = MakeBatch(all);
  again->array.offset = 3;
  again->array.length = 10;
  for (ArrowArray* c : again->columns) {
    c->offset = 2;
    c->length -= 2;
  }
  std::vector<uint32_t> reversed = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
  pieces = {{&again->array, reversed.data(), nullptr, 0, 10, 0, nullptr, 0, nullptr}};
  ASSERT_EQ(Assemble(10, pieces, &out), kIcefloeAssembleOk);
  ids = static_cast<const int32_t*>(out.children[0]->buffers[1]);
  tok_offsets = static_cast<const int32_t*>(out.children[2]->buffers[1]);
  for (int r = 0; r < 10; ++r) {
    EXPECT_EQ(ids[r], (9 - r + 5) * 3);
    EXPECT_EQ(tok_offsets[r + 1] - tok_offsets[r], (9 - r + 5) % 4);
  }
  out.release(&out);
}

TEST(Assemble, RefusesPiecesThatDoNotFillTheBatchOnceAndReleasesThemAll) {
  auto check = [](int64_t rows, std::vector<std::vector<uint32_t>> positions,
                  std::vector<int64_t> bases, int32_t expected) {
    std::vector<std::unique_ptr<Batch>> batches;
    std::vector<IcefloeAssemblePiece> pieces;
    for (size_t p = 0; p < positions.size(); ++p) {
      std::vector<uint32_t> rows_of(positions[p].size(), 1);
      batches.push_back(MakeBatch(rows_of));
      pieces.push_back({&batches.back()->array, positions[p].data(), nullptr, 0,
                        static_cast<int64_t>(positions[p].size()), bases[p], nullptr, 0, nullptr});
    }
    released = 0;
    ArrowArray out{};
    EXPECT_EQ(Assemble(rows, pieces, &out), expected);
    EXPECT_EQ(released, static_cast<int>(pieces.size()));
    EXPECT_EQ(out.release, nullptr);
  };
  check(4, {{0, 2}, {1, 2}}, {0, 0}, kIcefloeAssembleTwice);
  check(4, {{0, 2}, {1, 4}}, {0, 0}, kIcefloeAssembleOutside);
  check(4, {{0, 1}, {0, 1}}, {0, 3}, kIcefloeAssembleOutside);  // base 3 + 1
  check(5, {{0, 2}, {1, 3}}, {0, 0}, kIcefloeAssembleCount);
}

TEST(Assemble, RefusesSourceRunsOutsideThePiecesBatch) {
  std::vector<uint32_t> rows = {0, 1, 2, 3};
  auto file = MakeBatch(rows);
  std::vector<uint8_t> source(12);
  const uint64_t first = 2;
  const uint32_t length = 3;  // rows 2..4 of a batch of 4
  std::memcpy(source.data(), &first, 8);
  std::memcpy(source.data() + 8, &length, 4);
  std::vector<uint32_t> positions = {0, 1, 2};
  std::vector<IcefloeAssemblePiece> pieces = {
      {&file->array, positions.data(), nullptr, 0, 3, 0, source.data(), 1, nullptr}};
  ArrowArray out{};
  EXPECT_EQ(Assemble(3, pieces, &out), kIcefloeAssembleOutsideSource);
}

TEST(Assemble, RefusesOffsetsThatGoBackwardsNamingTheColumn) {
  std::vector<uint32_t> rows = {1, 2, 3, 4};
  auto b = MakeBatch(rows);
  std::swap(b->name.offsets[1], b->name.offsets[2]);
  std::vector<uint32_t> run = {0, 4};
  std::vector<IcefloeAssemblePiece> pieces = {
      {&b->array, nullptr, run.data(), 1, 4, 0, nullptr, 0, nullptr}};
  ArrowArray out{};
  std::string error;
  EXPECT_EQ(Assemble(4, pieces, &out, nullptr, &error), kIcefloeAssembleBadOffsets);
  EXPECT_NE(error.find("column 'name'"), std::string::npos) << error;
  // A list's offsets past its values.
  auto c = MakeBatch(rows);
  c->toks.offsets[4] = 1000;
  pieces[0].batch = &c->array;
  EXPECT_EQ(Assemble(4, pieces, &out, nullptr, &error), kIcefloeAssembleBadOffsets);
  EXPECT_NE(error.find("column 'toks'"), std::string::npos) << error;
}

TEST(Assemble, LeavesADictionaryColumnToTheCallerWithTheInverse) {
  Schema schema;
  ArrowSchema dictionary{"u", "", nullptr, 0, 0, nullptr, nullptr, nullptr, nullptr};
  schema.id.dictionary = &dictionary;  // say the ids were dictionary indices
  std::vector<uint32_t> rows = {0, 1, 2, 3};
  auto b = MakeBatch(rows);
  std::vector<uint32_t> positions = {3, 2, 1, 0};
  std::vector<IcefloeAssemblePiece> pieces = {
      {&b->array, positions.data(), nullptr, 0, 4, 0, nullptr, 0, nullptr}};
  ArrowArray out{};
  std::vector<int64_t> inverse(4, -1);
  char error[128];
  released = 0;
  EXPECT_EQ(icefloe_assemble(4, &schema.batch, 1, pieces.data(), &out, inverse.data(), error,
                             sizeof error),
            kIcefloeAssembleUnsupported);
  EXPECT_NE(std::string(error).find("column 'id'"), std::string::npos) << error;
  EXPECT_EQ(inverse, (std::vector<int64_t>{3, 2, 1, 0}));
  EXPECT_EQ(released, 1);
  EXPECT_EQ(out.release, nullptr);
}

}  // namespace
