#include "icefloe/node/tier/readahead.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <arrow/array/builder_binary.h>
#include <arrow/array/builder_primitive.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include "icefloe/node/tier/tier_file.h"

namespace icefloe {
namespace {

namespace fs = std::filesystem;

// A copy of 24 MiB (12 tier batches of about 2 MiB) written to a tier file
// on this machine's disk, and ways to push its pages out of RAM.
class TierReadaheadTest : public ::testing::Test {
 protected:
  static constexpr int64_t kRows = 6 << 20;  // int64 id + int64 value: 16 bytes a row

  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "icefloe-readahead-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    auto schema =
        arrow::schema({arrow::field("id", arrow::int64()), arrow::field("v", arrow::int64())});
    arrow::Int64Builder ids, values;
    ASSERT_TRUE(ids.Reserve(kRows).ok());
    ASSERT_TRUE(values.Reserve(kRows).ok());
    for (int64_t i = 0; i < kRows; ++i) {
      ids.UnsafeAppend(i);
      values.UnsafeAppend(i * 7);
    }
    auto batch = arrow::RecordBatch::Make(schema, kRows, {*ids.Finish(), *values.Finish()});
    auto file = TierFile::Write(dir_ + "/0.arrow", schema, {batch}, nullptr);
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *file;
    std::vector<CachedBatch> cached;
    uint64_t at = 0;
    for (const auto& b : file_->batches()) {
      cached.push_back({at, b});
      at += static_cast<uint64_t>(b->num_rows());
    }
    auto ds = CachedDataset::Make("t", 1, schema, std::move(cached), nullptr, {}, {file_});
    ASSERT_TRUE(ds.ok()) << ds.status();
    dataset_ = *ds;
  }
  void TearDown() override {
    dataset_.reset();
    file_.reset();
    fs::remove_all(dir_);
  }

  // Pushes the file's pages out of RAM (written back first: dirty pages stay).
  // False where this kernel keeps them (then the test cannot tell).
  bool PageOut() {
    int fd = open(file_->path().c_str(), O_RDONLY);
    if (fd < 0) return false;
    fdatasync(fd);
    const auto begin = reinterpret_cast<uintptr_t>(file_->data()) / 4096 * 4096;
    const auto end = reinterpret_cast<uintptr_t>(file_->data()) + file_->size();
#ifdef MADV_PAGEOUT
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
#endif
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    return ResidentFraction() < 0.1;
  }
  double ResidentFraction() const {
    const auto begin = reinterpret_cast<uintptr_t>(file_->data()) / 4096 * 4096;
    const auto end = reinterpret_cast<uintptr_t>(file_->data()) + file_->size();
    std::vector<unsigned char> in((end - begin + 4095) / 4096);
    if (mincore(reinterpret_cast<void*>(begin), end - begin, in.data()) != 0) return 1;
    size_t n = 0;
    for (unsigned char c : in) n += c & 1;
    return static_cast<double>(n) / static_cast<double>(in.size());
  }
  // One consumer reading the whole copy, `batch_size` rows a batch.
  PlanTicket Ticket(ShuffleMode mode, uint64_t batch_size) const {
    PlanTicket ticket;
    ticket.params.order.num_rows = kRows;
    ticket.params.order.mode = mode;
    ResolveDefaults(&ticket.params.order);
    ticket.params.batch_size = batch_size;
    ticket.batch_end = (kRows + batch_size - 1) / batch_size;
    ticket.params.drop_last = false;
    ticket.owned = {{0, kRows}};
    return ticket;
  }

  std::string dir_;
  std::shared_ptr<TierFile> file_;
  std::shared_ptr<const CachedDataset> dataset_;
};

TEST_F(TierReadaheadTest, TheCopyKnowsWhichOfItsBatchesLieOnTheTier) {
  ASSERT_GE(dataset_->batches().size(), 12u);  // cut to about kTierBatchBytes each
  ASSERT_EQ(dataset_->on_disk().size(), dataset_->batches().size());
  int64_t total = 0;
  for (size_t i = 0; i < dataset_->batches().size(); ++i) {
    const MappedSpan& span = dataset_->on_disk()[i];
    EXPECT_LE(span.size, kTierBatchBytes + 4096) << i;
    EXPECT_TRUE(file_->Contains(span.data, span.data + span.size)) << i;
    EXPECT_EQ(span.data, dataset_->batches()[i].batch->column(0)->data()->buffers[1]->data()) << i;
    total += span.size;
  }
  EXPECT_EQ(dataset_->disk_bytes(), total);
  // A copy in memory has none.
  auto in_memory = CachedDataset::Make("m", 1, dataset_->schema(), {{0, file_->batches()[0]}});
  ASSERT_TRUE(in_memory.ok());
  EXPECT_TRUE((*in_memory)->on_disk().empty());
}

// A stream reading slowly finds its batches in RAM: the read-ahead read them
// from disk ahead of it. Without a working set, the same stream waits for
// the disk on most of its batches. Where they were is the kernel's answer
// (mincore), not the read-ahead's own.
TEST_F(TierReadaheadTest, ReadsAheadOfAStreamSoThatItFindsItsBatchesInRam) {
  for (const int64_t capacity : {int64_t{8} << 20, int64_t{0}}) {
    SCOPED_TRACE(capacity);
    if (!PageOut()) GTEST_SKIP() << "this kernel keeps the tier file's pages";
    TierReadahead readahead(capacity);
    const PlanTicket ticket = Ticket(ShuffleMode::kNone, 64 * 1024);
    auto tracked = readahead.Track(dataset_, ticket);
    ASSERT_TRUE(tracked.ok()) << tracked.status();
    ASSERT_NE(*tracked, nullptr);
    for (uint64_t b = ticket.batch_begin; b < ticket.batch_end; ++b) {
      // A consumer slower than the disk: the read-ahead has time to get ahead.
      for (int i = 0; i < 200 && capacity > 0 && readahead.Stats().lead_batches < 1; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      const ReadaheadStats before = readahead.Stats();
      EXPECT_LE(before.used_bytes, capacity);
      ASSERT_TRUE((*tracked)->Reading(b + 1).ok());
    }
    const ReadaheadStats stats = readahead.Stats();
    EXPECT_EQ(stats.streams, 1);
    const double read = static_cast<double>(stats.ram_bytes + stats.disk_bytes);
    EXPECT_NEAR(read, static_cast<double>(dataset_->disk_bytes()), 4096.0);
    if (capacity > 0) {
      EXPECT_GE(stats.ram_bytes, 0.9 * read);
      EXPECT_GE(stats.read_ahead_bytes, dataset_->disk_bytes() - 2 * kTierBatchBytes - 8192);
      EXPECT_LE(stats.disk_waits, 1);
    } else {
      EXPECT_GE(stats.disk_bytes, 0.8 * read);
      EXPECT_EQ(stats.read_ahead_bytes, 0);
      EXPECT_GE(stats.disk_waits, 10);
    }
    tracked->reset();
    EXPECT_EQ(readahead.Stats().streams, 0);
  }
}

// Two jobs reading the copy: the working set is shared, and each stream's
// next batch is in RAM by the time it reads it.
TEST_F(TierReadaheadTest, TwoStreamsShareOneWorkingSetWithinItsBound) {
  const int64_t capacity = int64_t{6} << 20;
  TierReadahead readahead(capacity);
  const PlanTicket a = Ticket(ShuffleMode::kNone, 32 * 1024);
  PlanTicket b = Ticket(ShuffleMode::kBlock, 32 * 1024);
  b.params.order.seed = 7;
  auto fa = readahead.Track(dataset_, a);
  auto fb = readahead.Track(dataset_, b);
  ASSERT_TRUE(fa.ok() && fb.ok());
  ASSERT_NE(*fa, nullptr);
  ASSERT_NE(*fb, nullptr);
  EXPECT_EQ(readahead.Stats().streams, 2);
  for (uint64_t k = 0; k < a.batch_end; ++k) {
    for (int i = 0; i < 20 && readahead.Stats().lead_batches < 1; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    EXPECT_LE(readahead.Stats().used_bytes, capacity);
    ASSERT_TRUE((*fa)->Reading(k + 1).ok());
    ASSERT_TRUE((*fb)->Reading(k + 1).ok());
  }
  // Each read the whole copy once: the bytes counted are the copy's, twice
  // (less rounding of each batch's share).
  const ReadaheadStats stats = readahead.Stats();
  EXPECT_GT(stats.read_ahead_bytes, 0);
  EXPECT_NEAR(static_cast<double>(stats.ram_bytes + stats.disk_bytes),
              2.0 * static_cast<double>(dataset_->disk_bytes()), 4096.0);
}

TEST_F(TierReadaheadTest, TracksOnlyRunsOfRowsOnTheTier) {
  TierReadahead readahead(int64_t{8} << 20);
  for (ShuffleMode mode : {ShuffleMode::kWindow, ShuffleMode::kSample}) {
    auto tracked = readahead.Track(dataset_, Ticket(mode, 1024));
    ASSERT_TRUE(tracked.ok());
    EXPECT_EQ(*tracked, nullptr) << ShuffleModeName(mode);
  }
  auto in_memory = CachedDataset::Make("m", 1, dataset_->schema(), {{0, file_->batches()[0]}});
  ASSERT_TRUE(in_memory.ok());
  auto tracked = readahead.Track(*in_memory, Ticket(ShuffleMode::kNone, 1024));
  ASSERT_TRUE(tracked.ok());
  EXPECT_EQ(*tracked, nullptr);
}

}  // namespace
}  // namespace icefloe
