// Filter expressions: parsing, binding, row filtering and pruning.
//
// A filter arrives as SQL-style text ("x > 5 AND name LIKE 'ab%'"). The parts
// fit together as a pipeline:
//
//   ParseFilter(text)      -> Expr: an unbound tree of column names and literals as written.
//   Bind(expr, schema)     -> BoundExpr: columns resolved to field ids and types, literals
//                             coerced to the column type, constants folded, NOT pushed down
//                             to the leaves (see Normalize).
//   ToArrowExpression(b)   -> an arrow::compute::Expression that filters rows exactly;
//   ToArrowPushdownExpression(b) -> its NaN-safe weakening for Parquet row-group pruning.
//   MightMatch(b, stats)   -> false only when no row of a file can match, from its column
//                             bounds and counts (Iceberg's inclusive metrics evaluation).
//
// Semantics (the same in row filtering and pruning):
// - SQL three-valued logic. A comparison, IN, NOT IN, LIKE or NOT LIKE on a null value is
//   unknown, and so is its NOT; AND/OR are Kleene; a row is kept only when the filter is
//   true. So a row where `x` is null matches neither `x < 5` nor `NOT (x < 5)`.
// - IS [NOT] NULL and IS [NOT] NAN are two-valued: a null is not NaN.
// - NaN (float/double columns) compares as IEEE 754 does: `=`, `<`, `<=`, `>`, `>=` and IN
//   are false for NaN, `!=` and NOT IN are true; -0.0 equals 0.0. NOT keeps its meaning, so
//   `NOT (x < 5)` is true for NaN: Normalize rewrites it as `x >= 5 OR x IS NAN`. Column
//   bounds leave NaN out; pruning uses nan_count and is conservative when it is unknown.
// - Literals are coerced to the column type before comparing (a float literal compared with
//   a `float` column is rounded to float32), so pruning and row filtering see equal values.
//
// All functions are pure and thread-safe. Errors are arrow::Status::Invalid with the
// 1-based character position of the offending part of the filter text.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/compute/expression.h>
#include <arrow/result.h>

#include "icefloe/iceberg/types.h"

namespace icefloe::iceberg {

/// The longest filter text ParseFilter accepts, in bytes.
inline constexpr size_t kMaxFilterBytes = 64 * 1024;
/// The deepest nesting of parentheses and NOTs ParseFilter accepts.
inline constexpr int kMaxFilterDepth = 200;

/// The node kinds shared by unbound (Expr) and bound (BoundExpr) trees. Each
/// operator has a negation (see Negate) so NOT can be pushed to the leaves.
enum class ExprOp {
  kTrue,
  kFalse,
  kAnd,  ///< children (any number)
  kOr,   ///< children (any number)
  kNot,  ///< children[0]
  kEq,   ///< column = literals[0]
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kIn,     ///< column IN (literals...)
  kNotIn,  ///< column NOT IN (literals...)
  kIsNull,
  kNotNull,
  kIsNan,  ///< float/double columns only
  kNotNan,
  kStartsWith,     ///< column LIKE 'literals[0]%'
  kNotStartsWith,  ///< column NOT LIKE 'literals[0]%'
};

/// The operator that is true exactly when `op` is false (for a non-null,
/// non-NaN value): kLt <-> kGe, kAnd <-> kOr (De Morgan), kIn <-> kNotIn, ...
/// kNot has no negation and is returned as is.
ExprOp Negate(ExprOp op);
/// The operator with its operands swapped: `5 < x` is `x > 5`.
ExprOp Flip(ExprOp op);
/// The SQL spelling: "=", "!=", "IN", "IS NULL", "LIKE", "AND", ...
const char* OpName(ExprOp op);

/// A constant as written in the filter text. It gets its Iceberg type only
/// when bound to a column.
struct ParsedLiteral {
  enum class Kind { kInteger, kFloat, kString, kBoolean, kDate, kTimestamp };
  Kind kind = Kind::kInteger;
  /// Numbers as written (with sign), strings unescaped, "true"/"false", the
  /// text inside DATE '...' and TIMESTAMP '...'.
  std::string text;
  /// 1-based character position in the filter text.
  int32_t position = 0;

  /// As it would be written in a filter: 5, 'it''s', DATE '2024-01-31'.
  std::string ToString() const;
};

struct Expr;
/// Unbound trees are immutable and shared.
using ExprPtr = std::shared_ptr<const Expr>;

/// A node of an unbound filter tree. BETWEEN is parsed as `x >= a AND x <= b`,
/// LIKE 'p%' as kStartsWith, a LIKE pattern without wildcards as kEq, and a
/// comparison with the literal on the left is flipped to put the column first.
struct Expr {
  ExprOp op = ExprOp::kTrue;
  /// The column of a predicate, as written (unquoted).
  std::string column;
  /// 1-based character position: the column of a predicate, else the node's first token.
  int32_t position = 0;
  /// The constants of a predicate: one for comparisons and LIKE, several for IN.
  std::vector<ParsedLiteral> literals;
  /// The operands of kAnd, kOr (two or more) and kNot (one).
  std::vector<ExprPtr> children;

  /// A fully parenthesized filter that parses back to the same tree.
  std::string ToString() const;
};

/// Reads a value written in Iceberg's JSON single-value serialization (as
/// metadata.json writes `initial-default`) as a literal of primitive `type`:
/// booleans and numbers as JSON values, decimals as strings ("14.20"), dates,
/// times, timestamps and UUIDs as ISO-8601 / 8-4-4-4-12 strings, binary and
/// fixed as hex strings, null as a null literal. Invalid naming `what` when
/// the value does not fit the type; NotImplemented for nested types.
arrow::Result<Literal> LiteralFromJson(const Type& type, std::string_view json_text,
                                       std::string_view what);

/// Parses a filter. Grammar (keywords are case-insensitive; NOT binds tighter
/// than AND, AND tighter than OR):
///
///   filter     := or
///   or         := and (OR and)*
///   and        := not (AND not)*
///   not        := NOT not | '(' or ')' | TRUE | FALSE | predicate
///   predicate  := column op literal | literal op column
///               | column [NOT] IN '(' literal (',' literal)* ')'
///               | column [NOT] BETWEEN literal AND literal
///               | column IS [NOT] NULL | column IS [NOT] NAN
///               | column [NOT] LIKE 'prefix%'
///   op         := '=' | '!=' | '<>' | '<' | '<=' | '>' | '>='
///   literal    := [+-]integer | [+-]float (1.5, .5, 1e-3) | 'string' ('' escapes a quote)
///               | TRUE | FALSE | DATE 'YYYY-MM-DD'
///               | TIMESTAMP 'YYYY-MM-DD[ T]HH:MM:SS[.fffffffff][Z|+HH:MM|-HH:MM]'
///   column     := name (letters, digits, '_', '.' between parts of a nested field: a.b)
///               | "quoted name" ("" escapes a quote) | `quoted name` (`` escapes)
///
/// Reserved words (quote a column that has one of these names): AND, OR, NOT,
/// IN, IS, NULL, LIKE, BETWEEN, TRUE, FALSE. DATE and TIMESTAMP are keywords
/// only before a string. Only prefix LIKE patterns are supported.
///
/// Errors: Invalid, "filter syntax error at position P: <what>" followed by the
/// text around P and a caret under it; also when the text is longer than
/// kMaxFilterBytes or nests deeper than kMaxFilterDepth.
arrow::Result<ExprPtr> ParseFilter(std::string_view text);

/// A filter tree bound to a schema. Build one with Bind, or by hand with the
/// static helpers (the scan planner builds trees over partition fields).
struct BoundExpr {
  using Op = ExprOp;

  Op op = Op::kTrue;
  /// The column of a predicate.
  int32_t field_id = 0;
  /// The column's Iceberg type (primitive).
  TypePtr type;
  /// The column's names from the top-level field down ({"loc", "lat"}); used
  /// for Arrow field references and ToString. May be empty for hand-built trees
  /// that are only used for pruning.
  std::vector<std::string> column_path;
  /// Constants of the column's type: one for comparisons and kStartsWith,
  /// any number for kIn/kNotIn, none otherwise.
  std::vector<Literal> literals;
  /// The operands of kAnd, kOr and kNot.
  std::vector<BoundExpr> children;

  /// Constants: every row, no row.
  static BoundExpr True();
  static BoundExpr False();
  /// Connectives over the children as given (Normalize folds and flattens them).
  static BoundExpr And(std::vector<BoundExpr> children);
  static BoundExpr Or(std::vector<BoundExpr> children);
  static BoundExpr Not(BoundExpr child);
  /// A comparison or kStartsWith/kNotStartsWith on one literal.
  static BoundExpr Compare(Op op, int32_t field_id, TypePtr type, Literal literal,
                           std::vector<std::string> column_path = {});
  /// Any predicate: kIn/kNotIn with a set, kIsNull/... with no literals.
  static BoundExpr Predicate(Op op, int32_t field_id, TypePtr type, std::vector<Literal> literals,
                             std::vector<std::string> column_path = {});

  /// True for the ops that test a column (kEq .. kNotStartsWith).
  bool is_predicate() const;
  /// The column path joined with '.' ("loc.lat"), or "field#<id>" when unnamed.
  std::string column_name() const;
  /// A fully parenthesized filter in the ParseFilter syntax.
  std::string ToString() const;
};

/// Resolves the columns of `expr` in `schema` (Schema::FindByName: exact name,
/// then case-insensitive, dotted paths into structs), coerces each literal to
/// its column's type and returns the tree normalized (see Normalize).
///
/// Coercions: integer -> int (range checked), long, float, double, decimal;
/// float -> float, double, decimal (scale checked); string -> string, date
/// ('YYYY-MM-DD'), time ('HH:MM:SS[.ffffff]'), timestamp(tz)(_ns) (as in the
/// TIMESTAMP literal, or a date for midnight; an offset converts to UTC and is
/// only accepted for timestamptz columns unless it is zero), uuid (8-4-4-4-12
/// hex), binary, fixed[L] (exactly L bytes); DATE -> date, timestamp(tz)(_ns);
/// TIMESTAMP -> timestamp(tz)(_ns); TRUE/FALSE -> boolean.
///
/// Errors (Invalid, with the position): an unknown column (listing the
/// top-level columns), a predicate on a struct/list/map column, LIKE on a
/// non-string column, IS NAN on a non-float column, a literal that does not
/// fit the column's type.
arrow::Result<BoundExpr> Bind(const ExprPtr& expr, const Schema& schema);

/// Pushes NOT down to the predicates (De Morgan; a predicate's NOT becomes its
/// negated operator, plus `OR x IS NAN` for range comparisons on float/double
/// columns so NaN keeps its meaning), folds constants (x AND FALSE -> FALSE,
/// ...), flattens nested AND/OR, and turns IN with one value into `=` (NOT IN
/// into `!=`; an empty IN into FALSE, an empty NOT IN into IS NOT NULL). The
/// result has no kNot node and selects exactly the same rows.
BoundExpr Normalize(BoundExpr expr);

/// The field ids a tree refers to, sorted, without duplicates.
std::vector<int32_t> ReferencedFieldIds(const BoundExpr& expr);

/// The Arrow expression that selects the rows where `expr` is true, on a
/// table or batch whose columns carry the names in `column_path` (the current
/// schema's names). AND/OR chains become balanced trees of and_kleene/
/// or_kleene; IN is is_in with EMIT_NULL (null stays unknown); LIKE is
/// starts_with; IS NAN is is_nan. Exact on rows; as a Parquet scan filter see
/// ToArrowPushdownExpression. Errors: Invalid for a malformed hand-built tree
/// (e.g. no column path).
arrow::Result<arrow::compute::Expression> ToArrowExpression(const BoundExpr& expr);

/// A filter for Parquet row-group pruning (ParquetFileFragment::SplitByRowGroup
/// or a dataset scan filter). Arrow's row-group statistics leave NaN out of
/// min/max yet are read as bounding every value (min == max as "every value is
/// min"), so Arrow would drop row groups whose only matches are NaN rows. Here
/// the predicates that NaN can satisfy on float/double columns (!=, NOT IN,
/// IS NAN, and so the NaN half of a negated range) are TRUE: the result is
/// implied by `expr`, never prunes a matching row, and may keep extra rows, so
/// apply ToArrowExpression to the rows it returns. Equal to ToArrowExpression
/// when the filter has no such predicate.
arrow::Result<arrow::compute::Expression> ToArrowPushdownExpression(const BoundExpr& expr);

/// What a data file's metadata says about one column. Bounds cover the
/// non-null, non-NaN values and may be loose (Iceberg truncates string
/// bounds), but always satisfy lower <= value <= upper.
struct ColumnStats {
  std::optional<Literal> lower;
  std::optional<Literal> upper;
  std::optional<int64_t> null_count;
  /// Values including nulls and NaNs (Iceberg's value_counts).
  std::optional<int64_t> value_count;
  std::optional<int64_t> nan_count;
};

/// The stats of a field id, or nullptr when there are none (no pruning on it).
/// The pointer must stay valid during the MightMatch call.
using StatsLookup = std::function<const ColumnStats*(int32_t field_id)>;

/// Inclusive pruning: false only when no row of a file with these stats can
/// make `expr` true; true when some row might (or the stats cannot tell).
/// `record_count` is the file's row count (0 prunes; negative means unknown).
/// NOT is pushed down with Normalize first, never evaluated as "not might".
/// Errors: Invalid for a malformed tree or stats that do not compare with the
/// literals (a bug in the caller).
arrow::Result<bool> MightMatch(const BoundExpr& expr, const StatsLookup& stats,
                               int64_t record_count);

/// The partition value of a field id, or nullptr when unknown. A null Literal
/// is a null partition value.
using PartitionValueLookup = std::function<const Literal*(int32_t field_id)>;

/// MightMatch for a partition: every row has the given value in each field
/// (for the scan planner, with trees over partition fields).
arrow::Result<bool> MightMatchPartition(const BoundExpr& expr, const PartitionValueLookup& values);

}  // namespace icefloe::iceberg
