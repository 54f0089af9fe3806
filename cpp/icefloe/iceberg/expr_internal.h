// Helpers shared by the expr_*.cc files: date/time text, literal coercion and
// the SQL spelling of names and constants. Not part of the public API.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>

#include "icefloe/iceberg/expr.h"
#include "icefloe/iceberg/types.h"

namespace icefloe::iceberg::internal {

/// Days since 1970-01-01 of 'YYYY-MM-DD', or nullopt when malformed or not a calendar date.
std::optional<int64_t> ParseDateText(std::string_view text);

/// 'YYYY-MM-DD[ T]HH:MM:SS[.f{1,9}][Z|+HH:MM|-HH:MM]', split into parts.
struct TimestampText {
  int64_t days = 0;          ///< since 1970-01-01 (local date as written)
  int64_t nanos_of_day = 0;  ///< as written, before the offset
  int fraction_digits = 0;
  bool has_offset = false;
  int32_t offset_seconds = 0;  ///< east of UTC
};
/// Parses a timestamp; with `allow_date_only`, 'YYYY-MM-DD' is midnight.
std::optional<TimestampText> ParseTimestampText(std::string_view text, bool allow_date_only);

/// Microseconds since midnight of 'HH:MM:SS[.f{1,6}]'.
std::optional<int64_t> ParseTimeText(std::string_view text);

/// Coerces a constant from the filter text to a column's type (see Bind).
/// Errors name the column and the literal's position.
arrow::Result<Literal> CoerceLiteral(const ParsedLiteral& literal, const Type& type,
                                     std::string_view column);

/// 'text' with quotes doubled.
std::string QuoteString(std::string_view text);
/// A column name as the parser reads it back: bare when it is a plain
/// identifier that is not a reserved word, else "double-quoted".
std::string QuoteColumn(std::string_view name);
/// True for the reserved words (case-insensitive).
bool IsReservedWord(std::string_view word);
/// A literal of `type` in filter syntax: 5, 1.5, 'abc', DATE '2024-01-31',
/// TIMESTAMP '2024-01-31 10:00:00.000001+00:00'.
std::string FormatLiteral(const Literal& literal, const Type* type);

/// Checks the shape of a hand-built tree: NOT has one operand, predicates have
/// a primitive type and the number of non-null literals their op needs.
arrow::Status ValidateTree(const BoundExpr& expr);

/// True for float and double.
bool IsFloating(const Type* type);

/// One node in filter syntax, from its already-formatted parts: `column`
/// (quoted), `literals` (kStartsWith's with the trailing '%') and `children`.
std::string FormatNode(ExprOp op, const std::string& column,
                       const std::vector<std::string>& literals,
                       const std::vector<std::string>& children);

}  // namespace icefloe::iceberg::internal
