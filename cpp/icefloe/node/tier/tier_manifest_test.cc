#include "icefloe/node/tier/tier_manifest.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include <arrow/array/builder_primitive.h>
#include <arrow/util/crc32.h>
#include <gtest/gtest.h>

#include "icefloe/node/tier/tier_file.h"

namespace icefloe {
namespace {

namespace fs = std::filesystem;

// A copy of two tier files (rows [0, 3000) and [5000, 7000)) with a manifest,
// and the directory a restarted node finds: what the first run left (copied
// before the copy goes, as a SIGKILL leaves it).
class TierManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "icefloe-manifest-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    fs::create_directories(root_ / "run1");
    schema_ = arrow::schema({arrow::field("id", arrow::int64())});
    std::vector<CachedBatch> batches;
    std::vector<std::shared_ptr<const MappedRegion>> held;
    for (const auto& [start, rows] : {std::pair<int64_t, int64_t>{0, 3000}, {5000, 2000}}) {
      arrow::Int64Builder ids;
      for (int64_t i = 0; i < rows; ++i) ASSERT_TRUE(ids.Append(start + i).ok());
      auto batch = arrow::RecordBatch::Make(schema_, rows, {*ids.Finish()});
      auto file =
          TierFile::Write((root_ / "run1" / (std::to_string(start) + ".arrow")).string(), schema_,
                          {batch->Slice(0, rows / 2), batch->Slice(rows / 2)}, nullptr);
      ASSERT_TRUE(file.ok()) << file.status();
      uint64_t at = static_cast<uint64_t>(start);
      for (const auto& b : (*file)->batches()) {
        batches.push_back({at, b});
        at += static_cast<uint64_t>(b->num_rows());
      }
      held.push_back(*file);
    }
    auto copy = CachedDataset::Make("clicks/v1", 7, schema_, batches, nullptr, {}, held);
    ASSERT_TRUE(copy.ok()) << copy.status();
    copy_ = *copy;
    ASSERT_TRUE(SaveTierManifest((root_ / "run1").string(), *copy_, {{"storage_name", "x"}}).ok());
    fs::copy(root_ / "run1", root_ / "run2");
  }
  void TearDown() override {
    copy_.reset();
    fs::remove_all(root_);
  }
  std::string Run2() const { return (root_ / "run2").string(); }
  std::vector<std::string> Files(const std::string& dir) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename());
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path root_;
  std::shared_ptr<arrow::Schema> schema_;
  std::shared_ptr<const CachedDataset> copy_;
};

TEST_F(TierManifestTest, ARestartAdoptsTheCopyItsManifestDescribes) {
  std::ofstream(fs::path(Run2()) / "99.arrow") << "no manifest names me";
  auto disk = std::make_shared<MemoryBudget>(int64_t{1} << 30);
  auto adopted = AdoptTierDir(Run2(), disk);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  ASSERT_EQ(adopted->copies.size(), 1u);
  EXPECT_TRUE(adopted->refused.empty());
  EXPECT_EQ(adopted->files_adopted, 2);
  EXPECT_EQ(adopted->files_removed, 1);  // the stray file
  const CachedDataset& copy = *adopted->copies[0].copy;
  EXPECT_EQ(copy.name(), "clicks/v1");
  EXPECT_EQ(copy.generation(), 7u);
  EXPECT_EQ(adopted->copies[0].record, (nlohmann::json{{"storage_name", "x"}}));
  ASSERT_EQ(copy.batches().size(), copy_->batches().size());
  for (size_t i = 0; i < copy.batches().size(); ++i) {
    EXPECT_EQ(copy.batches()[i].global_start, copy_->batches()[i].global_start);
    EXPECT_TRUE(copy.batches()[i].batch->Equals(*copy_->batches()[i].batch));
  }
  EXPECT_EQ(copy.disk_bytes(), copy_->disk_bytes());  // mapped again, on the tier
  int64_t bytes = 0;
  for (const auto& f : fs::directory_iterator(Run2())) {
    if (f.path().extension() == ".arrow") bytes += static_cast<int64_t>(f.file_size());
  }
  EXPECT_EQ(disk->used_bytes(), bytes);
}

TEST_F(TierManifestTest, AFileThatFailsItsProofIsRemovedAndItsRowsAreNotAdopted) {
  {  // one byte of the second file's data changed: its CRC-32 no longer holds
    std::fstream f(fs::path(Run2()) / "5000.arrow",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
  }
  auto adopted = AdoptTierDir(Run2(), nullptr);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  ASSERT_EQ(adopted->copies.size(), 1u);
  ASSERT_EQ(adopted->refused.size(), 1u);
  EXPECT_NE(adopted->refused[0].find("5000.arrow is corrupt"), std::string::npos)
      << adopted->refused[0];
  EXPECT_EQ(adopted->copies[0].copy->num_rows(), 3000);  // the other file's rows only
  EXPECT_EQ(adopted->copies[0].copy->CountRows({5000, 7000}), 0u);
  adopted->copies.clear();  // the copy goes: so do its files
  std::vector<std::string> left = Files(Run2());
  EXPECT_EQ(std::count_if(left.begin(), left.end(),
                          [](const std::string& f) { return f.ends_with(".arrow"); }),
            0);
}

TEST_F(TierManifestTest, AMalformedManifestIsRefusedAndWhatItNamedIsRemoved) {
  for (const auto& e : fs::directory_iterator(Run2())) {
    if (e.path().string().ends_with(".manifest.json")) std::ofstream(e.path()) << "{\"files\": 3";
  }
  auto adopted = AdoptTierDir(Run2(), nullptr);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_TRUE(adopted->copies.empty());
  ASSERT_EQ(adopted->refused.size(), 1u);
  EXPECT_NE(adopted->refused[0].find("not a manifest"), std::string::npos);
  EXPECT_TRUE(Files(Run2()).empty());
}

// The one manifest in `dir`, parsed; `edit` changes it and it is written back
// as valid JSON.
void EditManifest(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  int found = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.path().string().ends_with(".manifest.json")) continue;
    ++found;
    std::ifstream in(e.path());
    nlohmann::json m = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(m.is_object());
    in.close();
    edit(m);
    std::ofstream(e.path()) << m.dump();
  }
  ASSERT_EQ(found, 1);
}

// A manifest another version of the node wrote is not read as this one's:
// its copy is refused, by version, and its files are removed. So is one of
// version 1, written before manifests carried their own checksum.
TEST_F(TierManifestTest, AManifestOfAnotherVersionIsRefusedByItsVersion) {
  for (const int other : {1, 3}) {
    SCOPED_TRACE(other);
    fs::remove_all(Run2());
    fs::copy(root_ / "run1", Run2());
    EditManifest(Run2(), [&](nlohmann::json& m) {
      ASSERT_EQ(m["v"], 2);
      m["v"] = other;
    });
    auto adopted = AdoptTierDir(Run2(), nullptr);
    ASSERT_TRUE(adopted.ok()) << adopted.status();
    EXPECT_TRUE(adopted->copies.empty());
    ASSERT_EQ(adopted->refused.size(), 1u);
    EXPECT_NE(adopted->refused[0].find("version " + std::to_string(other) +
                                       ", this node reads version 2"),
              std::string::npos)
        << adopted->refused[0];
    EXPECT_TRUE(Files(Run2()).empty());
  }
}

// Only the data files carried a CRC: a manifest whose batch starts were
// swapped (valid JSON, each file intact) served rows at the wrong row ids.
// The manifest's own checksum refuses it, naming it, and its files go.
TEST_F(TierManifestTest, AManifestWithSwappedBatchStartsIsRefusedByItsChecksum) {
  EditManifest(Run2(), [](nlohmann::json& m) {
    nlohmann::json& starts = m["files"][0]["starts"];
    ASSERT_EQ(starts, (nlohmann::json{0, 1500}));  // two batches of 1500 rows
    starts = {1500, 0};
  });
  auto adopted = AdoptTierDir(Run2(), nullptr);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_TRUE(adopted->copies.empty());
  ASSERT_EQ(adopted->refused.size(), 1u);
  EXPECT_NE(adopted->refused[0].find(".manifest.json: its content does not match its checksum"),
            std::string::npos)
      << adopted->refused[0];
  EXPECT_TRUE(Files(Run2()).empty());
}

TEST_F(TierManifestTest, AManifestWithoutItsChecksumIsRefused) {
  EditManifest(Run2(), [](nlohmann::json& m) { m.erase("manifest_crc32"); });
  auto adopted = AdoptTierDir(Run2(), nullptr);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_TRUE(adopted->copies.empty());
  ASSERT_EQ(adopted->refused.size(), 1u);
  EXPECT_NE(adopted->refused[0].find(".manifest.json: no manifest_crc32"), std::string::npos)
      << adopted->refused[0];
  EXPECT_TRUE(Files(Run2()).empty());
}

// The checksum covers the content, not its spelling: the same manifest
// written with its keys in another order and spaces is adopted.
TEST_F(TierManifestTest, AManifestRewrittenWithTheSameContentIsAdopted) {
  for (const auto& e : fs::directory_iterator(Run2())) {
    if (!e.path().string().ends_with(".manifest.json")) continue;
    std::ifstream in(e.path());
    nlohmann::ordered_json m = nlohmann::ordered_json::parse(in);
    in.close();
    nlohmann::ordered_json reversed;
    std::vector<std::string> keys;
    for (auto it = m.begin(); it != m.end(); ++it) keys.push_back(it.key());
    for (auto k = keys.rbegin(); k != keys.rend(); ++k) reversed[*k] = m[*k];
    std::ofstream(e.path()) << reversed.dump(2);
  }
  auto adopted = AdoptTierDir(Run2(), nullptr);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_TRUE(adopted->refused.empty()) << adopted->refused[0];
  EXPECT_EQ(adopted->copies.size(), 1u);
}

// Rewrites the one manifest in `dir` as `edit` changes it, its checksum made
// to match (as a node that wrote it so would have): what it then refuses, it
// refuses for the content, not the checksum.
void EditManifestKeepingItsChecksum(const std::string& dir,
                                    const std::function<void(nlohmann::json&)>& edit) {
  EditManifest(dir, [&](nlohmann::json& m) {
    edit(m);
    m.erase("manifest_crc32");
    const std::string text = m.dump();
    m["manifest_crc32"] = arrow::internal::crc32(0, text.data(), text.size());
  });
}

// The manifest is a field-table message: a field missing, or of another type,
// refuses the manifest with an error naming the field (and the file entry it
// is in), and what it named is removed.
TEST_F(TierManifestTest, AManifestWithAFieldMissingOrOfAnotherTypeIsRefusedNamingIt) {
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases = {
      {[](nlohmann::json& m) { m.erase("generation"); }, ".manifest.json: missing 'generation'"},
      {[](nlohmann::json& m) { m["dataset"] = 7; }, "'dataset' must be a string"},
      {[](nlohmann::json& m) { m["record"] = "x"; }, "'record' must be an object or null"},
      {[](nlohmann::json& m) { m["files"][1].erase("crc32"); }, "'files'[1]: missing 'crc32'"},
      {[](nlohmann::json& m) { m["files"][0]["bytes"] = "4096"; },
       "'files'[0]: 'bytes' must be an integer"},
      {[](nlohmann::json& m) { m["files"][0]["starts"][1] = -1; },
       "'files'[0]: 'starts'[1] must be an integer"},
  };
  for (const auto& [edit, want] : cases) {
    SCOPED_TRACE(want);
    fs::remove_all(Run2());
    fs::copy(root_ / "run1", Run2());
    EditManifestKeepingItsChecksum(Run2(), edit);
    auto adopted = AdoptTierDir(Run2(), nullptr);
    ASSERT_TRUE(adopted.ok()) << adopted.status();
    EXPECT_TRUE(adopted->copies.empty());
    ASSERT_EQ(adopted->refused.size(), 1u);
    EXPECT_NE(adopted->refused[0].find(want), std::string::npos) << adopted->refused[0];
    EXPECT_TRUE(Files(Run2()).empty());
  }
}

// Tier files on disk outlive the node that wrote them: the manifest a node
// writes is, byte for byte, the text version 2 has always had (keys sorted,
// compact, the checksum over the rest), so an earlier node's manifests open.
TEST_F(TierManifestTest, AManifestIsWrittenAsVersion2HasAlwaysBeenWritten) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& region : copy_->held()) {
    const auto& file = dynamic_cast<const TierFile&>(*region);
    nlohmann::json starts = nlohmann::json::array();
    for (const auto& b : file.batches()) {
      for (const auto& c : copy_->batches()) {
        if (c.batch == b) starts.push_back(c.global_start);
      }
    }
    files.push_back({{"file", fs::path(file.path()).filename().string()},
                     {"bytes", file.bytes()},
                     {"crc32", file.crc32()},
                     {"starts", starts}});
  }
  nlohmann::json want = {{"v", 2},
                         {"dataset", "clicks/v1"},
                         {"generation", 7},
                         {"record", {{"storage_name", "x"}}},
                         {"files", files}};
  const std::string content = want.dump();
  want["manifest_crc32"] = arrow::internal::crc32(0, content.data(), content.size());
  int found = 0;
  for (const auto& e : fs::directory_iterator(root_ / "run1")) {
    if (!e.path().string().ends_with(".manifest.json")) continue;
    ++found;
    std::ifstream in(e.path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, want.dump());
  }
  EXPECT_EQ(found, 1);
}

TEST_F(TierManifestTest, ACopyWithNothingOnTheTierHasNoManifest) {
  auto in_memory = CachedDataset::Make("clicks/v1", 8, schema_, {copy_->batches()[0]});
  ASSERT_TRUE(in_memory.ok());
  ASSERT_TRUE(SaveTierManifest(Run2(), **in_memory, nullptr).ok());
  for (const auto& f : Files(Run2())) EXPECT_FALSE(f.ends_with(".manifest.json")) << f;
}

}  // namespace
}  // namespace icefloe
