// Small gtest helpers for the transform tests (the wheel has no arrow_testing).
#pragma once

#include <memory>
#include <string>

#include <arrow/array.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>

namespace icefloe::transform {

#define ASSERT_OK(expr)                      \
  do {                                       \
    auto _st = (expr);                       \
    ASSERT_TRUE(_st.ok()) << _st.ToString(); \
  } while (false)
// ASSERT_OK_AND_ASSIGN(auto x, expr), as Arrow's own tests write it.
#define ICEFLOE_CONCAT_INNER(a, b) a##b
#define ICEFLOE_CONCAT(a, b) ICEFLOE_CONCAT_INNER(a, b)
#define ASSERT_OK_AND_ASSIGN(lhs, ...)                           \
  auto ICEFLOE_CONCAT(_result_, __LINE__) = (__VA_ARGS__);       \
  ASSERT_TRUE(ICEFLOE_CONCAT(_result_, __LINE__).ok())           \
      << ICEFLOE_CONCAT(_result_, __LINE__).status().ToString(); \
  lhs = std::move(*ICEFLOE_CONCAT(_result_, __LINE__))
#define ASSERT_ARRAYS_EQUAL(expected, actual) \
  ASSERT_TRUE((expected).Equals(actual)) << (expected).ToString() << " vs " << (actual).ToString()

inline std::shared_ptr<arrow::Array> ArrayFromJSON(const std::shared_ptr<arrow::DataType>& type,
                                                   const std::string& json) {
  return arrow::json::ArrayFromJSONString(type, json).ValueOrDie();
}

}  // namespace icefloe::transform
