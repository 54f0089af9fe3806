#include "icefloe/iceberg/types.h"

#include <arrow/scalar.h>
#include <arrow/type.h>
#include <arrow/util/key_value_metadata.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace icefloe::iceberg {

using json = nlohmann::json;

namespace {

const char* kSchema = R"J({
  "type": "struct", "schema-id": 3, "identifier-field-ids": [1],
  "fields": [
    {"id": 1, "name": "id", "required": true, "type": "long"},
    {"id": 2, "name": "price", "required": false, "type": "decimal(9,2)"
},
    {"id": 3, "name": "tags", "required": false,
     "type": {"type": "list", "element-id": 6, "element": "string", "element-required": false}},
    {"id": 4, "name": "attrs", "required": false,
     "type": {"type": "map", "key-id": 7, "key": "string", "value-id": 8, "value": "double",
              "value-required": true}},
    {"id": 5, "name": "loc", "required": false,
     "type": {"type": "struct", "fields": [
        {"id": 9, "name": "lat", "required": true, "type": "float"},
        {"id": 10, "name": "when", "required": false, "type": "timestamptz"}]}},
    {"id": 11, "name": "digest", "required": false, "type": "fixed[16]"},
    {"id": 12, "name": "u", "required": false, "type": "uuid"}
  ]
})J";

}  // namespace

TEST(Schema, ParsesNestedTypesAndFindsFields) {
  auto schema = ParseSchema(json::parse(kSchema));
  ASSERT_TRUE(schema.ok()) << schema.status();
  EXPECT_EQ(schema->schema_id, 3);
  EXPECT_EQ(schema->identifier_field_ids, std::vector<int32_t>{1});
  EXPECT_EQ(schema->FindById(10)->name, "when");
  EXPECT_EQ(schema->FindByName("loc.lat")->id, 9);
  EXPECT_EQ(schema->FindByName("PRICE")->id, 2);
  EXPECT_EQ(schema->FindByName("nope"), nullptr);
  EXPECT_EQ(schema->AllFieldIds().size(), 12u);
  EXPECT_EQ(schema->FindById(2)->type->ToString(), "decimal(9,2)");
  EXPECT_EQ(schema->FindById(4)->type->ToString(), "map<string, double>");
}

TEST(Schema, RoundTripsThroughJson) {
  auto schema = *ParseSchema(json::parse(kSchema));
  auto again = *ParseSchema(SchemaToJson(schema));
  EXPECT_EQ(SchemaToJson(again), SchemaToJson(schema));
  EXPECT_EQ(again.schema_id, 3);
  EXPECT_EQ(again.FindById(8)->type->ToString(), "double");
  EXPECT_TRUE(again.FindById(8)->required);
}

TEST(Schema, MapsToArrowWithFieldIds) {
  auto schema = *ParseSchema(json::parse(kSchema));
  auto arrow_schema = *ToArrowSchema(schema);
  EXPECT_EQ(arrow_schema->field(0)->type()->ToString(), "int64");
  EXPECT_FALSE(arrow_schema->field(0)->nullable());
  EXPECT_EQ(arrow_schema->field(1)->type()->ToString(), "decimal128(9, 2)");
  EXPECT_EQ(arrow_schema->field(2)->type()->id(), arrow::Type::LIST);
  EXPECT_EQ(arrow_schema->field(3)->type()->id(), arrow::Type::MAP);
  EXPECT_EQ(arrow_schema->field(4)->type()->field(1)->type()->ToString(), "timestamp[us, tz=UTC]");
  EXPECT_EQ(arrow_schema->field(5)->type()->ToString(), "fixed_size_binary[16]");
  EXPECT_EQ(arrow_schema->field(0)->metadata()->Get("PARQUET:field_id").ValueOrDie(), "1");
  std::vector<int32_t> projection = {5, 1};
  auto projected = *ToArrowSchema(schema, &projection);
  EXPECT_EQ(projected->field_names(), (std::vector<std::string>{"loc", "id"}));
  std::vector<int32_t> missing = {99};
  EXPECT_TRUE(ToArrowSchema(schema, &missing).status().IsKeyError());
}

TEST(Schema, RejectsBadTypes) {
  EXPECT_FALSE(ParseType(json("varchar")).ok());
  EXPECT_FALSE(ParseType(json("decimal(40,2)")).ok());
  EXPECT_FALSE(ParseType(json::parse(R"({"type": "list", "element": "int"})")).ok());
  EXPECT_FALSE(ParseSchema(json::parse(R"({"type": "struct", "fields": [{"id": 1}]})")).ok());
}

TEST(SingleValue, DecodesAppendixD) {
  auto lit = [](TypePtr t, std::string bytes) { return *DecodeSingleValue(*t, bytes); };
  EXPECT_EQ(std::get<int64_t>(lit(MakePrimitive(TypeId::kInt), std::string("\x2a\0\0\0", 4)).value),
            42);
  EXPECT_EQ(std::get<int64_t>(lit(MakePrimitive(TypeId::kLong),
                                  std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8))
                                  .value),
            -1);
  // int promoted to long: old files keep 4-byte bounds.
  EXPECT_EQ(
      std::get<int64_t>(lit(MakePrimitive(TypeId::kLong), std::string("\x07\0\0\0", 4)).value), 7);
  double d = 2.5;
  std::string dbytes(reinterpret_cast<const char*>(&d), 8);
  EXPECT_EQ(std::get<double>(lit(MakePrimitive(TypeId::kDouble), dbytes).value), 2.5);
  EXPECT_EQ(std::get<std::string>(lit(MakePrimitive(TypeId::kString), "abc").value), "abc");
  // decimal(9,2) 12.34 = unscaled 1234 = 0x04D2, big-endian two's complement.
  Literal dec = lit(MakeDecimal(9, 2), std::string("\x04\xd2", 2));
  EXPECT_EQ(dec.ToString(), "12.34");
  Literal neg = lit(MakeDecimal(9, 2), std::string("\xff\x38", 2));  // -200 -> -2.00
  EXPECT_EQ(neg.ToString(), "-2.00");
  EXPECT_FALSE(DecodeSingleValue(*MakePrimitive(TypeId::kInt), "abc").ok());
}

TEST(SingleValue, EncodesWhatItDecodes) {
  auto round_trip = [](TypePtr type, Literal::Value value, int32_t scale = 0) {
    Literal lit;
    lit.type = type->id;
    lit.value = value;
    lit.scale = scale;
    auto bytes = EncodeSingleValue(lit, *type);
    EXPECT_TRUE(bytes.ok()) << type->ToString() << ": " << bytes.status();
    auto back = DecodeSingleValue(*type, *bytes);
    EXPECT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*CompareLiterals(lit, *back), 0) << type->ToString();
    return *bytes;
  };
  round_trip(MakePrimitive(TypeId::kBoolean), true);
  EXPECT_EQ(round_trip(MakePrimitive(TypeId::kInt), int64_t{-7}).size(), 4u);
  round_trip(MakePrimitive(TypeId::kDate), int64_t{19723});
  EXPECT_EQ(round_trip(MakePrimitive(TypeId::kLong), int64_t{1} << 40).size(), 8u);
  round_trip(MakePrimitive(TypeId::kTimestampTz), int64_t{1700000000000000});
  EXPECT_EQ(round_trip(MakePrimitive(TypeId::kFloat), static_cast<double>(1.1f)).size(), 4u);
  round_trip(MakePrimitive(TypeId::kDouble), 2.222);
  round_trip(MakePrimitive(TypeId::kString), std::string("impala"));
  round_trip(MakePrimitive(TypeId::kUuid), std::string(16, '\x7f'));
  // The minimal big-endian two's complement, up to 16 bytes.
  EXPECT_EQ(round_trip(MakeDecimal(9, 2), arrow::Decimal128(1234), 2), std::string("\x04\xd2", 2));
  EXPECT_EQ(round_trip(MakeDecimal(9, 2), arrow::Decimal128(-200), 2), std::string("\xff\x38", 2));
  EXPECT_EQ(round_trip(MakeDecimal(9, 2), arrow::Decimal128(128), 2), std::string("\x00\x80", 2));
  auto big = *arrow::Decimal128::FromString("-1000000000000.00000000000000000001000");
  EXPECT_EQ(round_trip(MakeDecimal(36, 23), big, 23).size(), 15u);  // -10^35: 117 bits
  Literal null;
  EXPECT_FALSE(EncodeSingleValue(null, *MakePrimitive(TypeId::kLong)).ok());
}

TEST(Schema, KeepsInitialDefaultsAndNamesUnsupportedColumns) {
  auto schema = ParseSchema(json::parse(R"({"type": "struct", "fields": [
      {"id": 1, "name": "n", "required": false, "type": "int", "initial-default": 42},
      {"id": 2, "name": "d", "required": false, "type": "date", "initial-default": null}]})"));
  ASSERT_TRUE(schema.ok()) << schema.status();
  EXPECT_EQ(schema->fields[0].initial_default, "42");
  EXPECT_EQ(schema->fields[1].initial_default, "");
  auto again = *ParseSchema(SchemaToJson(*schema));
  EXPECT_EQ(again.fields[0].initial_default, "42");
  for (const char* type : {"variant", "geometry", "geography(srid:4326)"}) {
    auto refused = ParseSchema(
        json{{"type", "struct"},
             {"fields",
              json::array({{{"id", 3}, {"name", "shape"}, {"required", false}, {"type", type}}})}});
    ASSERT_FALSE(refused.ok()) << type;
    EXPECT_TRUE(refused.status().IsNotImplemented());
    EXPECT_NE(refused.status().message().find("'shape'"), std::string::npos);
  }
}

TEST(Literal, ComparesAcrossForms) {
  Literal a{TypeId::kLong, int64_t{5}}, b{TypeId::kDouble, 5.5};
  EXPECT_EQ(*CompareLiterals(a, b), -1);
  Literal s1{TypeId::kString, std::string("ab")}, s2{TypeId::kString, std::string("b")};
  EXPECT_EQ(*CompareLiterals(s1, s2), -1);
  Literal hi{TypeId::kString, std::string("\xc3\xa9")};  // é sorts after ASCII bytewise
  EXPECT_EQ(*CompareLiterals(hi, s2), 1);
  Literal d1{TypeId::kDecimal, arrow::Decimal128(1234), 2},
      d2{TypeId::kDecimal, arrow::Decimal128(12), 0};
  EXPECT_EQ(*CompareLiterals(d1, d2), 1);  // 12.34 > 12
  EXPECT_FALSE(CompareLiterals(a, s1).ok());
  EXPECT_FALSE(CompareLiterals(Literal{}, a).ok());
}

TEST(Literal, ToArrowScalar) {
  Literal d{TypeId::kDecimal, arrow::Decimal128(5), 0};
  auto scalar = *ToArrowScalar(d, *MakeDecimal(9, 2));
  EXPECT_EQ(scalar->ToString(), "5.00");
  auto ts = *ToArrowScalar(Literal{TypeId::kTimestampTz, int64_t{1000}},
                           *MakePrimitive(TypeId::kTimestampTz));
  EXPECT_EQ(ts->type->ToString(), "timestamp[us, tz=UTC]");
  auto f = *ToArrowScalar(Literal{TypeId::kLong, int64_t{3}}, *MakePrimitive(TypeId::kFloat));
  EXPECT_EQ(f->type->id(), arrow::Type::FLOAT);
  EXPECT_FALSE((*ToArrowScalar(Literal{}, *MakePrimitive(TypeId::kInt)))->is_valid);
}

}  // namespace icefloe::iceberg
