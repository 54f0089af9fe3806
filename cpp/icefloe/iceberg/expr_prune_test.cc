// MightMatch and MightMatchPartition: a table of cases, and a randomized check
// that pruning never drops a file with a matching row.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <set>

#include <arrow/api.h>
#include <arrow/compute/initialize.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "icefloe/iceberg/expr.h"
#include "icefloe/iceberg/expr_test_util.h"

namespace icefloe::iceberg {

namespace cp = arrow::compute;

namespace {

Literal Long(int64_t v) { return Literal{TypeId::kLong, v}; }
Literal Double(double v) { return Literal{TypeId::kDouble, v}; }
Literal Str(std::string v) { return Literal{TypeId::kString, std::move(v)}; }

struct PruneCase {
  const char* filter;
  ColumnStats stats;  // for every column
  bool might;
};

}  // namespace

TEST(MightMatch, TableOfCases) {
  const char* schema_json = R"J({"type": "struct", "fields": [
      {"id": 1, "name": "x", "required": false, "type": "long"},
      {"id": 2, "name": "d", "required": false, "type": "double"},
      {"id": 3, "name": "s", "required": false, "type": "string"}]})J";
  Schema schema = *ParseSchema(nlohmann::json::parse(schema_json));
  auto bounds = [](Literal lo, Literal hi, int64_t nulls = 0, int64_t nans = 0) {
    return ColumnStats{lo, hi, nulls, 10, nans};
  };
  const ColumnStats x5_9 = bounds(Long(5), Long(9));
  const ColumnStats all_null{std::nullopt, std::nullopt, 10, 10, std::nullopt};
  const PruneCase cases[] = {
      {"x > 10", bounds(Long(0), Long(5)), false},
      {"x > 5", bounds(Long(0), Long(5)), false},
      {"x >= 5", bounds(Long(0), Long(5)), true},
      {"x < 5", x5_9, false},
      {"x <= 5", x5_9, true},
      {"x = 3", x5_9, false},
      {"x = 10", x5_9, false},
      {"x = 7", x5_9, true},
      {"x != 7", x5_9, true},
      {"x != 7", bounds(Long(7), Long(7)), false},
      {"x != 7", bounds(Long(7), Long(7), 3), false},  // nulls do not match !=
      {"x IN (1, 2, 10)", x5_9, false},
      {"x IN (1, 6)", x5_9, true},
      {"x NOT IN (7, 8)", bounds(Long(7), Long(7)), false},
      {"x NOT IN (6, 8)", bounds(Long(7), Long(7)), true},
      {"x IS NULL", x5_9, false},
      {"x IS NULL", bounds(Long(5), Long(9), 1), true},
      {"x IS NULL", ColumnStats{Long(5), Long(9), std::nullopt, 10, std::nullopt}, true},
      {"x IS NOT NULL", all_null, false},
      {"x IS NOT NULL", bounds(Long(5), Long(9), 9), true},
      {"x = 5", all_null, false},
      {"x != 5", all_null, false},
      {"x NOT IN (5)", all_null, false},
      {"NOT (x = 5)", all_null, false},
      {"x > 3", ColumnStats{}, true},  // no stats
      {"x > 3", ColumnStats{std::nullopt, Long(2), 0, 10, std::nullopt}, false},
      {"x > 3 AND x < 4", x5_9, false},
      {"x > 3 OR x < 4", x5_9, true},
      {"x < 3 OR x > 10", x5_9, false},
      {"NOT (x >= 5)", x5_9, false},  // rewritten to x < 5, never "not might"
      {"NOT (x > 5)", x5_9, true},
      {"NOT (x < 3 OR x > 10)", x5_9, true},
      {"NOT (x BETWEEN 0 AND 100)", x5_9, false},
      {"NOT (x BETWEEN 6 AND 100)", x5_9, true},
      {"NOT x IS NULL", all_null, false},
      // NaN: bounds exclude NaN; NaN matches no range comparison but matches !=.
      {"d > 5", bounds(Double(0), Double(5), 0, 3), false},
      {"NOT (d <= 5)", bounds(Double(0), Double(5), 0, 0), false},
      {"NOT (d <= 5)", bounds(Double(0), Double(5), 0, 3), true},  // NaN rows match
      {"NOT (d <= 5)", ColumnStats{Double(0), Double(5), 0, 10, std::nullopt}, true},
      {"d = 1", ColumnStats{std::nullopt, std::nullopt, 0, 10, 10}, false},  // all NaN
      {"d = 1", ColumnStats{std::nullopt, std::nullopt, 4, 10, 6}, false},   // null or NaN
      {"d != 1", ColumnStats{std::nullopt, std::nullopt, 0, 10, 10}, true},
      {"d != 1", bounds(Double(1), Double(1), 0, 0), false},
      {"d != 1", bounds(Double(1), Double(1), 0, 1), true},
      {"d != 1", ColumnStats{Double(1), Double(1), 0, 10, std::nullopt}, true},
      {"d IS NAN", bounds(Double(0), Double(5), 0, 0), false},
      {"d IS NAN", bounds(Double(0), Double(5), 0, 1), true},
      {"d IS NAN", ColumnStats{Double(0), Double(5), 0, 10, std::nullopt}, true},
      {"d IS NOT NAN", ColumnStats{std::nullopt, std::nullopt, 0, 10, 10}, false},
      {"d IS NOT NAN", ColumnStats{std::nullopt, std::nullopt, 2, 10, 8}, true},
      {"d > 1", ColumnStats{Double(0), Double(std::nan("")), 0, 10, 1}, true},  // NaN bound
      {"d = -0.0", bounds(Double(0.0), Double(1)), true},
      // Prefixes against truncated bounds: only prefix-length bytes compare.
      {"s LIKE 'abc%'", bounds(Str("abd"), Str("b")), false},
      {"s LIKE 'abc%'", bounds(Str("ab"), Str("ac")), true},
      {"s LIKE 'abc%'", bounds(Str("abc"), Str("abc")), true},
      {"s LIKE 'abc%'", bounds(Str("abcz"), Str("abd")), true},
      {"s LIKE 'abc%'", bounds(Str("a"), Str("abb")), false},
      {"s LIKE 'abc%'", bounds(Str("a"), Str("abbzzzz")), false},
      {"s LIKE 'b%'", bounds(Str("a"), Str("az")), false},
      {"s LIKE 'b%'", bounds(Str("a"), Str("b")), true},
      {"s NOT LIKE 'ab%'", bounds(Str("abc"), Str("abz")), false},
      {"s NOT LIKE 'ab%'", bounds(Str("a"), Str("abz")), true},
      {"s NOT LIKE 'ab%'", bounds(Str("abc"), Str("ac")), true},
      {"NOT s LIKE 'ab%'", bounds(Str("abc"), Str("abz")), false},
      {"s = 'abc'", bounds(Str("abd"), Str("b")), false},
      {"s = 'abc'", bounds(Str("ab"), Str("ac")), true},
      {"s LIKE '%'", all_null, false},
  };
  for (const auto& c : cases) {
    auto bound = Bind(*ParseFilter(c.filter), schema);
    ASSERT_TRUE(bound.ok()) << c.filter << ": " << bound.status();
    StatsLookup stats = [&](int32_t) { return &c.stats; };
    auto might = MightMatch(*bound, stats, 10);
    ASSERT_TRUE(might.ok()) << c.filter << ": " << might.status();
    EXPECT_EQ(*might, c.might) << c.filter << " with " << bound->ToString();
  }
}

TEST(MightMatch, RecordCountsAndMissingStats) {
  TypePtr long_type = MakePrimitive(TypeId::kLong);
  BoundExpr gt = BoundExpr::Compare(ExprOp::kGt, 1, long_type, Long(10));
  ColumnStats stats{Long(0), Long(5), 0, std::nullopt, std::nullopt};
  EXPECT_FALSE(*MightMatch(
      gt, [&](int32_t) { return &stats; }, 100));
  EXPECT_TRUE(*MightMatch(
      gt, [](int32_t) { return nullptr; }, 100));
  EXPECT_TRUE(*MightMatch(gt, nullptr, 100));
  EXPECT_FALSE(*MightMatch(BoundExpr::True(), nullptr, 0));
  EXPECT_TRUE(*MightMatch(BoundExpr::True(), nullptr, -1));
  // Without value_count, the record count tells that all values are null.
  ColumnStats nulls{std::nullopt, std::nullopt, 100, std::nullopt, std::nullopt};
  BoundExpr not_null = BoundExpr::Predicate(ExprOp::kNotNull, 1, long_type, {});
  EXPECT_FALSE(*MightMatch(
      not_null, [&](int32_t) { return &nulls; }, 100));
  EXPECT_TRUE(*MightMatch(
      not_null, [&](int32_t) { return &nulls; }, 101));
  EXPECT_TRUE(*MightMatch(
      not_null, [&](int32_t) { return &nulls; }, -1));
  // Bounds that do not compare with the literal are the caller's bug.
  ColumnStats strings{Str("a"), Str("b"), 0, 10, std::nullopt};
  EXPECT_TRUE(MightMatch(
                  gt, [&](int32_t) { return &strings; }, 10)
                  .status()
                  .IsInvalid());
}

TEST(MightMatch, Partitions) {
  TypePtr long_type = MakePrimitive(TypeId::kLong);
  TypePtr date_type = MakePrimitive(TypeId::kDate);
  // day >= 19723 AND bucket IN (1, 3), over partition fields 1000 (day) and 1001 (bucket).
  BoundExpr filter = BoundExpr::And(
      {BoundExpr::Compare(ExprOp::kGe, 1000, date_type, Literal{TypeId::kDate, int64_t{19723}}),
       BoundExpr::Predicate(ExprOp::kIn, 1001, long_type, {Long(1), Long(3)})});
  auto partition = [](std::optional<int64_t> day, std::optional<int64_t> bucket) {
    Literal day_value = day ? Literal{TypeId::kDate, *day} : Literal{};
    Literal bucket_value = bucket ? Long(*bucket) : Literal{};
    return PartitionValueLookup(
        [day_value, bucket_value](int32_t id) { return id == 1000 ? &day_value : &bucket_value; });
  };
  EXPECT_TRUE(*MightMatchPartition(filter, partition(19723, 1)));
  EXPECT_FALSE(*MightMatchPartition(filter, partition(19722, 1)));
  EXPECT_FALSE(*MightMatchPartition(filter, partition(19800, 2)));
  EXPECT_FALSE(*MightMatchPartition(filter, partition(std::nullopt, 3)));  // null partition
  EXPECT_TRUE(*MightMatchPartition(filter, [](int32_t) { return nullptr; }));
  BoundExpr is_null = BoundExpr::Predicate(ExprOp::kIsNull, 1000, date_type, {});
  EXPECT_TRUE(*MightMatchPartition(is_null, partition(std::nullopt, 3)));
  EXPECT_FALSE(*MightMatchPartition(is_null, partition(19723, 3)));
  EXPECT_FALSE(*MightMatchPartition(BoundExpr::Not(filter), partition(19723, 3)));
  EXPECT_TRUE(*MightMatchPartition(BoundExpr::Not(filter), partition(19723, 2)));
}

// ---- Randomized: pruning never drops a file with a matching row ------------

namespace {

// SQL three-valued truth.
enum class Truth { kFalse, kTrue, kUnknown };

Truth Not3(Truth t) {
  return t == Truth::kUnknown ? t : (t == Truth::kTrue ? Truth::kFalse : Truth::kTrue);
}

// One generated file: a long column (id 1), a double column (id 2) and a string column (id 3).
struct Row {
  std::optional<int64_t> x;
  std::optional<double> d;
  std::optional<std::string> s;
};

class RandomCase {
 public:
  explicit RandomCase(uint32_t seed) : rng_(seed) {}

  std::vector<Row> Rows() {
    std::vector<Row> rows(Uniform(1, 8));
    for (auto& r : rows) {
      if (Uniform(0, 4) > 0) r.x = Uniform(-3, 3);
      int kind = Uniform(0, 6);
      if (kind == 0) {
        r.d = std::numeric_limits<double>::quiet_NaN();
      } else if (kind == 1) {
        r.d = -0.0;
      } else if (kind > 2) {
        r.d = Uniform(-4, 4) / 2.0;
      }
      if (Uniform(0, 4) > 0) {
        std::string s;
        for (int n = Uniform(0, 3); n > 0; --n) s += static_cast<char>('a' + Uniform(0, 2));
        r.s = s;
      }
    }
    return rows;
  }

  BoundExpr Filter(int depth) {
    int kind = Uniform(0, depth > 0 ? 9 : 5);
    if (kind <= 5) return Predicate();
    if (kind == 6) return BoundExpr::Not(Filter(depth - 1));
    std::vector<BoundExpr> children;
    for (int n = Uniform(1, 3); n > 0; --n) children.push_back(Filter(depth - 1));
    return kind == 7 ? BoundExpr::And(std::move(children)) : BoundExpr::Or(std::move(children));
  }

  // Exact stats, with some randomly forgotten and string bounds randomly truncated.
  std::map<int32_t, ColumnStats> Stats(const std::vector<Row>& rows) {
    std::map<int32_t, ColumnStats> stats;
    auto count = [&](auto get, ColumnStats* c, bool floating) {
      int64_t nulls = 0, nans = 0;
      for (const auto& r : rows) {
        auto v = get(r);
        if (!v) {
          ++nulls;
          continue;
        }
        if constexpr (std::is_same_v<std::decay_t<decltype(*v)>, double>) {
          if (std::isnan(*v)) {
            ++nans;
            continue;
          }
        }
        Literal lit;
        lit.type = floating ? TypeId::kDouble : TypeId::kLong;
        lit.value = *v;
        if (!c->lower || *CompareLiterals(lit, *c->lower) < 0) c->lower = lit;
        if (!c->upper || *CompareLiterals(lit, *c->upper) > 0) c->upper = lit;
      }
      if (Uniform(0, 5) > 0) c->null_count = nulls;
      if (Uniform(0, 5) > 0) c->value_count = static_cast<int64_t>(rows.size());
      if (floating && Uniform(0, 5) > 0) c->nan_count = nans;
      if (Uniform(0, 6) == 0) c->lower.reset();
      if (Uniform(0, 6) == 0) c->upper.reset();
    };
    count([](const Row& r) { return r.x; }, &stats[1], false);
    count([](const Row& r) { return r.d; }, &stats[2], true);
    ColumnStats& s = stats[3];
    count([](const Row& r) { return r.s; }, &s, false);
    for (auto* bound : {&s.lower, &s.upper}) {
      if (*bound) (*bound)->type = TypeId::kString;
    }
    size_t keep = static_cast<size_t>(Uniform(0, 3));
    if (s.lower) {
      auto& lower = std::get<std::string>(s.lower->value);
      if (lower.size() > keep) lower.resize(keep);  // a prefix is still <= every value
    }
    if (s.upper) {
      auto& upper = std::get<std::string>(s.upper->value);
      if (upper.size() > keep) {  // Iceberg: truncate and increment the last byte
        upper.resize(keep);
        if (upper.empty()) {
          s.upper.reset();
        } else {
          upper.back() = static_cast<char>(upper.back() + 1);
        }
      }
    }
    return stats;
  }

 private:
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  BoundExpr Predicate() {
    static const TypePtr kLongType = MakePrimitive(TypeId::kLong);
    static const TypePtr kDoubleType = MakePrimitive(TypeId::kDouble);
    static const TypePtr kStringType = MakePrimitive(TypeId::kString);
    const int column = Uniform(1, 3);
    auto literal = [&]() -> Literal {
      if (column == 1) return Long(Uniform(-4, 4));
      if (column == 2) return Double(Uniform(0, 9) == 0 ? -0.0 : Uniform(-5, 5) / 2.0);
      std::string s;
      for (int n = Uniform(0, 2); n > 0; --n) s += static_cast<char>('a' + Uniform(0, 2));
      return Str(s);
    };
    std::vector<ExprOp> ops = {ExprOp::kEq,     ExprOp::kNe,     ExprOp::kLt, ExprOp::kLe,
                               ExprOp::kGt,     ExprOp::kGe,     ExprOp::kIn, ExprOp::kNotIn,
                               ExprOp::kIsNull, ExprOp::kNotNull};
    if (column == 2) ops.insert(ops.end(), {ExprOp::kIsNan, ExprOp::kNotNan});
    if (column == 3) ops.insert(ops.end(), {ExprOp::kStartsWith, ExprOp::kNotStartsWith});
    const ExprOp op = ops[Uniform(0, static_cast<int>(ops.size()) - 1)];
    std::vector<Literal> literals;
    if (op == ExprOp::kIn || op == ExprOp::kNotIn) {
      for (int n = Uniform(0, 3); n > 0; --n) literals.push_back(literal());
    } else if (op != ExprOp::kIsNull && op != ExprOp::kNotNull && op != ExprOp::kIsNan &&
               op != ExprOp::kNotNan) {
      literals.push_back(literal());
    }
    const TypePtr& type = column == 1 ? kLongType : column == 2 ? kDoubleType : kStringType;
    const char* name = column == 1 ? "x" : column == 2 ? "d" : "s";
    return BoundExpr::Predicate(op, column, type, std::move(literals), {name});
  }

  std::mt19937 rng_;
};

// The reference evaluator: SQL three-valued logic, IEEE NaN comparisons.
template <typename T>
Truth Compare(ExprOp op, const std::optional<T>& value, const std::vector<Literal>& literals) {
  if (!value) return Truth::kUnknown;
  auto lit = [&](size_t i) {
    if constexpr (std::is_same_v<T, std::string>) {
      return std::get<std::string>(literals[i].value);
    } else if constexpr (std::is_same_v<T, double>) {
      return std::get<double>(literals[i].value);
    } else {
      return std::get<int64_t>(literals[i].value);
    }
  };
  auto truth = [](bool b) { return b ? Truth::kTrue : Truth::kFalse; };
  const T& v = *value;
  switch (op) {
    case ExprOp::kEq:
      return truth(v == lit(0));
    case ExprOp::kNe:
      return truth(v != lit(0));
    case ExprOp::kLt:
      return truth(v < lit(0));
    case ExprOp::kLe:
      return truth(v <= lit(0));
    case ExprOp::kGt:
      return truth(v > lit(0));
    case ExprOp::kGe:
      return truth(v >= lit(0));
    case ExprOp::kIn:
    case ExprOp::kNotIn: {
      bool found = false;
      for (size_t i = 0; i < literals.size(); ++i) found = found || v == lit(i);
      return truth(found == (op == ExprOp::kIn));
    }
    default:
      if constexpr (std::is_same_v<T, std::string>) {
        bool starts = v.compare(0, lit(0).size(), lit(0)) == 0;
        return truth(starts == (op == ExprOp::kStartsWith));
      }
      return Truth::kUnknown;
  }
}

Truth Evaluate(const BoundExpr& e, const Row& row) {
  switch (e.op) {
    case ExprOp::kTrue:
      return Truth::kTrue;
    case ExprOp::kFalse:
      return Truth::kFalse;
    case ExprOp::kNot:
      return Not3(Evaluate(e.children[0], row));
    case ExprOp::kAnd:
    case ExprOp::kOr: {
      const Truth absorbing = e.op == ExprOp::kAnd ? Truth::kFalse : Truth::kTrue;
      Truth out = Not3(absorbing);
      for (const auto& c : e.children) {
        Truth t = Evaluate(c, row);
        if (t == absorbing) return absorbing;
        if (t == Truth::kUnknown) out = Truth::kUnknown;
      }
      return out;
    }
    default:
      break;
  }
  const bool is_null = e.field_id == 1 ? !row.x : e.field_id == 2 ? !row.d : !row.s;
  switch (e.op) {
    case ExprOp::kIsNull:
      return is_null ? Truth::kTrue : Truth::kFalse;
    case ExprOp::kNotNull:
      return is_null ? Truth::kFalse : Truth::kTrue;
    case ExprOp::kIsNan:
    case ExprOp::kNotNan: {
      const bool nan = row.d && std::isnan(*row.d);
      return nan == (e.op == ExprOp::kIsNan) ? Truth::kTrue : Truth::kFalse;
    }
    default:
      break;
  }
  if (e.field_id == 1) return Compare(e.op, row.x, e.literals);
  if (e.field_id == 2) return Compare(e.op, row.d, e.literals);
  return Compare(e.op, row.s, e.literals);
}

std::shared_ptr<arrow::RecordBatch> ToBatch(const std::vector<Row>& rows) {
  arrow::Int64Builder x;
  arrow::DoubleBuilder d;
  arrow::StringBuilder s;
  for (const auto& r : rows) {
    EXPECT_TRUE((r.x ? x.Append(*r.x) : x.AppendNull()).ok());
    EXPECT_TRUE((r.d ? d.Append(*r.d) : d.AppendNull()).ok());
    EXPECT_TRUE((r.s ? s.Append(*r.s) : s.AppendNull()).ok());
  }
  auto schema =
      arrow::schema({arrow::field("x", arrow::int64()), arrow::field("d", arrow::float64()),
                     arrow::field("s", arrow::utf8())});
  return arrow::RecordBatch::Make(schema, static_cast<int64_t>(rows.size()),
                                  {*x.Finish(), *d.Finish(), *s.Finish()});
}

}  // namespace

TEST(MightMatch, NeverPrunesAFileWithAMatchingRow) {
  ASSERT_TRUE(cp::Initialize().ok());
  // ICEFLOE_TEST_SEED=<seed> replays a failure.
  const char* forced = std::getenv("ICEFLOE_TEST_SEED");
  const uint32_t seed = forced ? static_cast<uint32_t>(std::stoul(forced)) : std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed) + " (replay with ICEFLOE_TEST_SEED)");
  RandomCase gen(seed);
  int pruned = 0, matched = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    SCOPED_TRACE("trial=" + std::to_string(trial));
    const std::vector<Row> rows = gen.Rows();
    const BoundExpr filter = gen.Filter(3);
    SCOPED_TRACE(filter.ToString());
    std::set<int> expected;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (Evaluate(filter, rows[i]) == Truth::kTrue) expected.insert(static_cast<int>(i));
    }
    // Pruning is inclusive.
    const auto stats = gen.Stats(rows);
    StatsLookup lookup = [&](int32_t id) {
      auto it = stats.find(id);
      return it == stats.end() ? nullptr : &it->second;
    };
    auto might = MightMatch(filter, lookup, static_cast<int64_t>(rows.size()));
    ASSERT_TRUE(might.ok()) << might.status();
    if (!expected.empty()) {
      ++matched;
      ASSERT_TRUE(*might) << "pruned a file with " << expected.size() << " matching rows";
    } else if (!*might) {
      ++pruned;
    }
    if (rows.size() == 1) {
      Literal x = rows[0].x ? Long(*rows[0].x) : Literal{};
      Literal d = rows[0].d ? Double(*rows[0].d) : Literal{};
      Literal s = rows[0].s ? Str(*rows[0].s) : Literal{};
      auto part = MightMatchPartition(filter, [&](int32_t id) {
        return id == 1 ? &x : id == 2 ? &d : &s;
      });
      ASSERT_TRUE(part.ok()) << part.status();
      if (!expected.empty()) {
        ASSERT_TRUE(*part);
      }
    }
    // Arrow selects exactly the true rows, before and after normalization.
    auto batch = ToBatch(rows);
    for (const BoundExpr& tree : {filter, Normalize(filter)}) {
      auto arrow_filter = ToArrowExpression(tree);
      ASSERT_TRUE(arrow_filter.ok()) << arrow_filter.status();
      ASSERT_EQ(SelectedRows(*arrow_filter, *batch), expected) << tree.ToString();
    }
    // The pushdown filter is implied by the filter.
    auto pushdown = ToArrowPushdownExpression(filter);
    ASSERT_TRUE(pushdown.ok()) << pushdown.status();
    const std::set<int> kept = SelectedRows(*pushdown, *batch);
    ASSERT_TRUE(std::includes(kept.begin(), kept.end(), expected.begin(), expected.end()))
        << pushdown->ToString();
  }
  // The test is not vacuous: both outcomes happen.
  EXPECT_GT(pruned, 100);
  EXPECT_GT(matched, 100);
}

}  // namespace icefloe::iceberg
