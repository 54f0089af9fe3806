#include "icefloe/node/serve/row_lengths.h"

#include <arrow/array/builder_nested.h>
#include <arrow/array/builder_primitive.h>
#include <arrow/type.h>
#include <gtest/gtest.h>

namespace icefloe {
namespace {

std::shared_ptr<arrow::RecordBatch> Lists(const std::vector<int32_t>& lengths) {
  arrow::ListBuilder builder(arrow::default_memory_pool(), std::make_shared<arrow::Int32Builder>());
  auto* values = static_cast<arrow::Int32Builder*>(builder.value_builder());
  for (int32_t n : lengths) {
    EXPECT_TRUE(builder.Append().ok());
    for (int32_t i = 0; i < n; ++i) EXPECT_TRUE(values->Append(i).ok());
  }
  auto array = builder.Finish().ValueOrDie();
  return arrow::RecordBatch::Make(arrow::schema({arrow::field("t", array->type())}),
                                  array->length(), {array});
}

template <typename T>
std::vector<int64_t> Values(const arrow::RecordBatch& batch) {
  const auto& a = static_cast<const arrow::NumericArray<T>&>(*batch.column(0));
  std::vector<int64_t> out;
  for (int64_t i = 0; i < a.length(); ++i) out.push_back(static_cast<int64_t>(a.Value(i)));
  return out;
}

TEST(RowLengths, NarrowWhereEveryLengthFitsAndSlicesCount) {
  auto batch = Lists({3, 0, 5, 1});
  std::shared_ptr<arrow::Schema> schema;
  // A slice, as a range ticket's rows are: its offsets start inside the buffer.
  auto out = RowLengths({batch->Slice(1, 3), batch}, 0, "t", &schema);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(schema->field(0)->type()->id(), arrow::Type::UINT16);
  EXPECT_EQ(schema->field(0)->name(), "t");
  EXPECT_EQ(Values<arrow::UInt16Type>(*(*out)[0]), (std::vector<int64_t>{0, 5, 1}));
  EXPECT_EQ(Values<arrow::UInt16Type>(*(*out)[1]), (std::vector<int64_t>{3, 0, 5, 1}));
}

TEST(RowLengths, WideWhenOneLengthDoesNotFitSixteenBits) {
  std::shared_ptr<arrow::Schema> schema;
  auto out = RowLengths({Lists({2}), Lists({70000, 1})}, 0, "t", &schema);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(schema->field(0)->type()->id(), arrow::Type::UINT32);
  EXPECT_EQ(Values<arrow::UInt32Type>(*(*out)[0]), (std::vector<int64_t>{2}));
  EXPECT_EQ(Values<arrow::UInt32Type>(*(*out)[1]), (std::vector<int64_t>{70000, 1}));
}

TEST(RowLengths, ColumnOfAnotherTypeIsInvalidNamingIt) {
  arrow::Int64Builder b;
  ASSERT_TRUE(b.Append(1).ok());
  auto array = b.Finish().ValueOrDie();
  auto batch =
      arrow::RecordBatch::Make(arrow::schema({arrow::field("label", arrow::int64())}), 1, {array});
  std::shared_ptr<arrow::Schema> schema;
  auto status = RowLengths({batch}, 0, "label", &schema).status();
  EXPECT_TRUE(status.IsInvalid());
  EXPECT_NE(status.message().find("'label' is int64, not list<int32>"), std::string::npos)
      << status;
}

}  // namespace
}  // namespace icefloe
