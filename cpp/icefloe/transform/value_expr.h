// Value expressions of a transform's output columns: text to an Arrow
// compute expression (docs/transforms.md, "Expressions").
//
// The language is the filter language's (names, quoting, literals) with
// arithmetic and function calls:
//   stars - 1
//   (price - 12.5) / 4.0
//   if_else(stars >= 4, 1, 0)
//   utf8_lower(title)
//   hash_bucket(user_id, 1000)
//   cast(stars, 'float32')
// Operators map to Arrow's checked kernels (add_checked, ...), so an
// overflow is an error, never a wrapped value. A call names any element-wise
// function of Arrow's registry, plus the few below that take options as
// literal arguments. Parsing needs no schema; binding (type checking,
// kernel dispatch) is Arrow's Expression::Bind, done by the caller.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <arrow/compute/expression.h>
#include <arrow/result.h>

namespace icefloe::transform {

/// Longest expression text.
inline constexpr size_t kMaxExprBytes = 65536;
/// Deepest expression tree: each operator and call is a level, and a chain
/// is a level per operator (`a + b + c` is two). Also the deepest nesting of
/// parentheses, calls and operators in the text. Arrow's Bind recurses once
/// per level: a 32,000-term chain overflowed the stack (issue 42).
inline constexpr int kMaxExprDepth = 64;

/// Parses `text` (unbound). Invalid with the position and a caret on a
/// syntax error, an unknown function, a wrong literal argument or a tree
/// deeper than kMaxExprDepth.
arrow::Result<arrow::compute::Expression> ParseValueExpr(std::string_view text);

/// The column names `expr` reads, in first-use order.
std::vector<std::string> ColumnsOf(const arrow::compute::Expression& expr);

/// Registers icefloe's own element-wise functions (hash_bucket) in Arrow's
/// default registry and initializes Arrow compute; idempotent, thread-safe.
arrow::Status RegisterFunctions();

}  // namespace icefloe::transform
