// icefloe's own element-wise functions in Arrow's registry, so transforms
// (value_expr.h) call them like Arrow's: hash_bucket.
#include <cstring>
#include <mutex>

#include <arrow/compute/function.h>
#include <arrow/compute/initialize.h>
#include <arrow/compute/kernel.h>
#include <arrow/compute/registry.h>
#include <arrow/util/bit_util.h>

#include "icefloe/iceberg/partition.h"
#include "icefloe/transform/value_expr.h"

namespace icefloe::transform {

namespace cp = arrow::compute;

namespace {

// Iceberg's bucket transform (spec appendix B): integers hash as an 8-byte
// little-endian long, strings and binary as their bytes; bucket =
// (hash & INT32_MAX) % n. The same buckets as a table partitioned by
// bucket[n] of the column, in every engine.
int32_t Bucket(int32_t hash, int64_t n) {
  return static_cast<int32_t>(static_cast<int64_t>(hash & 0x7fffffff) % n);
}

int32_t HashLong(int64_t v) {
  char bytes[8];
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
  return iceberg::Murmur3Hash32(std::string_view(bytes, 8));
}

template <typename T>
void HashIntegers(const arrow::ArraySpan& in, int64_t n, int32_t* out) {
  const T* values = in.GetValues<T>(1);
  for (int64_t i = 0; i < in.length; ++i)
    out[i] = Bucket(HashLong(static_cast<int64_t>(values[i])), n);
}

template <typename Offset>
void HashBinary(const arrow::ArraySpan& in, int64_t n, int32_t* out) {
  const Offset* offsets = in.GetValues<Offset>(1);
  const char* data = reinterpret_cast<const char*>(in.buffers[2].data);
  for (int64_t i = 0; i < in.length; ++i) {
    std::string_view bytes(data + offsets[i], static_cast<size_t>(offsets[i + 1] - offsets[i]));
    out[i] = Bucket(iceberg::Murmur3Hash32(bytes), n);
  }
}

arrow::Status HashBucketExec(cp::KernelContext*, const cp::ExecSpan& batch, cp::ExecResult* out) {
  if (!batch[0].is_array()) {
    return arrow::Status::Invalid("hash_bucket: the value must be a column, not a constant");
  }
  if (!batch[1].is_scalar() || !batch[1].scalar->is_valid) {
    return arrow::Status::Invalid("hash_bucket: the bucket count must be an integer literal");
  }
  const int64_t n = batch[1].scalar_as<arrow::Int64Scalar>().value;
  if (n < 1 || n > std::numeric_limits<int32_t>::max()) {
    return arrow::Status::Invalid("hash_bucket: the bucket count must be in 1..2147483647; got ",
                                  n);
  }
  const arrow::ArraySpan& in = batch[0].array;
  int32_t* dst = out->array_span_mutable()->GetValues<int32_t>(1);
  switch (in.type->id()) {
    case arrow::Type::INT8:
      HashIntegers<int8_t>(in, n, dst);
      break;
    case arrow::Type::INT16:
      HashIntegers<int16_t>(in, n, dst);
      break;
    case arrow::Type::INT32:
    case arrow::Type::DATE32:
      HashIntegers<int32_t>(in, n, dst);
      break;
    case arrow::Type::INT64:
      HashIntegers<int64_t>(in, n, dst);
      break;
    case arrow::Type::STRING:
    case arrow::Type::BINARY:
      HashBinary<int32_t>(in, n, dst);
      break;
    case arrow::Type::LARGE_STRING:
    case arrow::Type::LARGE_BINARY:
      HashBinary<int64_t>(in, n, dst);
      break;
    default:
      return arrow::Status::TypeError("hash_bucket: cannot hash ", in.type->ToString());
  }
  return arrow::Status::OK();
}

arrow::Status AddHashBucket(cp::FunctionRegistry* registry) {
  static const cp::FunctionDoc kDoc{
      "Iceberg bucket of each value",
      "(murmur3_x86_32(value) & INT32_MAX) % buckets: integers hashed as 8-byte longs, strings "
      "and binary as their bytes; null stays null",
      {"values", "buckets"}};
  auto fn = std::make_shared<cp::ScalarFunction>("hash_bucket", cp::Arity::Binary(), kDoc);
  for (auto type : {arrow::int8(), arrow::int16(), arrow::int32(), arrow::int64(), arrow::date32(),
                    arrow::utf8(), arrow::binary(), arrow::large_utf8(), arrow::large_binary()}) {
    cp::ScalarKernel kernel({cp::InputType(type->id()), cp::InputType(arrow::Type::INT64)},
                            arrow::int32(), HashBucketExec);
    ARROW_RETURN_NOT_OK(fn->AddKernel(std::move(kernel)));
  }
  return registry->AddFunction(std::move(fn));
}

}  // namespace

arrow::Status RegisterFunctions() {
  static std::once_flag once;
  static arrow::Status status;
  std::call_once(once, [] {
    status = cp::Initialize();
    if (status.ok()) status = AddHashBucket(cp::GetFunctionRegistry());
  });
  return status;
}

}  // namespace icefloe::transform
