// `pack` of several aligned token columns (transform/pack.h). The same
// documents against transformers' DataCollatorWithFlattening:
// tests/test_pack_labels.py.
#include "icefloe/transform/pack.h"

#include <algorithm>
#include <map>
#include <random>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "icefloe/transform/test_util.h"
#include "icefloe/transform/transform.h"

namespace icefloe::transform {
namespace {

using Batches = std::vector<std::shared_ptr<arrow::RecordBatch>>;

ModelReader NoModels() {
  return [](const std::string& l) -> arrow::Result<std::string> {
    return arrow::Status::IOError("no model: ", l);
  };
}

std::shared_ptr<arrow::Schema> IdsAndLabels() {
  return arrow::schema({arrow::field("input_ids", arrow::list(arrow::int32())),
                        arrow::field("labels", arrow::list(arrow::int32()))});
}

std::shared_ptr<arrow::RecordBatch> Docs(const std::string& ids, const std::string& labels) {
  auto i = ArrayFromJSON(arrow::list(arrow::int32()), ids);
  auto l = ArrayFromJSON(arrow::list(arrow::int32()), labels);
  return arrow::RecordBatch::Make(IdsAndLabels(), i->length(), {i, l});
}

arrow::Result<std::shared_ptr<const Transform>> Packer(const std::string& pack,
                                                       std::shared_ptr<arrow::Schema> schema) {
  ARROW_ASSIGN_OR_RAISE(auto spec,
                        TransformSpec::FromJson(nlohmann::json::parse(
                            R"j({"keep": ["input_ids", "labels"], "pack": )j" + pack + "}")));
  return Transform::Make(spec, schema, NoModels());
}

// A task's batches through one stream: the packed rows and what it counted.
arrow::Result<std::pair<std::shared_ptr<arrow::Table>, PackStats>> PackTask(const Transform& t,
                                                                            const Batches& in,
                                                                            int64_t batch_rows) {
  auto stream = t.Stream(batch_rows, arrow::default_memory_pool());
  Batches out;
  for (const auto& b : in) ARROW_RETURN_NOT_OK(stream->Add(*b, &out));
  ARROW_RETURN_NOT_OK(stream->Finish(&out));
  for (const auto& b : out) {
    if (b->num_rows() > batch_rows) return arrow::Status::Invalid("a batch over batch_rows");
  }
  ARROW_ASSIGN_OR_RAISE(auto table, arrow::Table::FromRecordBatches(t.output_schema(), out));
  return std::make_pair(table, stream->pack_stats());
}

std::vector<std::vector<int32_t>> Rows(const arrow::Table& table, const std::string& column) {
  std::vector<std::vector<int32_t>> rows;
  for (const auto& chunk : table.GetColumnByName(column)->chunks()) {
    const auto& list = static_cast<const arrow::FixedSizeListArray&>(*chunk);
    const int32_t width = list.value_length();
    for (int64_t r = 0; r < list.length(); ++r) {
      std::vector<int32_t> row(width);
      const auto& values = *list.values();
      for (int32_t k = 0; k < width; ++k) {
        const int64_t at = list.value_offset(r) + k;
        row[k] = values.type_id() == arrow::Type::INT8
                     ? static_cast<const arrow::Int8Array&>(values).Value(at)
                     : static_cast<const arrow::Int32Array&>(values).Value(at);
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

using RowsT = std::vector<std::vector<int32_t>>;

// DataCollatorWithFlattening's output for these documents, cut into rows of
// 4: ids 1..10; labels with each document's first set to -100; positions
// restarting at each document; the last row padded (ids 0, labels -100,
// positions 0, mask 0).
TEST(PackTest, AlignedColumnsPackTogetherWithLabelsPositionsAndMask) {
  ASSERT_OK_AND_ASSIGN(auto t, Packer(R"j({"columns": ["input_ids", "labels"], "seq_len": 4,
                                          "position_ids": true, "tail": "pad"})j",
                                      IdsAndLabels()));
  EXPECT_EQ(t->output_schema()->ToString(),
            "input_ids: fixed_size_list<item: int32>[4] not null\n"
            "labels: fixed_size_list<item: int32>[4] not null\n"
            "attention_mask: fixed_size_list<item: int8>[4] not null\n"
            "position_ids: fixed_size_list<item: int32>[4] not null");
  auto batch =
      Docs("[[1,2,3],[4,5],[],null,[6,7,8,9,10]]", "[[-100,2,3],[4,5],[],null,[-100,-100,8,9,10]]");
  ASSERT_OK_AND_ASSIGN(auto run, PackTask(*t, {batch->Slice(0, 2), batch->Slice(2)}, 2));
  const auto& [table, stats] = run;
  EXPECT_EQ(Rows(*table, "input_ids"), (RowsT{{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 0, 0}}));
  EXPECT_EQ(Rows(*table, "labels"),
            (RowsT{{-100, 2, 3, -100}, {5, -100, -100, 8}, {9, 10, -100, -100}}));
  EXPECT_EQ(Rows(*table, "position_ids"), (RowsT{{0, 1, 2, 0}, {1, 0, 1, 2}, {3, 4, 0, 0}}));
  EXPECT_EQ(Rows(*table, "attention_mask"), (RowsT{{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 0, 0}}));
  EXPECT_EQ(stats.documents, 3);
  EXPECT_EQ(stats.tokens, 10);
  EXPECT_EQ(stats.pad_tokens, 2);
  EXPECT_EQ(stats.rows, 3);

  // An explicit labels column of another name; without one, no label is changed.
  auto renamed = arrow::schema({arrow::field("input_ids", arrow::list(arrow::int32())),
                                arrow::field("target", arrow::list(arrow::int32()))});
  ASSERT_OK_AND_ASSIGN(auto spec, TransformSpec::FromJson(nlohmann::json::parse(R"j(
      {"keep": ["input_ids", "target"], "pack": {"columns": ["input_ids", "target"],
       "labels": "target", "seq_len": 4, "pad": 9, "tail": "pad"}})j")));
  ASSERT_OK_AND_ASSIGN(auto named, Transform::Make(spec, renamed, NoModels()));
  auto b2 = arrow::RecordBatch::Make(renamed, 5, batch->columns());
  ASSERT_OK_AND_ASSIGN(auto run2, PackTask(*named, {b2}, 8));
  EXPECT_EQ(Rows(*run2.first, "target"),
            (RowsT{{-100, 2, 3, -100}, {5, -100, -100, 8}, {9, 10, -100, -100}}));
  EXPECT_EQ(Rows(*run2.first, "input_ids"), (RowsT{{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 9, 9}}));
}

TEST(PackTest, UnalignedRowsAreRefusedNamingTheColumnsAndRow) {
  ASSERT_OK_AND_ASSIGN(
      auto t, Packer(R"j({"columns": ["input_ids", "labels"], "seq_len": 4})j", IdsAndLabels()));
  // Row 3 of the task (the second batch's second row): 2 ids, 3 labels.
  auto stream = t->Stream(8, arrow::default_memory_pool());
  Batches out;
  ASSERT_OK(stream->Add(*Docs("[[1,2],[3]]", "[[1,2],[3]]"), &out));
  auto st = stream->Add(*Docs("[[4],[5,6]]", "[[4],[5,6,7]]"), &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.ToString(),
            "Invalid: transform: 'pack': row 3 of the task: 'input_ids' has 2 tokens, 'labels' 3; "
            "packed columns must be aligned (equal lengths per row)");
  stream = t->Stream(8, arrow::default_memory_pool());
  st = stream->Add(*Docs("[[1,2],[3]]", "[[1,2],null]"), &out);
  EXPECT_EQ(st.ToString(),
            "Invalid: transform: 'pack': row 1 of the task: 'input_ids' has 1 tokens, 'labels' is "
            "null; packed columns must be aligned (equal lengths per row)");
}

// A document longer than seq_len: "split" across rows (counted), or "drop"ped (counted).
TEST(PackTest, OverlongDocumentsAreSplitOrDroppedAndCounted) {
  auto batch = Docs("[[1,2,3],[4,5,6,7,8,9],[10,11]]", "[[1,2,3],[4,5,6,7,8,9],[10,11]]");
  ASSERT_OK_AND_ASSIGN(auto drop, Packer(R"j({"columns": ["input_ids", "labels"], "seq_len": 4,
                                             "overlong": "drop", "tail": "pad"})j",
                                         IdsAndLabels()));
  ASSERT_OK_AND_ASSIGN(auto dropped, PackTask(*drop, {batch}, 8));
  EXPECT_EQ(Rows(*dropped.first, "input_ids"), (RowsT{{1, 2, 3, 10}, {11, 0, 0, 0}}));
  EXPECT_EQ(dropped.second.overlong_dropped, 1);
  EXPECT_EQ(dropped.second.overlong_split, 0);
  EXPECT_EQ(dropped.second.documents, 2);

  ASSERT_OK_AND_ASSIGN(auto split, Packer(R"j({"columns": ["input_ids", "labels"], "seq_len": 4,
                                              "tail": "pad"})j",
                                          IdsAndLabels()));
  ASSERT_OK_AND_ASSIGN(auto kept, PackTask(*split, {batch}, 8));
  EXPECT_EQ(Rows(*kept.first, "input_ids"), (RowsT{{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 0}}));
  EXPECT_EQ(kept.second.overlong_split, 1);
  EXPECT_EQ(kept.second.overlong_dropped, 0);

  // FFD: the pieces of a split document each start a row (positions go on,
  // as in the document); the rest fills around them.
  ASSERT_OK_AND_ASSIGN(auto ffd, Packer(R"j({"columns": ["input_ids", "labels"], "seq_len": 4,
                                            "strategy": "ffd", "position_ids": true})j",
                                        IdsAndLabels()));
  ASSERT_OK_AND_ASSIGN(auto fitted, PackTask(*ffd, {batch}, 8));
  EXPECT_EQ(Rows(*fitted.first, "input_ids"), (RowsT{{4, 5, 6, 7}, {8, 9, 10, 11}, {1, 2, 3, 0}}));
  EXPECT_EQ(Rows(*fitted.first, "labels"),
            (RowsT{{-100, 5, 6, 7}, {8, 9, -100, 11}, {-100, 2, 3, -100}}));
  EXPECT_EQ(Rows(*fitted.first, "position_ids"), (RowsT{{0, 1, 2, 3}, {4, 5, 0, 1}, {0, 1, 2, 0}}));
  EXPECT_EQ(Rows(*fitted.first, "attention_mask"),
            (RowsT{{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 0}}));
  EXPECT_EQ(fitted.second.overlong_split, 1);
  EXPECT_EQ(fitted.second.pad_tokens, 1);
}

// Skewed lengths (most short, a few near seq_len): FFD keeps every document
// whole and exactly once, with fewer pad tokens than concatenation padded
// document by document would need, and its rows do not depend on where the
// task's input batches are cut.
TEST(PackTest, FirstFitDecreasingKeepsEveryDocumentWholeWithLessPadding) {
  const int32_t seq_len = 64;
  std::mt19937 rng(45);
  std::lognormal_distribution<double> length(2.5, 0.9);
  arrow::ListBuilder ids(arrow::default_memory_pool(), std::make_shared<arrow::Int32Builder>());
  arrow::ListBuilder labels(arrow::default_memory_pool(), std::make_shared<arrow::Int32Builder>());
  auto* id_values = static_cast<arrow::Int32Builder*>(ids.value_builder());
  auto* label_values = static_cast<arrow::Int32Builder*>(labels.value_builder());
  std::map<int32_t, int32_t> want;  // first id -> length; ids are doc * 1000 + k
  int64_t tokens = 0;
  for (int32_t d = 1; d <= 3000; ++d) {
    const int32_t n = std::clamp<int32_t>(static_cast<int32_t>(length(rng)), 1, seq_len);
    ASSERT_OK(ids.Append());
    ASSERT_OK(labels.Append());
    for (int32_t k = 0; k < n; ++k) {
      ASSERT_OK(id_values->Append(d * 1000 + k));
      ASSERT_OK(label_values->Append(k % 3 == 1 ? -100 : d * 1000 + k));
    }
    want[d * 1000] = n;
    tokens += n;
  }
  ASSERT_OK_AND_ASSIGN(auto id_array, ids.Finish());
  ASSERT_OK_AND_ASSIGN(auto label_array, labels.Finish());
  auto batch = arrow::RecordBatch::Make(IdsAndLabels(), 3000, {id_array, label_array});
  const std::string cols = R"j("columns": ["input_ids", "labels"], "position_ids": true, )j";
  ASSERT_OK_AND_ASSIGN(
      auto ffd,
      Packer("{" + cols + R"j("seq_len": 64, "strategy": "ffd", "pad": 7})j", IdsAndLabels()));
  // batch_rows 16: windows of 16 * 64 tokens, so many windows in this task.
  ASSERT_OK_AND_ASSIGN(auto whole, PackTask(*ffd, {batch}, 16));
  const auto& [table, stats] = whole;
  const RowsT id_rows = Rows(*table, "input_ids");
  const RowsT label_rows = Rows(*table, "labels");
  const RowsT positions = Rows(*table, "position_ids");
  const RowsT mask = Rows(*table, "attention_mask");
  std::map<int32_t, int32_t> got;
  int64_t pads = 0;
  for (size_t r = 0; r < id_rows.size(); ++r) {
    for (int32_t k = 0; k < seq_len; ++k) {
      if (mask[r][k] == 0) {
        EXPECT_EQ(id_rows[r][k], 7);
        EXPECT_EQ(label_rows[r][k], -100);
        EXPECT_EQ(positions[r][k], 0);
        ++pads;
        continue;
      }
      const int32_t id = id_rows[r][k];
      const int32_t p = positions[r][k];
      EXPECT_EQ(id % 1000, p) << "row " << r << " at " << k;  // positions restart per document
      if (p == 0) {
        EXPECT_EQ(label_rows[r][k], -100);
        EXPECT_TRUE(got.emplace(id, 1).second) << "document " << id / 1000 << " twice";
      } else {
        EXPECT_EQ(label_rows[r][k], p % 3 == 1 ? -100 : id);
        ASSERT_GT(k, 0) << "a document cut across rows";
        EXPECT_EQ(id_rows[r][k - 1], id - 1);
        ++got[id - p];
      }
    }
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(stats.tokens, tokens);
  EXPECT_EQ(stats.pad_tokens, pads);
  EXPECT_EQ(stats.documents, 3000);
  EXPECT_EQ(stats.rows, static_cast<int64_t>(id_rows.size()));

  // Concatenation that keeps documents whole has to pad each row where the
  // next document does not fit: next-fit, in arrival order.
  int64_t next_fit_pads = 0;
  int32_t used = 0;
  for (const auto& [first, n] : want) {
    if (used + n > seq_len) {
      next_fit_pads += seq_len - used;
      used = 0;
    }
    used += n;
  }
  next_fit_pads += seq_len - used;
  EXPECT_LT(pads, next_fit_pads);
  EXPECT_LT(static_cast<double>(pads) / (stats.rows * seq_len), 0.02) << pads;

  for (int64_t cut : {1, 7, 1000}) {
    Batches in;
    for (int64_t at = 0; at < batch->num_rows(); at += cut) in.push_back(batch->Slice(at, cut));
    ASSERT_OK_AND_ASSIGN(auto again, PackTask(*ffd, in, 16));
    EXPECT_TRUE(again.first->Equals(*table)) << cut;
  }
}

TEST(PackTest, BadPackSpecsAreRefusedNamingTheField) {
  auto error = [](const std::string& pack, const std::string& keep = R"(["input_ids", "labels"])") {
    auto spec = TransformSpec::FromJson(
        nlohmann::json::parse(R"j({"keep": )j" + keep + R"j(, "pack": )j" + pack + "}"));
    if (!spec.ok()) return spec.status().ToString();
    auto t = Transform::Make(*spec, IdsAndLabels(), NoModels());
    return t.ok() ? std::string("ok") : t.status().ToString();
  };
  EXPECT_EQ(error(R"j({"column": "input_ids", "columns": ["labels"], "seq_len": 4})j"),
            "Invalid: transform: 'pack': give exactly one of 'columns' (the aligned token "
            "columns packed together, e.g. [\"input_ids\", \"labels\"]) and 'column' (one token "
            "column)");
  EXPECT_EQ(error(R"j({"columns": ["input_ids"], "seq_len": 4})j"),
            "Invalid: transform: 'pack' makes rows of 4 tokens from several documents, so "
            "'labels' must be packed or left out (an unpacked column has no value per packed "
            "row); name it in 'pack': 'columns' or drop it from the output columns");
  EXPECT_EQ(error(R"j({"columns": ["input_ids", "nope"], "seq_len": 4})j"),
            "Invalid: transform: 'pack': column 'nope' must name an output column; it is none");
  EXPECT_EQ(error(R"j({"columns": ["input_ids", "labels"], "labels": "x", "seq_len": 4})j"),
            "Invalid: transform: 'pack': 'labels' 'x' must be one of the packed 'columns'");
  EXPECT_EQ(error(R"j({"columns": ["input_ids", "labels"], "eos": 2, "seq_len": 4})j"),
            "Invalid: transform: 'pack': 'eos' appends a separator to one column; with several "
            "'columns' each document carries its own end token (in input_ids and labels alike)");
  EXPECT_NE(error(R"j({"columns": ["input_ids", "labels"], "overlong": "wrap", "seq_len": 4})j")
                .find("'overlong' must be one of \"split\", \"drop\""),
            std::string::npos);
  EXPECT_NE(error(R"j({"columns": ["input_ids", "labels"], "strategy": "bfd", "seq_len": 4})j")
                .find("'strategy' must be one of \"concat\", \"ffd\""),
            std::string::npos);
  // The one-column form reads and writes back as it was given.
  auto one = TransformSpec::FromJson(nlohmann::json::parse(
      R"j({"keep": ["input_ids"], "pack": {"column": "input_ids", "seq_len": 4}})j"));
  ASSERT_OK(one.status());
  EXPECT_EQ(one->pack->Columns(), std::vector<std::string>{"input_ids"});
  EXPECT_EQ(one->pack->LabelsColumn(), std::nullopt);
}

}  // namespace
}  // namespace icefloe::transform
