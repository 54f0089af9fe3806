#include "icefloe/client/merge.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "icefloe/client/assemble.h"
#include "icefloe/client/assemble_testing.h"
#include "icefloe/protocol/piece.h"

namespace icefloe {
namespace {

struct Message {
  std::string header;
  int64_t rows = 0;
  int64_t file_rows = -1;             // by reference: the rows of the node's file; -1: rows carried
  const IcefloeFile* file = nullptr;  // by reference across the file's segments
};

// A piece of batches batch.. (count of them) with `rows` rows at positions 0..
Message Piece(uint64_t batch, uint32_t batch_size, int64_t rows, uint32_t count = 1,
              uint32_t last_size = 0) {
  PieceInfo p;
  p.batch = batch;
  p.batch_size = batch_size;
  p.count = count;
  p.last_size = last_size;
  if (rows > 0) p.runs.push_back({0, static_cast<uint32_t>(rows)});
  return {EncodePiece(p), rows};
}

Message Chunk(uint64_t batch, uint32_t batch_size, uint32_t count, uint32_t last_size,
              int64_t rows) {
  PieceInfo p;
  p.batch = batch;
  p.batch_size = batch_size;
  p.count = count;
  p.last_size = last_size;
  p.whole = true;
  return {EncodePiece(p), rows};
}

// A piece (or, `whole`, a chunk) by reference: `source` runs of a file of
// `file_rows` rows.
Message InFile(PieceInfo p, std::vector<SourceRun> source, int64_t file_rows) {
  p.by_reference = true;
  int64_t rows = 0;
  for (const SourceRun& r : source) rows += r.length;
  p.source = std::move(source);
  return {EncodePiece(p), rows, file_rows};
}

PieceInfo Shape(uint32_t batch_size, uint32_t count, uint32_t last_size, bool whole) {
  PieceInfo p;
  p.batch_size = batch_size;
  p.count = count;
  p.last_size = last_size;
  p.whole = whole;
  if (!whole) p.runs.push_back({0, static_cast<uint32_t>(p.span_rows())});
  return p;
}

// What a merge handed out: "B<batch>x<count>[streams]@bases", "C<batch>x<count>s<stream>@offsets"
// (with "f<start>+<rows>" for a slice of a file), then "done", or "error: ..." where it stopped.
std::vector<std::string> Merge(std::vector<std::vector<Message>> streams, uint64_t num_batches,
                               uint64_t first = 0, int32_t flags = 0) {
  std::unique_ptr<IcefloeMerger, void (*)(IcefloeMerger*)> m(
      icefloe_merger_new(static_cast<int32_t>(streams.size()), first, num_batches, flags),
      icefloe_merger_free);
  std::vector<size_t> next(streams.size(), 0);
  std::vector<std::string> out;
  IcefloeMergeStep step;
  int32_t kind = icefloe_merger_next(m.get(), &step);
  for (int guard = 0; guard < 1000; ++guard) {
    if (kind == ICEFLOE_MERGE_NEED) {  // the push (or end) says what comes next
      auto& queue = streams[static_cast<size_t>(step.stream)];
      size_t& k = next[static_cast<size_t>(step.stream)];
      if (k == queue.size()) {
        kind = icefloe_merger_end(m.get(), step.stream, &step);
        continue;
      }
      const Message& msg = queue[k++];
      if (msg.file != nullptr) {
        kind = icefloe_merger_push_file(
            m.get(), step.stream, reinterpret_cast<const uint8_t*>(msg.header.data()),
            static_cast<int64_t>(msg.header.size()), msg.rows, msg.file, &step);
        continue;
      }
      kind = icefloe_merger_push(m.get(), step.stream,
                                 reinterpret_cast<const uint8_t*>(msg.header.data()),
                                 static_cast<int64_t>(msg.header.size()), msg.rows,
                                 msg.file_rows < 0 ? ICEFLOE_ROWS_CARRIED : ICEFLOE_ROWS_IN_FILE,
                                 std::max<int64_t>(msg.file_rows, 0), &step);
      continue;
    }
    const std::string in_file =
        step.in_file ? "f" + std::to_string(step.start) + "+" + std::to_string(step.rows) : "";
    if (kind == ICEFLOE_MERGE_BATCH) {
      std::string s = "B" + std::to_string(step.batch) + "x" + std::to_string(step.count) + "[";
      for (int32_t i = 0; i < step.num_pieces; ++i) {
        s += (i ? "," : "") + std::to_string(step.streams[i]);
      }
      s += "]";
      if (step.bases != nullptr) {
        for (int32_t i = 0; i < step.num_pieces; ++i) {
          s += (i ? "," : "@") + std::to_string(step.bases[i]);
        }
      }
      out.push_back(s + in_file);
      kind = icefloe_merger_next(m.get(), &step);
    } else if (kind == ICEFLOE_MERGE_CHUNK) {
      std::string s = "C" + std::to_string(step.batch) + "x" + std::to_string(step.count) + "s" +
                      std::to_string(step.stream);
      for (uint32_t i = 0; step.offsets != nullptr && i < step.count; ++i) {
        s += (i ? "," : "@") + std::to_string(step.offsets[i]);
      }
      out.push_back(s + in_file);
      kind = icefloe_merger_next(m.get(), &step);
    } else if (kind == ICEFLOE_MERGE_DONE) {
      out.push_back("done");
      return out;
    } else {
      out.push_back(std::string("error: ") + icefloe_merger_error(m.get()));
      return out;
    }
  }
  ADD_FAILURE() << "the merge did not end";
  return out;
}

using Steps = std::vector<std::string>;

TEST(Merge, BatchesFromEveryStreamInOrder) {
  // Batches of 4 rows, the last of 2: node 0 sends 3 + 3 + 1, node 1 the rest.
  EXPECT_EQ(Merge({{Piece(0, 4, 3), Piece(1, 4, 3), Piece(2, 2, 1)},
                   {Piece(0, 4, 1), Piece(1, 4, 1), Piece(2, 2, 1)}},
                  3),
            (Steps{"B0x1[0,1]", "B1x1[0,1]", "B2x1[0,1]", "done"}));
  // A node with no rows of a batch sends nothing for it; two pieces of one
  // batch from one stream both count.
  EXPECT_EQ(Merge({{Piece(0, 4, 4), Piece(1, 4, 1), Piece(1, 4, 1)}, {Piece(1, 4, 2)}}, 2),
            (Steps{"B0x1[0]", "B1x1[0,0,1]", "done"}));
  // Resuming from batch 1; a stream that ends early.
  EXPECT_EQ(Merge({{Piece(1, 4, 4)}, {}}, 2, 1), (Steps{"B1x1[0]", "done"}));
}

TEST(Merge, SpansMergeWithPiecesOfSingleBatches) {
  // Three batches of 4, the last of 2 (10 positions): a span from node 0,
  // node 1's rows one piece per batch.
  EXPECT_EQ(Merge({{Piece(0, 4, 5, 3, 2)}, {Piece(0, 4, 2), Piece(1, 4, 2), Piece(2, 2, 1)}}, 3),
            (Steps{"B0x3[0,1,1,1]@0,0,4,8", "done"}));
  EXPECT_EQ(Merge({{Piece(0, 4, 2), Piece(1, 4, 2), Piece(2, 2, 1)}, {Piece(0, 4, 5, 3, 2)}}, 4),
            (Steps{"B0x3[0,0,0,1]@0,4,8,0",
                   "error: batch 3 is incomplete: 0 of 0 rows arrived; "
                   "the cluster changed under this epoch (was the "
                   "dataset reloaded?)"}));
}

TEST(Merge, ChunksOfWholeBatches) {
  // Node 1 sends batches 0..2 whole; node 0 batch 3.
  EXPECT_EQ(Merge({{Piece(3, 4, 4)}, {Chunk(0, 4, 3, 4, 12)}}, 4),
            (Steps{"C0x3s1", "B3x1[0]", "done"}));
}

TEST(Merge, ChunksByReferenceAreSlicesOfTheFileOrGathered) {
  const PieceInfo two = Shape(300, 2, 300, true);
  // One run: a slice of the file, the batches one after another.
  EXPECT_EQ(Merge({{InFile(two, {{10, 600}}, 1000)}}, 2), (Steps{"C0x2s0f10+600", "done"}));
  // A rank's batches in a span of the file, other ranks' rows between them.
  EXPECT_EQ(Merge({{InFile(two, {{700, 300}, {100, 300}}, 1000)}}, 2),
            (Steps{"C0x2s0@600,0f100+900", "done"}));
  // Short runs (the slice would be mostly rows nobody reads), overlapping
  // runs (each batch its own rows), or a copy asked for: gathered, one BATCH.
  EXPECT_EQ(Merge({{InFile(Shape(4, 2, 4, true), {{0, 4}, {10, 4}}, 20)}}, 2),
            (Steps{"B0x2[0]@0", "done"}));
  EXPECT_EQ(Merge({{InFile(two, {{0, 300}, {200, 300}}, 1000)}}, 2), (Steps{"B0x2[0]@0", "done"}));
  EXPECT_EQ(Merge({{InFile(two, {{10, 600}}, 1000)}}, 2, 0, ICEFLOE_MERGE_COPY),
            (Steps{"B0x2[0]@0", "done"}));
  EXPECT_EQ(Merge({{InFile(two, {{0, 200}, {500, 400}}, 1000)}}, 2),
            (Steps{"error: a node sent a chunk by reference whose batch 0 runs across two runs "
                   "of shared rows"}));
}

TEST(Merge, ABatchByReferenceInOrderIsASliceOfTheFile) {
  const PieceInfo one = Shape(4, 1, 0, false);
  EXPECT_EQ(Merge({{InFile(one, {{7, 4}}, 20)}}, 1), (Steps{"B0x1[0]f7+4", "done"}));
  EXPECT_EQ(Merge({{InFile(one, {{7, 2}, {1, 2}}, 20)}}, 1), (Steps{"B0x1[0]", "done"}));
  EXPECT_EQ(Merge({{InFile(one, {{7, 4}}, 20)}}, 1, 0, ICEFLOE_MERGE_COPY),
            (Steps{"B0x1[0]", "done"}));
}

TEST(Merge, APieceAcrossTheSegmentsOfItsFileIsAssembledNeverSliced) {
  // A file of two segments, rows 0..9 and 10..19.
  auto a = icefloe_testing::MakeBatch({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto b = icefloe_testing::MakeBatch({10, 11, 12, 13, 14, 15, 16, 17, 18, 19});
  ArrowArray segments[2] = {a->array, b->array};
  std::unique_ptr<IcefloeFile, void (*)(IcefloeFile*)> file(icefloe_file_new(2, segments),
                                                            icefloe_file_free);
  ASSERT_NE(file, nullptr);
  auto across = [&](PieceInfo p, std::vector<SourceRun> source) {
    Message m = InFile(std::move(p), std::move(source), 20);
    m.file = file.get();
    return m;
  };
  // One run in order across the two segments: assembled (no slice of one).
  EXPECT_EQ(Merge({{across(Shape(4, 1, 0, false), {{8, 4}})}}, 1), (Steps{"B0x1[0]", "done"}));
  // A span beside a piece of one segment.
  EXPECT_EQ(Merge({{across(Shape(4, 2, 4, false), {{18, 2}, {2, 6}})}}, 2),
            (Steps{"B0x2[0]@0", "done"}));
  // Rows outside the file, or a chunk (nodes cut chunks at segments).
  EXPECT_EQ(Merge({{across(Shape(4, 1, 0, false), {{18, 4}})}}, 1),
            (Steps{"error: a node named rows outside its shared file of 20 rows"}));
  EXPECT_EQ(Merge({{across(Shape(4, 2, 4, true), {{6, 8}})}}, 2),
            (Steps{"error: a node sent a chunk by reference whose rows lie in more than one "
                   "segment of its shared file"}));
}

std::string Error(std::vector<std::vector<Message>> streams, uint64_t num_batches) {
  const Steps steps = Merge(std::move(streams), num_batches);
  return steps.empty() ? "" : steps.back();
}

TEST(Merge, TheClusterChangingUnderTheEpochIsRefused) {
  EXPECT_EQ(Error({{Piece(0, 4, 3)}, {}}, 1),
            "error: batch 0 is incomplete: 3 of 4 rows arrived; the cluster changed under this "
            "epoch (was the dataset reloaded?)");
  EXPECT_EQ(Error({{Piece(0, 4, 5, 3, 2)}, {Piece(0, 4, 4, 3, 1)}}, 3),
            "error: nodes disagree on the shape of batches 0..2; the cluster changed under this "
            "epoch (was the dataset reloaded?)");
  EXPECT_EQ(Error({{Piece(0, 4, 5, 3, 2)}, {Piece(0, 4, 1, 4, 2)}}, 4),
            "error: a node sent rows of batches 0..3 across batch 0's span; the cluster changed "
            "under this epoch (was the dataset reloaded?)");
  EXPECT_EQ(Error({{Piece(0, 4, 5, 3, 2)}, {Chunk(1, 4, 1, 4, 4)}}, 3),
            "error: a node sent batches 1.. whole inside batch 0's span; the cluster changed "
            "under this epoch (was the dataset reloaded?)");
  EXPECT_EQ(Error({{Chunk(0, 4, 2, 4, 8)}, {Piece(1, 4, 1)}}, 2),
            "error: a node sent batches 0..1 whole while another sent rows of them (or the epoch "
            "has 2 batches); the cluster changed under this epoch (was the dataset reloaded?)");
  EXPECT_EQ(Error({{Chunk(0, 4, 2, 4, 8)}}, 1),
            "error: a node sent batches 0..1 whole while another sent rows of them (or the epoch "
            "has 1 batches); the cluster changed under this epoch (was the dataset reloaded?)");
  // Batch 1 already handed out, then a piece of it again.
  EXPECT_EQ(Error({{Piece(0, 4, 4)}, {Piece(1, 4, 4), Piece(0, 4, 1)}}, 2),
            "error: a node sent rows of batches 0..0 across batch 1's span; the cluster changed "
            "under this epoch (was the dataset reloaded?)");
}

TEST(Merge, MalformedMessagesAreRefused) {
  Message truncated = Piece(0, 4, 4);
  truncated.header.pop_back();
  EXPECT_EQ(Error({{truncated}}, 1),
            "error: a node sent malformed piece metadata: its length is not its header's");
  EXPECT_EQ(Error({{Chunk(0, 4, 2, 4, 7)}}, 2),
            "error: a node sent a chunk of 7 rows for 2 batches of 4 rows (the last 4)");
  const PieceInfo one = Shape(4, 1, 0, false);
  EXPECT_EQ(Error({{InFile(one, {{18, 4}}, 20)}}, 1),
            "error: a node named rows outside its shared file of 20 rows");
  Message too_few = InFile(one, {{0, 4}}, 20);
  too_few.rows = 5;
  EXPECT_EQ(Error({{too_few}}, 1), "error: a node named 4 shared rows for a piece of 5");
  EXPECT_EQ(Error({{Message{Piece(0, 4, 4).header, 4, 20}}}, 1),
            "error: a node sent a piece that carries its rows on a stream by reference");
  PieceInfo p;
  p.batch_size = 4;
  p.runs = {{0, 4}};
  p.by_reference = true;
  p.source = {{0, 4}};
  EXPECT_EQ(Error({{Message{EncodePiece(p), 4}}}, 1),
            "error: a node sent a piece by reference on a stream that carries its rows");
  p.batch = ~uint64_t{0};
  p.by_reference = false;
  p.source.clear();
  EXPECT_EQ(Error({{Message{EncodePiece(p), 4}}}, 1),
            "error: a node sent a piece past the last batch number");
}

TEST(Merge, TheCallerMustFollowTheSteps) {
  std::unique_ptr<IcefloeMerger, void (*)(IcefloeMerger*)> m(icefloe_merger_new(2, 0, 1, 0),
                                                             icefloe_merger_free);
  const Message msg = Piece(0, 4, 4);
  const auto* bytes = reinterpret_cast<const uint8_t*>(msg.header.data());
  const auto size = static_cast<int64_t>(msg.header.size());
  IcefloeMergeStep step;
  ASSERT_EQ(icefloe_merger_push(m.get(), 0, bytes, size, 4, 0, 0, &step), ICEFLOE_MERGE_NEED);
  EXPECT_EQ(step.stream, 1);
  // Stream 0 has a message not yet handed out: it was not asked for another.
  EXPECT_EQ(icefloe_merger_push(m.get(), 0, bytes, size, 4, 0, 0, &step), ICEFLOE_MERGE_ERROR);
  EXPECT_STREQ(icefloe_merger_error(m.get()), "stream 0 was not asked for a message");
  EXPECT_EQ(icefloe_merger_next(m.get(), &step), ICEFLOE_MERGE_ERROR);  // refused for good
  EXPECT_EQ(icefloe_merger_end(m.get(), 1, &step), ICEFLOE_MERGE_ERROR);
  EXPECT_EQ(icefloe_merger_new(-1, 0, 1, 0), nullptr);
  EXPECT_EQ(icefloe_merger_new(1, 0, 1, 2), nullptr);  // an unknown flag
}

TEST(Merge, RowsTheCallerHoldsCountWithThePiecesPushed) {
  // A take of 6 rows: 4 from a shared file the caller holds, 2 from a node.
  std::unique_ptr<IcefloeMerger, void (*)(IcefloeMerger*)> m(icefloe_merger_new(2, 0, 1, 0),
                                                             icefloe_merger_free);
  const Message msg = Piece(0, 6, 2);
  IcefloeMergeStep step;
  ASSERT_EQ(icefloe_merger_next(m.get(), &step), ICEFLOE_MERGE_NEED);
  const uint32_t mine[] = {0, 2, 4, 5};
  ASSERT_EQ(icefloe_merger_push_rows(m.get(), step.stream, 0, 6, 4, mine, &step),
            ICEFLOE_MERGE_NEED);
  ASSERT_EQ(
      icefloe_merger_push(m.get(), step.stream, reinterpret_cast<const uint8_t*>(msg.header.data()),
                          static_cast<int64_t>(msg.header.size()), 2, 0, 0, &step),
      ICEFLOE_MERGE_NEED);
  ASSERT_EQ(step.stream, 0);
  ASSERT_EQ(icefloe_merger_end(m.get(), 0, &step), ICEFLOE_MERGE_NEED);
  ASSERT_EQ(step.stream, 1);
  ASSERT_EQ(icefloe_merger_end(m.get(), 1, &step), ICEFLOE_MERGE_BATCH);
  EXPECT_EQ(step.num_pieces, 2);
  EXPECT_EQ(step.batch_size, 6u);
  EXPECT_EQ(step.in_order, 0);
  EXPECT_EQ(icefloe_merger_next(m.get(), &step), ICEFLOE_MERGE_DONE);
}

TEST(Merge, AssemblesTheSpanItHandsOut) {
  // A span of two batches of 3 rows (the last 2): node 0 a span piece of
  // positions 4, 0, 3 (rows 4, 0, 3 of the table), node 1 a piece of batch 0
  // (rows 2 and 1 at positions 2, 1).
  PieceInfo span;
  span.batch_size = 3;
  span.count = 2;
  span.last_size = 2;
  span.positions = {4, 0, 3};
  PieceInfo one;
  one.batch_size = 3;
  one.positions = {2, 1};
  const std::string headers[] = {EncodePiece(span), EncodePiece(one)};
  std::unique_ptr<IcefloeMerger, void (*)(IcefloeMerger*)> m(icefloe_merger_new(2, 0, 2, 0),
                                                             icefloe_merger_free);
  IcefloeMergeStep step;
  int32_t kind = icefloe_merger_next(m.get(), &step);
  for (const std::string& h : headers) {
    ASSERT_EQ(kind, ICEFLOE_MERGE_NEED);
    kind = icefloe_merger_push(m.get(), step.stream, reinterpret_cast<const uint8_t*>(h.data()),
                               static_cast<int64_t>(h.size()), &h == headers ? 3 : 2,
                               ICEFLOE_ROWS_CARRIED, 0, &step);
  }
  for (int32_t stream : {0, 1}) {
    ASSERT_EQ(kind, ICEFLOE_MERGE_NEED);
    kind = icefloe_merger_end(m.get(), stream, &step);
  }
  ASSERT_EQ(kind, ICEFLOE_MERGE_BATCH);
  ASSERT_EQ(step.count, 2u);
  EXPECT_EQ(step.in_order, 0);
  auto first = icefloe_testing::MakeBatch({4, 0, 3});
  auto second = icefloe_testing::MakeBatch({2, 1});
  ArrowArray batches[] = {first->array, second->array};
  icefloe_testing::Schema schema;
  ArrowArray out{};
  char error[128] = "";
  ASSERT_EQ(
      icefloe_merger_assemble(m.get(), &schema.batch, batches, &out, nullptr, error, sizeof error),
      kIcefloeAssembleOk)
      << error;
  ASSERT_EQ(out.length, 5);
  const auto* ids = static_cast<const int32_t*>(out.children[0]->buffers[1]);
  for (int32_t r = 0; r < 5; ++r) EXPECT_EQ(ids[r], r * 3);
  out.release(&out);
  // Once the next step is asked for, there is no batch to assemble.
  EXPECT_EQ(icefloe_merger_next(m.get(), &step), ICEFLOE_MERGE_DONE);
  EXPECT_EQ(icefloe_merger_assemble(m.get(), &schema.batch, batches, &out, nullptr, nullptr, 0),
            kIcefloeAssembleMalformed);
}

TEST(Merge, GathersAChunkFromTheNodesFile) {
  // Two batches of 4 by reference, rows 0..3 and 10..13 of a 20-row file.
  const Message msg = InFile(Shape(4, 2, 4, true), {{0, 4}, {10, 4}}, 20);
  std::unique_ptr<IcefloeMerger, void (*)(IcefloeMerger*)> m(icefloe_merger_new(1, 0, 2, 0),
                                                             icefloe_merger_free);
  IcefloeMergeStep step;
  ASSERT_EQ(icefloe_merger_next(m.get(), &step), ICEFLOE_MERGE_NEED);
  ASSERT_EQ(icefloe_merger_push(m.get(), 0, reinterpret_cast<const uint8_t*>(msg.header.data()),
                                static_cast<int64_t>(msg.header.size()), 8, ICEFLOE_ROWS_IN_FILE,
                                20, &step),
            ICEFLOE_MERGE_NEED);
  ASSERT_EQ(icefloe_merger_end(m.get(), 0, &step), ICEFLOE_MERGE_BATCH);
  ASSERT_EQ(step.count, 2u);
  EXPECT_EQ(step.in_order, 0);
  EXPECT_EQ(step.in_file, 0);
  std::vector<int64_t> rows(8);
  ASSERT_EQ(icefloe_merger_piece_rows(m.get(), 0, rows.data()), 0);
  EXPECT_EQ(rows, (std::vector<int64_t>{0, 1, 2, 3, 10, 11, 12, 13}));
  EXPECT_EQ(icefloe_merger_piece_rows(m.get(), 1, rows.data()), -1);
  std::vector<uint32_t> all(20);
  std::iota(all.begin(), all.end(), 0u);
  auto file = icefloe_testing::MakeBatch(all);
  icefloe_testing::Schema schema;
  ArrowArray out{};
  char error[128] = "";
  ASSERT_EQ(icefloe_merger_assemble(m.get(), &schema.batch, &file->array, &out, nullptr, error,
                                    sizeof error),
            kIcefloeAssembleOk)
      << error;
  ASSERT_EQ(out.length, 8);
  const auto* ids = static_cast<const int32_t*>(out.children[0]->buffers[1]);
  for (size_t r = 0; r < 8; ++r) EXPECT_EQ(ids[r], rows[r] * 3);
  out.release(&out);
  EXPECT_EQ(icefloe_merger_next(m.get(), &step), ICEFLOE_MERGE_DONE);
}

TEST(Merge, SaysWhenOnePieceIsTheBatchInOrder) {
  PieceInfo p;
  p.batch_size = 3;
  p.positions = {0, 1, 2};
  Message in_order{EncodePiece(p), 3};
  p.positions = {0, 2, 1};
  Message shuffled{EncodePiece(p), 3};
  p.positions = {0, 1};
  Message short_of_rows{EncodePiece(p), 3};
  for (const auto& [msg, want] : {std::pair{in_order, 1}, std::pair{shuffled, 0}}) {
    std::unique_ptr<IcefloeMerger, void (*)(IcefloeMerger*)> m(icefloe_merger_new(1, 0, 1, 0),
                                                               icefloe_merger_free);
    IcefloeMergeStep step;
    icefloe_merger_next(m.get(), &step);
    icefloe_merger_push(m.get(), 0, reinterpret_cast<const uint8_t*>(msg.header.data()),
                        static_cast<int64_t>(msg.header.size()), 3, ICEFLOE_ROWS_CARRIED, 0, &step);
    ASSERT_EQ(icefloe_merger_end(m.get(), 0, &step), ICEFLOE_MERGE_BATCH);
    EXPECT_EQ(step.in_order, want);
  }
  EXPECT_EQ(Error({{short_of_rows}}, 1),
            "error: a node sent a piece whose positions do not match its rows");
}

}  // namespace
}  // namespace icefloe
