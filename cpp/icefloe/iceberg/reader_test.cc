#include "icefloe/iceberg/reader.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <arrow/array.h>
#include <arrow/builder.h>
#include <arrow/compute/api.h>
#include <arrow/compute/initialize.h>
#include <arrow/filesystem/localfs.h>
#include <arrow/io/file.h>
#include <arrow/json/from_string.h>
#include <arrow/table.h>
#include <arrow/util/key_value_metadata.h>
#include <gtest/gtest.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/writer.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/properties.h>
#include <nlohmann/json.hpp>

#include "icefloe/iceberg/deletes.h"
#include "icefloe/iceberg/name_mapping.h"
#include "icefloe/iceberg/puffin.h"

namespace icefloe::iceberg {
namespace {

namespace cp = arrow::compute;
using json = nlohmann::json;

#define ASSERT_OK(expr)                                       \
  do {                                                        \
    arrow::Status _st = (expr);                               \
    ASSERT_TRUE(_st.ok()) << #expr << ": " << _st.ToString(); \
  } while (false)

#define READER_TEST_CONCAT_(a, b) a##b
#define READER_TEST_CONCAT(a, b) READER_TEST_CONCAT_(a, b)
#define ASSERT_OK_AND_ASSIGN_IMPL(result, lhs, rexpr)                       \
  auto result = (rexpr);                                                    \
  ASSERT_TRUE(result.ok()) << #rexpr << ": " << result.status().ToString(); \
  lhs = std::move(*result)
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  ASSERT_OK_AND_ASSIGN_IMPL(READER_TEST_CONCAT(result_, __LINE__), lhs, rexpr)

// An Arrow field carrying an Iceberg field id, as Iceberg writers produce.
std::shared_ptr<arrow::Field> F(const std::string& name, std::shared_ptr<arrow::DataType> type,
                                int32_t id, bool nullable = true) {
  return arrow::field(name, std::move(type), nullable,
                      arrow::key_value_metadata({"PARQUET:field_id"}, {std::to_string(id)}));
}

std::shared_ptr<arrow::Array> FromJson(const std::shared_ptr<arrow::DataType>& type,
                                       const std::string& text) {
  auto array = arrow::json::ArrayFromJSONString(type, text);
  EXPECT_TRUE(array.ok()) << array.status().ToString();
  return array.ValueOrDie();
}

std::shared_ptr<arrow::Table> MakeTable(const std::shared_ptr<arrow::Schema>& schema,
                                        const std::vector<std::string>& columns) {
  arrow::ArrayVector arrays;
  for (int i = 0; i < schema->num_fields(); ++i) {
    arrays.push_back(FromJson(schema->field(i)->type(), columns[i]));
  }
  return arrow::Table::Make(schema, arrays);
}

std::shared_ptr<arrow::Array> Int64Range(int64_t start, int64_t count) {
  arrow::Int64Builder builder;
  for (int64_t i = 0; i < count; ++i) EXPECT_TRUE(builder.Append(start + i).ok());
  return builder.Finish().ValueOrDie();
}

Schema ParseTestSchema(const char* text) {
  auto schema = ParseSchema(json::parse(text));
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  return schema.ValueOrDie();
}

class ReaderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(cp::Initialize().ok()); }

  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "reader_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::string Write(const std::string& name, const std::shared_ptr<arrow::Table>& table,
                    int64_t row_group_rows = 1024, bool store_schema = false) {
    const std::string path = Path(name);
    auto out = arrow::io::FileOutputStream::Open(path);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    parquet::ArrowWriterProperties::Builder arrow_properties;
    if (store_schema) arrow_properties.store_schema();
    auto st =
        parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), *out, row_group_rows,
                                   parquet::default_writer_properties(), arrow_properties.build());
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE((*out)->Close().ok());
    return path;
  }

  // A position delete file holding (file_path, pos) rows.
  std::string WritePositionDeletes(const std::string& name,
                                   const std::vector<std::pair<std::string, int64_t>>& rows,
                                   int64_t row_group_rows = 1024) {
    arrow::StringBuilder paths;
    arrow::Int64Builder positions;
    for (const auto& [path, pos] : rows) {
      EXPECT_TRUE(paths.Append(path).ok());
      EXPECT_TRUE(positions.Append(pos).ok());
    }
    auto schema = arrow::schema({F("file_path", arrow::utf8(), kDeleteFilePathFieldId, false),
                                 F("pos", arrow::int64(), kDeletePosFieldId, false)});
    return Write(
        name,
        arrow::Table::Make(schema, {paths.Finish().ValueOrDie(), positions.Finish().ValueOrDie()}),
        row_group_rows);
  }

  ScanTask Task(const std::string& path) const {
    ScanTask task;
    task.data_file.file_path = path;
    return task;
  }

  static DataFile DeleteFile(FileContent content, const std::string& path,
                             std::vector<int32_t> equality_ids = {}) {
    DataFile file;
    file.content = content;
    file.file_path = path;
    file.equality_ids = std::move(equality_ids);
    return file;
  }

  ReadOptions Options(const Schema& schema, std::vector<int32_t> projection = {}) const {
    ReadOptions options;
    options.open = FileSystemOpener(std::make_shared<arrow::fs::LocalFileSystem>());
    options.schema = &schema;
    options.projection = std::move(projection);
    return options;
  }

  // Reads a task into one batch, checking every batch's schema and size.
  static arrow::Result<std::shared_ptr<arrow::RecordBatch>> ReadAll(const ScanTask& task,
                                                                    const ReadOptions& options,
                                                                    ReadStats* stats = nullptr) {
    ARROW_ASSIGN_OR_RAISE(auto batches, ReadScanTask(task, options, stats));
    ARROW_ASSIGN_OR_RAISE(
        auto schema,
        ToArrowSchema(*options.schema, options.projection.empty() ? nullptr : &options.projection));
    for (const auto& batch : batches) {
      if (!batch->schema()->Equals(*schema, /*check_metadata=*/true)) {
        return arrow::Status::Invalid("batch schema ", batch->schema()->ToString(true),
                                      " != ", schema->ToString(true));
      }
      if (batch->num_rows() == 0 || batch->num_rows() > options.batch_rows) {
        return arrow::Status::Invalid("batch of ", batch->num_rows(), " rows");
      }
      ARROW_RETURN_NOT_OK(batch->ValidateFull());
    }
    ARROW_ASSIGN_OR_RAISE(auto table, arrow::Table::FromRecordBatches(schema, batches));
    return table->CombineChunksToBatch();
  }

  static void ExpectColumn(const arrow::RecordBatch& batch, const std::string& name,
                           const std::string& expected_json) {
    auto column = batch.GetColumnByName(name);
    ASSERT_NE(column, nullptr) << name;
    auto expected = FromJson(column->type(), expected_json);
    EXPECT_TRUE(column->Equals(*expected))
        << name << ": got " << column->ToString() << "\nexpected " << expected->ToString();
  }

  std::filesystem::path dir_;
};

TEST_F(ReaderTest, ProjectsAndReordersByFieldId) {
  Schema schema = ParseTestSchema(R"({"type": "struct", "schema-id": 0, "fields": [
      {"id": 1, "name": "id", "required": true, "type": "long"},
      {"id": 2, "name": "name", "required": false, "type": "string"},
      {"id": 3, "name": "score", "required": false, "type": "double"}]})");
  auto file_schema = arrow::schema({F("id", arrow::int64(), 1, false), F("name", arrow::utf8(), 2),
                                    F("score", arrow::float64(), 3)});
  auto path =
      Write("data.parquet",
            MakeTable(file_schema, {"[1, 2, 3]", R"(["a", null, "c"])", "[0.5, 1.5, null]"}));

  std::shared_ptr<arrow::RecordBatch> all;
  ASSERT_OK_AND_ASSIGN(all, ReadAll(Task(path), Options(schema)));
  EXPECT_EQ(all->schema()->field_names(), (std::vector<std::string>{"id", "name", "score"}));
  ExpectColumn(*all, "name", R"(["a", null, "c"])");

  std::shared_ptr<arrow::RecordBatch> projected;
  ASSERT_OK_AND_ASSIGN(projected, ReadAll(Task(path), Options(schema, {3, 1})));
  EXPECT_EQ(projected->schema()->field_names(), (std::vector<std::string>{"score", "id"}));
  ExpectColumn(*projected, "score", "[0.5, 1.5, null]");
  ExpectColumn(*projected, "id", "[1, 2, 3]");
}

TEST_F(ReaderTest, EvolvesSchemaByFieldId) {
  // Written before: id was an int, the name column was "old_name", score a
  // float, price decimal(5,2), and "gone" existed. Since then the name was
  // renamed, gone dropped, "added" added, and types promoted.
  auto file_schema =
      arrow::schema({F("id", arrow::int32(), 1, false), F("old_name", arrow::utf8(), 2),
                     F("gone", arrow::int64(), 4), F("score", arrow::float32(), 3),
                     F("price", arrow::decimal128(5, 2), 6)});
  auto path = Write("old.parquet", MakeTable(file_schema, {"[1, 2]", R"(["x", "y"])", "[7, 8]",
                                                           "[0.5, null]", R"(["1.25", "-3.00"])"}));
  Schema schema = ParseTestSchema(R"J({"type": "struct", "schema-id": 1, "fields": [
      {"id": 1, "name": "id", "required": true, "type": "long"},
      {"id": 2, "name": "new_name", "required": false, "type": "string"},
      {"id": 3, "name": "score", "required": false, "type": "double"},
      {"id": 6, "name": "price", "required": false, "type": "decimal(9,2)"},
      {"id": 5, "name": "added", "required": false, "type": "string"}]})J");

  std::shared_ptr<arrow::RecordBatch> batch;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(Task(path), Options(schema)));
  EXPECT_EQ(batch->schema()->field_names(),
            (std::vector<std::string>{"id", "new_name", "score", "price", "added"}));
  ExpectColumn(*batch, "id", "[1, 2]");
  ExpectColumn(*batch, "new_name", R"(["x", "y"])");
  ExpectColumn(*batch, "score", "[0.5, null]");
  ExpectColumn(*batch, "price", R"(["1.25", "-3.00"])");
  ExpectColumn(*batch, "added", "[null, null]");

  // Only columns the file lacks: nothing is decoded, rows still count.
  ReadStats stats;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(Task(path), Options(schema, {5}), &stats));
  ExpectColumn(*batch, "added", "[null, null]");
  EXPECT_EQ(stats.bytes_read, 0);
}

TEST_F(ReaderTest, ReadsNestedColumnsById) {
  auto file_loc = arrow::struct_({F("latitude", arrow::float32(), 10),
                                  F("dropped", arrow::utf8(), 16), F("lon", arrow::float64(), 11)});
  auto file_tags = arrow::list(F("element", arrow::utf8(), 13));
  auto file_attrs = std::make_shared<arrow::MapType>(F("key", arrow::utf8(), 14, false),
                                                     F("value", arrow::int32(), 15));
  auto file_schema = arrow::schema({F("id", arrow::int64(), 1), F("loc", file_loc, 2),
                                    F("tags", file_tags, 3), F("attrs", file_attrs, 4)});
  auto path = Write(
      "nested.parquet",
      MakeTable(file_schema, {"[1, 2, 3]",
                              R"([{"latitude": 1.5, "dropped": "q", "lon": 2.5}, null,
                     {"latitude": null, "dropped": "r", "lon": -1}])",
                              R"([["a", "b"], [], null])", R"([[["k", 1], ["l", 2]], null, []])"}));
  Schema schema = ParseTestSchema(R"({"type": "struct", "schema-id": 2, "fields": [
      {"id": 1, "name": "id", "required": false, "type": "long"},
      {"id": 2, "name": "loc", "required": false, "type": {"type": "struct", "fields": [
          {"id": 11, "name": "lon", "required": false, "type": "double"},
          {"id": 10, "name": "lat", "required": false, "type": "double"},
          {"id": 12, "name": "alt", "required": false, "type": "int"}]}},
      {"id": 3, "name": "tags", "required": false,
       "type": {"type": "list", "element-id": 13, "element": "string", "element-required": false}},
      {"id": 4, "name": "attrs", "required": false,
       "type": {"type": "map", "key-id": 14, "key": "string", "value-id": 15, "value": "long",
                "value-required": false}}]})");

  std::shared_ptr<arrow::RecordBatch> batch;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(Task(path), Options(schema, {2, 3, 4})));
  ExpectColumn(*batch, "loc",
               R"([{"lon": 2.5, "lat": 1.5, "alt": null}, null,
                   {"lon": -1, "lat": null, "alt": null}])");
  ExpectColumn(*batch, "tags", R"([["a", "b"], [], null])");
  ExpectColumn(*batch, "attrs", R"([[["k", 1], ["l", 2]], null, []])");

  // The struct child the table dropped is not decoded; a table that still
  // has it reads more bytes for the same column.
  ReadStats without_dropped;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(Task(path), Options(schema, {2}), &without_dropped));
  Schema with_dropped = schema;
  auto loc_type = std::make_shared<Type>(*schema.fields[1].type);
  loc_type->fields.push_back({16, "dropped", false, MakePrimitive(TypeId::kString), "", ""});
  with_dropped.fields[1].type = loc_type;
  ReadStats stats;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(Task(path), Options(with_dropped, {2}), &stats));
  ExpectColumn(*batch, "loc",
               R"([{"lon": 2.5, "lat": 1.5, "alt": null, "dropped": "q"}, null,
                   {"lon": -1, "lat": null, "alt": null, "dropped": "r"}])");
  EXPECT_GT(without_dropped.bytes_read, 0);
  EXPECT_LT(without_dropped.bytes_read, stats.bytes_read);
}

TEST_F(ReaderTest, DecodesDictionaryColumns) {
  auto dict_type = arrow::dictionary(arrow::int32(), arrow::utf8());
  auto indices = FromJson(arrow::int32(), "[0, 1, 0, null, 2]");
  auto dictionary = FromJson(arrow::utf8(), R"(["red", "green", "blue"])");
  auto column = std::make_shared<arrow::DictionaryArray>(dict_type, indices, dictionary);
  auto file_schema = arrow::schema({F("color", dict_type, 1)});
  // store_schema makes parquet::arrow read the column back as a dictionary.
  auto path = Write("dict.parquet", arrow::Table::Make(file_schema, {column}), 1024, true);
  std::shared_ptr<arrow::io::RandomAccessFile> input;
  ASSERT_OK_AND_ASSIGN(input, arrow::io::ReadableFile::Open(path));
  std::unique_ptr<parquet::arrow::FileReader> parquet_reader;
  ASSERT_OK_AND_ASSIGN(parquet_reader,
                       parquet::arrow::OpenFile(input, arrow::default_memory_pool()));
  std::shared_ptr<arrow::Schema> read_schema;
  ASSERT_OK(parquet_reader->GetSchema(&read_schema));
  ASSERT_EQ(read_schema->field(0)->type()->id(), arrow::Type::DICTIONARY);

  Schema schema = ParseTestSchema(R"({"type": "struct", "fields": [
      {"id": 1, "name": "color", "required": false, "type": "string"}]})");
  std::shared_ptr<arrow::RecordBatch> batch;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(Task(path), Options(schema)));
  ExpectColumn(*batch, "color", R"(["red", "green", "red", null, "blue"])");
}

TEST_F(ReaderTest, NameMappingGivesIdsToFilesWithoutThem) {
  // A file written by a non-Iceberg writer: no field ids. The mapping maps
  // "b" to 8 under its old name, "s.x" to 10, and leaves "u" unmapped.
  auto file_struct =
      arrow::struct_({arrow::field("x", arrow::int32()), arrow::field("w", arrow::utf8())});
  auto file_schema =
      arrow::schema({arrow::field("b", arrow::utf8()), arrow::field("a", arrow::int32()),
                     arrow::field("s", file_struct), arrow::field("u", arrow::int64())});
  auto path = Write("imported.parquet",
                    MakeTable(file_schema, {R"(["x", "y"])", "[1, 2]",
                                            R"([{"x": 5, "w": "p"}, null])", "[3, 4]"}));
  Schema schema = ParseTestSchema(R"({"type": "struct", "fields": [
      {"id": 7, "name": "a", "required": false, "type": "long"},
      {"id": 8, "name": "c", "required": false, "type": "string"},
      {"id": 9, "name": "s", "required": false, "type": {"type": "struct", "fields": [
          {"id": 10, "name": "x2", "required": false, "type": "long"},
          {"id": 11, "name": "z", "required": false, "type": "string", "initial-default": "zz"}]}},
      {"id": 12, "name": "u", "required": false, "type": "long"}]})");
  ASSERT_OK_AND_ASSIGN(NameMapping mapping, ParseNameMapping(R"([
      {"field-id": 7, "names": ["a"]},
      {"field-id": 8, "names": ["c", "b"]},
      {"field-id": 9, "names": ["s"], "fields": [{"field-id": 10, "names": ["x"]},
                                                 {"names": ["w"]}]}])"));
  ReadOptions options = Options(schema);
  options.name_mapping = &mapping;
  std::shared_ptr<arrow::RecordBatch> batch;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(Task(path), options));
  ExpectColumn(*batch, "a", "[1, 2]");
  ExpectColumn(*batch, "c", R"(["x", "y"])");
  ExpectColumn(*batch, "s", R"([{"x2": 5, "z": "zz"}, null])");
  // Same name as a file column, but the mapping does not give it id 12.
  ExpectColumn(*batch, "u", "[null, null]");

  // Without a mapping such a file is refused, as pyiceberg refuses it.
  auto refused = ReadAll(Task(path), Options(schema));
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().IsInvalid());
  EXPECT_NE(refused.status().message().find("imported.parquet"), std::string::npos);
  EXPECT_NE(refused.status().message().find("schema.name-mapping.default"), std::string::npos);
}

TEST(NameMapping, ParsesNestedEntriesAndRefusesMalformedOnes) {
  auto mapping = ParseNameMapping(R"([{"field-id": 1, "names": ["id", "ID"]},
      {"field-id": 2, "names": ["m"], "fields": [{"field-id": 3, "names": ["key"]},
                                                 {"field-id": 4, "names": ["value"]}]}])");
  ASSERT_TRUE(mapping.ok()) << mapping.status();
  EXPECT_EQ(NameMapping::Find(mapping->fields, "ID")->field_id, 1);
  EXPECT_EQ(NameMapping::Find(mapping->fields, "id")->field_id, 1);
  EXPECT_EQ(NameMapping::Find(mapping->fields, "Id"), nullptr);  // case-sensitive
  const MappedField* m = NameMapping::Find(mapping->fields, "m");
  EXPECT_EQ(NameMapping::Find(m->fields, "value")->field_id, 4);
  for (const char* bad : {"{}", "[1]", R"([{"field-id": 1}])", R"([{"names": "a"}])",
                          R"([{"field-id": "1", "names": []}])", "[", R"([{"names": [1]}])"}) {
    auto r = ParseNameMapping(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("schema.name-mapping.default"), std::string::npos);
  }
}

TEST_F(ReaderTest, AbsentColumnsTakePartitionValuesAndDefaults) {
  // A Hive-style file: the partition columns live only in the manifest.
  auto file_schema = arrow::schema({F("id", arrow::int64(), 1)});
  auto path = Write("part.parquet", MakeTable(file_schema, {"[1, 2, 3]"}));
  Schema schema = ParseTestSchema(R"J({"type": "struct", "fields": [
      {"id": 1, "name": "id", "required": false, "type": "long"},
      {"id": 2, "name": "day", "required": false, "type": "date"},
      {"id": 3, "name": "amount", "required": false, "type": "decimal(36,23)"},
      {"id": 4, "name": "flag", "required": false, "type": "boolean"},
      {"id": 5, "name": "ratio", "required": false, "type": "double"},
      {"id": 6, "name": "name", "required": false, "type": "string"},
      {"id": 7, "name": "added", "required": false, "type": "int", "initial-default": 42},
      {"id": 8, "name": "missing", "required": false, "type": "string"}]})J");
  ScanTask task = Task(path);
  auto value = [](int32_t id, TypePtr type, Literal::Value v, int32_t scale = 0) {
    Literal lit;
    lit.type = type->id;
    lit.value = std::move(v);
    lit.scale = scale;
    return PartitionValue{id, std::move(type), std::move(lit)};
  };
  ASSERT_OK_AND_ASSIGN(arrow::Decimal128 amount,
                       arrow::Decimal128::FromString("123456789012.12345678901234567890123"));
  task.data_file.identity_values = {
      value(2, MakePrimitive(TypeId::kDate), int64_t{19723}),  // 2024-01-01
      value(3, MakeDecimal(36, 23), amount, 23),
      value(4, MakePrimitive(TypeId::kBoolean), true),
      // A float partition value of a column promoted to double.
      value(5, MakePrimitive(TypeId::kDouble), static_cast<double>(1.1f)),
      value(6, MakePrimitive(TypeId::kString), std::string("click")),
  };
  std::shared_ptr<arrow::RecordBatch> batch;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(task, Options(schema)));
  ExpectColumn(*batch, "day", "[19723, 19723, 19723]");  // 2024-01-01
  ExpectColumn(*batch, "amount", R"(["123456789012.12345678901234567890123",
      "123456789012.12345678901234567890123", "123456789012.12345678901234567890123"])");
  ExpectColumn(*batch, "flag", "[true, true, true]");
  ExpectColumn(*batch, "ratio", "[1.100000023841858, 1.100000023841858, 1.100000023841858]");
  ExpectColumn(*batch, "name", R"(["click", "click", "click"])");
  ExpectColumn(*batch, "added", "[42, 42, 42]");
  ExpectColumn(*batch, "missing", "[null, null, null]");

  // Filters see the constants: matching ones keep every row, others prune
  // the row group without reading it.
  ReadOptions options = Options(schema, {1});
  options.filter = cp::and_(
      cp::equal(cp::field_ref("name"), cp::literal("click")),
      cp::greater(cp::field_ref("amount"), cp::literal(std::make_shared<arrow::Decimal128Scalar>(
                                               arrow::Decimal128(0), arrow::decimal128(36, 23)))));
  ReadStats stats;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(task, options, &stats));
  ExpectColumn(*batch, "id", "[1, 2, 3]");
  options.filter = cp::equal(cp::field_ref("added"), cp::literal(41));
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(task, options, &stats));
  EXPECT_EQ(batch->num_rows(), 0);
  EXPECT_EQ(stats.row_groups_read, 0);
  options.filter = cp::is_null(cp::field_ref("name"));
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(task, options, &stats));
  EXPECT_EQ(stats.row_groups_read, 0);

  // A malformed default names the column.
  Schema bad = ParseTestSchema(R"({"type": "struct", "fields": [
      {"id": 9, "name": "when", "required": false, "type": "date", "initial-default": "soon"}]})");
  auto refused = ReadAll(task, Options(bad));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("when"), std::string::npos) << refused.status();
}

TEST_F(ReaderTest, AppliesADeletionVector) {
  auto file_schema = arrow::schema({F("id", arrow::int64(), 1)});
  auto path = Write("dv-data.parquet", arrow::Table::Make(file_schema, {Int64Range(0, 100)}), 30);
  Schema schema = ParseTestSchema(R"({"type": "struct", "fields": [
      {"id": 1, "name": "id", "required": false, "type": "long"}]})");
  // Two vectors in one Puffin file; the second is this file's.
  std::vector<int64_t> offsets;
  const std::string other = *EncodeDeletionVector({0, 1, 2});
  const std::string mine = *EncodeDeletionVector({0, 5, 30, 31, 99});
  const std::string puffin = WritePuffinFile(
      {{std::string(kDeletionVectorBlobType), other, {}},
       {std::string(kDeletionVectorBlobType), mine, {{"referenced-data-file", path}}}},
      &offsets);
  const std::string puffin_path = Path("deletes.puffin");
  std::ofstream(puffin_path, std::ios::binary) << puffin;
  ScanTask task = Task(path);
  task.data_file.record_count = 100;
  DataFile dv = DeleteFile(FileContent::kPositionDeletes, puffin_path);
  dv.file_format = "PUFFIN";
  dv.referenced_data_file = path;
  dv.content_offset = offsets[1];
  dv.content_size_in_bytes = static_cast<int64_t>(mine.size());
  dv.record_count = 5;
  task.deletes = {dv};
  std::shared_ptr<arrow::RecordBatch> batch;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(task, Options(schema)));
  EXPECT_EQ(batch->num_rows(), 95);
  auto ids = std::static_pointer_cast<arrow::Int64Array>(batch->column(0));
  for (int64_t i = 0; i < ids->length(); ++i) {
    for (int64_t gone : {0, 5, 30, 31, 99}) ASSERT_NE(ids->Value(i), gone);
  }

  auto expect_refused = [&](const ScanTask& t, const std::string& why) {
    auto r = ReadAll(t, Options(schema));
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_NE(r.status().message().find(puffin_path), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status();
  };
  ScanTask wrong_count = task;
  wrong_count.deletes[0].record_count = 4;
  expect_refused(wrong_count, "the manifest says 4");
  ScanTask wrong_offset = task;
  wrong_offset.deletes[0].content_offset = offsets[1] + 1;
  expect_refused(wrong_offset, "deletion vector");
  ScanTask short_data = task;
  short_data.data_file.record_count = 99;  // position 99 is past its rows
  expect_refused(short_data, "limit");
  // A truncated Puffin file.
  std::ofstream(puffin_path, std::ios::binary | std::ios::trunc)
      << puffin.substr(0, static_cast<size_t>(offsets[1]) + 10);
  expect_refused(task, "truncated");
}

// 100 rows, ids 0..99 in row groups of 10, label "v<id>".
class PrunedReaderTest : public ReaderTest {
 protected:
  void SetUp() override {
    ReaderTest::SetUp();
    arrow::StringBuilder labels;
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(labels.Append("v" + std::to_string(i)).ok());
    auto file_schema =
        arrow::schema({F("id", arrow::int64(), 1, false), F("label", arrow::utf8(), 2)});
    path_ = Write(
        "sorted.parquet",
        arrow::Table::Make(file_schema, {Int64Range(0, 100), labels.Finish().ValueOrDie()}), 10);
    schema_ = ParseTestSchema(R"({"type": "struct", "fields": [
        {"id": 1, "name": "id", "required": true, "type": "long"},
        {"id": 2, "name": "label", "required": false, "type": "string"},
        {"id": 3, "name": "added", "required": false, "type": "string"}]})");
  }

  static std::string Ids(const std::vector<int64_t>& ids) {
    std::string out = "[";
    for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
    return out + "]";
  }

  std::string path_;
  Schema schema_;
};

TEST_F(PrunedReaderTest, PrunesRowGroupsWithStatistics) {
  ReadOptions options = Options(schema_, {1});
  options.filter = cp::greater_equal(cp::field_ref("id"), cp::literal(int64_t{75}));
  ReadStats stats;
  std::shared_ptr<arrow::RecordBatch> batch;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(Task(path_), options, &stats));
  std::vector<int64_t> expected;
  for (int64_t i = 75; i < 100; ++i) expected.push_back(i);
  ExpectColumn(*batch, "id", Ids(expected));
  EXPECT_EQ(stats.row_groups_total, 10);
  EXPECT_EQ(stats.row_groups_read, 3);
  EXPECT_EQ(stats.rows_read, 30);
  EXPECT_EQ(stats.rows_after_deletes, 30);
  EXPECT_EQ(stats.rows_after_filter, 25);

  ReadStats unfiltered;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(Task(path_), Options(schema_, {1}), &unfiltered));
  EXPECT_EQ(unfiltered.row_groups_read, 10);
  EXPECT_LT(stats.bytes_read, unfiltered.bytes_read);
}

TEST_F(PrunedReaderTest, FiltersOnAColumnThatIsNotProjected) {
  ReadOptions options = Options(schema_, {2});
  // An int32 literal against a long column: Bind casts it.
  options.filter = cp::and_(cp::less(cp::field_ref("id"), cp::literal(int32_t{15})),
                            cp::not_equal(cp::field_ref("id"), cp::literal(int64_t{3})));
  ReadStats stats;
  std::shared_ptr<arrow::RecordBatch> batch;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(Task(path_), options, &stats));
  EXPECT_EQ(batch->schema()->field_names(), std::vector<std::string>{"label"});
  ExpectColumn(*batch, "label",
               R"(["v0", "v1", "v2", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12",
                   "v13", "v14"])");
  EXPECT_EQ(stats.row_groups_read, 2);
}

TEST_F(PrunedReaderTest, AFilterOnAColumnAbsentFromTheFileSkipsEverything) {
  ReadOptions options = Options(schema_);
  options.filter = cp::equal(cp::field_ref("added"), cp::literal("x"));
  ReadStats stats;
  std::shared_ptr<arrow::RecordBatch> batch;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(Task(path_), options, &stats));
  EXPECT_EQ(batch->num_rows(), 0);
  EXPECT_EQ(stats.row_groups_read, 0);
  EXPECT_EQ(stats.bytes_read, 0);

  options.filter = cp::is_null(cp::field_ref("added"));
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(Task(path_), options, &stats));
  EXPECT_EQ(batch->num_rows(), 100);
}

TEST_F(PrunedReaderTest, AppliesPositionDeletesThroughSkippedRowGroups) {
  const std::string other = Path("other.parquet");
  // Sorted by file_path like Iceberg writers, in several row groups.
  auto deletes_a = WritePositionDeletes(
      "deletes-a.parquet",
      {{Path("aaa.parquet"), 3}, {path_, 5}, {path_, 12}, {path_, 77}, {path_, 93}, {other, 80}},
      2);
  auto deletes_b = WritePositionDeletes("deletes-b.parquet", {{path_, 78}, {path_, 77}});
  ScanTask task = Task(path_);
  task.deletes = {DeleteFile(FileContent::kPositionDeletes, deletes_a),
                  DeleteFile(FileContent::kPositionDeletes, deletes_b)};

  ReadOptions options = Options(schema_, {1});
  options.filter = cp::greater_equal(cp::field_ref("id"), cp::literal(int64_t{70}));
  ReadStats stats;
  std::shared_ptr<arrow::RecordBatch> batch;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(task, options, &stats));
  std::vector<int64_t> expected;
  for (int64_t i = 70; i < 100; ++i) {
    if (i != 77 && i != 78 && i != 93) expected.push_back(i);
  }
  ExpectColumn(*batch, "id", Ids(expected));
  EXPECT_EQ(stats.row_groups_read, 3);
  EXPECT_EQ(stats.rows_read, 30);
  EXPECT_EQ(stats.rows_after_deletes, 27);
  EXPECT_EQ(stats.rows_after_filter, 27);
  EXPECT_GT(stats.delete_bytes_read, 0);

  // Unfiltered, in batches of 7 rows: every batch but the last is full.
  options.filter.reset();
  options.batch_rows = 7;
  auto batches = ReadScanTask(task, options, &stats);
  ASSERT_TRUE(batches.ok()) << batches.status().ToString();
  int64_t rows = 0;
  for (size_t i = 0; i < batches->size(); ++i) {
    if (i + 1 < batches->size()) {
      EXPECT_EQ((*batches)[i]->num_rows(), 7);
    }
    rows += (*batches)[i]->num_rows();
  }
  EXPECT_EQ(rows, 95);
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(task, options));
  expected.clear();
  for (int64_t i = 0; i < 100; ++i) {
    if (i != 5 && i != 12 && i != 77 && i != 78 && i != 93) expected.push_back(i);
  }
  ExpectColumn(*batch, "id", Ids(expected));
}

TEST_F(PrunedReaderTest, ReadsOnlyDeleteRowGroupsNamingTheDataFile) {
  auto deletes = WritePositionDeletes(
      "deletes.parquet",
      {{Path("aaa"), 1}, {Path("aaa"), 2}, {path_, 5}, {path_, 6}, {Path("zzz"), 7}}, 2);
  ScanTask task = Task(path_);
  task.deletes = {DeleteFile(FileContent::kPositionDeletes, deletes)};
  ReadStats stats;
  std::shared_ptr<arrow::RecordBatch> batch;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(task, Options(schema_, {1}), &stats));
  EXPECT_EQ(batch->num_rows(), 98);
  std::unique_ptr<parquet::ParquetFileReader> file = parquet::ParquetFileReader::OpenFile(deletes);
  auto middle = file->metadata()->RowGroup(1);
  EXPECT_EQ(file->metadata()->num_row_groups(), 3);
  EXPECT_EQ(stats.delete_bytes_read, middle->ColumnChunk(0)->total_compressed_size() +
                                         middle->ColumnChunk(1)->total_compressed_size());
}

TEST_F(PrunedReaderTest, SkipsRowGroupsThatAreEntirelyDeleted) {
  std::vector<std::pair<std::string, int64_t>> rows;
  for (int64_t i = 10; i < 20; ++i) rows.emplace_back(path_, i);
  ScanTask task = Task(path_);
  task.deletes = {
      DeleteFile(FileContent::kPositionDeletes, WritePositionDeletes("deletes.parquet", rows))};
  ReadStats stats;
  std::shared_ptr<arrow::RecordBatch> batch;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(task, Options(schema_, {1}), &stats));
  EXPECT_EQ(batch->num_rows(), 90);
  EXPECT_EQ(stats.row_groups_read, 9);
}

// A file split at row-group boundaries (SplitTasks) reads, part after part,
// exactly the rows of the whole file, deletes and filter included, even when
// its split offsets miscount the row groups.
TEST_F(PrunedReaderTest, SplitPartsReadExactlyTheWholeFile) {
  std::unique_ptr<parquet::ParquetFileReader> file = parquet::ParquetFileReader::OpenFile(path_);
  const auto metadata = file->metadata();
  ASSERT_EQ(metadata->num_row_groups(), 10);
  std::vector<int64_t> offsets;
  for (int rg = 0; rg < 10; ++rg) offsets.push_back(metadata->RowGroup(rg)->file_offset());
  const int64_t size = static_cast<int64_t>(std::filesystem::file_size(path_));

  ScanTask task = Task(path_);
  task.data_file.file_size_in_bytes = size;
  task.deletes = {
      DeleteFile(FileContent::kPositionDeletes,
                 WritePositionDeletes("deletes.parquet",
                                      {{path_, 0}, {path_, 19}, {path_, 20}, {path_, 99}}))};
  ReadOptions options = Options(schema_, {1, 2});
  options.filter = cp::not_equal(cp::field_ref("id"), cp::literal(int64_t{55}));
  options.batch_rows = 6;
  std::shared_ptr<arrow::RecordBatch> whole;
  ASSERT_OK_AND_ASSIGN(whole, ReadAll(task, options));
  ASSERT_EQ(whole->num_rows(), 95);

  auto read_parts = [&](const std::vector<ScanTask>& parts) {
    arrow::RecordBatchVector batches;
    double share = 0;
    for (const auto& part : parts) {
      EXPECT_EQ(part.data_file.file_path, path_);
      EXPECT_EQ(part.deletes.size(), 1u);
      auto batch = ReadAll(part, options);
      EXPECT_TRUE(batch.ok()) << batch.status().ToString();
      if (!batch.ok()) return;
      batches.push_back(*batch);
      share += FileShare(part);
    }
    EXPECT_NEAR(share, 1.0, 1e-9);
    auto table = arrow::Table::FromRecordBatches(whole->schema(), batches).ValueOrDie();
    auto combined = table->CombineChunksToBatch().ValueOrDie();
    EXPECT_TRUE(combined->Equals(*whole)) << combined->ToString();
  };

  // A third of the row groups' bytes per part (the last one's end estimated
  // by the mean): three parts of consecutive row groups, the last reading to
  // the end.
  task.data_file.split_offsets = offsets;
  const int64_t data_bytes = offsets[9] + (offsets[9] - offsets[0]) / 9 - offsets[0];
  std::vector<ScanTask> parts = SplitTasks({task}, (data_bytes + 2) / 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].first_row_group, 0);
  EXPECT_GT(parts[1].first_row_group, 0);
  EXPECT_EQ(parts[0].row_groups, parts[1].first_row_group);
  EXPECT_EQ(parts[2].row_groups, -1);
  read_parts(parts);
  // One row group per part at most: a target far below a row group's bytes.
  parts = SplitTasks({task}, 1);
  EXPECT_EQ(parts.size(), 10u);
  read_parts(parts);
  // A file no larger than the target, or without usable offsets, stays whole.
  EXPECT_EQ(SplitTasks({task}, size).size(), 1u);
  EXPECT_EQ(SplitTasks({task}, 0).size(), 1u);
  ScanTask unsorted = task;
  std::swap(unsorted.data_file.split_offsets[2], unsorted.data_file.split_offsets[3]);
  EXPECT_EQ(SplitTasks({unsorted}, 1).size(), 1u);
  // Offsets that miss row groups (the last part reads to the end) or count
  // row groups the file lacks (parts beyond it are empty): still exact.
  ScanTask fewer = task;
  fewer.data_file.split_offsets.resize(4);
  read_parts(SplitTasks({fewer}, 1));
  ScanTask more = task;
  more.data_file.split_offsets.push_back(size - 2);
  more.data_file.split_offsets.push_back(size - 1);
  parts = SplitTasks({more}, 1);
  EXPECT_EQ(parts.size(), 12u);
  read_parts(parts);
}

TEST_F(ReaderTest, AppliesEqualityDeletes) {
  // cat was an int when the data was written and is a long now.
  auto data_schema = arrow::schema(
      {F("id", arrow::int64(), 1), F("name", arrow::utf8(), 2), F("cat", arrow::int32(), 3)});
  auto path = Write("data.parquet",
                    MakeTable(data_schema, {"[0, 1, 2, 3, 4, 5, 6, 7]",
                                            R"(["a", "b", "c", "c", null, "e", null, "f"])",
                                            "[1, 1, 1, 2, 2, 3, 1, null]"}),
                    3);
  auto by_id_schema = arrow::schema({F("id", arrow::int64(), 1)});
  auto by_id = Write("eq-id.parquet", MakeTable(by_id_schema, {"[2, 5, 42]"}));
  // Columns in another order and under other names: matched by id.
  auto by_pair_schema =
      arrow::schema({F("category", arrow::int64(), 3), F("old_name", arrow::utf8(), 2)});
  auto by_pair =
      Write("eq-pair.parquet", MakeTable(by_pair_schema, {"[1, 2, 9]", R"(["c", null, null])"}));
  Schema schema = ParseTestSchema(R"({"type": "struct", "fields": [
      {"id": 1, "name": "id", "required": false, "type": "long"},
      {"id": 2, "name": "name", "required": false, "type": "string"},
      {"id": 3, "name": "cat", "required": false, "type": "long"}]})");
  ScanTask task = Task(path);
  task.deletes = {DeleteFile(FileContent::kEqualityDeletes, by_id, {1}),
                  DeleteFile(FileContent::kEqualityDeletes, by_pair, {2, 3})};

  // (null, 2) deletes row 4 but not row 6 (null, 1): null equals null.
  ReadStats stats;
  std::shared_ptr<arrow::RecordBatch> batch;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(task, Options(schema, {1}), &stats));
  EXPECT_EQ(batch->schema()->field_names(), std::vector<std::string>{"id"});
  ExpectColumn(*batch, "id", "[0, 1, 3, 6, 7]");
  EXPECT_EQ(stats.rows_read, 8);
  EXPECT_EQ(stats.rows_after_deletes, 5);

  // With a filter on a column read only for the deletes.
  ReadOptions options = Options(schema, {1, 2});
  options.filter = cp::greater_equal(cp::field_ref("cat"), cp::literal(int64_t{2}));
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(task, options, &stats));
  ExpectColumn(*batch, "id", "[3]");
  ExpectColumn(*batch, "name", R"(["c"])");
  EXPECT_EQ(stats.rows_after_filter, 1);

  // Position and equality deletes together.
  task.deletes.push_back(DeleteFile(FileContent::kPositionDeletes,
                                    WritePositionDeletes("pos.parquet", {{path, 0}, {path, 7}})));
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(task, Options(schema, {1})));
  ExpectColumn(*batch, "id", "[1, 3, 6]");
}

TEST_F(ReaderTest, FloatBoundsDoNotPruneRowsANaNFilterWouldKeep) {
  auto file_schema = arrow::schema({F("x", arrow::float64(), 1), F("s", arrow::utf8(), 2)});
  auto path =
      Write("nan.parquet", MakeTable(file_schema, {"[1.0, NaN, 3.0]", R"(["a", "b", "c"])"}));
  Schema schema = ParseTestSchema(R"({"type": "struct", "fields": [
      {"id": 1, "name": "x", "required": false, "type": "double"},
      {"id": 2, "name": "s", "required": false, "type": "string"}]})");
  ReadOptions options = Options(schema);
  // NaN < 5 is false, so NOT (x < 5) keeps the NaN row; min/max (1, 3) omit it.
  options.filter = cp::not_(cp::less(cp::field_ref("x"), cp::literal(5.0)));
  std::shared_ptr<arrow::RecordBatch> batch;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(Task(path), options));
  ExpectColumn(*batch, "s", R"(["b"])");

  // Filters false for NaN in x prune with x's bounds, whatever they do with s.
  for (const auto& filter : {cp::greater(cp::field_ref("x"), cp::literal(5.0)),
                             cp::and_(cp::greater(cp::field_ref("x"), cp::literal(5.0)),
                                      cp::not_(cp::equal(cp::field_ref("s"), cp::literal("a"))))}) {
    options.filter = filter;
    ReadStats stats;
    ASSERT_OK_AND_ASSIGN(batch, ReadAll(Task(path), options, &stats));
    EXPECT_EQ(batch->num_rows(), 0);
    EXPECT_EQ(stats.row_groups_read, 0) << filter.ToString();
  }
}

TEST_F(ReaderTest, PrunesWithStatisticsOfManyTypes) {
  // Two row groups: rows 1-2 and 3-4. Columns are promoted or re-unitted on read.
  auto file_schema = arrow::schema(
      {F("i", arrow::int32(), 1), F("d", arrow::decimal128(5, 2), 2), F("s", arrow::utf8(), 3),
       F("t", arrow::timestamp(arrow::TimeUnit::MILLI), 4), F("dt", arrow::date32(), 5),
       F("tz", arrow::timestamp(arrow::TimeUnit::MICRO, "UTC"), 6), F("f", arrow::float32(), 7)});
  auto path =
      Write("types.parquet",
            MakeTable(file_schema, {"[1, 2, 3, 4]", R"(["-1.25", "-0.50", "3.75", "4.00"])",
                                    R"(["a", "b", "c", "d"])", "[1, 2, 3, 4]", "[1, 2, 3, 4]",
                                    "[10, 20, 30, 40]", "[0.5, 1.5, 2.5, 3.5]"}),
            2);
  Schema schema = ParseTestSchema(R"J({"type": "struct", "fields": [
      {"id": 1, "name": "i", "required": false, "type": "long"},
      {"id": 2, "name": "d", "required": false, "type": "decimal(9,2)"},
      {"id": 3, "name": "s", "required": false, "type": "string"},
      {"id": 4, "name": "t", "required": false, "type": "timestamp"},
      {"id": 5, "name": "dt", "required": false, "type": "date"},
      {"id": 6, "name": "tz", "required": false, "type": "timestamptz"},
      {"id": 7, "name": "f", "required": false, "type": "double"}]})J");
  auto decimal = [](const char* text) {
    return cp::literal(std::make_shared<arrow::Decimal128Scalar>(
        arrow::Decimal128::FromString(text).ValueOrDie(), arrow::decimal128(9, 2)));
  };
  auto micros = [](int64_t v, const char* tz) {
    return cp::literal(
        std::make_shared<arrow::TimestampScalar>(v, arrow::timestamp(arrow::TimeUnit::MICRO, tz)));
  };
  const std::vector<cp::Expression> filters = {
      cp::greater(cp::field_ref("i"), cp::literal(int64_t{2})),
      cp::greater(cp::field_ref("d"), decimal("3.00")),
      cp::greater_equal(cp::field_ref("s"), cp::literal("c")),
      cp::greater_equal(cp::field_ref("t"), micros(3000, "")),
      cp::greater(cp::field_ref("dt"), cp::literal(std::make_shared<arrow::Date32Scalar>(2))),
      cp::greater_equal(cp::field_ref("tz"), micros(30, "UTC")),
      cp::greater(cp::field_ref("f"), cp::literal(2.0)),
  };
  for (const auto& filter : filters) {
    ReadOptions options = Options(schema, {1});
    options.filter = filter;
    ReadStats stats;
    std::shared_ptr<arrow::RecordBatch> batch;
    ASSERT_OK_AND_ASSIGN(batch, ReadAll(Task(path), options, &stats));
    ExpectColumn(*batch, "i", "[3, 4]");
    EXPECT_EQ(stats.row_groups_read, 1) << filter.ToString();
  }
  // Negative decimals: two's complement bounds.
  ReadOptions options = Options(schema, {1});
  options.filter = cp::less(cp::field_ref("d"), decimal("-1.00"));
  ReadStats stats;
  std::shared_ptr<arrow::RecordBatch> batch;
  ASSERT_OK_AND_ASSIGN(batch, ReadAll(Task(path), options, &stats));
  ExpectColumn(*batch, "i", "[1]");
  EXPECT_EQ(stats.row_groups_read, 1);
}

TEST_F(ReaderTest, StreamsWithTheProjectedSchema) {
  auto file_schema = arrow::schema({F("id", arrow::int64(), 1)});
  auto path = Write("data.parquet", arrow::Table::Make(file_schema, {Int64Range(0, 25)}), 10);
  Schema schema = ParseTestSchema(R"({"type": "struct", "fields": [
      {"id": 1, "name": "id", "required": false, "type": "long"}]})");
  ReadOptions options = Options(schema);
  options.batch_rows = 4;
  std::unique_ptr<ScanTaskReader> reader;
  ASSERT_OK_AND_ASSIGN(reader, ScanTaskReader::Open(Task(path), options));
  EXPECT_TRUE(reader->schema()->Equals(*ToArrowSchema(schema).ValueOrDie(), true));
  std::vector<int64_t> sizes;
  while (true) {
    std::shared_ptr<arrow::RecordBatch> batch;
    ASSERT_OK(reader->ReadNext(&batch));
    if (batch == nullptr) break;
    sizes.push_back(batch->num_rows());
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 4, 4, 4, 4, 1}));
  EXPECT_EQ(reader->stats().rows_after_filter, 25);
}

TEST_F(ReaderTest, ReportsErrorsNamingTheFile) {
  Schema schema = ParseTestSchema(R"({"type": "struct", "fields": [
      {"id": 1, "name": "id", "required": false, "type": "long"}]})");
  const std::string missing = Path("missing.parquet");
  auto result = ReadScanTask(Task(missing), Options(schema));
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsIOError()) << result.status().ToString();
  EXPECT_NE(result.status().message().find(missing), std::string::npos);

  const std::string garbage = Path("garbage.parquet");
  std::ofstream(garbage) << "this is not a parquet file, not even close";
  result = ReadScanTask(Task(garbage), Options(schema));
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsIOError() || result.status().IsInvalid())
      << result.status().ToString();
  EXPECT_NE(result.status().message().find(garbage), std::string::npos);

  ScanTask avro = Task(Path("data.avro"));
  avro.data_file.file_format = "AVRO";
  result = ReadScanTask(avro, Options(schema));
  EXPECT_TRUE(result.status().IsNotImplemented()) << result.status().ToString();
  EXPECT_NE(result.status().message().find("data.avro"), std::string::npos);

  auto path =
      Write("data.parquet", MakeTable(arrow::schema({F("id", arrow::utf8(), 1)}), {R"(["a"])"}));
  ScanTask orc_deletes = Task(path);
  orc_deletes.deletes = {DeleteFile(FileContent::kPositionDeletes, Path("deletes.orc"))};
  orc_deletes.deletes[0].file_format = "ORC";
  result = ReadScanTask(orc_deletes, Options(schema));
  EXPECT_TRUE(result.status().IsNotImplemented()) << result.status().ToString();
  EXPECT_NE(result.status().message().find("deletes.orc"), std::string::npos);

  // A string column cannot be read as a long.
  result = ReadScanTask(Task(path), Options(schema));
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsInvalid()) << result.status().ToString();
  EXPECT_NE(result.status().message().find("'id'"), std::string::npos);
  EXPECT_NE(result.status().message().find("string"), std::string::npos);

  ReadOptions bad_filter = Options(schema);
  bad_filter.filter = cp::equal(cp::field_ref("nope"), cp::literal(1));
  result = ReadScanTask(Task(path), bad_filter);
  EXPECT_TRUE(result.status().IsKeyError()) << result.status().ToString();

  result = ReadScanTask(Task(path), Options(schema, {99}));
  EXPECT_TRUE(result.status().IsKeyError()) << result.status().ToString();
}

}  // namespace
}  // namespace icefloe::iceberg
