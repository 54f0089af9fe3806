// libFuzzer target for transform value expressions (value_expr.h): any text
// must parse to an expression or an error; a parsed one must bind to a
// fixed schema or fail, and a bound one must evaluate on a small batch or
// fail: never a crash, an exception, undefined behaviour or a hang. Seeded
// with testdata/corpus:
//   transform_fuzz -max_total_time=60 -rss_limit_mb=2048 corpus/
//   cpp/icefloe/transform/testdata/corpus
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <arrow/api.h>
#include <arrow/compute/exec.h>
#include <arrow/json/from_string.h>

#include "icefloe/transform/value_expr.h"

namespace {

std::shared_ptr<arrow::RecordBatch> Batch() {
  static const auto batch = [] {
    auto schema = arrow::schema(
        {arrow::field("stars", arrow::int32()), arrow::field("price", arrow::float64()),
         arrow::field("title", arrow::utf8()), arrow::field("user_id", arrow::int64()),
         arrow::field("quoted col", arrow::int8())});
    auto col = [](const std::shared_ptr<arrow::DataType>& t, const char* json) {
      return arrow::json::ArrayFromJSONString(t, json).ValueOrDie();
    };
    return arrow::RecordBatch::Make(
        schema, 3,
        {col(arrow::int32(), "[1, null, 5]"), col(arrow::float64(), "[0.5, -1e300, null]"),
         col(arrow::utf8(), R"j(["Aé", null, ""])j"),
         col(arrow::int64(), "[9223372036854775807, 0, -9223372036854775808]"),
         col(arrow::int8(), "[127, -128, 0]")});
  }();
  return batch;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto expr = icefloe::transform::ParseValueExpr(text);
  if (!expr.ok()) return 0;
  auto batch = Batch();
  auto bound = expr->Bind(*batch->schema());
  if (!bound.ok()) return 0;
  (void)arrow::compute::ExecuteScalarExpression(*bound, arrow::compute::ExecBatch(*batch));
  return 0;
}
