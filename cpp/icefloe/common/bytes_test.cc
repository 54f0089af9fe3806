#include "icefloe/common/bytes.h"

#include <gtest/gtest.h>

namespace icefloe {

TEST(ParseByteSize, AcceptsBinaryAndDecimalSuffixes) {
  EXPECT_EQ(*ParseByteSize("512"), 512);
  EXPECT_EQ(*ParseByteSize("64KiB"), 64 * 1024);
  EXPECT_EQ(*ParseByteSize("8GiB"), 8LL << 30);
  EXPECT_EQ(*ParseByteSize("8gib"), 8LL << 30);
  EXPECT_EQ(*ParseByteSize("1.5GB"), 1500000000LL);
  EXPECT_EQ(*ParseByteSize("100M"), 100LL << 20);
  EXPECT_EQ(*ParseByteSize("2 TiB"), 2LL << 40);
}

TEST(ParseByteSize, RejectsGarbageWithTheText) {
  for (const char* bad : {"", "GiB", "-1", "8XB", "1e3", "99999999999TiB"}) {
    auto r = ParseByteSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(r.status().IsInvalid());
    EXPECT_NE(r.status().message().find(bad), std::string::npos);
  }
}

TEST(FormatBytes, PicksAUnit) {
  EXPECT_EQ(FormatBytes(12), "12 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(8LL << 30), "8.0 GiB");
}

TEST(HexEncode, TwoLowercaseDigitsPerByte) {
  EXPECT_EQ(HexEncode(""), "");
  EXPECT_EQ(HexEncode(std::string("\x00\x01\xab\xff", 4)), "0001abff");
  EXPECT_EQ(HexEncode("clicks/v1"), "636c69636b732f7631");
}

}  // namespace icefloe
