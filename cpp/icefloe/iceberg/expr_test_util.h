// Test helper shared by the expr tests: evaluating an Arrow filter on a batch.
#pragma once

#include <set>

#include <arrow/api.h>
#include <arrow/compute/exec.h>
#include <arrow/compute/expression.h>
#include <gtest/gtest.h>

namespace icefloe::iceberg {

// The rows of `batch` where `filter` is true.
inline std::set<int> SelectedRows(const arrow::compute::Expression& filter,
                                  const arrow::RecordBatch& batch) {
  auto bound = filter.Bind(*batch.schema());
  EXPECT_TRUE(bound.ok()) << filter.ToString() << ": " << bound.status();
  if (!bound.ok()) return {};
  auto datum = arrow::compute::ExecuteScalarExpression(*bound, arrow::compute::ExecBatch(batch));
  EXPECT_TRUE(datum.ok()) << filter.ToString() << ": " << datum.status();
  if (!datum.ok()) return {};
  std::set<int> rows;
  if (datum->is_scalar()) {
    const auto& scalar = datum->scalar_as<arrow::BooleanScalar>();
    for (int i = 0; scalar.is_valid && scalar.value && i < batch.num_rows(); ++i) rows.insert(i);
    return rows;
  }
  auto mask = std::static_pointer_cast<arrow::BooleanArray>(datum->make_array());
  for (int64_t i = 0; i < mask->length(); ++i) {
    if (mask->IsValid(i) && mask->Value(i)) rows.insert(static_cast<int>(i));
  }
  return rows;
}

}  // namespace icefloe::iceberg
