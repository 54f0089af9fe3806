#include "icefloe/node/serve/row_lengths.h"

#include <algorithm>
#include <limits>

#include <arrow/array.h>
#include <arrow/buffer.h>
#include <arrow/type.h>
#include <arrow/type_traits.h>

namespace icefloe {
namespace {

// Lengths of one list array from its offsets: offsets[i + 1] - offsets[i].
template <typename Out>
arrow::Result<std::shared_ptr<arrow::Array>> LengthsOf(const arrow::ListArray& list) {
  const int64_t n = list.length();
  ARROW_ASSIGN_OR_RAISE(auto buffer, arrow::AllocateBuffer(n * static_cast<int64_t>(sizeof(Out))));
  auto* out = reinterpret_cast<Out*>(buffer->mutable_data());
  const int32_t* offsets = list.raw_value_offsets();  // already shifted by the slice's offset
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(offsets[i + 1] - offsets[i]);
  if (list.null_count() > 0) {
    for (int64_t i = 0; i < n; ++i) {
      if (list.IsNull(i)) out[i] = 0;
    }
  }
  using ArrowType = typename arrow::CTypeTraits<Out>::ArrowType;
  return std::make_shared<arrow::NumericArray<ArrowType>>(n, std::move(buffer));
}

}  // namespace

arrow::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> RowLengths(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches, int column,
    const std::string& name, std::shared_ptr<arrow::Schema>* schema) {
  // First pass: the longest row, which picks the answer's width.
  int32_t longest = 0;
  for (const auto& batch : batches) {
    const auto& array = batch->column(column);
    if (array->type_id() != arrow::Type::LIST ||
        array->type()->field(0)->type()->id() != arrow::Type::INT32) {
      return arrow::Status::Invalid("lengths ticket: column '", name, "' is ",
                                    array->type()->ToString(), ", not list<int32>");
    }
    const auto& list = static_cast<const arrow::ListArray&>(*array);
    const int32_t* offsets = list.raw_value_offsets();
    for (int64_t i = 0; i < list.length(); ++i) {
      longest = std::max(longest, offsets[i + 1] - offsets[i]);
    }
  }
  const bool narrow = longest <= std::numeric_limits<uint16_t>::max();
  *schema = arrow::schema(
      {arrow::field(name, narrow ? arrow::uint16() : arrow::uint32(), /*nullable=*/false)});
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  out.reserve(batches.size());
  for (const auto& batch : batches) {
    const auto& list = static_cast<const arrow::ListArray&>(*batch->column(column));
    std::shared_ptr<arrow::Array> lengths;
    if (narrow) {
      ARROW_ASSIGN_OR_RAISE(lengths, LengthsOf<uint16_t>(list));
    } else {
      ARROW_ASSIGN_OR_RAISE(lengths, LengthsOf<uint32_t>(list));
    }
    out.push_back(arrow::RecordBatch::Make(*schema, list.length(), {std::move(lengths)}));
  }
  return out;
}

}  // namespace icefloe
