// Gathers are charged to the node's memory budget: a gather that does not
// fit fails with OutOfMemory for that stream alone; the memory returns when
// the gathered piece is gone.
#include "icefloe/node/serve/piece_stream.h"
#include "icefloe/node/copy/shared_export.h"
#include "icefloe/node/serve/window_pieces.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arrow/array/builder_binary.h>
#include <arrow/array/builder_primitive.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/reader.h>
#include <arrow/ipc/writer.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <arrow/util/key_value_metadata.h>
#include <gtest/gtest.h>

#include "icefloe/common/memory.h"
#include "icefloe/common/wire_status.h"
#include "icefloe/node/tier/tier_file.h"

namespace icefloe {
namespace {

std::shared_ptr<const CachedDataset> Dataset(int64_t rows) {
  arrow::Int64Builder b;
  for (int64_t i = 0; i < rows; ++i) EXPECT_TRUE(b.Append(i).ok());
  auto schema = arrow::schema({arrow::field("id", arrow::int64())});
  return *CachedDataset::Make("d", 1, schema,
                              {{0, arrow::RecordBatch::Make(schema, rows, {*b.Finish()})}});
}

RowsTicket EveryOtherRow(uint64_t rows) {
  RowsTicket t;
  for (uint64_t r = 0; r < rows; r += 2) {
    t.positions.push_back(static_cast<uint32_t>(t.rows.size()));
    t.rows.push_back(r);
  }
  t.total = static_cast<uint32_t>(t.rows.size());
  return t;
}

// A node restarted with part of its copy says which rows it lacks, with the
// Flight kind readers fail over on, instead of serving the rows it has.
TEST(PieceStream, RowsNotAllHeldAreRefusedNamingThem) {
  auto held = *CachedDataset::Make(
      "d", 7, Dataset(100)->schema(),
      {{0, Dataset(100)->batches()[0].batch}, {200, Dataset(50)->batches()[0].batch}});
  EXPECT_TRUE(CheckHeld(*held, {0, 100}).ok());
  EXPECT_TRUE(CheckHeld(*held, {210, 250}).ok());
  const arrow::Status st = CheckHeld(*held, {50, 230});
  ASSERT_FALSE(st.ok());
  auto detail = arrow::flight::FlightStatusDetail::UnwrapStatus(st);
  ASSERT_NE(detail, nullptr);
  EXPECT_EQ(detail->extra_info(), kErrorRowsNotHeld);
  EXPECT_NE(st.message().find("rows [50, 230) of dataset 'd' generation 7 are not all held by "
                              "this node (it holds 80 of 180)"),
            std::string::npos)
      << st.message();
}

TEST(PieceStream, GathersAreChargedToTheBudget) {
  auto budget = std::make_shared<MemoryBudget>(1024);
  auto gathers = std::make_shared<TrackingPool>(budget, "gathers");
  auto stream = MakeRowsStream(Dataset(10000), EveryOtherRow(10000), gathers);
  ASSERT_TRUE(stream.ok());
  auto payload = (*stream)->Next();
  ASSERT_FALSE(payload.ok());
  EXPECT_TRUE(payload.status().IsOutOfMemory()) << payload.status().ToString();
  EXPECT_NE(payload.status().message().find("gathers"), std::string::npos);
  EXPECT_EQ(budget->used_bytes(), 0);

  auto roomy = std::make_shared<MemoryBudget>(1 << 20);
  auto pool = std::make_shared<TrackingPool>(roomy, "gathers");
  stream = MakeRowsStream(Dataset(10000), EveryOtherRow(10000), pool);
  ASSERT_TRUE(stream.ok());
  {
    auto piece = (*stream)->Next();
    ASSERT_TRUE(piece.ok()) << piece.status().ToString();
    EXPECT_GE(roomy->used_bytes(), 5000 * 8);  // the gathered ids, while the piece lives
  }
  stream->reset();
  EXPECT_EQ(roomy->used_bytes(), 0);
}

bool Has(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(PieceStream, MeterCountsRowsBytesAndGathers) {
  auto metrics = std::make_shared<NodeMetrics>();
  auto pool = std::make_shared<TrackingPool>(std::make_shared<MemoryBudget>(0), "gathers");
  auto stream = MakeRowsStream(Dataset(10000), EveryOtherRow(10000), pool,
                               std::make_unique<StreamMeter>(metrics, StreamKind::kRows));
  ASSERT_TRUE(stream.ok());
  EXPECT_TRUE(Has(metrics->registry().Scrape(), "icefloe_node_doget_streams_active 1"));
  int64_t body_bytes = 0;
  for (;;) {
    auto payload = (*stream)->Next();
    ASSERT_TRUE(payload.ok()) << payload.status().ToString();
    if (!payload->ipc_message.metadata) break;
    body_bytes += payload->ipc_message.body_length;
  }
  stream->reset();
  const std::string text = metrics->registry().Scrape();
  EXPECT_TRUE(
      Has(text, "icefloe_node_served_rows_total{ticket=\"rows\",transport=\"network\"} 5000"))
      << text;
  EXPECT_TRUE(Has(text, "icefloe_node_served_bytes_total{ticket=\"rows\",transport=\"network\"} " +
                            std::to_string(body_bytes)))
      << text;
  EXPECT_TRUE(Has(text, "icefloe_node_gathered_rows_total 5000")) << text;
  EXPECT_TRUE(Has(text, "icefloe_node_gathers_total 1")) << text;
  EXPECT_TRUE(Has(text, "icefloe_node_doget_streams_total{ticket=\"rows\"} 1")) << text;
  EXPECT_TRUE(Has(text, "icefloe_node_doget_streams_active 0")) << text;
  EXPECT_TRUE(Has(text, "icefloe_node_doget_first_batch_seconds_count{ticket=\"rows\"} 1")) << text;
  EXPECT_TRUE(Has(text, "icefloe_node_served_rows_total{ticket=\"plan\",transport=\"network\"} 0"))
      << text;
}

// Ids [0, rows) cached as batches of `cached_rows` rows, allocated from `pool`.
std::shared_ptr<const CachedDataset> Cached(
    int64_t rows, int64_t cached_rows, arrow::MemoryPool* pool = arrow::default_memory_pool()) {
  auto schema = arrow::schema({arrow::field("id", arrow::int64())});
  std::vector<CachedBatch> batches;
  for (int64_t start = 0; start < rows; start += cached_rows) {
    arrow::Int64Builder b(pool);
    for (int64_t i = start; i < std::min(rows, start + cached_rows); ++i) {
      EXPECT_TRUE(b.Append(i).ok());
    }
    const int64_t length = b.length();
    batches.push_back(
        {static_cast<uint64_t>(start), arrow::RecordBatch::Make(schema, length, {*b.Finish()})});
  }
  return *CachedDataset::Make("d", 1, schema, std::move(batches));
}

// The whole epoch of one consumer (mode none unless told), every row owned
// unless told.
PlanTicket Epoch(uint64_t rows, uint64_t batch_size, std::vector<RowRange> owned = {},
                 uint32_t world_size = 1, ShuffleMode mode = ShuffleMode::kNone) {
  PlanTicket t;
  t.params.order.num_rows = rows;
  t.params.order.mode = mode;
  ResolveDefaults(&t.params.order);
  t.params.world_size = world_size;
  t.params.batch_size = batch_size;
  t.params.drop_last = false;
  t.batch_end = Shape(t.params)->worker_batches;
  t.owned = owned.empty() ? std::vector<RowRange>{{0, rows}} : std::move(owned);
  return t;
}

// One message as the consumer sees it: its metadata and its ids.
// The piece a message's metadata names (every form a node sends).
PieceInfo Decoded(const std::string& metadata) {
  PieceInfo piece;
  const PieceError error = DecodePiece(metadata, &piece);
  EXPECT_EQ(error, PieceError::kOk) << PieceErrorText(error);
  return piece;
}

// The position of each of a piece's rows, from its runs or positions.
std::vector<uint32_t> Positions(const PieceInfo& piece) {
  std::vector<uint32_t> out = piece.positions;
  for (const PieceRun& run : piece.runs) {
    for (uint32_t k = 0; k < run.length; ++k) out.push_back(run.offset + k);
  }
  return out;
}

struct Message {
  std::string metadata;
  std::vector<int64_t> ids;
  size_t source_runs = 0;  // by reference: the runs of the export naming the rows
};

// Ids of a dataset's rows in local order (its shared export's rows).
std::vector<int64_t> LocalIds(const CachedDataset& dataset) {
  std::vector<int64_t> ids;
  for (const auto& b : dataset.batches()) {
    const auto& column = static_cast<const arrow::Int64Array&>(*b.batch->column(0));
    for (int64_t r = 0; r < column.length(); ++r) ids.push_back(column.Value(r));
  }
  return ids;
}

// `by_reference`: the stream for a reader of the dataset's shared export,
// each message's ids looked up from the runs it names.
std::vector<Message> ReadAll(std::shared_ptr<const CachedDataset> dataset, PlanTicket ticket,
                             bool by_reference = false) {
  auto pool = std::make_shared<TrackingPool>(std::make_shared<MemoryBudget>(0), "gathers");
  const std::vector<int64_t> local_ids = by_reference ? LocalIds(*dataset) : std::vector<int64_t>{};
  auto stream = MakePlanStream(dataset, std::move(ticket), pool, nullptr, {}, by_reference);
  EXPECT_TRUE(stream.ok()) << stream.status().ToString();
  auto schema = (*stream)->schema();
  std::vector<Message> out;
  for (int i = 0; i < 10000; ++i) {  // bounded: tests send far fewer
    auto payload = (*stream)->Next();
    EXPECT_TRUE(payload.ok()) << payload.status().ToString();
    if (!payload.ok() || !payload->ipc_message.metadata) break;
    auto sink = *arrow::io::BufferOutputStream::Create();
    int32_t length = 0;
    EXPECT_TRUE(arrow::ipc::WriteIpcPayload(payload->ipc_message,
                                            arrow::ipc::IpcWriteOptions::Defaults(), sink.get(),
                                            &length)
                    .ok());
    arrow::io::BufferReader reader(*sink->Finish());
    auto message = *arrow::ipc::ReadMessage(&reader);
    auto batch = *arrow::ipc::ReadRecordBatch(*message, schema, nullptr,
                                              arrow::ipc::IpcReadOptions::Defaults());
    Message m{payload->app_metadata->ToString(), {}};
    if (by_reference) {
      EXPECT_EQ(batch->num_columns(), 0);
      const PieceInfo piece = Decoded(m.metadata);
      EXPECT_TRUE(piece.by_reference);
      m.source_runs = piece.source.size();
      for (const auto& run : piece.source) {
        for (uint64_t k = run.start; k < run.start + run.length && k < local_ids.size(); ++k) {
          m.ids.push_back(local_ids[k]);
        }
      }
      EXPECT_EQ(static_cast<int64_t>(m.ids.size()), batch->num_rows());
    } else {
      const auto& ids = static_cast<const arrow::Int64Array&>(*batch->column(0));
      for (int64_t r = 0; r < ids.length(); ++r) m.ids.push_back(ids.Value(r));
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<int64_t> Ids(int64_t start, int64_t stop) {
  std::vector<int64_t> ids;
  for (int64_t i = start; i < stop; ++i) ids.push_back(i);
  return ids;
}

void ExpectChunk(const Message& m, uint64_t first_batch, uint32_t batch_size, uint32_t count,
                 uint32_t last_size, int64_t first_id) {
  const PieceInfo chunk = Decoded(m.metadata);
  ASSERT_TRUE(chunk.whole);
  EXPECT_EQ(chunk.batch, first_batch);
  EXPECT_EQ(chunk.batch_size, batch_size);
  EXPECT_EQ(chunk.count, count);
  EXPECT_EQ(chunk.last_size, last_size);
  const int64_t rows = int64_t{batch_size} * (count - 1) + last_size;
  EXPECT_EQ(m.ids, Ids(first_id, first_id + rows));
}

void ExpectPiece(const Message& m, uint64_t batch, uint32_t offset, int64_t first_id,
                 int64_t rows) {
  const PieceInfo piece = Decoded(m.metadata);
  ASSERT_FALSE(piece.whole);
  EXPECT_EQ(piece.batch, batch);
  ASSERT_EQ(piece.runs.size(), 1u);
  EXPECT_EQ(piece.runs[0].offset, offset);
  EXPECT_EQ(piece.runs[0].length, rows);
  EXPECT_EQ(m.ids, Ids(first_id, first_id + rows));
}

TEST(PieceStream, ConsecutiveBatchesOfOneCachedBatchTravelAsChunks) {
  // Cached batches [0, 4000), [4000, 8000), [8000, 10000); batches of 1500.
  auto messages = ReadAll(Cached(10000, 4000), Epoch(10000, 1500));
  ASSERT_EQ(messages.size(), 7u);
  ExpectChunk(messages[0], 0, 1500, 2, 1500, 0);  // [0, 3000)
  ExpectPiece(messages[1], 2, 0, 3000, 1000);     // batch 2 crosses a cached batch
  ExpectPiece(messages[2], 2, 1000, 4000, 500);
  ExpectChunk(messages[3], 3, 1500, 2, 1500, 4500);  // [4500, 7500)
  ExpectPiece(messages[4], 5, 0, 7500, 500);
  ExpectPiece(messages[5], 5, 500, 8000, 1000);
  ExpectPiece(messages[6], 6, 0, 9000, 1000);  // a lone last batch is a plain piece
}

TEST(PieceStream, ChunkEndsWithTheShortLastBatch) {
  auto messages = ReadAll(Cached(10000, 10000), Epoch(10000, 3000));
  ASSERT_EQ(messages.size(), 1u);
  ExpectChunk(messages[0], 0, 3000, 4, 1000, 0);
}

TEST(PieceStream, ChunksStayWithinTheirRowBound) {
  // 200 batches of 1000 rows: 65 fit in 64Ki rows.
  auto messages = ReadAll(Cached(200000, 200000), Epoch(200000, 1000));
  ASSERT_EQ(messages.size(), 4u);
  ExpectChunk(messages[0], 0, 1000, 65, 1000, 0);
  ExpectChunk(messages[1], 65, 1000, 65, 1000, 65000);
  ExpectChunk(messages[2], 130, 1000, 65, 1000, 130000);
  ExpectChunk(messages[3], 195, 1000, 5, 1000, 195000);
}

TEST(PieceStream, ChunksStayWithinTheirByteBound) {
  // 1 KiB a row: 20000 rows are 20 MiB; chunks of 100-row batches halve to 50.
  auto schema = arrow::schema({arrow::field("s", arrow::binary())});
  arrow::BinaryBuilder b;
  const std::string value(1024, 'x');
  for (int i = 0; i < 20000; ++i) ASSERT_TRUE(b.Append(value).ok());
  auto dataset = *CachedDataset::Make(
      "d", 1, schema, {{0, arrow::RecordBatch::Make(schema, 20000, {*b.Finish()})}});
  auto pool = std::make_shared<TrackingPool>(std::make_shared<MemoryBudget>(0), "gathers");
  auto stream = *MakePlanStream(dataset, Epoch(20000, 100), pool);
  uint64_t next = 0;
  for (int i = 0; i < 1000 && next < 200; ++i) {
    auto payload = stream->Next();
    ASSERT_TRUE(payload.ok()) << payload.status().ToString();
    ASSERT_TRUE(payload->ipc_message.metadata);
    const PieceInfo chunk = Decoded(payload->app_metadata->ToString());
    ASSERT_TRUE(chunk.whole);
    EXPECT_EQ(chunk.batch, next);
    EXPECT_GE(chunk.count, 2u);
    EXPECT_LE(payload->ipc_message.body_length, 8 << 20);
    EXPECT_GT(payload->ipc_message.body_length, 4 << 20);  // halved only as far as needed
    next += chunk.count;
  }
  EXPECT_EQ(next, 200u);
}

TEST(PieceStream, NoChunksAcrossOwnedRangesOrOtherRanksBatches) {
  // Owned [0, 2500): batches 0 and 1 whole, then 500 rows of batch 2.
  auto messages = ReadAll(Cached(10000, 10000), Epoch(10000, 1000, {{0, 2500}}));
  ASSERT_EQ(messages.size(), 2u);
  ExpectChunk(messages[0], 0, 1000, 2, 1000, 0);
  ExpectPiece(messages[1], 2, 0, 2000, 500);
  // Two ranks: rank 0's batches are every other step, never adjacent rows.
  messages = ReadAll(Cached(10000, 10000), Epoch(10000, 1000, {}, 2));
  ASSERT_EQ(messages.size(), 5u);
  for (uint64_t b = 0; b < 5; ++b) ExpectPiece(messages[b], b, 0, 2000 * b, 1000);
}

TEST(PieceStream, BlockModeChunksWithinABlock) {
  // Blocks of 4000 rows in a permuted order: each block's batches are one chunk.
  PlanTicket ticket = Epoch(16000, 1000, {}, 1, ShuffleMode::kBlock);
  ticket.params.order.block_rows = 4000;
  ticket.params.order.seed = 3;
  auto messages = ReadAll(Cached(16000, 16000), ticket);
  ASSERT_EQ(messages.size(), 4u);
  std::vector<int64_t> starts;
  for (uint64_t i = 0; i < 4; ++i) {
    ASSERT_FALSE(messages[i].ids.empty());
    starts.push_back(messages[i].ids[0]);
    ExpectChunk(messages[i], 4 * i, 1000, 4, 1000, messages[i].ids[0]);
    EXPECT_EQ(messages[i].ids[0] % 4000, 0);
  }
  std::sort(starts.begin(), starts.end());
  EXPECT_EQ(starts, (std::vector<int64_t>{0, 4000, 8000, 12000}));
}

// Every batch of a window-mode stream rebuilt from its messages (chunks split,
// pieces placed at their runs' positions, a span's positions counted over its
// batches laid end to end; -1 where another node serves the row), checked
// against the plan's rows: exactly the owned rows of each batch in their
// positions. Returns how many messages were chunks; `spans` (optional) gets
// the (first batch, count) of every span piece.
int ExpectWindowBatches(std::shared_ptr<const CachedDataset> dataset, const PlanTicket& ticket,
                        std::vector<std::pair<uint64_t, uint32_t>>* spans = nullptr) {
  std::map<uint64_t, std::vector<int64_t>> got;
  const EpochShape shape = *Shape(ticket.params);
  auto batch = [&](uint64_t b) -> std::vector<int64_t>& {
    auto [it, fresh] = got.try_emplace(b);
    if (fresh) it->second.assign(BatchLength(ticket.params, shape, b), -1);
    return it->second;
  };
  int chunks = 0;
  for (const Message& m : ReadAll(std::move(dataset), ticket)) {
    const PieceInfo piece = Decoded(m.metadata);
    if (piece.whole) {
      ++chunks;
      size_t next = 0;
      for (uint32_t i = 0; i < piece.count; ++i) {
        auto& rows = batch(piece.batch + i);
        EXPECT_EQ(rows.size(), i + 1 < piece.count ? piece.batch_size : piece.last_size);
        for (auto& r : rows) {
          EXPECT_EQ(r, -1);
          r = next < m.ids.size() ? m.ids[next++] : -2;
        }
      }
      EXPECT_EQ(next, m.ids.size());
      continue;
    }
    if (piece.count > 1 && spans != nullptr) spans->emplace_back(piece.batch, piece.count);
    for (uint32_t i = 0; i < piece.count; ++i) {
      const uint32_t want = i + 1 < piece.count ? piece.batch_size
                            : piece.count > 1   ? piece.last_size
                                                : piece.batch_size;
      EXPECT_EQ(BatchLength(ticket.params, shape, piece.batch + i), want);
    }
    size_t next = 0;
    for (const uint64_t p : Positions(piece)) {
      EXPECT_LT(p, piece.span_rows());
      if (p >= piece.span_rows()) return chunks;
      auto& rows = batch(piece.batch + p / piece.batch_size);
      const uint64_t offset = p % piece.batch_size;
      EXPECT_LT(offset, rows.size());
      if (offset >= rows.size()) return chunks;
      EXPECT_EQ(rows[offset], -1);
      rows[offset] = next < m.ids.size() ? m.ids[next++] : -2;
    }
    EXPECT_EQ(next, m.ids.size());
  }
  for (uint64_t b = ticket.batch_begin; b < ticket.batch_end; ++b) {
    std::vector<int64_t> want;
    for (uint64_t row : *BatchRows(ticket.params, b)) {
      bool owned = false;
      for (const RowRange& r : ticket.owned) owned = owned || (row >= r.start && row < r.stop);
      want.push_back(owned ? static_cast<int64_t>(row) : -1);
    }
    auto it = got.find(b);
    if (std::all_of(want.begin(), want.end(), [](int64_t r) { return r == -1; })) {
      EXPECT_TRUE(it == got.end()) << "batch " << b;
    } else if (it == got.end()) {
      ADD_FAILURE() << "batch " << b << " is missing";
    } else {
      EXPECT_EQ(it->second, want) << "batch " << b;
    }
  }
  EXPECT_TRUE(got.empty() || got.begin()->first >= ticket.batch_begin);
  return chunks;
}

PlanTicket WindowEpoch(uint64_t rows, uint64_t batch_size, std::vector<RowRange> owned = {},
                       uint32_t world_size = 1) {
  PlanTicket t = Epoch(rows, batch_size, std::move(owned), world_size, ShuffleMode::kWindow);
  t.params.order.seed = 5;
  t.params.order.epoch = 2;
  return t;
}

TEST(PieceStream, WindowBatchesHeldWholeTravelAsChunksInPlanOrder) {
  auto dataset = Cached(150000, 3000);
  for (uint64_t batch_size : {1000u, 4096u, 7u, 50000u}) {
    SCOPED_TRACE(batch_size);
    const int chunks = ExpectWindowBatches(dataset, WindowEpoch(150000, batch_size));
    EXPECT_EQ(chunks > 0, kWindowSpanRows / batch_size >= 2);
  }
  // Resuming at a batch inside a window, and the batches of one rank of three.
  PlanTicket resumed = WindowEpoch(150000, 1000);
  resumed.batch_begin = 3;
  EXPECT_GT(ExpectWindowBatches(dataset, resumed), 0);
  for (uint32_t rank = 0; rank < 3; ++rank) {
    PlanTicket t = WindowEpoch(150000, 1000, {}, 3);
    t.params.rank = rank;
    t.batch_end = Shape(t.params)->worker_batches;
    ExpectWindowBatches(dataset, t);
  }
}

TEST(PieceStream, NodesSharingWindowsCutTheSameSpans) {
  // Two nodes holding complementary ranges: each sends one span piece per
  // span, and the consumer merges the two with the same (first batch, count).
  auto dataset = Cached(150000, 3000);
  const std::vector<RowRange> a = {{0, 51000}, {90000, 123000}};
  const std::vector<RowRange> b = {{51000, 90000}, {123000, 150000}};
  for (uint64_t batch_size : {1000u, 4096u, 8192u}) {
    SCOPED_TRACE(batch_size);
    std::vector<std::pair<uint64_t, uint32_t>> spans_a, spans_b;
    EXPECT_EQ(ExpectWindowBatches(dataset, WindowEpoch(150000, batch_size, a), &spans_a), 0);
    EXPECT_EQ(ExpectWindowBatches(dataset, WindowEpoch(150000, batch_size, b), &spans_b), 0);
    EXPECT_FALSE(spans_a.empty());
    EXPECT_EQ(spans_a, spans_b);
    for (const auto& [first, count] : spans_a) {
      EXPECT_EQ(first % (kWindowSpanRows / batch_size), 0u);
      EXPECT_LE(count, kWindowSpanRows / batch_size);
    }
  }
}

TEST(PieceStream, WindowBatchesSplitAcrossNodesArePiecesInPlanOrder) {
  // This node holds two ranges: every window has rows held elsewhere.
  auto dataset = Cached(150000, 3000);
  const std::vector<RowRange> owned = {{0, 51000}, {90000, 123000}};
  for (uint64_t batch_size : {1000u, 4096u, 7u, 50000u}) {
    SCOPED_TRACE(batch_size);
    EXPECT_EQ(ExpectWindowBatches(dataset, WindowEpoch(150000, batch_size, owned)), 0);
  }
  PlanTicket resumed = WindowEpoch(150000, 16384, owned);
  resumed.batch_begin = 5;
  resumed.batch_end = 10;
  std::vector<std::pair<uint64_t, uint32_t>> spans;
  ExpectWindowBatches(dataset, resumed, &spans);
  // Spans of 4 batches from batch 0: a stream resumed at 5 ends its first at 8.
  EXPECT_EQ(spans, (std::vector<std::pair<uint64_t, uint32_t>>{{5, 3}, {8, 2}}));
  // A job resumed mid-window, read by worker 1 of 3: no batch starts a window.
  PlanTicket worker = WindowEpoch(150000, 1000, owned);
  worker.params.start = 1234;
  worker.params.num_workers = 3;
  worker.params.worker = 1;
  worker.batch_end = Shape(worker.params)->worker_batches;
  ExpectWindowBatches(dataset, worker);
}

// A copy holding rows [0, 5000) and [9100, 16000) in cached batches of 700.
std::shared_ptr<CachedDataset> Gappy() {
  auto low = Cached(5000, 700), high = Cached(16000, 700);
  std::vector<CachedBatch> batches = low->batches();
  for (const auto& b : high->batches()) {
    if (b.global_start >= 9100) batches.push_back(b);
  }
  return *CachedDataset::Make("d", 1, low->schema(), std::move(batches));
}

TEST(SharedExport, IsASealedCopyChargedToTheBudget) {
  auto budget = std::make_shared<MemoryBudget>(1 << 20);
  auto source = Gappy();
  {
    Shared shared = ExportShared(Gappy(), budget);
    ASSERT_TRUE(shared.status.ok()) << shared.status.ToString();
    const auto& exported = shared.dataset->shared();
    ASSERT_NE(exported, nullptr);
    EXPECT_GE(budget->used_bytes(), 11900 * 8);  // the file's bytes (plus nothing else)
    EXPECT_EQ(budget->used_bytes(), exported->size());
    EXPECT_EQ(LocalIds(*shared.dataset), LocalIds(*source));
    ASSERT_EQ(shared.dataset->batches().size(), source->batches().size());
    for (size_t i = 0; i < source->batches().size(); ++i) {
      EXPECT_EQ(shared.dataset->batches()[i].global_start, source->batches()[i].global_start);
    }
    EXPECT_EQ(shared.dataset->LocalRow(9100), 5000);
    EXPECT_EQ(shared.dataset->LocalRow(15999), 11899);
    EXPECT_EQ(shared.dataset->LocalRow(5000), -1);
    const auto held = shared.dataset->Locate(9150);
    ASSERT_TRUE(held.has_value());
    EXPECT_EQ(held->local, 5050u);
    EXPECT_EQ(held->batch_stop, 9800u);  // the end of the cached batch of 700 holding it
    EXPECT_FALSE(shared.dataset->Locate(16000).has_value());
    EXPECT_EQ(exported->held(), (std::vector<uint64_t>{0, 5000, 9100, 16000}));
    ASSERT_EQ(exported->segments().size(), 1u);
    const int fd = exported->segments()[0]->fd();
    const int seals = fcntl(fd, F_GET_SEALS);
    EXPECT_EQ(seals, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    // Nothing can change the rows: not a write through a new descriptor...
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    const int rw = open(path.c_str(), O_RDWR);
    ASSERT_GE(rw, 0);
    const char byte = 1;
    EXPECT_EQ(pwrite(rw, &byte, 1, 0), -1);
    EXPECT_EQ(ftruncate(rw, 0), -1);
    close(rw);
  }
  EXPECT_EQ(budget->used_bytes(), 0);  // released with the copy's last view

  // A budget without room for a second copy: the copy is served as it was.
  auto small = std::make_shared<MemoryBudget>(1000);
  Shared refused = ExportShared(source, small);
  EXPECT_TRUE(refused.status.IsOutOfMemory()) << refused.status.ToString();
  EXPECT_EQ(refused.dataset, source);
  EXPECT_EQ(small->used_bytes(), 0);
  // Room for the rows in one batch but not for the file beside them: the
  // copy given is served, privately.
  auto one_copy = std::make_shared<MemoryBudget>(12000 * 8 + 4096);
  Shared compact = ExportShared(source, one_copy);
  EXPECT_TRUE(compact.status.IsOutOfMemory()) << compact.status.ToString();
  EXPECT_EQ(compact.dataset, source);
  EXPECT_EQ(one_copy->used_bytes(), 0);
}

// Ids [0, n) in a copy's batches, in order.
bool IdsInOrder(const CachedDataset& copy, int64_t n) {
  int64_t next = 0;
  for (const auto& b : copy.batches()) {
    const auto& ids = static_cast<const arrow::Int64Array&>(*b.batch->column(0));
    for (int64_t i = 0; i < ids.length(); ++i) {
      if (ids.Value(i) != next++) return false;
    }
  }
  return next == n;
}

TEST(SharedExport, AHandedOverCopyIsLaidOutBesideItsRowsOneSegmentAtATime) {
  constexpr int64_t kRows = 200000;
  int64_t heap = 0;  // the copy's buffers (the builders round capacities up)
  {
    auto unlimited = std::make_shared<TrackingPool>(std::make_shared<MemoryBudget>(0), "probe");
    auto probe = Cached(kRows, 1000, unlimited.get());
    heap = unlimited->bytes_allocated();
  }
  // The copy's rows take all of the budget but 256 KiB (0.87 of it): each
  // segment's heap rows go before the next is written, so the copy is shared.
  auto budget = std::make_shared<MemoryBudget>(heap + (256 << 10));
  auto pool = std::make_shared<TrackingPool>(budget, "load");
  {
    auto copy = Cached(kRows, 1000, pool.get());
    ASSERT_EQ(budget->used_bytes(), heap);
    Shared shared = ExportShared(std::move(copy), budget);
    ASSERT_TRUE(shared.status.ok()) << shared.status.ToString();
    ASSERT_NE(shared.dataset->shared(), nullptr);
    EXPECT_GT(shared.dataset->shared()->segments().size(), 1u);
    EXPECT_TRUE(IdsInOrder(*shared.dataset, kRows));
    EXPECT_EQ(pool->bytes_allocated(), 0);  // every heap row went
  }
  EXPECT_EQ(budget->used_bytes(), 0);
  // Room for a few segments' files beside the rows, then none (each file is
  // a little larger than its rows): not shared, and the rows served are
  // exact, those laid out as views of their segments.
  auto tight = std::make_shared<MemoryBudget>(heap + 8000 * 3);
  auto tight_pool = std::make_shared<TrackingPool>(tight, "load");
  {
    Shared refused = ExportShared(Cached(kRows, 1000, tight_pool.get()), tight);
    EXPECT_TRUE(refused.status.IsOutOfMemory()) << refused.status.ToString();
    EXPECT_NE(refused.status.message().find("bytes for a segment of 1000 rows"), std::string::npos)
        << refused.status.ToString();
    ASSERT_NE(refused.dataset, nullptr);
    EXPECT_EQ(refused.dataset->shared(), nullptr);
    EXPECT_EQ(refused.dataset->num_rows(), kRows);
    EXPECT_TRUE(IdsInOrder(*refused.dataset, kRows));
    EXPECT_LT(tight_pool->bytes_allocated(), heap);  // some rows were laid out
  }
  EXPECT_EQ(tight->used_bytes(), 0);
}

// (batch, position in it, id) of each row of a stream's messages, sorted:
// what the stream puts where, whatever order and messages its rows come in.
std::vector<std::tuple<uint64_t, uint64_t, int64_t>> Placed(const std::vector<Message>& stream) {
  std::vector<std::tuple<uint64_t, uint64_t, int64_t>> out;
  for (const Message& m : stream) {
    uint64_t batch = 0, batch_size = 0;  // positions run over batches of batch_size
    std::vector<uint64_t> positions;
    const PieceInfo piece = Decoded(m.metadata);
    batch = piece.batch;
    if (piece.whole) {
      batch_size = piece.batch_size;
      for (uint64_t k = 0; k < m.ids.size(); ++k) positions.push_back(k);
    } else {
      batch_size = piece.count > 1 ? piece.batch_size : UINT32_MAX;
      for (const uint32_t p : Positions(piece)) positions.push_back(p);
    }
    EXPECT_EQ(positions.size(), m.ids.size());
    for (size_t k = 0; k < std::min(positions.size(), m.ids.size()); ++k) {
      out.emplace_back(batch + positions[k] / batch_size, positions[k] % batch_size, m.ids[k]);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A stream by reference names exactly the rows the stream by value carries,
// each to the same place (in their own order, where the node would have
// copied them in storage order; in fewer messages, where rows held back to
// back in several cached batches are one run of the export): every mode,
// chunks and pieces, a copy with gaps, rows owned in part.
TEST(SharedExport, StreamsByReferenceNameTheRowsStreamsByValueCarry) {
  auto source = Gappy();
  Shared shared = ExportShared(Gappy(), nullptr);
  ASSERT_TRUE(shared.status.ok()) << shared.status.ToString();
  std::shared_ptr<const CachedDataset> mapped = shared.dataset;
  const std::vector<RowRange> owned = {{0, 5000}, {9100, 16000}};
  std::vector<PlanTicket> tickets = {Epoch(16000, 1000, owned),
                                     Epoch(16000, 300, owned, 3),
                                     Epoch(16000, 1000, owned, 1, ShuffleMode::kBlock),
                                     Epoch(16000, 64, owned, 2, ShuffleMode::kSample),
                                     WindowEpoch(16000, 1000, owned),
                                     WindowEpoch(16000, 256, {{0, 5000}, {9100, 12000}}, 2)};
  for (const auto& ticket : tickets) {
    auto by_value = ReadAll(mapped, ticket);
    auto by_reference = ReadAll(mapped, ticket, /*by_reference=*/true);
    ASSERT_FALSE(by_value.empty());
    EXPECT_LE(by_reference.size(), by_value.size());
    EXPECT_EQ(Placed(by_value), Placed(by_reference));
  }
  // A rank of a larger world: its batches are not consecutive rows, one
  // message each by value (17); by reference, a chunk of runs either side
  // of the rows this node does not hold, and the batch across their edge.
  const PlanTicket rank = Epoch(16000, 300, owned, 3);
  EXPECT_EQ(ReadAll(mapped, rank).size(), 17u);
  EXPECT_EQ(ReadAll(mapped, rank, /*by_reference=*/true).size(), 3u);
  // Only a shared copy streams by reference.
  auto refused = MakePlanStream(source, Epoch(16000, 1000, owned), nullptr, nullptr, {}, true);
  EXPECT_FALSE(refused.ok());
}

// Every message of a stream (its pieces), decoded.
std::vector<PieceInfo> Pieces(arrow::flight::FlightDataStream* stream) {
  std::vector<PieceInfo> out;
  for (int i = 0; i < 10000; ++i) {  // bounded: tests send far fewer
    auto payload = stream->Next();
    EXPECT_TRUE(payload.ok()) << payload.status().ToString();
    if (!payload.ok() || !payload->ipc_message.metadata) break;
    out.push_back(Decoded(payload->app_metadata->ToString()));
  }
  return out;
}

// A copy of 2M rows whose shared file is two segments: [0, 1.5M), [1.5M, 2M)
// (each cut at a task's start once it holds kMinSegmentBytes).
Shared TwoSegments() {
  auto whole = Cached(2000000, 500000);
  return ExportShared(
      *CachedDataset::Make("d", 1, whole->schema(), std::vector<CachedBatch>(whole->batches())),
      nullptr, {}, {0, 500000, 1000000, 1500000});
}

// A range by reference: its rows in order, one whole piece per segment it
// crosses, each counting the range's rows before it.
TEST(SharedExport, RangesByReferenceNameTheirRowsSegmentBySegment) {
  Shared shared = TwoSegments();
  ASSERT_TRUE(shared.status.ok()) << shared.status.ToString();
  ASSERT_EQ(shared.dataset->shared()->segments().size(), 2u);
  auto pool = std::make_shared<TrackingPool>(std::make_shared<MemoryBudget>(0), "gathers");
  auto stream = MakeRangeStream(shared.dataset, {1400000, 1700001}, pool);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  const std::vector<PieceInfo> pieces = Pieces(stream->get());
  ASSERT_EQ(pieces.size(), 2u);
  uint64_t before = 0;
  for (const PieceInfo& p : pieces) {
    EXPECT_TRUE(p.whole && p.by_reference);
    EXPECT_EQ(p.batch, before);
    ASSERT_EQ(p.source.size(), 1u);
    EXPECT_EQ(p.source[0].start, 1400000 + before);  // the file's rows are the global ones
    EXPECT_EQ(p.source[0].length, p.batch_size);
    before += p.batch_size;
  }
  EXPECT_EQ(pieces[0].batch_size, 100000u);  // up to the second segment's start
  EXPECT_EQ(before, 300001u);
  // Rows the node does not hold, or a copy it does not share, are refused.
  EXPECT_FALSE(MakeRangeStream(shared.dataset, {1900000, 2000001}, pool).ok());
  EXPECT_FALSE(MakeRangeStream(Cached(100, 10), {0, 10}, pool).ok());
}

// To a reader that cuts pieces at segments itself, a window span's piece
// goes whole, in one message, naming the same rows.
TEST(SharedExport, AReaderThatCutsGetsOneMessageAPiece) {
  Shared shared = TwoSegments();
  ASSERT_TRUE(shared.status.ok()) << shared.status.ToString();
  auto pool = std::make_shared<TrackingPool>(std::make_shared<MemoryBudget>(0), "gathers");
  auto read = [&](bool reader_cuts) {
    auto stream = MakePlanStream(shared.dataset, WindowEpoch(2000000, 4096), pool, nullptr, {},
                                 /*by_reference=*/true, nullptr, reader_cuts);
    EXPECT_TRUE(stream.ok()) << stream.status().ToString();
    return Pieces(stream->get());
  };
  const auto cut = read(false), whole = read(true);
  auto rows = [](const std::vector<PieceInfo>& pieces) {
    std::vector<uint64_t> out;  // every source row, piece by piece
    for (const auto& p : pieces) {
      for (const auto& r : p.source) {
        for (uint64_t k = r.start; k < r.start + r.length; ++k) out.push_back(k);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(rows(cut), rows(whole));
  EXPECT_GT(cut.size(), whole.size());  // a span's rows lie in both segments
  const auto& starts = shared.dataset->shared()->starts();
  size_t crossing = 0;
  for (const auto& p : whole) {
    bool low = false, high = false;
    for (const auto& r : p.source) (r.start < uint64_t(starts[1]) ? low : high) = true;
    crossing += low && high;
  }
  EXPECT_GT(crossing, 0u);
}

// A window span by reference names the node's rows in storage order (the
// window's blocks: long runs) with each row's position, even where the node
// holds the whole span (by value, a chunk gathered into batch order, whose
// rows by reference would be one run each).
TEST(SharedExport, WindowSpansByReferenceNameTheirBlocksInStorageOrder) {
  auto whole = Cached(150000, 3000);
  Shared shared = ExportShared(
      *CachedDataset::Make("d", 1, whole->schema(), std::vector<CachedBatch>(whole->batches())),
      nullptr);
  ASSERT_TRUE(shared.status.ok()) << shared.status.ToString();
  // Batch 1000 of world 2: each batch is a part of a window, and a rank's
  // rows are half of each block (runs of ~2 rows), still in storage order.
  for (const PlanTicket& ticket : {WindowEpoch(150000, 4096), WindowEpoch(150000, 1000, {}, 2)}) {
    auto by_value = ReadAll(shared.dataset, ticket);
    auto by_reference = ReadAll(shared.dataset, ticket, /*by_reference=*/true);
    EXPECT_EQ(Placed(by_value), Placed(by_reference));
    size_t rows = 0, runs = 0;
    for (const Message& m : by_reference) {
      EXPECT_FALSE(Decoded(m.metadata).whole) << "a chunk by reference";
      size_t descents = 0;  // storage order: ascending, or in long ascending stretches
      for (size_t k = 1; k < m.ids.size(); ++k) descents += m.ids[k] < m.ids[k - 1] ? 1 : 0;
      EXPECT_LE(descents * 16, m.ids.size()) << "not in storage order";
      rows += m.ids.size();
      runs += m.source_runs;
    }
    EXPECT_GT(rows, 0u);
    if (ticket.params.world_size == 1) {
      EXPECT_GE(rows, 8 * runs) << "rows named one by one, not as their blocks";
    }
  }
}

// Kilobytes of the mapping holding `address` that this process maps in huge
// pages of shared memory (its ShmemPmdMapped line in /proc/self/smaps).
int64_t ShmemPmdMappedKb(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(address);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t start = 0, stop = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &start, &stop) == 2) {  // a mapping's first line
      inside = start <= at && at < stop;
    } else if (int64_t kb = 0;
               inside && std::sscanf(line.c_str(), "ShmemPmdMapped: %ld kB", &kb) == 1) {
      return kb;
    }
  }
  return -1;
}

// Readers gather rows from all over a shared file: where the kernel gives
// shared memory huge pages on request, the file asks for them, and every
// mapping of it (the node's, readers') maps them whole.
TEST(SharedExport, AsksForHugePagesWhereTheKernelGivesThemOnRequest) {
  auto policy = ShmemHugePages();
  if (!policy.ok() || *policy != "advise") {
    GTEST_SKIP() << "shmem_enabled: " << (policy.ok() ? *policy : policy.status().ToString())
                 << " (the test needs advise)";
  }
  auto whole = Cached(2 << 20, 1 << 20);  // 16 MiB of ids
  Shared shared = ExportShared(
      *CachedDataset::Make("d", 1, whole->schema(), std::vector<CachedBatch>(whole->batches())),
      nullptr);
  ASSERT_TRUE(shared.status.ok()) << shared.status.ToString();
  const auto& file = shared.dataset->shared()->segments()[0];
  int64_t sum = 0;
  for (int64_t at = 0; at < file->size(); at += 4096) sum += file->data()[at];
  EXPECT_GE(sum, 0);
  EXPECT_GE(ShmemPmdMappedKb(file->data()), 8 << 10) << "fewer than half the file in huge pages";
}

// A refresh's copy whose first batches are views of the copy before it
// (reused tasks) names that copy's segment again and writes only its new
// rows; its streams by reference name each piece's rows in one segment.
TEST(SharedExport, ARefreshReusesTheSegmentsItsBatchesView) {
  auto budget = std::make_shared<MemoryBudget>(1 << 20);
  auto low = Cached(5000, 700);
  Shared old = ExportShared(
      *CachedDataset::Make("d", 1, low->schema(), std::vector<CachedBatch>(low->batches())),
      budget);
  ASSERT_TRUE(old.status.ok()) << old.status.ToString();
  const int64_t old_bytes = budget->used_bytes();
  std::vector<CachedBatch> batches = old.dataset->batches();
  auto high = Cached(16000, 700);
  for (const auto& b : high->batches()) {
    if (b.global_start >= 9100) batches.push_back(b);
  }
  auto next = *CachedDataset::Make("d", 2, low->schema(), std::move(batches));
  Shared shared = ExportShared(next, budget, {old.dataset->shared()}, {0, 9100});
  ASSERT_TRUE(shared.status.ok()) << shared.status.ToString();
  const SharedExport& file = *shared.dataset->shared();
  ASSERT_EQ(file.segments().size(), 2u);
  EXPECT_EQ(file.segments()[0], old.dataset->shared()->segments()[0]);
  EXPECT_EQ(file.bytes_written(), file.segments()[1]->size());
  EXPECT_EQ(budget->used_bytes(), old_bytes + file.bytes_written());
  EXPECT_EQ(file.starts(), (std::vector<int64_t>{0, 5000, 11900}));
  EXPECT_EQ(file.held(), (std::vector<uint64_t>{0, 5000, 9100, 16000}));
  EXPECT_EQ(LocalIds(*shared.dataset), LocalIds(*Gappy()));

  std::shared_ptr<const CachedDataset> mapped = shared.dataset;
  const std::vector<RowRange> owned = {{0, 5000}, {9100, 16000}};
  for (const auto& ticket :
       {Epoch(16000, 1000, owned), Epoch(16000, 300, owned, 3),
        Epoch(16000, 1000, owned, 1, ShuffleMode::kBlock), WindowEpoch(16000, 1000, owned)}) {
    auto by_reference = ReadAll(mapped, ticket, /*by_reference=*/true);
    EXPECT_EQ(Placed(ReadAll(mapped, ticket)), Placed(by_reference));
    for (const Message& m : by_reference) {
      const PieceInfo piece = Decoded(m.metadata);
      ASSERT_FALSE(piece.source.empty());
      const size_t k = file.SegmentOf(static_cast<int64_t>(piece.source[0].start));
      for (const auto& run : piece.source) {
        EXPECT_GE(static_cast<int64_t>(run.start), file.starts()[k]);
        EXPECT_LE(static_cast<int64_t>(run.start + run.length), file.starts()[k + 1]);
      }
    }
  }
  // The old copy freed: its segment stays while the new copy names it.
  old.dataset.reset();
  next.reset();
  EXPECT_EQ(budget->used_bytes(), old_bytes + file.bytes_written());
  mapped.reset();
  shared.dataset.reset();
  EXPECT_EQ(budget->used_bytes(), 0);
}

// A copy partly on the tier is shared: its rows in memory in a memfd
// segment (charged to the budget), each batch on the tier a segment of its
// own naming the tier file (open read-only, charged nothing), and the
// shared file's description says where each segment's rows lie in its file.
TEST(SharedExport, BatchesOnTheTierAreSegmentsNamingTheirTierFile) {
  std::string dir = (std::filesystem::temp_directory_path() / "icefloe-share-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  auto all = Cached(2100, 700);  // ids 0..2099 in three batches
  const auto& b = all->batches();
  auto file = TierFile::Write(dir + "/t.arrow", all->schema(), {b[1].batch, b[2].batch}, nullptr);
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<CachedBatch> batches = {
      b[0], {700, (*file)->batches()[0]}, {1400, (*file)->batches()[1]->Slice(0, 700)}};
  auto copy = *CachedDataset::Make("d", 1, all->schema(), std::move(batches), nullptr, {}, {*file});
  ASSERT_GT(copy->disk_bytes(), 0);
  auto budget = std::make_shared<MemoryBudget>(int64_t{1} << 30);

  Shared refused = ExportShared(copy, budget);  // no locator: a batch on the tier is not shared
  EXPECT_TRUE(refused.status.IsInvalid()) << refused.status.ToString();
  EXPECT_EQ(refused.dataset, copy);

  Shared shared = ExportShared(copy, budget, {}, {}, LocateOnTier(*copy));
  ASSERT_TRUE(shared.status.ok()) << shared.status.ToString();
  const SharedExport& out = *shared.dataset->shared();
  ASSERT_EQ(out.segments().size(), 3u);
  EXPECT_FALSE(out.segments()[0]->on_tier());
  EXPECT_EQ(budget->used_bytes(), out.segments()[0]->size());  // the tier's pages are the kernel's
  EXPECT_EQ(out.size(), out.segments()[0]->size());
  struct stat st {};
  ASSERT_EQ(stat((dir + "/t.arrow").c_str(), &st), 0);
  for (int k = 1; k <= 2; ++k) {
    const SharedSegment& s = *out.segments()[k];
    EXPECT_TRUE(s.on_tier());
    EXPECT_EQ(s.fd(), (*file)->fd());
    EXPECT_EQ(s.inode(), static_cast<uint64_t>(st.st_ino));
    EXPECT_EQ(s.size(), st.st_size);
    EXPECT_EQ(s.batch(), k - 1);
    EXPECT_EQ(s.offset(), 0);
    EXPECT_EQ(s.num_rows(), 700);
  }
  // The copy published keeps its tier batches (served over TCP through the
  // read-ahead) and its rows.
  EXPECT_EQ(shared.dataset->disk_bytes(), copy->disk_bytes());
  EXPECT_EQ(shared.dataset->batches()[1].batch, copy->batches()[1].batch);
  EXPECT_TRUE(shared.dataset->table()->Equals(*all->table()));

  auto schema = SharedSchema(*shared.dataset, {});
  ASSERT_TRUE(schema.ok()) << schema.status();
  auto reply = SharedFileReply::Parse((*schema)->metadata()->value(0));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->batches, (std::vector<uint64_t>{0, 0, 700, 0, 0, 700, 1, 0, 700}));
  EXPECT_EQ(reply->segments.size(), 6u);

  file->reset();
  shared = {};
  refused = {};
  copy.reset();
  EXPECT_EQ(budget->used_bytes(), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace icefloe
