#include "icefloe/iceberg/puffin.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <arrow/util/crc32.h>
#include <gtest/gtest.h>

#include "icefloe/iceberg/roaring.h"

namespace icefloe::iceberg {
namespace {

std::string Hex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// Rewrites the length and CRC of a deletion vector blob around `bitmap`.
std::string Frame(const std::string& bitmap) {
  std::string covered = std::string("\xD1\xD3\x39\x64", 4) + bitmap;
  std::string out;
  auto put = [&out](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>(v >> s));
  };
  put(static_cast<uint32_t>(covered.size()));
  out += covered;
  put(arrow::internal::crc32(0, covered.data(), covered.size()));
  return out;
}

TEST(Roaring64, ReadsAKnownSparkVector) {
  // A deletion vector Spark wrote for position 0: one 32-bit bitmap (key 0)
  // without run containers, one array container {0}.
  const std::string bitmap = Hex("0100000000000000000000003a3000000100000000000000100000000000");
  auto values = DecodeRoaring64(bitmap, 10);
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, std::vector<int64_t>{0});
  auto blob = DecodeDeletionVector(Frame(bitmap), 10, "x.puffin");
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_EQ(*blob, std::vector<int64_t>{0});
}

TEST(Roaring64, RoundTripsEveryContainerKind) {
  std::mt19937_64 rng(42);  // seed logged by value: 42
  std::vector<int64_t> values;
  for (int64_t v = 0; v < 3000; v += 3) values.push_back(v);                    // array
  for (int64_t v = 70000; v < 80000; ++v) values.push_back(v);                  // run or bitset
  for (int64_t v = 200000; v < 262144; v += 2) values.push_back(v);             // bitset
  for (int i = 0; i < 50; ++i) values.push_back((int64_t{5} << 32) + i * 977);  // high key 5
  std::vector<int64_t> random;
  for (int i = 0; i < 2000; ++i) random.push_back(static_cast<int64_t>(rng() % 500000) + 300000);
  std::sort(random.begin(), random.end());
  random.erase(std::unique(random.begin(), random.end()), random.end());
  values.insert(values.end(), random.begin(), random.end());
  std::sort(values.begin(), values.end());
  for (bool runs : {false, true}) {
    auto bytes = EncodeRoaring64(values, runs);
    ASSERT_TRUE(bytes.ok());
    auto decoded = DecodeRoaring64(*bytes, int64_t{6} << 32);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, values) << "runs " << runs;
  }
  auto empty = DecodeRoaring64(*EncodeRoaring64({}, true), 1);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(Roaring64, RefusesMalformedBitmaps) {
  const std::vector<int64_t> values = {1, 5, 9, 70000};
  const std::string good = *EncodeRoaring64(values, false);
  // Every truncation fails; none reads a shorter set.
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(DecodeRoaring64(good.substr(0, n), 100000).ok()) << n;
  }
  // Values at or past the limit (a position past the data file's rows).
  EXPECT_FALSE(DecodeRoaring64(good, 70000).ok());
  // Unknown cookie.
  std::string bad = good;
  bad[12] = 0x7f;
  EXPECT_FALSE(DecodeRoaring64(bad, 100000).ok());
  // An array container that is not ascending: {0: [5, 1]}.
  std::string unsorted =
      Hex("0100000000000000000000003a300000010000000000010010000000") + Hex("05000100");
  auto r = DecodeRoaring64(unsorted, 100);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ascending"), std::string::npos);
  // A cardinality that disagrees with the container: header says 2, run holds 3.
  std::string runs = Hex("0100000000000000000000003b30000001") +
                     Hex("0000"
                         "0100") +
                     Hex("0100"
                         "0000"
                         "0200");
  EXPECT_FALSE(DecodeRoaring64(runs, 100).ok());
  // A run past the container's end.
  std::string overflow = Hex("0100000000000000000000003b30000001") +
                         Hex("0000"
                             "0100") +
                         Hex("0100"
                             "ffff"
                             "0100");
  EXPECT_FALSE(DecodeRoaring64(overflow, int64_t{1} << 40).ok());
  // A count of bitmaps the input cannot hold.
  EXPECT_FALSE(DecodeRoaring64(Hex("ffffffffffffff7f"), 100).ok());
}

TEST(DeletionVector, ChecksLengthMagicAndChecksum) {
  const std::string blob = *EncodeDeletionVector({0, 2, 7});
  auto ok = DecodeDeletionVector(blob, 8, "d.puffin");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, (std::vector<int64_t>{0, 2, 7}));
  for (size_t i = 0; i < blob.size(); ++i) {
    std::string flipped = blob;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x10);
    auto r = DecodeDeletionVector(flipped, 8, "d.puffin");
    ASSERT_FALSE(r.ok()) << "byte " << i;
    EXPECT_NE(r.status().message().find("d.puffin"), std::string::npos);
  }
  auto truncated = DecodeDeletionVector(blob.substr(0, blob.size() - 1), 8, "d.puffin");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("length"), std::string::npos);
  // Bytes after the bitmap but inside the checksum are refused too.
  std::string bitmap = *EncodeRoaring64({1}, false);
  EXPECT_FALSE(DecodeDeletionVector(Frame(bitmap + "x"), 8, "d.puffin").ok());
  // A position at the data file's row count.
  EXPECT_FALSE(DecodeDeletionVector(blob, 7, "d.puffin").ok());
}

TEST(Puffin, ReadsAFooterWithSeveralBlobs) {
  std::vector<int64_t> offsets;
  const std::string a = *EncodeDeletionVector({3});
  const std::string b = *EncodeDeletionVector({0, 1});
  const std::string file = WritePuffinFile(
      {{std::string(kDeletionVectorBlobType), a, {{"referenced-data-file", "a.parquet"}}},
       {std::string(kDeletionVectorBlobType), b, {{"cardinality", "2"}}}},
      &offsets);
  auto footer = ParsePuffinFooter(file, static_cast<int64_t>(file.size()), "f.puffin");
  ASSERT_TRUE(footer.ok()) << footer.status();
  ASSERT_EQ(footer->blobs.size(), 2u);
  EXPECT_EQ(footer->blobs[0].offset, 4);
  EXPECT_EQ(footer->blobs[1].offset, offsets[1]);
  EXPECT_EQ(footer->blobs[1].length, static_cast<int64_t>(b.size()));
  EXPECT_EQ(footer->blobs[0].properties.at("referenced-data-file"), "a.parquet");
  const auto& second = footer->blobs[1];
  auto positions = DecodeDeletionVector(std::string_view(file).substr(second.offset, second.length),
                                        10, "f.puffin");
  ASSERT_TRUE(positions.ok());
  EXPECT_EQ(*positions, (std::vector<int64_t>{0, 1}));
  // A footer read from the file's tail only.
  auto from_tail = ParsePuffinFooter(std::string_view(file).substr(4),
                                     static_cast<int64_t>(file.size()), "f.puffin");
  ASSERT_TRUE(from_tail.ok()) << from_tail.status();
  EXPECT_EQ(from_tail->blobs.size(), 2u);
}

TEST(Puffin, CorruptOrTruncatedFilesNameTheFile) {
  const std::string file =
      WritePuffinFile({{std::string(kDeletionVectorBlobType), *EncodeDeletionVector({1}), {}}});
  for (size_t n = 0; n < file.size(); ++n) {
    auto r = ParsePuffinFooter(file.substr(0, n), static_cast<int64_t>(n), "broken.puffin");
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_NE(r.status().message().find("broken.puffin"), std::string::npos) << r.status();
  }
  std::string bad_magic = file;
  bad_magic[bad_magic.size() - 1] = 'X';
  EXPECT_FALSE(ParsePuffinFooter(bad_magic, static_cast<int64_t>(file.size()), "b").ok());
  // A blob that claims to lie past the footer.
  std::string payload = R"({"blobs":[{"type":"deletion-vector-v1","fields":[],"snapshot-id":-1,)"
                        R"("sequence-number":-1,"offset":4,"length":100000}]})";
  std::string lying = "PFA1PFA1" + payload;
  const auto size = static_cast<int32_t>(payload.size());
  lying.append(reinterpret_cast<const char*>(&size), 4);
  lying.append(4, '\0');
  lying += "PFA1";
  auto r = ParsePuffinFooter(lying, static_cast<int64_t>(lying.size()), "lying.puffin");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("outside"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace icefloe::iceberg
