// Gathers are charged to the node's memory budget: a gather that does not
// fit fails with OutOfMemory for that stream alone; the memory returns when
// the gathered piece is gone.
#include "icefloe/node/piece_stream.h"

#include <arrow/array/builder_primitive.h>
#include <arrow/type.h>
#include <gtest/gtest.h>

#include "icefloe/common/memory.h"

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
  EXPECT_TRUE(Has(text, "icefloe_node_served_rows_total{ticket=\"rows\"} 5000")) << text;
  EXPECT_TRUE(
      Has(text, "icefloe_node_served_bytes_total{ticket=\"rows\"} " + std::to_string(body_bytes)))
      << text;
  EXPECT_TRUE(Has(text, "icefloe_node_gathered_rows_total 5000")) << text;
  EXPECT_TRUE(Has(text, "icefloe_node_gathers_total 1")) << text;
  EXPECT_TRUE(Has(text, "icefloe_node_doget_streams_total{ticket=\"rows\"} 1")) << text;
  EXPECT_TRUE(Has(text, "icefloe_node_doget_streams_active 0")) << text;
  EXPECT_TRUE(Has(text, "icefloe_node_doget_first_batch_seconds_count{ticket=\"rows\"} 1")) << text;
  EXPECT_TRUE(Has(text, "icefloe_node_served_rows_total{ticket=\"plan\"} 0")) << text;
}

}  // namespace
}  // namespace icefloe
