// Row-group pruning from Parquet statistics (see RowGroupMayMatch).
#include <cmath>
#include <cstring>
#include <set>
#include <utility>

#include <arrow/compute/api_scalar.h>
#include <arrow/scalar.h>
#include <arrow/type.h>
#include <parquet/arrow/schema.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/statistics.h>

#include "icefloe/iceberg/parquet_columns.h"

namespace icefloe::iceberg {

namespace cp = arrow::compute;

namespace {

bool References(const cp::Expression& expr, const std::string& column) {
  for (const auto& ref : cp::FieldsInExpression(expr)) {
    if (ref.name() != nullptr && *ref.name() == column) return true;
  }
  return false;
}

// Whether `expr` cannot become true because `column` holds NaN: it uses the
// column only through comparisons (false for NaN), null tests and casts,
// combined with AND/OR. Only then may the column's min/max statistics, which
// leave NaN out, prune row groups. `NOT (x < 5)` or `x IS NAN` may not.
bool NaNNeverMatches(const cp::Expression& expr, const std::string& column) {
  const cp::Expression::Call* call = expr.call();
  if (call == nullptr) return true;
  static const std::set<std::string> kSafe = {
      "and",     "and_kleene",    "or",       "or_kleene", "equal", "less", "less_equal",
      "greater", "greater_equal", "is_valid", "is_null",   "cast"};
  bool safe = kSafe.count(call->function_name) > 0;
  if (safe && call->function_name == "is_null" && call->options) {
    const auto* null_options = dynamic_cast<const cp::NullOptions*>(call->options.get());
    safe = null_options != nullptr && !null_options->nan_is_null;
  }
  if (!safe) return !References(expr, column);
  return std::all_of(call->arguments.begin(), call->arguments.end(),
                     [&](const cp::Expression& arg) { return NaNNeverMatches(arg, column); });
}

bool IsNaN(const arrow::Scalar& scalar) {
  if (scalar.type->id() == arrow::Type::DOUBLE) {
    return std::isnan(static_cast<const arrow::DoubleScalar&>(scalar).value);
  }
  if (scalar.type->id() == arrow::Type::FLOAT) {
    return std::isnan(static_cast<const arrow::FloatScalar&>(scalar).value);
  }
  return false;
}

// A decimal bound from Parquet's plain encoding: an unscaled integer (INT32,
// INT64) or big-endian two's complement bytes (FIXED_LEN_BYTE_ARRAY,
// BYTE_ARRAY). The scale is the table's: CanRead only widens precision.
std::shared_ptr<arrow::Scalar> DecimalBound(parquet::Type::type physical, const std::string& bytes,
                                            const std::shared_ptr<arrow::DataType>& type) {
  arrow::Decimal128 value;
  if (physical == parquet::Type::INT32 && bytes.size() == 4) {
    int32_t v;
    std::memcpy(&v, bytes.data(), 4);
    value = arrow::Decimal128(v);
  } else if (physical == parquet::Type::INT64 && bytes.size() == 8) {
    int64_t v;
    std::memcpy(&v, bytes.data(), 8);
    value = arrow::Decimal128(v);
  } else if ((physical == parquet::Type::FIXED_LEN_BYTE_ARRAY ||
              physical == parquet::Type::BYTE_ARRAY) &&
             !bytes.empty() && bytes.size() <= 16) {
    auto decoded = arrow::Decimal128::FromBigEndian(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                    static_cast<int32_t>(bytes.size()));
    if (!decoded.ok()) return nullptr;
    value = *decoded;
  } else {
    return nullptr;
  }
  return std::make_shared<arrow::Decimal128Scalar>(value, type);
}

// The min and max of `stats` as scalars of the table type, or nulls.
std::pair<std::shared_ptr<arrow::Scalar>, std::shared_ptr<arrow::Scalar>> Bounds(
    const parquet::Statistics& stats, const std::shared_ptr<arrow::DataType>& type) {
  if (type->id() == arrow::Type::DECIMAL128) {
    return {DecimalBound(stats.physical_type(), stats.EncodeMin(), type),
            DecimalBound(stats.physical_type(), stats.EncodeMax(), type)};
  }
  std::shared_ptr<arrow::Scalar> min, max;
  if (!parquet::arrow::StatisticsAsScalars(stats, &min, &max).ok()) return {};
  auto typed_min = min->CastTo(type);
  auto typed_max = max->CastTo(type);
  if (!typed_min.ok() || !typed_max.ok()) return {};
  return {std::move(*typed_min), std::move(*typed_max)};
}

// What a row group's statistics guarantee about one primitive column, as
// conjunction members on the column's table name (none when unknown).
void StatisticsGuarantee(const parquet::RowGroupMetaData& row_group, const ColumnMatch& column,
                         const cp::Expression& filter, std::vector<cp::Expression>* out) {
  cp::Expression ref = cp::field_ref(column.field.name);
  auto chunk = row_group.ColumnChunk(column.leaves[0]);
  if (!chunk->is_stats_set()) return;
  std::shared_ptr<parquet::Statistics> stats = chunk->statistics();
  if (stats == nullptr) return;
  const bool may_have_nulls = !stats->HasNullCount() || stats->null_count() > 0;
  if (stats->HasNullCount() && stats->num_values() == 0 && stats->null_count() > 0) {
    out->push_back(cp::is_null(ref));
    return;
  }
  if (!may_have_nulls) out->push_back(cp::is_valid(ref));
  if (!stats->HasMinMax()) return;
  const auto& type = column.arrow_field->type();
  const bool is_float = type->id() == arrow::Type::FLOAT || type->id() == arrow::Type::DOUBLE;
  if (is_float && !NaNNeverMatches(filter, column.field.name)) return;
  auto [min, max] = Bounds(*stats, type);
  if (min == nullptr || max == nullptr || IsNaN(*min) || IsNaN(*max)) return;
  cp::Expression lower = cp::greater_equal(ref, cp::literal(std::move(min)));
  cp::Expression upper = cp::less_equal(ref, cp::literal(std::move(max)));
  if (may_have_nulls) {
    // The form SimplifyWithGuarantee understands for nullable columns.
    lower = cp::or_(std::move(lower), cp::is_null(ref));
    upper = cp::or_(std::move(upper), cp::is_null(ref));
  }
  out->push_back(std::move(lower));
  out->push_back(std::move(upper));
}

}  // namespace

arrow::Result<bool> RowGroupMayMatch(const ParquetFile& file, int row_group,
                                     const std::vector<ColumnMatch>& columns,
                                     const cp::Expression& bound_filter) {
  auto metadata = file.reader->parquet_reader()->metadata()->RowGroup(row_group);
  if (metadata->num_rows() == 0) return false;
  std::set<std::string> referenced;
  for (const auto& ref : cp::FieldsInExpression(bound_filter)) {
    if (ref.name() != nullptr) referenced.insert(*ref.name());
  }
  std::vector<cp::Expression> guarantee;
  for (const auto& column : columns) {
    if (referenced.count(column.field.name) == 0) continue;
    if (column.file_root < 0) {
      // Every row holds the column's constant (a partition value, a default or null).
      cp::Expression ref = cp::field_ref(column.field.name);
      if (column.constant == nullptr || !column.constant->is_valid) {
        guarantee.push_back(cp::is_null(ref));
      } else if (!IsNaN(*column.constant)) {
        guarantee.push_back(cp::equal(ref, cp::literal(column.constant)));
      }
    } else if (column.field.type->is_primitive() && column.leaves.size() == 1) {
      StatisticsGuarantee(*metadata, column, bound_filter, &guarantee);
    }
  }
  if (guarantee.empty()) return true;
  ARROW_ASSIGN_OR_RAISE(auto simplified,
                        cp::SimplifyWithGuarantee(bound_filter, cp::and_(guarantee)));
  return simplified.IsSatisfiable();
}

}  // namespace icefloe::iceberg
