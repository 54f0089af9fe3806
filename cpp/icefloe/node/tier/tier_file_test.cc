#include "icefloe/node/tier/tier_file.h"

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <arrow/array/builder_binary.h>
#include <arrow/array/builder_primitive.h>
#include <arrow/memory_pool.h>
#include <arrow/util/byte_size.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

namespace icefloe {
namespace {

namespace fs = std::filesystem;

class TierFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "icefloe-tier-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    schema_ = arrow::schema({arrow::field("id", arrow::int64()), arrow::field("s", arrow::utf8())});
    for (int b = 0; b < 3; ++b) {
      arrow::Int64Builder ids;
      arrow::StringBuilder s;
      for (int64_t i = 0; i < 10000; ++i) {
        ASSERT_TRUE(ids.Append(b * 10000 + i).ok());
        ASSERT_TRUE((i % 7 == 0 ? s.AppendNull() : s.Append("row" + std::to_string(i))).ok());
      }
      batches_.push_back(arrow::RecordBatch::Make(schema_, 10000, {*ids.Finish(), *s.Finish()}));
    }
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (fs::path(dir_) / name).string(); }
  // Every file left in the directory.
  std::vector<std::string> Files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename());
    return out;
  }

  // This process's resident bytes of the mapping that holds `p` (its Rss in
  // /proc/self/smaps): page-cache pages it has mapped in, counted in its RSS.
  static int64_t ResidentBytes(const void* p) {
    std::ifstream smaps("/proc/self/smaps");
    const auto at = reinterpret_cast<uintptr_t>(p);
    bool in = false;
    for (std::string line; std::getline(smaps, line);) {
      uintptr_t begin = 0, end = 0;
      if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2 && line.find(' ') != 0 &&
          line.find('-') < line.find(' ')) {
        in = begin <= at && at < end;
      } else if (in && line.rfind("Rss:", 0) == 0) {
        return std::stoll(line.substr(4)) * 1024;
      }
    }
    return -1;
  }

  std::string dir_;
  std::shared_ptr<arrow::Schema> schema_;
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches_;
};

// A batch larger than kTierBatchBytes is written as slices of about that
// size (the read-ahead's unit), rows and values unchanged, strings included.
TEST_F(TierFileTest, CutsALargeBatchIntoBatchesOfAboutTheTierBatchBytes) {
  arrow::Int64Builder ids;
  arrow::StringBuilder s;
  const int64_t rows = 200000;  // about 7 MB: 8-byte ids, ~26-byte strings and offsets
  for (int64_t i = 0; i < rows; ++i) {
    ASSERT_TRUE(ids.Append(i).ok());
    ASSERT_TRUE(
        (i % 11 == 0 ? s.AppendNull() : s.Append("a string of row " + std::to_string(i))).ok());
  }
  auto big = arrow::RecordBatch::Make(schema_, rows, {*ids.Finish(), *s.Finish()});
  auto file = TierFile::Write(Path("big.arrow"), schema_, {big}, nullptr);
  ASSERT_TRUE(file.ok()) << file.status();
  const auto& written = (*file)->batches();
  ASSERT_GE(written.size(), 3u);
  int64_t at = 0;
  for (const auto& b : written) {
    auto bytes = arrow::util::ReferencedBufferSize(*b);
    ASSERT_TRUE(bytes.ok());
    EXPECT_LE(*bytes, kTierBatchBytes + kTierBatchBytes / 8);
    EXPECT_TRUE(b->Equals(*big->Slice(at, b->num_rows())));
    at += b->num_rows();
  }
  EXPECT_EQ(at, rows);
}

TEST_F(TierFileTest, WritesBatchesAndMapsThemBackWithoutACopy) {
  auto disk = std::make_shared<MemoryBudget>(int64_t{1} << 30);
  auto file = TierFile::Write(Path("a.arrow"), schema_, batches_, disk);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(disk->used_bytes(), (*file)->bytes());
  EXPECT_EQ(static_cast<int64_t>(fs::file_size(Path("a.arrow"))), (*file)->bytes());
  ASSERT_EQ((*file)->batches().size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE((*file)->batches()[i]->Equals(*batches_[i]));
  EXPECT_EQ(Files(), std::vector<std::string>{"a.arrow"});  // no partial file left

  // Mapped again (as after a restart), proven against the CRC-32, with no
  // allocation of its rows: the batches are views of the mapping.
  const int64_t before = arrow::default_memory_pool()->bytes_allocated();
  auto again = TierFile::Open(Path("a.arrow"), (*file)->bytes(), (*file)->crc32(), nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_LT(arrow::default_memory_pool()->bytes_allocated() - before, (*file)->bytes() / 10);
  EXPECT_TRUE((*again)->batches()[2]->Equals(*batches_[2]));

  // Dropped: the file goes and its bytes return to the budget; the rows stay
  // readable while a view of them lives.
  auto view = (*file)->batches()[1];
  file->reset();
  EXPECT_EQ(disk->used_bytes(), 0);
  again->reset();
  EXPECT_TRUE(Files().empty());
  EXPECT_TRUE(view->Equals(*batches_[1]));
}

// A same-host reader maps the file itself (shared_export.h): the file is
// open read-only as fd(), and each of its batches, or a slice of one, is
// located as (record batch, first row); a batch of other memory is not.
TEST_F(TierFileTest, LocatesItsBatchesAndSlicesForAReaderThatMapsTheFile) {
  auto file = TierFile::Write(Path("a.arrow"), schema_, batches_, nullptr);
  ASSERT_TRUE(file.ok()) << file.status();
  struct stat by_fd {
  }, by_path{};
  ASSERT_EQ(fstat((*file)->fd(), &by_fd), 0);
  ASSERT_EQ(stat(Path("a.arrow").c_str(), &by_path), 0);
  EXPECT_EQ(by_fd.st_ino, by_path.st_ino);
  EXPECT_EQ(by_fd.st_size, (*file)->bytes());
  EXPECT_EQ(fcntl((*file)->fd(), F_GETFL) & O_ACCMODE, O_RDONLY);
  for (int64_t k = 0; k < 3; ++k) {
    auto at = (*file)->Locate(*(*file)->batches()[k]);
    ASSERT_TRUE(at.has_value()) << k;
    EXPECT_EQ(at->batch, k);
    EXPECT_EQ(at->offset, 0);
  }
  auto at = (*file)->Locate(*(*file)->batches()[1]->Slice(2500, 100));
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(at->batch, 1);
  EXPECT_EQ(at->offset, 2500);
  EXPECT_FALSE((*file)->Locate(*batches_[1]).has_value());  // equal rows, other memory
}

TEST_F(TierFileTest, ABudgetTooSmallRefusesTheWriteNamingBoth) {
  auto disk = std::make_shared<MemoryBudget>(1000);
  auto file = TierFile::Write(Path("b.arrow"), schema_, batches_, disk);
  ASSERT_TRUE(file.status().IsOutOfMemory()) << file.status();
  EXPECT_NE(file.status().message().find("tier file " + Path("b.arrow") + " needs "),
            std::string::npos);
  EXPECT_NE(file.status().message().find("the node's disk budget has 1000 of 1000 left"),
            std::string::npos);
  EXPECT_EQ(disk->used_bytes(), 0);
  EXPECT_TRUE(Files().empty());
}

TEST_F(TierFileTest, AFullDiskFailsTheWriteCleanly) {
  // The system refuses the write past 64 KiB (RLIMIT_FSIZE: EFBIG), as a
  // full disk refuses it (ENOSPC).
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 64 * 1024;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  auto disk = std::make_shared<MemoryBudget>(int64_t{1} << 30);
  auto file = TierFile::Write(Path("c.arrow"), schema_, batches_, disk);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  ASSERT_TRUE(file.status().IsIOError()) << file.status();
  EXPECT_EQ(file.status().message().rfind("tier file " + Path("c.arrow") + ": ", 0), 0u)
      << file.status();
  EXPECT_EQ(disk->used_bytes(), 0);
  EXPECT_TRUE(Files().empty());
}

TEST_F(TierFileTest, AMissingTruncatedOrCorruptFileIsAnErrorNamingIt) {
  auto file = TierFile::Write(Path("d.arrow"), schema_, batches_, nullptr);
  ASSERT_TRUE(file.ok()) << file.status();
  const int64_t bytes = (*file)->bytes();
  const uint32_t crc = (*file)->crc32();
  std::string raw(static_cast<size_t>(bytes), '\0');
  std::ifstream(Path("d.arrow"), std::ios::binary).read(raw.data(), bytes);
  auto put = [&](const std::string& name, const std::string& content) {
    std::ofstream(Path(name), std::ios::binary).write(content.data(), content.size());
  };

  auto missing = TierFile::Open(Path("none.arrow"), bytes, crc, nullptr);
  ASSERT_TRUE(missing.status().IsIOError()) << missing.status();
  EXPECT_NE(missing.status().message().find(Path("none.arrow")), std::string::npos);

  put("short.arrow", raw.substr(0, raw.size() / 2));
  auto truncated = TierFile::Open(Path("short.arrow"), bytes, crc, nullptr);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("tier file " + Path("short.arrow") + ": holds " +
                                              std::to_string(bytes / 2) + " bytes, not the " +
                                              std::to_string(bytes) + " written"),
            std::string::npos)
      << truncated.status();

  std::string flipped = raw;
  flipped[flipped.size() / 2] ^= 0x40;  // a value's byte: the IPC file still parses
  put("bad.arrow", flipped);
  auto corrupt = TierFile::Open(Path("bad.arrow"), bytes, crc, nullptr);
  ASSERT_TRUE(corrupt.status().IsInvalid()) << corrupt.status();
  EXPECT_NE(corrupt.status().message().find("tier file " + Path("bad.arrow") + " is corrupt"),
            std::string::npos);
  // A file found bad is left for the caller (to remove and heal).
  EXPECT_TRUE(fs::exists(Path("bad.arrow")));
}

// A task streamed to the tier: the writer's file holds the same bytes as
// one written whole, charged to the disk budget as it grew, proven by the
// same CRC-32 when opened again.
TEST_F(TierFileTest, AWriterStreamsBatchesIntoTheSameFileAsAWholeWrite) {
  auto disk = std::make_shared<MemoryBudget>(int64_t{1} << 30);
  auto whole = TierFile::Write(Path("whole.arrow"), schema_, batches_, disk);
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto writer = TierFileWriter::Open(Path("streamed.arrow"), schema_, disk);
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (const auto& b : batches_) {
    ASSERT_TRUE((*writer)->Append(b).ok());
    EXPECT_GT(disk->used_bytes(), (*whole)->bytes());  // charged as written
  }
  auto file = (*writer)->Finish();
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->bytes(), (*whole)->bytes());
  EXPECT_EQ((*file)->crc32(), (*whole)->crc32());
  EXPECT_EQ(disk->used_bytes(), 2 * (*whole)->bytes());
  ASSERT_EQ((*file)->batches().size(), batches_.size());
  for (size_t i = 0; i < batches_.size(); ++i) {
    EXPECT_TRUE((*file)->batches()[i]->Equals(*batches_[i]));
  }
  const int64_t bytes = (*file)->bytes();
  const uint32_t crc = (*file)->crc32();
  file->reset();  // removes the file; opened again it would be refused
  auto again = TierFile::Open(Path("whole.arrow"), bytes, crc, disk);
  EXPECT_TRUE(again.ok()) << again.status();
}

// Issue 42: mapping a tier file reads its batches' headers through the
// mapping, and the kernel maps in the pages around each (fault-around): 4 MiB
// of each file in a bounded load, 24 MiB per node above a 24 MiB budget. The
// pages are the page cache's; this process keeps none of them mapped until a
// reader touches them.
TEST_F(TierFileTest, AMappedFileHoldsNoneOfItsPagesInTheProcessUntilRead) {
  std::vector<std::shared_ptr<arrow::RecordBatch>> many;
  for (int i = 0; i < 40; ++i) many.push_back(batches_[i % 3]);
  auto writer = TierFileWriter::Open(Path("w.arrow"), schema_, nullptr);
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (const auto& b : many) ASSERT_TRUE((*writer)->Append(b).ok());
  auto file = (*writer)->Finish();
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(ResidentBytes((*file)->data()), 0);
  // Opened again (after a restart): its whole CRC was read through the mapping.
  auto again = TierFile::Open(Path("w.arrow"), (*file)->bytes(), (*file)->crc32(), nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ResidentBytes((*again)->data()), 0);
  // Read, the rows are there (mapped in again from the page cache).
  EXPECT_TRUE((*again)->batches()[39]->Equals(*batches_[0]));
  EXPECT_GT(ResidentBytes((*again)->data()), 0);
}

// A disk budget that runs out mid-task fails the write naming the file and
// what is left, and leaves neither file nor charge behind.
TEST_F(TierFileTest, AWriterOutOfDiskBudgetLeavesNothingBehind) {
  auto whole = TierFile::Write(Path("whole.arrow"), schema_, batches_, nullptr);
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto disk = std::make_shared<MemoryBudget>((*whole)->bytes() / 2);
  whole->reset();
  {
    auto writer = TierFileWriter::Open(Path("t.arrow"), schema_, disk);
    ASSERT_TRUE(writer.ok()) << writer.status();
    arrow::Status st;
    for (const auto& b : batches_) {
      st = (*writer)->Append(b);
      if (!st.ok()) break;
    }
    ASSERT_TRUE(st.IsOutOfMemory()) << st;
    EXPECT_NE(st.message().find("tier file " + Path("t.arrow")), std::string::npos) << st;
    EXPECT_NE(st.message().find("disk budget has"), std::string::npos) << st;
  }
  EXPECT_EQ(disk->used_bytes(), 0);
  EXPECT_TRUE(Files().empty());
}

}  // namespace
}  // namespace icefloe
