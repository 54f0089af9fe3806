// ToArrowExpression (rows) and ToArrowPushdownExpression (Parquet row groups).
#include <filesystem>
#include <set>
#include <string>

#include <unistd.h>

#include <arrow/api.h>
#include <arrow/compute/initialize.h>
#include <arrow/dataset/file_parquet.h>
#include <arrow/filesystem/localfs.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>
#include <parquet/arrow/writer.h>
#include <nlohmann/json.hpp>

#include "icefloe/iceberg/expr.h"
#include "icefloe/iceberg/expr_test_util.h"

namespace icefloe::iceberg {

namespace {

namespace cp = arrow::compute;

const char* kTableSchema = R"J({
  "type": "struct", "schema-id": 1,
  "fields": [
    {"id": 1, "name": "i", "required": false, "type": "int"},
    {"id": 2, "name": "l", "required": false, "type": "long"},
    {"id": 4, "name": "d", "required": false, "type": "double"},
    {"id": 10, "name": "s", "required": false, "type": "string"},
    {"id": 6, "name": "day", "required": false, "type": "date"},
    {"id": 7, "name": "ts", "required": false, "type": "timestamp"},
    {"id": 5, "name": "dec", "required": false, "type": "decimal(9,2)"},
    {"id": 11, "name": "b", "required": false, "type": "boolean"},
    {"id": 13, "name": "loc", "required": false,
     "type": {"type": "struct", "fields": [
        {"id": 14, "name": "lat", "required": false, "type": "double"},
        {"id": 15, "name": "name", "required": false, "type": "string"}]}}
  ]
})J";

// Eight rows; the comments of the test cases below refer to them by index.
const char* kColumns[] = {
    "[1, 2, 3, null, 5, 6, 7, 8]",
    "[10, 20, null, 40, 50, 60, 70, -80]",
    "[1.5, NaN, -2.0, null, 0.0, NaN, 100.0, -0.0]",
    R"(["apple", "apricot", "banana", null, "cherry", "", "apple pie", "Apple"])",
    "[19723, 19724, null, 19726, 19727, 19728, 19729, 19730]",
    "[1704067200000000, 1704067201000000, 1704067202000000, null, 1704067204000000, "
    "1704067205000000, 1704067206000000, 1704067207000000]",
    R"(["1.00", "2.50", null, "-0.50", "10.00", "0.00", "9.99", "0.01"])",
    "[true, false, null, true, false, true, null, false]",
    R"([{"lat": 1.0, "name": "x"}, {"lat": 2.0, "name": "y"}, null,
        {"lat": 4.0, "name": null}, {"lat": 5.0, "name": "x"}, {"lat": 6.0, "name": "z"},
        {"lat": 7.0, "name": "x"}, {"lat": 8.0, "name": "y"}])",
};

class ExprEvalTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(cp::Initialize().ok()); }

  void SetUp() override {
    schema_ = *ParseSchema(nlohmann::json::parse(kTableSchema));
    auto arrow_schema = *ToArrowSchema(schema_);
    arrow::ArrayVector columns;
    for (int i = 0; i < arrow_schema->num_fields(); ++i) {
      auto column = arrow::json::ArrayFromJSONString(arrow_schema->field(i)->type(), kColumns[i]);
      ASSERT_TRUE(column.ok()) << arrow_schema->field(i)->name() << ": " << column.status();
      columns.push_back(*column);
    }
    batch_ = arrow::RecordBatch::Make(arrow_schema, 8, columns);
    ASSERT_TRUE(batch_->ValidateFull().ok());
  }

  arrow::Result<cp::Expression> ArrowFilter(std::string_view text) {
    ARROW_ASSIGN_OR_RAISE(ExprPtr expr, ParseFilter(text));
    ARROW_ASSIGN_OR_RAISE(BoundExpr bound, Bind(expr, schema_));
    return ToArrowExpression(bound);
  }

  arrow::Result<cp::Expression> PushdownFilter(std::string_view text) {
    ARROW_ASSIGN_OR_RAISE(ExprPtr expr, ParseFilter(text));
    ARROW_ASSIGN_OR_RAISE(BoundExpr bound, Bind(expr, schema_));
    return ToArrowPushdownExpression(bound);
  }

  // The rows where the filter is true.
  std::set<int> Selected(std::string_view text) {
    auto filter = ArrowFilter(text);
    EXPECT_TRUE(filter.ok()) << text << ": " << filter.status();
    if (!filter.ok()) return {};
    return SelectedRows(*filter, *batch_);
  }

  Schema schema_;
  std::shared_ptr<arrow::RecordBatch> batch_;
};

}  // namespace

TEST_F(ExprEvalTest, SelectsRowsWithSqlNullAndIeeeNanSemantics) {
  const std::pair<const char*, std::set<int>> cases[] = {
      {"i > 3", {4, 5, 6, 7}},
      {"3 < i", {4, 5, 6, 7}},
      {"i >= 3 AND i < 6", {2, 4}},
      {"NOT (i > 3)", {0, 1, 2}},  // row 3 (null) matches neither
      {"i IN (1, 8, 42)", {0, 7}},
      {"i NOT IN (1, 8)", {1, 2, 4, 5, 6}},
      {"NOT i IN (1, 8)", {1, 2, 4, 5, 6}},
      {"i IS NULL", {3}},
      {"i IS NOT NULL", {0, 1, 2, 4, 5, 6, 7}},
      {"l BETWEEN 20 AND 60", {1, 3, 4, 5}},
      {"l NOT BETWEEN 20 AND 60", {0, 6, 7}},
      {"d > 0", {0, 6}},
      {"d < 0", {2}},  // -0.0 < 0 is false
      {"d = 0", {4, 7}},
      {"d != 1.5", {1, 2, 4, 5, 6, 7}},  // NaN != 1.5
      {"NOT (d < 1)", {0, 1, 5, 6}},     // NaN < 1 is false, so its NOT is true
      {"NOT (d >= 1)", {1, 2, 4, 5, 7}},
      {"d IS NAN", {1, 5}},
      {"d IS NOT NAN", {0, 2, 3, 4, 6, 7}},
      {"NOT d IS NAN", {0, 2, 3, 4, 6, 7}},
      {"d IN (1.5, -2)", {0, 2}},
      {"d NOT IN (1.5, -2)", {1, 4, 5, 6, 7}},
      {"s = 'apple'", {0}},
      {"s LIKE 'ap%'", {0, 1, 6}},
      {"s NOT LIKE 'ap%'", {2, 4, 5, 7}},
      {"s LIKE '%'", {0, 1, 2, 4, 5, 6, 7}},
      {"s LIKE 'apple'", {0}},
      {"s > 'b'", {2, 4}},
      {"s < 'B'", {5, 7}},
      {"s IN ('apple', 'cherry', 'zzz')", {0, 4}},
      {"day >= '2024-01-05'", {4, 5, 6, 7}},
      {"day = DATE '2024-01-02'", {1}},
      {"ts > TIMESTAMP '2024-01-01 00:00:04'", {5, 6, 7}},
      {"ts BETWEEN '2024-01-01 00:00:01' AND '2024-01-01T00:00:02.5Z'", {1, 2}},
      {"dec >= 2.5", {1, 4, 6}},
      {"dec < 0", {3}},
      {"dec IN (0, 0.01)", {5, 7}},
      {"b = TRUE", {0, 3, 5}},
      {"b != TRUE", {1, 4, 7}},
      {"NOT b = TRUE", {1, 4, 7}},
      {"loc.lat >= 5", {4, 5, 6, 7}},
      {"loc.name = 'x'", {0, 4, 6}},
      {"LOC.NAME IS NOT NULL", {0, 1, 4, 5, 6, 7}},
      {"i > 3 OR s LIKE 'ap%'", {0, 1, 4, 5, 6, 7}},
      {"NOT (i > 3 OR s LIKE 'ap%')", {2}},
      {"i > 6 OR l < 0 OR d IS NAN OR s = ''", {1, 5, 6, 7}},
      {"TRUE", {0, 1, 2, 3, 4, 5, 6, 7}},
      {"FALSE", {}},
      {"i = 1 AND FALSE", {}},
  };
  for (const auto& [text, rows] : cases) {
    EXPECT_EQ(Selected(text), rows) << text;
  }
}

TEST_F(ExprEvalTest, LongChainsStayShallow) {
  std::string chain = "i = -1";
  for (int k = 0; k < 3000; ++k) chain += " OR i = " + std::to_string(k * 3 + 2);
  EXPECT_EQ(Selected(chain), (std::set<int>{1, 4, 7}));
}

TEST_F(ExprEvalTest, RejectsMalformedTrees) {
  TypePtr long_type = MakePrimitive(TypeId::kLong);
  Literal one{TypeId::kLong, int64_t{1}};
  EXPECT_TRUE(ToArrowExpression(BoundExpr::Compare(ExprOp::kEq, 2, long_type, one))
                  .status()
                  .IsInvalid());  // no column name
  EXPECT_FALSE(ToArrowExpression(BoundExpr::Predicate(ExprOp::kEq, 2, long_type, {}, {"l"})).ok());
  BoundExpr bad_not;
  bad_not.op = ExprOp::kNot;
  EXPECT_FALSE(ToArrowExpression(bad_not).ok());
  EXPECT_FALSE(MightMatch(bad_not, nullptr, 10).ok());
}

TEST_F(ExprEvalTest, PushesDownToParquetRowGroups) {
  auto dir =
      std::filesystem::temp_directory_path() / ("icefloe_expr_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "rows.parquet").string();
  auto fs = std::make_shared<arrow::fs::LocalFileSystem>();
  {
    auto table = *arrow::Table::FromRecordBatches({batch_});
    auto out = *fs->OpenOutputStream(path);
    // Four row groups of two rows: [0,1] [2,3] [4,5] [6,7].
    ASSERT_TRUE(
        parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), out, /*chunk_size=*/2)
            .ok());
    ASSERT_TRUE(out->Close().ok());
  }
  auto format = std::make_shared<arrow::dataset::ParquetFileFormat>();
  auto fragment = *format->MakeFragment(arrow::dataset::FileSource(path, fs));
  auto parquet_fragment = std::static_pointer_cast<arrow::dataset::ParquetFileFragment>(fragment);
  auto physical = *fragment->ReadPhysicalSchema();

  const std::pair<const char*, size_t> cases[] = {
      {"i > 6", 1},                // only [6,7]
      {"i IS NULL", 1},            // only [2,3]
      {"l BETWEEN 15 AND 45", 3},  // [-80, 70] overlaps too
      {"day = '2024-01-02'", 1},
      {"i < 0", 0},
      {"TRUE", 4},
      // Float columns: Arrow reads [1.5, NaN] as min = max = 1.5 and would drop
      // it for `d != 1.5`; the pushdown filter keeps every group with a NaN match.
      {"d != 1.5", 4},
      {"d NOT IN (1.5, 2)", 4},
      {"NOT (d <= 1.5)", 4},
      {"d IS NAN OR i = 1", 4},
      {"d > 1.5", 1},
      {"d = 1.5 AND i > 7", 1},         // [-0.0, 100] x [7, 8]
      {"i IN (1, 8) AND d != 1.5", 3},  // Arrow keeps [3, null] for is_in
  };
  for (const auto& [text, groups] : cases) {
    auto filter = PushdownFilter(text);
    ASSERT_TRUE(filter.ok()) << filter.status();
    auto bound = filter->Bind(*physical);
    ASSERT_TRUE(bound.ok()) << text << ": " << bound.status();
    auto kept = parquet_fragment->SplitByRowGroup(*bound);
    ASSERT_TRUE(kept.ok()) << text << ": " << kept.status();
    EXPECT_EQ(kept->size(), groups) << text;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace icefloe::iceberg
