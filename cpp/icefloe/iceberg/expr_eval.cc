// Evaluating bound filters: as Arrow expressions (rows) and against column
// stats (pruning).
#include <cmath>
#include <map>
#include <utility>

#include <arrow/array/builder_base.h>
#include <arrow/compute/api_scalar.h>
#include <arrow/scalar.h>
#include <arrow/type.h>

#include "icefloe/iceberg/expr.h"
#include "icefloe/iceberg/expr_internal.h"

namespace icefloe::iceberg {

namespace {

namespace cp = arrow::compute;
using Op = ExprOp;

// a AND b AND c ... as a balanced tree, so long chains stay shallow.
cp::Expression Balanced(const char* function, const std::vector<cp::Expression>& operands,
                        size_t begin, size_t end) {
  if (end - begin == 1) return operands[begin];
  const size_t mid = begin + (end - begin) / 2;
  return cp::call(
      function, {Balanced(function, operands, begin, mid), Balanced(function, operands, mid, end)});
}

const char* ComparisonFunction(Op op) {
  switch (op) {
    case Op::kEq:
      return "equal";
    case Op::kNe:
      return "not_equal";
    case Op::kLt:
      return "less";
    case Op::kLe:
      return "less_equal";
    case Op::kGt:
      return "greater";
    default:
      return "greater_equal";
  }
}

// is_in hashes floats, so unlike `equal` it tells -0.0 from 0.0 and finds NaN;
// for IEEE equality the set gets both zeros and no NaN.
std::vector<Literal> SetForLookup(const BoundExpr& e) {
  if (!internal::IsFloating(e.type.get())) return e.literals;
  std::vector<Literal> set;
  for (const Literal& l : e.literals) {
    const double* d = std::get_if<double>(&l.value);
    if (d != nullptr && std::isnan(*d)) continue;
    set.push_back(l);
    if (d != nullptr && *d == 0) {
      Literal other_zero = l;
      other_zero.value = std::signbit(*d) ? 0.0 : -0.0;
      set.push_back(std::move(other_zero));
    }
  }
  return set;
}

arrow::Result<cp::Expression> PredicateToArrow(const BoundExpr& e) {
  if (e.column_path.empty()) {
    return arrow::Status::Invalid("field ", e.field_id, " has no column name for an Arrow filter");
  }
  std::vector<arrow::FieldRef> parts(e.column_path.begin(), e.column_path.end());
  cp::Expression column =
      cp::field_ref(parts.size() == 1 ? parts[0] : arrow::FieldRef(std::move(parts)));
  switch (e.op) {
    case Op::kIsNull:
      return cp::call("is_null", {column}, cp::NullOptions(/*nan_is_null=*/false));
    case Op::kNotNull:
      return cp::call("is_valid", {column});
    case Op::kIsNan:
    case Op::kNotNan: {
      // Two-valued, as IS NULL: a null is not NaN.
      cp::Expression is_nan =
          cp::call("and_kleene", {cp::call("is_valid", {column}), cp::call("is_nan", {column})});
      return e.op == Op::kIsNan ? is_nan : cp::call("invert", {is_nan});
    }
    case Op::kStartsWith:
    case Op::kNotStartsWith: {
      cp::Expression starts =
          cp::call("starts_with", {column},
                   cp::MatchSubstringOptions(std::get<std::string>(e.literals[0].value)));
      return e.op == Op::kStartsWith ? starts : cp::call("invert", {starts});
    }
    case Op::kIn:
    case Op::kNotIn: {
      ARROW_ASSIGN_OR_RAISE(auto arrow_type, ToArrowType(*e.type));
      ARROW_ASSIGN_OR_RAISE(auto builder, arrow::MakeBuilder(arrow_type));
      for (const Literal& l : SetForLookup(e)) {
        ARROW_ASSIGN_OR_RAISE(auto scalar, ToArrowScalar(l, *e.type));
        ARROW_RETURN_NOT_OK(builder->AppendScalar(*scalar));
      }
      ARROW_ASSIGN_OR_RAISE(auto value_set, builder->Finish());
      // EMIT_NULL: a null input stays unknown, so NOT IN does not select it.
      cp::Expression in =
          cp::call("is_in", {column},
                   cp::SetLookupOptions(std::move(value_set), cp::SetLookupOptions::EMIT_NULL));
      return e.op == Op::kIn ? in : cp::call("invert", {in});
    }
    default: {
      ARROW_ASSIGN_OR_RAISE(auto scalar, ToArrowScalar(e.literals[0], *e.type));
      return cp::call(ComparisonFunction(e.op), {column, cp::literal(std::move(scalar))});
    }
  }
}

arrow::Result<cp::Expression> ToArrow(const BoundExpr& e) {
  switch (e.op) {
    case Op::kTrue:
      return cp::literal(true);
    case Op::kFalse:
      return cp::literal(false);
    case Op::kNot: {
      ARROW_ASSIGN_OR_RAISE(cp::Expression child, ToArrow(e.children[0]));
      return cp::call("invert", {std::move(child)});
    }
    case Op::kAnd:
    case Op::kOr: {
      if (e.children.empty()) return cp::literal(e.op == Op::kAnd);
      std::vector<cp::Expression> operands;
      for (const auto& c : e.children) {
        ARROW_ASSIGN_OR_RAISE(cp::Expression operand, ToArrow(c));
        operands.push_back(std::move(operand));
      }
      return Balanced(e.op == Op::kAnd ? "and_kleene" : "or_kleene", operands, 0, operands.size());
    }
    default:
      return PredicateToArrow(e);
  }
}

bool IsNaN(const Literal& l) {
  const auto* d = std::get_if<double>(&l.value);
  return d != nullptr && std::isnan(*d);
}

// A NOT-free tree with the predicates that NaN can satisfy made TRUE: weaker
// than the tree, as AND and OR are monotone.
BoundExpr WithoutNanMatches(BoundExpr e) {
  if (e.is_predicate()) {
    const bool nan_matches = e.op == Op::kNe || e.op == Op::kNotIn || e.op == Op::kIsNan;
    return nan_matches && internal::IsFloating(e.type.get()) ? BoundExpr::True() : e;
  }
  for (auto& c : e.children) c = WithoutNanMatches(std::move(c));
  return e;
}

bool ContainsNot(const BoundExpr& e) {
  if (e.op == Op::kNot) return true;
  for (const auto& c : e.children) {
    if (ContainsNot(c)) return true;
  }
  return false;
}

// Iceberg's inclusive metrics evaluation over a NOT-free tree: false only when
// no row can make a predicate true. Bounds hold for non-null, non-NaN values.
class StatsEvaluator {
 public:
  StatsEvaluator(const StatsLookup& stats, int64_t record_count)
      : stats_(stats), record_count_(record_count) {}

  arrow::Result<bool> Eval(const BoundExpr& e) {
    switch (e.op) {
      case Op::kTrue:
        return true;
      case Op::kFalse:
        return false;
      case Op::kAnd:
        for (const auto& c : e.children) {
          ARROW_ASSIGN_OR_RAISE(bool might, Eval(c));
          if (!might) return false;
        }
        return true;
      case Op::kOr:
        for (const auto& c : e.children) {
          ARROW_ASSIGN_OR_RAISE(bool might, Eval(c));
          if (might) return true;
        }
        return false;
      case Op::kNot:
        return arrow::Status::Invalid("NOT must be rewritten before pruning");
      default:
        return EvalPredicate(e);
    }
  }

 private:
  // What the stats of one column tell.
  struct Facts {
    const Literal* lower = nullptr;  // usable bounds only (never NaN)
    const Literal* upper = nullptr;
    bool all_null = false;     // every value is null
    bool no_ordinary = false;  // every value is null or NaN
    bool nan_free = false;     // no NaN (always for non-float columns)
    bool all_nan = false;      // every value is NaN
  };

  Facts Gather(const ColumnStats& s, bool floating) const {
    Facts f;
    if (s.lower && !s.lower->is_null() && !IsNaN(*s.lower)) f.lower = &*s.lower;
    if (s.upper && !s.upper->is_null() && !IsNaN(*s.upper)) f.upper = &*s.upper;
    std::optional<int64_t> values = s.value_count;
    if (!values && record_count_ >= 0) values = record_count_;
    std::optional<int64_t> nans = floating ? s.nan_count : std::optional<int64_t>(0);
    f.nan_free = nans && *nans == 0;
    if (values) {
      f.all_null = s.null_count && *s.null_count >= *values;
      f.no_ordinary = f.all_null || (s.null_count && nans && *s.null_count + *nans >= *values);
      f.all_nan = floating && nans && *nans >= *values;
    }
    return f;
  }

  arrow::Result<bool> EvalPredicate(const BoundExpr& e) {
    const ColumnStats* s = stats_ ? stats_(e.field_id) : nullptr;
    if (s == nullptr) return true;
    const bool floating = internal::IsFloating(e.type.get());
    const Facts f = Gather(*s, floating);
    for (const auto& l : e.literals) {
      if (IsNaN(l)) return true;  // hand-built NaN constants: no pruning
    }
    switch (e.op) {
      case Op::kIsNull:
        return !(s->null_count && *s->null_count == 0);
      case Op::kNotNull:
        return !f.all_null;
      case Op::kIsNan:
        return floating && !f.nan_free && !f.all_null;
      case Op::kNotNan:
        return !f.all_nan;
      case Op::kNe:
      case Op::kNotIn:
        return MightDiffer(e, f);
      case Op::kStartsWith:
        return f.no_ordinary ? false : MightStartWith(e, f);
      case Op::kNotStartsWith:
        return f.all_null ? false : MightNotStartWith(e, f);
      default:
        return f.no_ordinary ? false : MightCompare(e, f);
    }
  }

  // =, <, <=, >, >=, IN against [lower, upper].
  arrow::Result<bool> MightCompare(const BoundExpr& e, const Facts& f) {
    for (const auto& lit : e.literals) {
      bool might = true;
      if (f.lower && (e.op == Op::kLt || e.op == Op::kLe || e.op == Op::kEq || e.op == Op::kIn)) {
        ARROW_ASSIGN_OR_RAISE(int c, CompareLiterals(*f.lower, lit));
        might = e.op == Op::kLt ? c < 0 : c <= 0;
      }
      if (might && f.upper &&
          (e.op == Op::kGt || e.op == Op::kGe || e.op == Op::kEq || e.op == Op::kIn)) {
        ARROW_ASSIGN_OR_RAISE(int c, CompareLiterals(*f.upper, lit));
        might = e.op == Op::kGt ? c > 0 : c >= 0;
      }
      if (might) return true;
    }
    return false;
  }

  // != and NOT IN: nothing matches only when every value is the same excluded one.
  arrow::Result<bool> MightDiffer(const BoundExpr& e, const Facts& f) {
    if (f.all_null) return false;
    if (!f.lower || !f.upper || !f.nan_free) return true;
    ARROW_ASSIGN_OR_RAISE(int width, CompareLiterals(*f.lower, *f.upper));
    if (width != 0) return true;
    for (const auto& lit : e.literals) {
      ARROW_ASSIGN_OR_RAISE(int c, CompareLiterals(*f.lower, lit));
      if (c == 0) return false;
    }
    return true;
  }

  static arrow::Result<const std::string*> Text(const Literal* l) {
    const auto* s = std::get_if<std::string>(&l->value);
    if (s == nullptr) return arrow::Status::Invalid("LIKE compares with a non-string bound");
    return s;
  }

  // Only the first prefix-length bytes of a bound are compared: the bounds
  // may be truncated, and truncation keeps their order against a prefix.
  arrow::Result<bool> MightStartWith(const BoundExpr& e, const Facts& f) {
    const auto& prefix = std::get<std::string>(e.literals[0].value);
    if (f.lower) {
      ARROW_ASSIGN_OR_RAISE(const std::string* lower, Text(f.lower));
      if (lower->compare(0, prefix.size(), prefix) > 0) return false;
    }
    if (f.upper) {
      ARROW_ASSIGN_OR_RAISE(const std::string* upper, Text(f.upper));
      if (upper->compare(0, prefix.size(), prefix) < 0) return false;
    }
    return true;
  }

  // Nothing matches only when both bounds start with the prefix: every value
  // between them does too.
  arrow::Result<bool> MightNotStartWith(const BoundExpr& e, const Facts& f) {
    if (!f.lower || !f.upper) return true;
    const auto& prefix = std::get<std::string>(e.literals[0].value);
    ARROW_ASSIGN_OR_RAISE(const std::string* lower, Text(f.lower));
    ARROW_ASSIGN_OR_RAISE(const std::string* upper, Text(f.upper));
    auto starts = [&](const std::string* s) {
      return s->size() >= prefix.size() && s->compare(0, prefix.size(), prefix) == 0;
    };
    return !(starts(lower) && starts(upper));
  }

  const StatsLookup& stats_;
  int64_t record_count_;
};

}  // namespace

arrow::Result<arrow::compute::Expression> ToArrowExpression(const BoundExpr& expr) {
  ARROW_RETURN_NOT_OK(internal::ValidateTree(expr));
  return ToArrow(expr);
}

arrow::Result<arrow::compute::Expression> ToArrowPushdownExpression(const BoundExpr& expr) {
  ARROW_RETURN_NOT_OK(internal::ValidateTree(expr));
  return ToArrow(Normalize(WithoutNanMatches(Normalize(expr))));
}

arrow::Result<bool> MightMatch(const BoundExpr& expr, const StatsLookup& stats,
                               int64_t record_count) {
  ARROW_RETURN_NOT_OK(internal::ValidateTree(expr));
  if (record_count == 0) return false;
  StatsEvaluator evaluator(stats, record_count);
  if (!ContainsNot(expr)) return evaluator.Eval(expr);
  return evaluator.Eval(Normalize(expr));
}

arrow::Result<bool> MightMatchPartition(const BoundExpr& expr, const PartitionValueLookup& values) {
  std::map<int32_t, ColumnStats> cache;
  StatsLookup stats = [&](int32_t field_id) -> const ColumnStats* {
    if (auto it = cache.find(field_id); it != cache.end()) return &it->second;
    const Literal* value = values ? values(field_id) : nullptr;
    if (value == nullptr) return nullptr;
    ColumnStats s;
    s.value_count = 1;
    s.null_count = value->is_null() ? 1 : 0;
    s.nan_count = IsNaN(*value) ? 1 : 0;
    if (!value->is_null() && !IsNaN(*value)) s.lower = s.upper = *value;
    return &cache.emplace(field_id, std::move(s)).first->second;
  };
  return MightMatch(expr, stats, 1);
}

}  // namespace icefloe::iceberg
