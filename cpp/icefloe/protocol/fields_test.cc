#include "icefloe/protocol/fields.h"

#include <gtest/gtest.h>

namespace icefloe {
namespace {

using json = nlohmann::json;

struct Sample {
  std::string name;
  int64_t delta = 0;
  uint64_t count = 3;
  std::optional<uint64_t> limit;
  uint32_t small = 0;
  bool flag = false;
  std::vector<std::string> tags;
  std::vector<uint64_t> ids;
};

constexpr std::string_view kColors[] = {"red", "blue"};
const Field<Sample> kSampleFields[] = {
    {Str("name", kRequired, Values(1, 8), kColors), &Sample::name},
    {Int("delta", kOptional, Values(-5, 5)), &Sample::delta},
    {Uint("count", kOptional, Values(1, 100)), &Sample::count},
    {Uint("limit", kOptional, Values(0, std::numeric_limits<uint64_t>::max())), &Sample::limit},
    {Uint("small", kOptional, Values(0, 70000)), &Sample::small},
    {Flag("flag"), &Sample::flag},
    {ListOf(FieldType::kStringList, "tags", kOptional, Values(1, 3), Values(0, 2)), &Sample::tags},
    {ListOf(FieldType::kUintList, "ids", kOptional, Values(0, 9), Values(0, 4)), &Sample::ids},
};

arrow::Result<Sample> ParseSample(std::string_view body) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(body, "sample"));
  Sample s;
  ARROW_RETURN_NOT_OK(ReadFields<Sample>(JsonFields(j, "sample"), kSampleFields, &s));
  return s;
}

void ExpectInvalid(std::string_view body, std::string_view needle) {
  auto r = ParseSample(body);
  ASSERT_FALSE(r.ok()) << body;
  EXPECT_TRUE(r.status().IsInvalid()) << r.status().ToString();
  EXPECT_NE(r.status().message().find(needle), std::string::npos)
      << body << " -> " << r.status().message();
}

TEST(FieldsTest, ReadsEveryTypeAndKeepsDefaults) {
  auto r = ParseSample(
      R"({"v": 1, "name": "red", "delta": -5, "limit": 18446744073709551615, "flag": true,
          "tags": ["a", "bcd"], "ids": [0, 9], "unknown": {"x": [1]}})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->name, "red");
  EXPECT_EQ(r->delta, -5);
  EXPECT_EQ(r->count, 3u);  // absent: default kept
  EXPECT_EQ(r->limit, std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(r->flag);
  EXPECT_EQ(r->tags, (std::vector<std::string>{"a", "bcd"}));
  EXPECT_EQ(r->ids, (std::vector<uint64_t>{0, 9}));
  json back = json::object();
  WriteFields<Sample>(kSampleFields, *r, &back);
  EXPECT_EQ(back["limit"].get<uint64_t>(), std::numeric_limits<uint64_t>::max());
  EXPECT_FALSE(back.contains("unknown"));
}

TEST(FieldsTest, RefusesWrongTypesNamingTheField) {
  ExpectInvalid(R"({"name": 5})", "'name' must be a string; got 5");
  ExpectInvalid(R"({"name": null})", "'name' must be a string; got null");
  ExpectInvalid(R"({})", "missing 'name'");
  ExpectInvalid(R"({"name": "green"})", "'name' must be one of \"red\", \"blue\"");
  ExpectInvalid(R"({"name": "red", "flag": 1})", "'flag' must be true or false");
  ExpectInvalid(R"({"name": "red", "count": "7"})", "'count' must be an integer in 1..100");
  ExpectInvalid(R"({"name": "red", "tags": "a"})", "'tags' must be a list");
  ExpectInvalid(R"({"name": "red", "tags": ["a", 1]})", "'tags'[1] must be a string");
  ExpectInvalid(R"({"name": "red", "tags": ["abcd"]})", "'tags'[0] must be a string of 1..3");
  ExpectInvalid(R"({"name": "red", "tags": ["a", "b", "c"]})", "'tags' must have 0..2 items");
}

TEST(FieldsTest, RefusesNumbersOutOfRangeFractionalOrOverflowing) {
  ExpectInvalid(R"({"name": "red", "count": 0})", "'count' must be an integer in 1..100; got 0");
  ExpectInvalid(R"({"name": "red", "count": 101})", "'count'");
  ExpectInvalid(R"({"name": "red", "count": -1})", "'count'");
  ExpectInvalid(R"({"name": "red", "count": 2.5})", "'count' must be an integer");
  ExpectInvalid(R"({"name": "red", "count": 2.0})", "'count' must be an integer");
  ExpectInvalid(R"({"name": "red", "count": 1e3})", "'count'");
  ExpectInvalid(R"({"name": "red", "limit": 18446744073709551616})", "'limit'");    // 2^64
  ExpectInvalid(R"({"name": "red", "limit": 1180591620717411303424})", "'limit'");  // 2^70
  ExpectInvalid(R"({"name": "red", "limit": -1})", "'limit'");
  ExpectInvalid(R"({"name": "red", "delta": 6})", "'delta' must be an integer in -5..5");
  ExpectInvalid(R"({"name": "red", "delta": -6})", "'delta'");
  ExpectInvalid(R"({"name": "red", "delta": 9223372036854775808})", "'delta'");
  ExpectInvalid(R"({"name": "red", "small": 70001})", "'small'");
  ExpectInvalid(R"({"name": "red", "ids": [1, -1]})", "'ids'[1] must be an integer in 0..9");
  ExpectInvalid(R"({"name": "red", "ids": [1.5]})", "'ids'[0]");
}

TEST(FieldsTest, BoundsBodySizeNestingAndVersion) {
  std::string deep = R"({"name": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  ExpectInvalid(deep, "nested deeper than 64 levels");
  std::string ok_depth =
      R"({"name": "red", "x": )" + std::string(60, '[') + std::string(60, ']') + "}";
  EXPECT_TRUE(ParseSample(ok_depth).ok());
  // Brackets inside strings do not count.
  EXPECT_TRUE(ParseSample(R"({"name": "red", "x": ")" + std::string(1000, '[') + "\"}").ok());
  ExpectInvalid("[1, 2]", "not a JSON object");
  ExpectInvalid("{\"name\": ", "not valid JSON");
  ExpectInvalid(R"({"v": 2, "name": "red"})", "'v' is an unsupported version: 2");
  ExpectInvalid(R"({"v": "1", "name": "red"})", "unsupported version");
  ExpectInvalid(std::string(kMaxBodyBytes + 1, ' '), "larger than");
}

TEST(FieldsTest, DumpNeverThrowsOnInvalidUtf8) {
  json j = {{"s", std::string("bad \xff\xfe bytes")}};
  std::string s = Dump(j);
  EXPECT_NE(s.find("bad"), std::string::npos);
}

}  // namespace
}  // namespace icefloe
