#include "icefloe/node/copy/dataset.h"

#include "icefloe/node/copy/gather.h"
#include "icefloe/node/copy/id_batches_test_util.h"

#include <arrow/array/builder_primitive.h>
#include <arrow/type.h>
#include <gtest/gtest.h>

namespace icefloe {
namespace {

using copy_test_util::Batch;
using copy_test_util::Ids;
using copy_test_util::TestSchema;

}  // namespace

TEST(CachedDataset, SlicesAcrossBatchesAndGaps) {
  // Rows [0,10) and [20,25) are held here; [10,20) lives on another node.
  auto ds = *CachedDataset::Make("d", 1, TestSchema(), {Batch(0, 4), Batch(4, 6), Batch(20, 5)});
  EXPECT_EQ(ds->num_rows(), 15);
  std::vector<int64_t> want = {3, 4, 5, 6, 7, 8, 9, 20, 21};
  EXPECT_EQ(Ids(ds->Slice({3, 22})), want);
  EXPECT_EQ(ds->CountRows({3, 22}), want.size());
  EXPECT_TRUE(ds->Slice({10, 20}).empty());
  EXPECT_TRUE(ds->Slice({30, 40}).empty());
  EXPECT_EQ(Ids(ds->Slice({0, 100})).size(), 15u);
}

TEST(CachedDataset, SliceIsZeroCopy) {
  auto ds = *CachedDataset::Make("d", 1, TestSchema(), {Batch(0, 100)});
  auto out = ds->Slice({10, 20});
  ASSERT_EQ(out.size(), 1u);
  auto cached = ds->batches()[0].batch->column_data(0)->buffers[1]->data();
  EXPECT_EQ(out[0]->column_data(0)->buffers[1]->data(), cached);
}

TEST(CachedDataset, CountsSharedBuffersOnce) {
  auto whole = Batch(0, 100);
  auto ds = *CachedDataset::Make(
      "d", 1, TestSchema(), {{0, whole.batch->Slice(0, 50)}, {50, whole.batch->Slice(50, 50)}});
  EXPECT_EQ(ds->nbytes(), whole.batch->column_data(0)->buffers[1]->size());
}

TEST(CachedDataset, RejectsOverlapAndSchemaMismatch) {
  EXPECT_TRUE(
      CachedDataset::Make("d", 1, TestSchema(), {Batch(0, 10), Batch(5, 10)}).status().IsInvalid());
  auto other = arrow::schema({arrow::field("x", arrow::int32())});
  EXPECT_TRUE(CachedDataset::Make("d", 1, other, {Batch(0, 10)}).status().IsInvalid());
}

// Heal (issue 14): a healed range joins the copy a node holds, same name and
// generation; both parts' memory pools stay alive and count.
TEST(CachedDataset, ExtendAddsAHealedRangeAndRefusesOverlap) {
  auto base = *CachedDataset::Make("d", 3, TestSchema(), {Batch(0, 10), Batch(30, 10)});
  auto healed = CachedDataset::Extend(*base, {Batch(10, 20)}, nullptr);
  ASSERT_TRUE(healed.ok()) << healed.status().ToString();
  EXPECT_EQ((*healed)->name(), "d");
  EXPECT_EQ((*healed)->generation(), 3u);
  EXPECT_EQ((*healed)->num_rows(), 40);
  std::vector<int64_t> want(40);
  for (int64_t i = 0; i < 40; ++i) want[static_cast<size_t>(i)] = i;
  EXPECT_EQ(Ids((*healed)->Slice({0, 40})), want);
  auto gathered = Gather(**healed, {35, 15, 0}, arrow::default_memory_pool());
  ASSERT_TRUE(gathered.ok()) << gathered.status().ToString();
  EXPECT_EQ(Ids({*gathered}), (std::vector<int64_t>{35, 15, 0}));
  EXPECT_EQ(base->num_rows(), 20);  // the old snapshot is unchanged (streams keep it)
  auto overlap = CachedDataset::Extend(*base, {Batch(5, 10)}, nullptr);
  ASSERT_TRUE(overlap.status().IsInvalid());
}

}  // namespace icefloe
