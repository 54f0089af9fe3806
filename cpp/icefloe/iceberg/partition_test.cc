#include "icefloe/iceberg/partition.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace icefloe::iceberg {

namespace {

Literal Lit(TypeId type, int64_t v) {
  Literal l;
  l.type = type;
  l.value = v;
  return l;
}

Literal Str(TypeId type, std::string v) {
  Literal l;
  l.type = type;
  l.value = std::move(v);
  return l;
}

Literal Dec(int64_t unscaled, int32_t scale) {
  Literal l;
  l.type = TypeId::kDecimal;
  l.value = arrow::Decimal128(unscaled);
  l.scale = scale;
  return l;
}

int64_t IntOf(const arrow::Result<Literal>& r) {
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::get<int64_t>(r->value) : 0;
}

std::string StrOf(const arrow::Result<Literal>& r) {
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::get<std::string>(r->value) : "";
}

Transform T(std::string_view text) { return *ParseTransform(text); }

// 2017-11-16 and 2017-11-16T22:31:08 (spec appendix B).
constexpr int64_t kDays20171116 = 17486;
constexpr int64_t kMicros20171116T223108 = 1510871468000000LL;

}  // namespace

TEST(Transform, ParsesAndPrints) {
  for (const char* text :
       {"identity", "bucket[16]", "truncate[4]", "year", "month", "day", "hour", "void"}) {
    auto t = ParseTransform(text);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->ToString(), text);
  }
  EXPECT_EQ(T("bucket[16]").kind, Transform::kBucket);
  EXPECT_EQ(T("bucket[16]").param, 16);
  EXPECT_EQ(T("truncate[10]").param, 10);
  EXPECT_TRUE(ParseTransform("bucket[0]").status().IsInvalid());
  EXPECT_TRUE(ParseTransform("bucket[x]").status().IsInvalid());
  EXPECT_TRUE(ParseTransform("bucket").status().IsInvalid());
  EXPECT_TRUE(ParseTransform("day[3]").status().IsInvalid());
  auto unknown = ParseTransform("zorder");
  EXPECT_TRUE(unknown.status().IsNotImplemented());
  EXPECT_NE(unknown.status().message().find("zorder"), std::string::npos);
}

TEST(Transform, ResultTypes) {
  auto result = [](const char* t, TypePtr source) {
    auto r = T(t).ResultType(*source);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? (*r)->ToString() : "";
  };
  EXPECT_EQ(result("identity", MakePrimitive(TypeId::kString)), "string");
  EXPECT_EQ(result("truncate[3]", MakeDecimal(9, 2)), "decimal(9,2)");
  EXPECT_EQ(result("bucket[8]", MakePrimitive(TypeId::kUuid)), "int");
  EXPECT_EQ(result("year", MakePrimitive(TypeId::kTimestampTz)), "int");
  EXPECT_EQ(result("month", MakePrimitive(TypeId::kDate)), "int");
  EXPECT_EQ(result("day", MakePrimitive(TypeId::kTimestamp)), "date");
  EXPECT_EQ(result("hour", MakePrimitive(TypeId::kTimestampNs)), "int");
  EXPECT_EQ(result("void", MakePrimitive(TypeId::kDouble)), "double");
  EXPECT_TRUE(T("bucket[4]").ResultType(*MakePrimitive(TypeId::kDouble)).status().IsInvalid());
  EXPECT_TRUE(T("hour").ResultType(*MakePrimitive(TypeId::kDate)).status().IsInvalid());
  EXPECT_TRUE(T("truncate[2]").ResultType(*MakePrimitive(TypeId::kBoolean)).status().IsInvalid());
}

TEST(Murmur3, MatchesSpecAppendixB) {
  EXPECT_EQ(*BucketHash(Lit(TypeId::kInt, 34)), 2017239379);
  EXPECT_EQ(*BucketHash(Lit(TypeId::kLong, 34)), 2017239379);
  EXPECT_EQ(*BucketHash(Dec(1420, 2)), -500754589);  // 14.20
  EXPECT_EQ(*BucketHash(Lit(TypeId::kDate, kDays20171116)), -653330422);
  EXPECT_EQ(*BucketHash(Lit(TypeId::kTime, 81068000000LL)), -662762989);  // 22:31:08
  EXPECT_EQ(*BucketHash(Lit(TypeId::kTimestamp, kMicros20171116T223108)), -2047944441);
  EXPECT_EQ(*BucketHash(Lit(TypeId::kTimestampTz, kMicros20171116T223108)), -2047944441);
  EXPECT_EQ(*BucketHash(Lit(TypeId::kTimestamp, kMicros20171116T223108 + 1)), -1207196810);
  // Nanosecond timestamps hash at microsecond precision.
  EXPECT_EQ(*BucketHash(Lit(TypeId::kTimestampNs, kMicros20171116T223108 * 1000 + 999)),
            -2047944441);
  EXPECT_EQ(*BucketHash(Str(TypeId::kString, "iceberg")), 1210000089);
  const char uuid[] = "\xf7\x9c\x3e\x09\x67\x7c\x4b\xbd\xa4\x79\x3f\x34\x9c\xb7\x85\xe7";
  EXPECT_EQ(*BucketHash(Str(TypeId::kUuid, std::string(uuid, 16))), 1488055340);
  EXPECT_EQ(*BucketHash(Str(TypeId::kFixed, std::string("\0\1\2\3", 4))), -188683207);
  EXPECT_EQ(*BucketHash(Str(TypeId::kBinary, std::string("\0\1\2\3", 4))), -188683207);
  EXPECT_TRUE(BucketHash(Lit(TypeId::kBoolean, 1)).status().IsInvalid());
  EXPECT_EQ(Murmur3Hash32(""), 0);
}

TEST(Murmur3, DecimalUsesMinimalTwosComplement) {
  // The same value at any precision hashes alike; negatives keep their sign byte.
  EXPECT_EQ(*BucketHash(Dec(-1, 0)), Murmur3Hash32("\xff"));
  EXPECT_EQ(*BucketHash(Dec(128, 0)), Murmur3Hash32(std::string("\x00\x80", 2)));
  EXPECT_EQ(*BucketHash(Dec(-129, 0)), Murmur3Hash32("\xff\x7f"));
  EXPECT_EQ(*BucketHash(Dec(0, 0)), Murmur3Hash32(std::string("\0", 1)));
}

TEST(Transform, Bucket) {
  // (2017239379 & INT_MAX) % 16 and the "bucket(100, 34) = 79" example.
  EXPECT_EQ(IntOf(T("bucket[16]").Apply(Lit(TypeId::kInt, 34))), 2017239379 % 16);
  EXPECT_EQ(IntOf(T("bucket[100]").Apply(Lit(TypeId::kLong, 34))), 79);
  // A negative hash is masked, not negated.
  EXPECT_EQ(IntOf(T("bucket[1000]").Apply(Dec(1420, 2))), (-500754589 & 0x7fffffff) % 1000);
  auto null = T("bucket[4]").Apply(Literal{TypeId::kString, {}, 0});
  ASSERT_TRUE(null.ok());
  EXPECT_TRUE(null->is_null());
  EXPECT_EQ(null->type, TypeId::kInt);
}

TEST(Transform, Truncate) {
  EXPECT_EQ(IntOf(T("truncate[10]").Apply(Lit(TypeId::kInt, 1))), 0);
  EXPECT_EQ(IntOf(T("truncate[10]").Apply(Lit(TypeId::kInt, -1))), -10);
  EXPECT_EQ(IntOf(T("truncate[10]").Apply(Lit(TypeId::kLong, -11))), -20);
  EXPECT_EQ(IntOf(T("truncate[7]").Apply(Lit(TypeId::kLong, 22))), 21);
  EXPECT_EQ(StrOf(T("truncate[3]").Apply(Str(TypeId::kString, "iceberg"))), "ice");
  EXPECT_EQ(StrOf(T("truncate[1]").Apply(Str(TypeId::kString, "\xe6\xb5\x8b\xe8\xaf\x95"))),
            "\xe6\xb5\x8b");  // first code point of a two-character CJK string
  EXPECT_EQ(StrOf(T("truncate[6]").Apply(Str(TypeId::kString, "ab"))), "ab");
  EXPECT_EQ(StrOf(T("truncate[2]").Apply(Str(TypeId::kBinary, "\x01\x02\x03"))), "\x01\x02");
  // Spec: truncate[10] of decimal 12.34 (unscaled 1234) is 12.30; -0.05 becomes -0.10.
  auto d = T("truncate[10]").Apply(Dec(1234, 2));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(std::get<arrow::Decimal128>(d->value), arrow::Decimal128(1230));
  EXPECT_EQ(d->scale, 2);
  auto neg = T("truncate[10]").Apply(Dec(-5, 2));
  ASSERT_TRUE(neg.ok());
  EXPECT_EQ(std::get<arrow::Decimal128>(neg->value), arrow::Decimal128(-10));
}

TEST(Transform, TimeUnits) {
  const int64_t micros = kMicros20171116T223108;
  EXPECT_EQ(IntOf(T("year").Apply(Lit(TypeId::kDate, kDays20171116))), 47);
  EXPECT_EQ(IntOf(T("month").Apply(Lit(TypeId::kDate, kDays20171116))), 47 * 12 + 10);
  EXPECT_EQ(IntOf(T("day").Apply(Lit(TypeId::kDate, kDays20171116))), kDays20171116);
  EXPECT_EQ(IntOf(T("year").Apply(Lit(TypeId::kTimestamp, micros))), 47);
  EXPECT_EQ(IntOf(T("month").Apply(Lit(TypeId::kTimestampTz, micros))), 574);
  auto day = T("day").Apply(Lit(TypeId::kTimestamp, micros));
  EXPECT_EQ(IntOf(day), kDays20171116);
  EXPECT_EQ(day->type, TypeId::kDate);
  EXPECT_EQ(IntOf(T("hour").Apply(Lit(TypeId::kTimestamp, micros))), kDays20171116 * 24 + 22);
  EXPECT_EQ(IntOf(T("hour").Apply(Lit(TypeId::kTimestampNs, micros * 1000))),
            kDays20171116 * 24 + 22);
  // Before 1970 the units round down: 1969-12-31 is year -1, month -1, day -1.
  EXPECT_EQ(IntOf(T("year").Apply(Lit(TypeId::kDate, -1))), -1);
  EXPECT_EQ(IntOf(T("month").Apply(Lit(TypeId::kDate, -1))), -1);
  EXPECT_EQ(IntOf(T("year").Apply(Lit(TypeId::kDate, -365))), -1);  // 1969-01-01
  EXPECT_EQ(IntOf(T("year").Apply(Lit(TypeId::kDate, -366))), -2);  // 1968-12-31
  EXPECT_EQ(IntOf(T("day").Apply(Lit(TypeId::kTimestamp, -1))), -1);
  EXPECT_EQ(IntOf(T("hour").Apply(Lit(TypeId::kTimestamp, -1))), -1);
  EXPECT_EQ(IntOf(T("month").Apply(Lit(TypeId::kDate, 0))), 0);
  EXPECT_TRUE(T("hour").Apply(Lit(TypeId::kDate, 1)).status().IsInvalid());
}

TEST(Transform, IdentityAndVoid) {
  EXPECT_EQ(StrOf(T("identity").Apply(Str(TypeId::kString, "x"))), "x");
  auto v = T("void").Apply(Lit(TypeId::kLong, 5));
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->is_null());
  EXPECT_EQ(v->type, TypeId::kLong);
}

TEST(PartitionSpec, ParsesV1AndV2Forms) {
  auto v2 = ParsePartitionSpec(nlohmann::json::parse(R"({"spec-id": 3, "fields": [
      {"source-id": 1, "field-id": 1000, "name": "id_bucket", "transform": "bucket[16]"},
      {"source-id": 2, "field-id": 1005, "name": "ts_day", "transform": "day"}]})"));
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(v2->spec_id, 3);
  ASSERT_EQ(v2->fields.size(), 2u);
  EXPECT_EQ(v2->fields[1].field_id, 1005);
  EXPECT_EQ(v2->fields[1].transform.kind, Transform::kDay);
  EXPECT_FALSE(v2->is_unpartitioned());

  auto v1 = ParsePartitionSpec(nlohmann::json::parse(R"([
      {"source-id": 1, "name": "a", "transform": "identity"},
      {"source-id": 2, "name": "b", "transform": "truncate[4]"}])"));
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(v1->fields[0].field_id, 1000);
  EXPECT_EQ(v1->fields[1].field_id, 1001);

  Schema schema;
  schema.fields = {{1, "id", true, MakePrimitive(TypeId::kLong), "", ""},
                   {2, "ts", false, MakePrimitive(TypeId::kTimestamp), "", ""}};
  auto type = v2->PartitionType(schema);
  ASSERT_TRUE(type.ok()) << type.status();
  EXPECT_EQ((*type)[0].type->ToString(), "int");
  EXPECT_EQ((*type)[1].type->ToString(), "date");
  EXPECT_EQ((*type)[1].id, 1005);
  schema.fields.pop_back();
  EXPECT_TRUE(v2->PartitionType(schema).status().IsKeyError());

  auto bad = ParsePartitionSpec(nlohmann::json::parse(
      R"({"spec-id": 0, "fields": [{"source-id": 1, "name": "x", "transform": "zorder"}]})"));
  EXPECT_TRUE(bad.status().IsNotImplemented());
  EXPECT_NE(bad.status().message().find("'x'"), std::string::npos) << bad.status();
  auto missing = ParsePartitionSpec(
      nlohmann::json::parse(R"({"spec-id": 0, "fields": [{"name": "x", "transform": "day"}]})"));
  EXPECT_TRUE(missing.status().IsInvalid());
  EXPECT_NE(missing.status().message().find("source-id"), std::string::npos);
  EXPECT_TRUE(PartitionSpec{}.is_unpartitioned());
}

}  // namespace icefloe::iceberg
