// For the copy's tests: batches of a one-column copy whose "id" values are
// their own global row ids, and the ids a read gives back.
#pragma once

#include <arrow/array/array_primitive.h>
#include <arrow/array/builder_primitive.h>
#include <arrow/type.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "icefloe/node/copy/dataset.h"

namespace icefloe::copy_test_util {

inline std::shared_ptr<arrow::Schema> TestSchema() {
  return arrow::schema({arrow::field("id", arrow::int64())});
}

// A batch whose "id" column holds its own global row ids.
inline CachedBatch Batch(uint64_t start, int64_t rows) {
  arrow::Int64Builder b;
  for (int64_t i = 0; i < rows; ++i) EXPECT_TRUE(b.Append(static_cast<int64_t>(start) + i).ok());
  return {start, arrow::RecordBatch::Make(TestSchema(), rows, {*b.Finish()})};
}

// The "id" values of `batches`, in order.
inline std::vector<int64_t> Ids(const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches) {
  std::vector<int64_t> ids;
  for (const auto& b : batches) {
    auto col = std::static_pointer_cast<arrow::Int64Array>(b->column(0));
    for (int64_t i = 0; i < col->length(); ++i) ids.push_back(col->Value(i));
  }
  return ids;
}

}  // namespace icefloe::copy_test_util
