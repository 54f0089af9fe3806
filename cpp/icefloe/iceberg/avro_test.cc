#include "icefloe/iceberg/avro.h"

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include <arrow/io/file.h>
#include <arrow/util/compression.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace icefloe::iceberg {
namespace {

using json = nlohmann::json;

#define AVRO_TEST_CONCAT_(a, b) a##b
#define AVRO_TEST_CONCAT(a, b) AVRO_TEST_CONCAT_(a, b)
#define ASSERT_OK_AND_ASSIGN_IMPL(result, lhs, rexpr) \
  auto result = (rexpr);                              \
  ASSERT_TRUE(result.ok()) << result.status();        \
  lhs = std::move(result).ValueUnsafe();
/// Asserts that a Result is OK and assigns its value.
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  ASSERT_OK_AND_ASSIGN_IMPL(AVRO_TEST_CONCAT(result_, __LINE__), lhs, rexpr)

std::string Fixture(const std::string& name) {
  return std::string(ICEFLOE_TESTDATA_DIR) + "/avro/" + name;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::shared_ptr<arrow::Buffer> Bytes(std::string s) { return arrow::Buffer::FromString(s); }

std::string Hex(std::string_view bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

// The canonical JSON of make_fixtures.py.
json ToJson(const AvroValue& v) {
  const auto& s = v.storage();
  switch (v.type()) {
    case AvroType::kNull:
      return nullptr;
    case AvroType::kBoolean:
      return std::get<bool>(s);
    case AvroType::kInt:
    case AvroType::kLong:
      return std::get<int64_t>(s);
    case AvroType::kFloat:
      return static_cast<double>(std::get<float>(s));
    case AvroType::kDouble:
      return std::get<double>(s);
    case AvroType::kString:
      return std::get<std::string>(s);
    case AvroType::kBytes:
    case AvroType::kFixed:
      return json{{"$bytes", Hex(std::get<std::string>(s))}};
    case AvroType::kEnum:
      return std::get<AvroEnum>(s).symbol;
    case AvroType::kRecord: {
      json out = json::object();
      const AvroRecord& r = std::get<AvroRecord>(s);
      for (size_t i = 0; i < r.fields.size(); ++i) {
        out[r.schema->fields[i].name] = ToJson(r.fields[i]);
      }
      return out;
    }
    case AvroType::kArray: {
      json out = json::array();
      for (const AvroValue& item : std::get<AvroArray>(s)) out.push_back(ToJson(item));
      return out;
    }
    case AvroType::kMap: {
      json out = json::object();
      for (const auto& [key, value] : std::get<AvroMap>(s)) out[key] = ToJson(value);
      return out;
    }
    case AvroType::kUnion:
      break;
  }
  ADD_FAILURE() << "value of type union";
  return nullptr;
}

std::unique_ptr<AvroReader> OpenFixture(const std::string& name) {
  auto file = arrow::io::ReadableFile::Open(Fixture(name));
  EXPECT_TRUE(file.ok()) << file.status();
  auto reader = AvroReader::Open(*file, name);
  EXPECT_TRUE(reader.ok()) << reader.status();
  return reader.ok() ? std::move(*reader) : nullptr;
}

void ExpectMatchesOracle(const std::string& avro, const std::string& expected_json) {
  SCOPED_TRACE(avro);
  auto reader = OpenFixture(avro);
  ASSERT_NE(reader, nullptr);
  auto values = reader->ReadAll();
  ASSERT_TRUE(values.ok()) << values.status();
  json expected = json::parse(ReadText(Fixture(expected_json)));
  ASSERT_EQ(values->size(), expected.size());
  for (size_t i = 0; i < values->size(); ++i) {
    EXPECT_EQ(ToJson((*values)[i]), expected[i]) << "object " << i;
  }
}

// --- Avro binary encoding, to build files by hand -------------------------------------------

std::string Varint(uint64_t u) {
  std::string out;
  do {
    uint8_t b = u & 0x7F;
    u >>= 7;
    out.push_back(static_cast<char>(u ? (b | 0x80) : b));
  } while (u);
  return out;
}
std::string Long(int64_t v) {
  return Varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
}
std::string Str(std::string_view s) {
  return Long(static_cast<int64_t>(s.size())) + std::string(s);
}

const std::string kSync = "0123456789abcdef";

std::string Header(std::string_view schema, std::string_view codec = "null") {
  return std::string("Obj\x01", 4) + Long(2) + Str("avro.schema") + Str(schema) +
         Str("avro.codec") + Str(codec) + Long(0) + kSync;
}
std::string Block(int64_t count, std::string_view data) { return Long(count) + Str(data) + kSync; }

arrow::Result<std::vector<AvroValue>> ReadAllBytes(std::string bytes,
                                                   const std::string& path = "mem://t.avro",
                                                   const AvroReaderOptions& options = {}) {
  ARROW_ASSIGN_OR_RAISE(auto reader,
                        AvroReader::OpenBuffer(Bytes(std::move(bytes)), path, options));
  return reader->ReadAll();
}

// The status message, or "" when OK; for EXPECT_THAT-free checks.
template <typename T>
std::string Message(const arrow::Result<T>& r) {
  return r.ok() ? "" : r.status().ToString();
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// --- Fixtures written by fastavro and pyiceberg ----------------------------------------------

class AllTypesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AllTypesTest, MatchesFastavro) {
  ExpectMatchesOracle("all_types_" + GetParam() + ".avro", "all_types.json");
}

TEST_P(AllTypesTest, HeaderAndCodec) {
  auto reader = OpenFixture("all_types_" + GetParam() + ".avro");
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->codec(), GetParam());
  ASSERT_NE(reader->FindMetadata("avro.schema"), nullptr);
  EXPECT_EQ(reader->FindMetadata("nope"), nullptr);
  EXPECT_EQ(reader->metadata().at("avro.codec"), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Codecs, AllTypesTest,
                         ::testing::Values("null", "deflate", "snappy", "zstandard"));

TEST(AvroReaderTest, AllTypesSchema) {
  auto reader = OpenFixture("all_types_null.avro");
  ASSERT_NE(reader, nullptr);
  const AvroSchema& s = *reader->schema();
  ASSERT_EQ(s.type, AvroType::kRecord);
  EXPECT_EQ(s.name, "icefloe.test.AllTypes");
  ASSERT_EQ(s.fields.size(), 19u);
  auto field = [&](std::string_view name) { return s.fields[s.FieldIndex(name)].schema; };
  EXPECT_EQ(field("fx")->type, AvroType::kFixed);
  EXPECT_EQ(field("fx")->fixed_size, 4);
  EXPECT_EQ(field("fx")->name, "icefloe.test.Quad");
  EXPECT_EQ(field("fx2"), field("fx"));  // a named reference shares the node
  EXPECT_EQ(field("point")->name, "geo.Point");
  EXPECT_EQ(field("points")->items, field("point"));
  EXPECT_EQ(field("e")->symbols, (std::vector<std::string>{"RED", "GREEN", "BLUE"}));
  EXPECT_EQ(field("multi")->branches[3], field("e"));
  EXPECT_EQ(field("multi")->branches[4], field("fx"));
  EXPECT_EQ(field("ts")->type, AvroType::kLong);
  EXPECT_EQ(field("ts")->logical_type, "timestamp-micros");
  EXPECT_EQ(field("opt")->NullableBranch(), 1);
  EXPECT_EQ(field("opt_rev")->NullableBranch(), 0);
  EXPECT_EQ(field("multi")->NullableBranch(), -1);
  EXPECT_EQ(s.FieldIndex("missing"), -1);
}

TEST(AvroReaderTest, TypedAccess) {
  auto reader = OpenFixture("all_types_deflate.avro");
  ASSERT_NE(reader, nullptr);
  AvroValue row;
  ASSERT_TRUE(*reader->Next(&row));  // row 0
  ASSERT_TRUE(*reader->Next(&row));  // row 1
  EXPECT_EQ(*row.Get<int32_t>("i"), -1);
  EXPECT_EQ(*row.Get<int64_t>("i"), -1);  // int widens to long
  EXPECT_EQ(*row.Get<int64_t>("l"), -1);
  EXPECT_EQ(*row.Get<bool>("b"), false);
  EXPECT_EQ(*row.Get<float>("f"), -25.65625f);
  EXPECT_EQ(*row.Get<double>("f"), -25.65625);  // float widens to double
  EXPECT_EQ(*row.Get<std::string_view>("s"), "héllo wörld");
  EXPECT_EQ(*row.Get<std::string_view>("fx"), std::string("\x01\x02\x03\xfe", 4));
  EXPECT_EQ((*row.Get<const AvroValue*>("e"))->storage().index(), 9u);
  EXPECT_EQ((*row.Get<const AvroRecord*>("point"))->fields.size(), 2u);
  EXPECT_EQ((*row.Get<const AvroArray*>("points"))->size(), 1u);
  EXPECT_EQ((*row.Get<const AvroMap*>("tags"))->at(0).first, "t0");
  EXPECT_EQ(*row.Get<std::string_view>("opt"), "opt1");
  EXPECT_EQ(row.FindField("opt")->union_branch(), 1);
  EXPECT_EQ(row.FindField("opt_rev")->union_branch(), 1);
  EXPECT_EQ(row.FindField("opt_rev")->NotNull(), nullptr);
  EXPECT_EQ(row.FindField("i")->union_branch(), -1);
  EXPECT_EQ(row.FindField("missing"), nullptr);
  EXPECT_EQ(row.FindField(7), nullptr);  // no field ids in this schema
  EXPECT_EQ(*row.GetOptional<int64_t>("opt_rev"), std::nullopt);
  EXPECT_EQ(*row.GetOptional<int64_t>("missing"), std::nullopt);
  EXPECT_EQ(*row.FindField("multi")->As<int32_t>(), 1);

  auto wrong = row.Get<std::string_view>("i");
  ASSERT_TRUE(wrong.status().IsInvalid());
  EXPECT_EQ(wrong.status().message(),
            "field 'i' of record 'icefloe.test.AllTypes' is int, expected string, bytes or "
            "fixed");
  auto null = row.Get<int64_t>("opt_rev");
  EXPECT_TRUE(Contains(null.status().message(), "field 'opt_rev'")) << null.status();
  EXPECT_TRUE(Contains(null.status().message(), "is null")) << null.status();
  auto missing = row.Get<int64_t>("nope");
  EXPECT_EQ(missing.status().message(), "record 'icefloe.test.AllTypes' has no field named 'nope'");
  EXPECT_TRUE(row.Get<int32_t>("l").status().IsInvalid());                  // long does not narrow
  EXPECT_TRUE(row.FindField("i")->Get<int32_t>("x").status().IsInvalid());  // not a record
  EXPECT_TRUE(row.FindField("i")->GetOptional<int32_t>(1).status().IsInvalid());
}

TEST(AvroReaderTest, IcebergStyleManifest) {
  ExpectMatchesOracle("iceberg_manifest.avro", "iceberg_manifest.json");
  auto reader = OpenFixture("iceberg_manifest.avro");
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->codec(), "deflate");
  EXPECT_EQ(reader->metadata().at("format-version"), "2");
  EXPECT_EQ(reader->metadata().at("partition-spec-id"), "0");
  EXPECT_EQ(reader->metadata().at("content"), "data");
  EXPECT_TRUE(json::accept(reader->metadata().at("partition-spec")));
  EXPECT_TRUE(json::accept(reader->metadata().at("schema")));

  const AvroSchema& entry = *reader->schema();
  const AvroSchema& data_file = *entry.fields[entry.FieldIndex(2)].schema;
  EXPECT_EQ(data_file.fields[data_file.FieldIndex(100)].name, "file_path");
  const AvroSchema& sizes = *data_file.fields[data_file.FieldIndex(108)].schema;
  ASSERT_EQ(sizes.NullableBranch(), 1);
  const AvroSchema& sizes_array = *sizes.branches[1];
  EXPECT_EQ(sizes_array.type, AvroType::kArray);
  EXPECT_EQ(sizes_array.logical_type, "map");
  EXPECT_EQ(sizes_array.items->fields[0].field_id, 117);
  EXPECT_EQ(sizes_array.items->fields[1].field_id, 118);
  const AvroSchema& properties = *data_file.fields[data_file.FieldIndex(200)].schema;
  EXPECT_EQ(properties.key_id, 201);
  EXPECT_EQ(properties.value_id, 202);
  const AvroSchema& splits = *data_file.fields[data_file.FieldIndex(132)].schema->branches[1];
  EXPECT_EQ(splits.element_id, 133);
  EXPECT_EQ(splits.key_id, std::nullopt);

  AvroValue e;
  ASSERT_TRUE(*reader->Next(&e));
  EXPECT_EQ(*e.Get<int32_t>(0), 0);
  EXPECT_EQ(**e.GetOptional<int64_t>(3), 0);
  EXPECT_EQ(*e.GetOptional<int64_t>(4), std::nullopt);
  ASSERT_OK_AND_ASSIGN(const AvroValue* df, e.Get<const AvroValue*>(2));
  EXPECT_EQ(*df->Get<std::string_view>(100), "s3://bucket/table/data/day=0/file-0.parquet");
  EXPECT_EQ(*df->Get<int64_t>(103), 100);
  EXPECT_EQ(*(*df->Get<const AvroValue*>(102))->Get<int32_t>(1000), 19000);
  ASSERT_OK_AND_ASSIGN(auto column_sizes, df->GetOptional<const AvroArray*>(108));
  ASSERT_TRUE(column_sizes.has_value());
  ASSERT_EQ((*column_sizes)->size(), 3u);
  EXPECT_EQ(*(*column_sizes)->at(2).Get<int32_t>(117), 3);
  EXPECT_EQ(*(*column_sizes)->at(2).Get<int64_t>(118), 30);
  auto bad = df->Get<std::string_view>(103);
  EXPECT_EQ(bad.status().message(),
            "field 'record_count' (id 103) of record 'r2' is long, expected string, bytes or "
            "fixed");
  EXPECT_EQ(df->Get<int64_t>(999).status().message(), "record 'r2' has no field with id 999");
}

TEST(AvroReaderTest, PyicebergManifestAndList) {
  ExpectMatchesOracle("pyiceberg_manifest.avro", "pyiceberg_manifest.json");
  ExpectMatchesOracle("pyiceberg_manifest_list.avro", "pyiceberg_manifest_list.json");

  auto list = OpenFixture("pyiceberg_manifest_list.avro");
  ASSERT_NE(list, nullptr);
  EXPECT_EQ(list->metadata().at("format-version"), "2");
  ASSERT_OK_AND_ASSIGN(auto manifests, list->ReadAll());
  ASSERT_EQ(manifests.size(), 1u);
  ASSERT_OK_AND_ASSIGN(std::string_view manifest_path, manifests[0].Get<std::string_view>(500));
  EXPECT_TRUE(manifest_path.ends_with("-m0.avro")) << manifest_path;
  EXPECT_GT(*manifests[0].Get<int64_t>(501), 0);
  EXPECT_EQ(*manifests[0].Get<int32_t>(517), 0);  // data manifest

  auto manifest = OpenFixture("pyiceberg_manifest.avro");
  ASSERT_NE(manifest, nullptr);
  EXPECT_EQ(manifest->metadata().at("content"), "data");
  EXPECT_TRUE(json::accept(manifest->metadata().at("partition-spec")));
  ASSERT_OK_AND_ASSIGN(auto entries, manifest->ReadAll());
  ASSERT_EQ(entries.size(), 2u);
  int64_t rows = 0;
  for (const AvroValue& entry : entries) {
    EXPECT_EQ(*entry.Get<int32_t>(0), 1);  // added
    ASSERT_OK_AND_ASSIGN(const AvroValue* df, entry.Get<const AvroValue*>(2));
    EXPECT_EQ(*df->Get<std::string_view>(101), "PARQUET");
    EXPECT_TRUE(df->Get<std::string_view>(100)->ends_with(".parquet"));
    rows += *df->Get<int64_t>(103);
  }
  EXPECT_EQ(rows, 3);
}

// --- Schemas ----------------------------------------------------------------------------------

TEST(AvroSchemaTest, PrimitivesAndAttributes) {
  ASSERT_OK_AND_ASSIGN(auto s, ParseAvroSchema(R"("long")"));
  EXPECT_EQ(s->type, AvroType::kLong);
  ASSERT_OK_AND_ASSIGN(s, ParseAvroSchema(
                              R"({"type": "fixed", "name": "d", "size": 16,
                                  "logicalType": "decimal", "precision": 38, "scale": 2})"));
  EXPECT_EQ(s->logical_type, "decimal");
  EXPECT_EQ(s->attributes.at("precision"), "38");
  EXPECT_EQ(s->min_encoded_bytes, 16);
  ASSERT_OK_AND_ASSIGN(s, ParseAvroSchema(R"({"type": {"type": "array", "items": "int"}})"));
  EXPECT_EQ(s->type, AvroType::kArray);
  for (std::string_view name : {"null", "boolean", "int", "long", "float", "double", "bytes",
                                "string", "record", "enum", "array", "map", "fixed", "union"}) {
    EXPECT_NE(AvroTypeName(AvroType::kNull), "unknown") << name;
  }
}

TEST(AvroSchemaTest, NamespacesAndReferences) {
  ASSERT_OK_AND_ASSIGN(auto s, ParseAvroSchema(R"({
    "type": "record", "name": "a.Outer", "fields": [
      {"name": "x", "type": {"type": "record", "name": "Inner", "fields": []}},
      {"name": "y", "type": "Inner"},
      {"name": "z", "type": "a.Inner"},
      {"name": "w", "type": {"type": "enum", "name": "E", "namespace": "b", "symbols": ["A"]}},
      {"name": "v", "type": "b.E"}]})"));
  EXPECT_EQ(s->name, "a.Outer");
  EXPECT_EQ(s->fields[0].schema->name, "a.Inner");
  EXPECT_EQ(s->fields[1].schema, s->fields[0].schema);
  EXPECT_EQ(s->fields[2].schema, s->fields[0].schema);
  EXPECT_EQ(s->fields[4].schema, s->fields[3].schema);
  EXPECT_EQ(s->min_encoded_bytes, 2);  // two enums; the empty records take no bytes
}

TEST(AvroSchemaTest, Errors) {
  const std::pair<const char*, const char*> cases[] = {
      {"{", "malformed JSON"},
      {"42", "must be a string, array or object"},
      {R"("Nope")", "unknown type name 'Nope'"},
      {R"({"name": "x"})", "without \"type\""},
      {R"({"type": "record", "fields": []})", "without a string \"name\""},
      {R"({"type": "record", "name": "r"})", "without a \"fields\" array"},
      {R"({"type": "record", "name": "r", "fields": [{"name": "a", "type": "r"}]})",
       "recursive type 'r'"},
      {R"(["int", {"type": "fixed", "name": "f", "size": 1}, {"type": "enum", "name": "f",
          "symbols": []}])",
       "defined twice"},
      {R"(["null", ["int"]])", "a union directly inside a union"},
      {"[]", "empty union"},
      {R"({"type": "fixed", "name": "f", "size": -1})", "valid \"size\""},
      {R"({"type": "enum", "name": "e", "symbols": [1]})", "non-string symbol"},
      {R"({"type": "array"})", "without \"items\""},
      {R"({"type": "map"})", "without \"values\""},
      {R"({"type": "record", "name": "r", "fields": [{"name": "a", "type": "int",
          "field-id": "x"}]})",
       "\"field-id\" is not a 32-bit integer"},
  };
  for (const auto& [schema, message] : cases) {
    auto s = ParseAvroSchema(schema);
    ASSERT_FALSE(s.ok()) << schema;
    EXPECT_TRUE(s.status().IsInvalid()) << schema;
    EXPECT_TRUE(Contains(s.status().message(), message)) << schema << ": " << s.status();
  }
}

TEST(AvroSchemaTest, DepthIsBounded) {
  std::string deep = R"("int")";
  for (int i = 1; i < kMaxAvroSchemaDepth; ++i)
    deep = R"({"type": "array", "items": )" + deep + "}";
  EXPECT_TRUE(ParseAvroSchema(deep).ok());
  deep = R"({"type": "array", "items": )" + deep + "}";
  auto s = ParseAvroSchema(deep);
  EXPECT_TRUE(Contains(s.status().message(), "nested deeper than 64")) << s.status();
  // Deep JSON of any shape fails cleanly too.
  EXPECT_FALSE(ParseAvroSchema(std::string(100000, '[') + std::string(100000, ']')).ok());
}

// --- Hand-made files: each kind of corruption gives a precise error ---------------------------

TEST(AvroReaderTest, HandMadeFile) {
  std::string file = Header(R"({"type": "record", "name": "r", "fields": [
      {"name": "a", "type": "long"}, {"name": "b", "type": ["null", "string"]}]})");
  file += Block(2, Long(-5) + Long(0) + Long(300) + Long(1) + Str("hi"));
  file += Block(1, Long(int64_t{1} << 62) + Long(0));
  ASSERT_OK_AND_ASSIGN(auto values, ReadAllBytes(file));
  ASSERT_EQ(values.size(), 3u);
  EXPECT_EQ(*values[0].Get<int64_t>("a"), -5);
  EXPECT_TRUE(values[0].FindField("b")->is_null());
  EXPECT_EQ(*values[1].Get<int64_t>("a"), 300);
  EXPECT_EQ(*values[1].Get<std::string_view>("b"), "hi");
  EXPECT_EQ(*values[2].Get<int64_t>("a"), int64_t{1} << 62);
}

TEST(AvroReaderTest, PreciseErrors) {
  const std::string header = Header(R"("long")");
  const auto data_at = static_cast<int64_t>(header.size()) + 2;  // after count and size
  struct Case {
    std::string file;
    std::string message;
  };
  const Case cases[] = {
      {"Obj\x02", "not an Avro object container file (no 'Obj\\x01' magic) at offset 0"},
      {"", "no 'Obj\\x01' magic"},
      {std::string("Obj\x01", 4) + Long(0) + kSync, "no avro.schema in its header"},
      {std::string("Obj\x01", 4) + Long(1) + Str("avro.schema"), "truncated varint at offset 17"},
      {std::string("Obj\x01", 4) + Long(1000), "metadata map block count 1000 exceeds"},
      {std::string("Obj\x01", 4) + Long(1) + Long(-3) + "xx", "metadata key length -3 overruns"},
      {Header(R"("nope")"), "invalid Avro schema: unknown type name 'nope'"},
      {header + Block(1, std::string(11, '\xff')),
       "varint longer than 10 bytes or over 64 bits at offset " + std::to_string(data_at)},
      {header + Block(1, std::string(9, '\xff') + '\x02'), "varint longer than 10 bytes"},
      {header + Long(-1), "negative object count -1 at offset " + std::to_string(header.size())},
      {header + Long(1) + Long(100) + "x", "block size 100 overruns the 1 bytes left"},
      {header + Long(1) + Long(1) + Long(0) + "0123456789abcdeX",
       "sync marker does not match the header's at offset " + std::to_string(header.size() + 3)},
      {header + Block(5, Long(1)), "block of 5 objects has only 1 bytes"},
      {header + Block(1, Long(1) + Long(2)), "1 bytes after the last object of the block"},
      {header + Block(1, "\x80"), "truncated varint"},
  };
  for (const Case& c : cases) {
    auto r = ReadAllBytes(c.file, "s3://b/m.avro");
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_TRUE(r.status().IsInvalid()) << r.status();
    EXPECT_TRUE(Contains(r.status().message(), "corrupt Avro file s3://b/m.avro: ")) << r.status();
    EXPECT_TRUE(Contains(r.status().message(), c.message))
        << "want: " << c.message << "\n got: " << r.status();
  }
}

TEST(AvroReaderTest, ValueErrors) {
  struct Case {
    const char* schema;
    std::string data;
    const char* message;
  };
  const Case cases[] = {
      {R"("boolean")", "\x02", "boolean byte 2"},
      {R"("int")", Long(int64_t{1} << 31), "int 2147483648 out of range"},
      {R"({"type": "record", "name": "r", "fields": [{"name": "s", "type": "string"},
          {"name": "f", "type": "float"}]})",
       Str("ab") + "xy", "float of 4 bytes overruns the 2 bytes left"},
      {R"("string")", Long(-1), "string length -1 overruns"},
      {R"("bytes")", Long(50) + "abc", "bytes length 50 overruns the 3 bytes left"},
      {R"({"type": "record", "name": "r", "fields": [{"name": "s", "type": "string"},
          {"name": "f", "type": {"type": "fixed", "name": "f", "size": 8}}]})",
       Str("abcdefgh") + "x", "fixed of 8 bytes overruns the 1 bytes left"},
      {R"({"type": "enum", "name": "e", "symbols": ["A"]})", Long(1),
       "enum index 1 out of range for 1 symbols of 'e'"},
      {R"(["null", "int"])", Long(2), "union branch 2 out of range for 2 branches"},
      {R"({"type": "array", "items": "long"})", Long(int64_t{1} << 40),
       "array block count 1099511627776 exceeds the 0 bytes left"},
      {R"({"type": "array", "items": "long"})", Long(-2) + Long(99) + Long(1) + Long(2),
       "array block size 99 overruns"},
      {R"({"type": "array", "items": "long"})", Long(std::numeric_limits<int64_t>::min()),
       "invalid array block count"},
      {R"({"type": "map", "values": "long"})", Long(3) + Str("k") + Long(1),
       "map block count 3 exceeds the 3 bytes left"},
      // Values that take no bytes cannot be counted against the data: the value budget stops
      // a huge count of them, instead of a huge allocation or an endless loop.
      {R"({"type": "array", "items": "null"})", Long(int64_t{1} << 60) + Long(0),
       "more values than the file's size allows"},
  };
  for (const Case& c : cases) {
    auto r = ReadAllBytes(Header(c.schema) + Block(1, c.data));
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_TRUE(r.status().IsInvalid()) << r.status();
    EXPECT_TRUE(Contains(r.status().message(), c.message))
        << "want: " << c.message << "\n got: " << r.status();
  }
}

TEST(AvroReaderTest, ExponentialSchemaIsBudgeted) {
  // r40 holds two r39, each holding two r38, ...: 2^40 empty records from zero bytes of data.
  std::string schema = R"({"type": "record", "name": "r0", "fields": []})";
  for (int i = 1; i <= 40; ++i) {
    std::string prev = "r" + std::to_string(i - 1);
    schema = R"({"type": "record", "name": "r)" + std::to_string(i) +
             R"(", "fields": [{"name": "a", "type": )" + schema + R"(}, {"name": "b", "type": ")" +
             prev + R"("}]})";
  }
  auto r = ReadAllBytes(Header(schema) + Block(1, ""));
  EXPECT_TRUE(Contains(r.status().message(), "more values than the file's size allows"))
      << r.status();
  // Objects of a schema that takes no bytes: a huge count stops at the budget too.
  r = ReadAllBytes(Header(R"("null")") + Block(int64_t{1} << 62, ""));
  EXPECT_TRUE(Contains(r.status().message(), "more values than the file's size allows"))
      << r.status();
  ASSERT_OK_AND_ASSIGN(auto few, ReadAllBytes(Header(R"("null")") + Block(3, "")));
  EXPECT_EQ(few.size(), 3u);
}

TEST(AvroReaderTest, EmptyFileHasNoObjects) {
  ASSERT_OK_AND_ASSIGN(auto values, ReadAllBytes(Header(R"("long")")));
  EXPECT_TRUE(values.empty());
  ASSERT_OK_AND_ASSIGN(values, ReadAllBytes(Header(R"("long")") + Block(0, "")));
  EXPECT_TRUE(values.empty());
}

TEST(AvroReaderTest, ErrorsAreSticky) {
  ASSERT_OK_AND_ASSIGN(
      auto reader,
      AvroReader::OpenBuffer(Bytes(Header(R"("long")") + Block(2, Long(1) + "\xff")), "t.avro"));
  AvroValue v;
  ASSERT_TRUE(*reader->Next(&v));
  auto first = reader->Next(&v);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(reader->Next(&v).status(), first.status());
}

TEST(AvroReaderTest, UnsupportedCodec) {
  auto r = AvroReader::OpenBuffer(Bytes(Header(R"("long")", "xz")), "t.avro");
  EXPECT_TRUE(r.status().IsNotImplemented()) << r.status();
  EXPECT_TRUE(Contains(r.status().message(), "codec 'xz'")) << r.status();
}

TEST(AvroReaderTest, FileSizeLimit) {
  AvroReaderOptions options;
  options.max_file_bytes = 100;
  auto file = arrow::io::ReadableFile::Open(Fixture("all_types_null.avro"));
  ASSERT_TRUE(file.ok());
  auto r = AvroReader::Open(*file, "big.avro", options);
  EXPECT_TRUE(r.status().IsOutOfMemory()) << r.status();
  EXPECT_TRUE(Contains(r.status().message(), "big.avro")) << r.status();
}

// --- Codecs -----------------------------------------------------------------------------------

std::string Compress(arrow::Compression::type type, std::string_view data) {
  arrow::util::GZipCodecOptions gzip;
  gzip.gzip_format = arrow::util::GZipFormat::DEFLATE;
  auto codec = type == arrow::Compression::GZIP ? arrow::util::Codec::Create(type, gzip)
                                                : arrow::util::Codec::Create(type);
  EXPECT_TRUE(codec.ok());
  const auto* in = reinterpret_cast<const uint8_t*>(data.data());
  std::string out(static_cast<size_t>((*codec)->MaxCompressedLen(data.size(), in)), '\0');
  auto n = (*codec)->Compress(data.size(), in, out.size(), reinterpret_cast<uint8_t*>(out.data()));
  EXPECT_TRUE(n.ok());
  out.resize(static_cast<size_t>(*n));
  return out;
}

std::string BigEndianCrc(uint32_t crc) {
  return {static_cast<char>(crc >> 24), static_cast<char>(crc >> 16), static_cast<char>(crc >> 8),
          static_cast<char>(crc)};
}

TEST(AvroCodecTest, DeflateGrowsItsBufferUpToTheCap) {
  // 8 MiB of one long value compresses to a few KiB; the first output buffer is 64 KiB.
  std::string data;
  for (int i = 0; i < (8 << 20); ++i) data += Long(0);
  const std::string file =
      Header(R"("long")", "deflate") + Block(8 << 20, Compress(arrow::Compression::GZIP, data));
  ASSERT_OK_AND_ASSIGN(auto reader, AvroReader::OpenBuffer(Bytes(file), "d.avro"));
  AvroValue v;
  int64_t count = 0;
  while (*reader->Next(&v)) ++count;
  EXPECT_EQ(count, 8 << 20);

  AvroReaderOptions options;
  options.max_block_bytes = 1 << 20;
  auto r = ReadAllBytes(file, "d.avro", options);
  EXPECT_TRUE(r.status().IsOutOfMemory()) << r.status();
  EXPECT_TRUE(Contains(r.status().message(), "decompresses to more than 1048576 bytes"))
      << r.status();
}

TEST(AvroCodecTest, TruncatedAndGarbageCompressedData) {
  const std::string data = Long(1) + Long(2) + Long(3);
  for (auto [codec, type] : {std::pair{"deflate", arrow::Compression::GZIP},
                             std::pair{"zstandard", arrow::Compression::ZSTD}}) {
    SCOPED_TRACE(codec);
    std::string compressed = Compress(type, data);
    ASSERT_OK_AND_ASSIGN(auto ok, ReadAllBytes(Header(R"("long")", codec) + Block(3, compressed)));
    EXPECT_EQ(ok.size(), 3u);
    compressed.pop_back();
    auto r = ReadAllBytes(Header(R"("long")", codec) + Block(3, compressed));
    EXPECT_TRUE(r.status().IsInvalid()) << r.status();
    auto g = ReadAllBytes(Header(R"("long")", codec) + Block(3, "garbage!"));
    EXPECT_TRUE(g.status().IsInvalid()) << g.status();
  }
}

TEST(AvroCodecTest, ZstandardConcatenatedFrames) {
  const std::string block = Compress(arrow::Compression::ZSTD, Long(1) + Long(2)) +
                            Compress(arrow::Compression::ZSTD, Long(3));
  ASSERT_OK_AND_ASSIGN(auto values,
                       ReadAllBytes(Header(R"("long")", "zstandard") + Block(3, block)));
  ASSERT_EQ(values.size(), 3u);
  EXPECT_EQ(*values[2].As<int64_t>(), 3);
}

TEST(AvroCodecTest, SnappyChecksItsCrc) {
  const std::string data = Long(7) + Long(8);
  const std::string compressed = Compress(arrow::Compression::SNAPPY, data);
  const uint32_t crc = 0xc2ed2f15;  // zlib.crc32 of the two varints 0x0e 0x10
  ASSERT_OK_AND_ASSIGN(auto values, ReadAllBytes(Header(R"("long")", "snappy") +
                                                 Block(2, compressed + BigEndianCrc(crc))));
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(*values[1].As<int64_t>(), 8);
  auto r =
      ReadAllBytes(Header(R"("long")", "snappy") + Block(2, compressed + BigEndianCrc(crc ^ 1)));
  EXPECT_TRUE(Contains(r.status().message(), "snappy block CRC32 mismatch")) << r.status();
  r = ReadAllBytes(Header(R"("long")", "snappy") + Block(2, "abc"));
  EXPECT_TRUE(Contains(r.status().message(), "snappy block shorter than its CRC")) << r.status();
  // A preamble that claims 2 GiB gives OutOfMemory before any allocation.
  r = ReadAllBytes(Header(R"("long")", "snappy") + Block(2, "\x80\x80\x80\x80\x08xxxx"));
  EXPECT_TRUE(r.status().IsOutOfMemory()) << r.status();
}

// --- Corruption: truncation at every byte and random byte flips ---------------------------------

const char* const kCorruptibleFixtures[] = {
    "all_types_null.avro",         "all_types_deflate.avro", "all_types_snappy.avro",
    "all_types_zstandard.avro",    "iceberg_manifest.avro",  "pyiceberg_manifest.avro",
    "pyiceberg_manifest_list.avro"};

TEST(AvroCorruptionTest, TruncatedAtEveryOffset) {
  for (const char* name : kCorruptibleFixtures) {
    SCOPED_TRACE(name);
    const std::string full = ReadText(Fixture(name));
    ASSERT_OK_AND_ASSIGN(auto all, ReadAllBytes(full));
    const std::string path = std::string("s3://b/") + name;
    for (size_t n = 0; n < full.size(); ++n) {
      auto r = ReadAllBytes(full.substr(0, n), path);
      if (r.ok()) {
        // Only a cut between blocks leaves a valid file, with fewer objects.
        EXPECT_LT(r->size(), all.size()) << "cut at " << n;
        continue;
      }
      ASSERT_TRUE(r.status().IsInvalid()) << "cut at " << n << ": " << r.status();
      const std::string& m = r.status().message();
      ASSERT_TRUE(Contains(m, "corrupt Avro file " + path + ": ") && Contains(m, " offset "))
          << "cut at " << n << ": " << m;
    }
  }
}

TEST(AvroCorruptionTest, RandomByteFlips) {
  // ICEFLOE_TEST_SEED=<seed> replays a failure.
  const char* env_seed = std::getenv("ICEFLOE_TEST_SEED");
  const uint32_t seed = env_seed != nullptr
                            ? static_cast<uint32_t>(std::strtoul(env_seed, nullptr, 10))
                            : std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed) +
               " (rerun with ICEFLOE_TEST_SEED=" + std::to_string(seed) + ")");
  std::mt19937 rng(seed);
  AvroReaderOptions options;
  options.max_block_bytes = 16 << 20;
  for (const char* name : kCorruptibleFixtures) {
    SCOPED_TRACE(name);
    const std::string full = ReadText(Fixture(name));
    const std::string path = std::string("s3://b/") + name;
    int failures = 0;
    for (int iteration = 0; iteration < 1000; ++iteration) {
      std::string bytes = full;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) {
        bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
      }
      auto r = ReadAllBytes(bytes, path, options);
      if (r.ok()) continue;  // e.g. a flipped string character
      ++failures;
      const arrow::Status& st = r.status();
      ASSERT_TRUE(st.IsInvalid() || st.IsNotImplemented() || st.IsOutOfMemory())
          << "iteration " << iteration << ": " << st;
      ASSERT_TRUE(Contains(st.message(), path)) << "iteration " << iteration << ": " << st;
    }
    EXPECT_GT(failures, 0);
  }
}

TEST(AvroCorruptionTest, WrongSyncMarkerIsNamed) {
  std::string bytes = ReadText(Fixture("all_types_null.avro"));
  // The fixtures' sync marker is bytes 0x30..0x3f; corrupt its second occurrence (after the
  // first block).
  const std::string sync = "0123456789:;<=>?";
  const size_t header_sync = bytes.find(sync);
  const size_t first_block_sync = bytes.find(sync, header_sync + 16);
  ASSERT_NE(first_block_sync, std::string::npos);
  bytes[first_block_sync + 5] = 'X';
  auto r = ReadAllBytes(bytes, "s3://b/m.avro");
  EXPECT_EQ(r.status().message(),
            "corrupt Avro file s3://b/m.avro: sync marker does not match the header's at offset " +
                std::to_string(first_block_sync));
}

}  // namespace
}  // namespace icefloe::iceberg
