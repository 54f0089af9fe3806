// ParseFilter and Bind. Row filtering and pruning are in expr_eval_test.cc.
#include "icefloe/iceberg/expr.h"

#include <cstdlib>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace icefloe::iceberg {

namespace {

std::string Parsed(std::string_view text) {
  auto expr = ParseFilter(text);
  if (!expr.ok()) return "error: " + expr.status().message();
  return (*expr)->ToString();
}

const char* kSchema = R"J({
  "type": "struct", "schema-id": 1,
  "fields": [
    {"id": 1, "name": "i", "required": false, "type": "int"},
    {"id": 2, "name": "l", "required": false, "type": "long"},
    {"id": 3, "name": "f", "required": false, "type": "float"},
    {"id": 4, "name": "d", "required": false, "type": "double"},
    {"id": 5, "name": "dec", "required": false, "type": "decimal(9,2)"},
    {"id": 6, "name": "day", "required": false, "type": "date"},
    {"id": 7, "name": "ts", "required": false, "type": "timestamp"},
    {"id": 8, "name": "tstz", "required": false, "type": "timestamptz"},
    {"id": 9, "name": "tsns", "required": false, "type": "timestamp_ns"},
    {"id": 10, "name": "s", "required": false, "type": "string"},
    {"id": 11, "name": "b", "required": false, "type": "boolean"},
    {"id": 12, "name": "u", "required": false, "type": "uuid"},
    {"id": 13, "name": "loc", "required": false,
     "type": {"type": "struct", "fields": [
        {"id": 14, "name": "lat", "required": true, "type": "double"},
        {"id": 15, "name": "name", "required": false, "type": "string"}]}},
    {"id": 16, "name": "tags", "required": false,
     "type": {"type": "list", "element-id": 17, "element": "string", "element-required": false}},
    {"id": 18, "name": "t", "required": false, "type": "time"},
    {"id": 19, "name": "my col", "required": false, "type": "long"},
    {"id": 20, "name": "fx", "required": false, "type": "fixed[3]"},
    {"id": 21, "name": "date", "required": false, "type": "date"}
  ]
})J";

const Schema& TestSchema() {
  static const Schema schema = *ParseSchema(nlohmann::json::parse(kSchema));
  return schema;
}

arrow::Result<BoundExpr> ParseAndBind(std::string_view text) {
  ARROW_ASSIGN_OR_RAISE(ExprPtr expr, ParseFilter(text));
  return Bind(expr, TestSchema());
}

std::string Bound(std::string_view text) {
  auto bound = ParseAndBind(text);
  if (!bound.ok()) return "error: " + bound.status().message();
  return bound->ToString();
}

// The single literal of a bound comparison.
Literal BoundLiteral(std::string_view text) {
  auto bound = ParseAndBind(text);
  EXPECT_TRUE(bound.ok()) << text << ": " << bound.status();
  if (!bound.ok() || bound->literals.size() != 1) {
    ADD_FAILURE() << text << " did not bind to one literal";
    return Literal{};
  }
  return bound->literals[0];
}

}  // namespace

TEST(ParseFilter, Comparisons) {
  EXPECT_EQ(Parsed("x = 5"), "x = 5");
  EXPECT_EQ(Parsed("x == 5"), "x = 5");
  EXPECT_EQ(Parsed("x != 5"), "x != 5");
  EXPECT_EQ(Parsed("x <> 5"), "x != 5");
  EXPECT_EQ(Parsed("x<5"), "x < 5");
  EXPECT_EQ(Parsed("x <= 5"), "x <= 5");
  EXPECT_EQ(Parsed("x > 5"), "x > 5");
  EXPECT_EQ(Parsed("x >= 5"), "x >= 5");
  // The literal on the left flips the operator.
  EXPECT_EQ(Parsed("5 < x"), "x > 5");
  EXPECT_EQ(Parsed("5 >= x"), "x <= 5");
  EXPECT_EQ(Parsed("'a' = s"), "s = 'a'");
  EXPECT_EQ(Parsed("DATE '2024-01-01' <= day"), "day >= DATE '2024-01-01'");
  EXPECT_EQ(Parsed("TRUE = flag"), "flag = TRUE");
}

TEST(ParseFilter, Literals) {
  EXPECT_EQ(Parsed("x = -5"), "x = -5");
  EXPECT_EQ(Parsed("x = +5"), "x = +5");
  EXPECT_EQ(Parsed("x > -1.5e-3"), "x > -1.5e-3");
  EXPECT_EQ(Parsed("x > .5"), "x > .5");
  EXPECT_EQ(Parsed("x > 2E10"), "x > 2E10");
  EXPECT_EQ(Parsed("s = 'it''s'"), "s = 'it''s'");
  EXPECT_EQ(Parsed("s = ''"), "s = ''");
  EXPECT_EQ(Parsed("b = true"), "b = TRUE");
  EXPECT_EQ(Parsed("b = False"), "b = FALSE");
  EXPECT_EQ(Parsed("d = date '2024-02-29'"), "d = DATE '2024-02-29'");
  EXPECT_EQ(Parsed("t < TIMESTAMP '2024-01-01T10:00:00.123456Z'"),
            "t < TIMESTAMP '2024-01-01T10:00:00.123456Z'");
  EXPECT_EQ(Parsed("t < TIMESTAMP '2024-01-01 10:00:00+02:00'"),
            "t < TIMESTAMP '2024-01-01 10:00:00+02:00'");

  auto expr = *ParseFilter("x IN (1, -2.5, 'a', TRUE, DATE '2024-01-01')");
  ASSERT_EQ(expr->literals.size(), 5u);
  using Kind = ParsedLiteral::Kind;
  EXPECT_EQ(expr->literals[0].kind, Kind::kInteger);
  EXPECT_EQ(expr->literals[1].kind, Kind::kFloat);
  EXPECT_EQ(expr->literals[1].text, "-2.5");
  EXPECT_EQ(expr->literals[2].kind, Kind::kString);
  EXPECT_EQ(expr->literals[3].kind, Kind::kBoolean);
  EXPECT_EQ(expr->literals[4].kind, Kind::kDate);
  EXPECT_EQ(expr->literals[4].position, 27);
}

TEST(ParseFilter, Predicates) {
  EXPECT_EQ(Parsed("x IN (1, 2)"), "x IN (1, 2)");
  EXPECT_EQ(Parsed("x NOT IN (1)"), "x NOT IN (1)");
  EXPECT_EQ(Parsed("x BETWEEN 1 AND 5"), "(x >= 1 AND x <= 5)");
  EXPECT_EQ(Parsed("x NOT BETWEEN 1 AND 5"), "(NOT (x >= 1 AND x <= 5))");
  EXPECT_EQ(Parsed("x BETWEEN 1 AND 5 AND y = 2"), "((x >= 1 AND x <= 5) AND y = 2)");
  EXPECT_EQ(Parsed("x IS NULL"), "x IS NULL");
  EXPECT_EQ(Parsed("x is not null"), "x IS NOT NULL");
  EXPECT_EQ(Parsed("x IS NaN"), "x IS NAN");
  EXPECT_EQ(Parsed("x IS NOT NAN"), "x IS NOT NAN");
  EXPECT_EQ(Parsed("s LIKE 'ab%'"), "s LIKE 'ab%'");
  EXPECT_EQ(Parsed("s NOT LIKE 'ab%'"), "s NOT LIKE 'ab%'");
  EXPECT_EQ(Parsed("s LIKE '%'"), "s LIKE '%'");
  EXPECT_EQ(Parsed("s LIKE 'abc'"), "s = 'abc'");
  EXPECT_EQ(Parsed("s NOT LIKE 'abc'"), "s != 'abc'");
  EXPECT_EQ(Parsed("TRUE"), "TRUE");
  EXPECT_EQ(Parsed("false"), "FALSE");
}

TEST(ParseFilter, PrecedenceAndParentheses) {
  EXPECT_EQ(Parsed("a = 1 OR b = 2 AND c = 3"), "(a = 1 OR (b = 2 AND c = 3))");
  EXPECT_EQ(Parsed("a = 1 AND b = 2 OR c = 3"), "((a = 1 AND b = 2) OR c = 3)");
  EXPECT_EQ(Parsed("(a = 1 OR b = 2) AND c = 3"), "((a = 1 OR b = 2) AND c = 3)");
  EXPECT_EQ(Parsed("NOT a = 1 AND b = 2"), "((NOT a = 1) AND b = 2)");
  EXPECT_EQ(Parsed("NOT (a = 1 AND b = 2)"), "(NOT (a = 1 AND b = 2))");
  EXPECT_EQ(Parsed("NOT NOT a = 1"), "(NOT (NOT a = 1))");
  EXPECT_EQ(Parsed("a = 1 AND b = 2 AND c = 3"), "(a = 1 AND b = 2 AND c = 3)");
  EXPECT_EQ(Parsed("((a = 1))"), "a = 1");
  EXPECT_EQ(Parsed("x in (1) and not y is null or z like 'a%'"),
            "((x IN (1) AND (NOT y IS NULL)) OR z LIKE 'a%')");
}

TEST(ParseFilter, ColumnNames) {
  EXPECT_EQ((*ParseFilter("loc.lat > 1"))->column, "loc.lat");
  EXPECT_EQ((*ParseFilter("a_1.b2.c = 1"))->column, "a_1.b2.c");
  EXPECT_EQ((*ParseFilter("\"my col\" = 1"))->column, "my col");
  EXPECT_EQ((*ParseFilter("\"say \"\"hi\"\"\" = 1"))->column, "say \"hi\"");
  EXPECT_EQ((*ParseFilter("`we``ird` = 1"))->column, "we`ird");
  EXPECT_EQ((*ParseFilter("\"and\" = 1"))->column, "and");
  EXPECT_EQ(Parsed("\"my col\" = 1"), "\"my col\" = 1");
  EXPECT_EQ(Parsed("\"OR\" = 1"), "\"OR\" = 1");
  // DATE and TIMESTAMP are keywords only before a string.
  EXPECT_EQ(Parsed("date = DATE '2024-01-01'"), "date = DATE '2024-01-01'");
  EXPECT_EQ(Parsed("timestamp IS NULL"), "timestamp IS NULL");
  EXPECT_EQ((*ParseFilter("x = 1"))->position, 1);
  EXPECT_EQ((*ParseFilter("  5 < x"))->position, 7);
}

TEST(ParseFilter, ToStringParsesBack) {
  for (const char* text :
       {"a = 1 OR b = 2 AND NOT c = 3", "x NOT BETWEEN -1.5 AND 2e3",
        "\"my col\" IN ('it''s', 'b') AND s LIKE 'p%'", "t >= TIMESTAMP '2024-01-01 00:00:00Z'",
        "x IS NOT NULL OR (y IS NAN AND z NOT IN (DATE '2024-01-01'))"}) {
    std::string once = Parsed(text);
    EXPECT_EQ(Parsed(once), once) << text;
  }
}

struct SyntaxErrorCase {
  const char* text;
  int position;
  const char* message;
};

TEST(ParseFilter, SyntaxErrorsNamePositionAndCause) {
  const SyntaxErrorCase cases[] = {
      {"x > AND y", 5, "expected a literal after '>', found 'AND'"},
      {"", 1, "the filter is empty"},
      {"   ", 4, "the filter is empty"},
      {"x = 'abc", 5, "unterminated string literal"},
      {"\"abc = 1", 1, "unterminated quoted column name"},
      {"\"\" = 1", 1, "empty quoted column name"},
      {"x = 1 #", 7, "unexpected character '#'"},
      {"x = 1 \x01", 7, "unexpected byte 0x01"},
      {"x = 1.2.3", 5, "invalid number '1.2.3'"},
      {"x = 5abc", 5, "invalid number '5abc'"},
      {"x = 1e", 5, "invalid number '1e'"},
      {"x = -", 5, "unexpected character '-'"},
      {"a. = 1", 1, "invalid column name 'a.'"},
      {"(x = 1", 7, "expected ')' to close the '(' at position 1, found the end of the filter"},
      {"x = 1)", 6, "unmatched ')'"},
      {"x = 1 y = 2", 7, "expected AND, OR or the end of the filter, found 'y'"},
      {"x = 1 AND", 10, "expected a column, a predicate or '(', found the end of the filter"},
      {"AND = 1", 1, "expected a column, a predicate or '(', found 'AND'"},
      {"x", 2, "expected a comparison operator, IN, BETWEEN, IS or LIKE after column 'x'"},
      {"x 5", 3, "expected a comparison operator, IN, BETWEEN, IS or LIKE after column 'x'"},
      {"x NOT 5", 7, "expected IN, BETWEEN or LIKE after NOT, found '5'"},
      {"x IN 1", 6, "expected '(' after IN"},
      {"x IN ()", 7, "expected a literal after 'IN (', found ')'"},
      {"x IN (1, 2", 11, "expected ',' or ')' in the IN list"},
      {"x IN (1,)", 9, "expected a literal after ','"},
      {"x BETWEEN 1 OR 2", 13, "expected AND between the BETWEEN bounds, found 'OR'"},
      {"x BETWEEN 1 AND y", 17, "expected a literal after BETWEEN ... AND, found 'y'"},
      {"x IS 5", 6, "expected NULL or NAN after IS, found '5'"},
      {"x IS NOT 5", 10, "expected NULL or NAN after IS NOT"},
      {"x = NULL", 5, "a comparison with NULL is never true; use IS NULL or IS NOT NULL"},
      {"x IN (1, NULL)", 10, "NULL is only allowed in IS NULL and IS NOT NULL"},
      {"NULL = x", 1, "NULL is only allowed in IS NULL and IS NOT NULL"},
      {"s LIKE 'a%b'", 8, "only prefix LIKE patterns are supported"},
      {"s LIKE 'a_%'", 8, "only prefix LIKE patterns are supported"},
      {"s LIKE '%a'", 8, "only prefix LIKE patterns are supported"},
      {"s LIKE 5", 8, "expected a string pattern after LIKE, found '5'"},
      {"x = y", 5, "comparisons between two columns are not supported"},
      {"1 = 2", 5, "a comparison needs a column on one side"},
      {"1 x", 3, "expected a comparison operator after the literal 1, found 'x'"},
      {"1 = AND", 5, "expected a column after '=', found 'AND'"},
      {"x = DATE '2024-02-30'", 10, "invalid DATE literal, expected 'YYYY-MM-DD'"},
      {"x = TIMESTAMP '2024-01-01 25:00:00'", 15, "invalid TIMESTAMP literal"},
      {"x = TIMESTAMP '2024-01-01 10:00:00+0200'", 15, "invalid TIMESTAMP literal"},
      {"\xe5\x90\x8d\xe5\x89\x8d > AND", 6, "expected a literal after '>'"},
  };
  for (const auto& c : cases) {
    auto result = ParseFilter(c.text);
    ASSERT_FALSE(result.ok()) << c.text;
    EXPECT_TRUE(result.status().IsInvalid()) << c.text;
    const std::string& message = result.status().message();
    const std::string head = "filter syntax error at position " + std::to_string(c.position) + ": ";
    EXPECT_EQ(message.rfind(head, 0), 0u) << c.text << " -> " << message;
    EXPECT_NE(message.find(c.message), std::string::npos) << c.text << " -> " << message;
  }
}

TEST(ParseFilter, ErrorShowsCaretUnderPosition) {
  auto status = ParseFilter("x > AND y").status();
  EXPECT_EQ(status.message(),
            "filter syntax error at position 5: expected a literal after '>', found 'AND'\n"
            "  x > AND y\n"
            "      ^");
  // Long texts show a window around the position.
  std::string text = std::string(100, ' ') + "x = 1 AND y = 2 AND AND" + std::string(100, ' ');
  status = ParseFilter(text).status();
  EXPECT_NE(status.message().find("at position 121: expected a column"), std::string::npos);
  EXPECT_NE(status.message().find("\n  ...     "), std::string::npos) << status.message();
  const std::string& m = status.message();
  const size_t snippet = m.find("\n  ") + 3, caret = m.rfind("\n  ") + 3;
  EXPECT_EQ(m.substr(snippet + (m.size() - 1 - caret), 3), "AND") << m;
}

TEST(ParseFilter, BoundsDepthAndLength) {
  std::string deep =
      std::string(kMaxFilterDepth, '(') + "x = 1" + std::string(kMaxFilterDepth, ')');
  EXPECT_TRUE(ParseFilter(deep).ok());
  std::string deeper = "(" + deep + ")";
  auto status = ParseFilter(deeper).status();
  EXPECT_TRUE(status.IsInvalid());
  EXPECT_NE(status.message().find("nests deeper than 200"), std::string::npos);
  EXPECT_NE(status.message().find("at position 201"), std::string::npos) << status.message();

  std::string nots;
  for (int i = 0; i <= kMaxFilterDepth; ++i) nots += "NOT ";
  EXPECT_NE(ParseFilter(nots + "x = 1").status().message().find("nests deeper"), std::string::npos);

  // Long AND/OR chains are flat, not deep.
  std::string chain = "x = 0";
  for (int i = 1; i < 5000; ++i) chain += " OR x = " + std::to_string(i);
  auto expr = ParseFilter(chain);
  ASSERT_TRUE(expr.ok()) << expr.status();
  EXPECT_EQ((*expr)->children.size(), 5000u);

  std::string big(kMaxFilterBytes + 1, ' ');
  status = ParseFilter(big).status();
  EXPECT_TRUE(status.IsInvalid());
  EXPECT_NE(status.message().find("more than the limit of 65536"), std::string::npos);
}

namespace {

// Random filter text: mostly well-formed predicates joined by AND/OR/NOT, with
// some pieces dropped or inserted so the error paths run too.
class RandomFilterText {
 public:
  explicit RandomFilterText(uint32_t seed) : rng_(seed) {}

  std::string Next() {
    std::vector<std::string> pieces;
    Filter(2, &pieces);
    for (int n = Pick(0, 3) == 0 ? Pick(1, 3) : 0; n > 0; --n) {
      const size_t at = static_cast<size_t>(Pick(0, static_cast<int>(pieces.size())));
      if (Pick(0, 1) == 0 && at < pieces.size()) {
        pieces.erase(pieces.begin() + static_cast<std::ptrdiff_t>(at));
      } else {
        pieces.insert(pieces.begin() + static_cast<std::ptrdiff_t>(at), Any(kNoise));
      }
    }
    std::string text;
    for (const auto& p : pieces) text += p + (Pick(0, 5) == 0 ? "" : " ");
    return text;
  }

 private:
  static constexpr const char* kColumns[] = {
      "i", "l", "d", "f", "s", "dec", "day", "ts", "loc.lat", "\"my col\"", "`b`", "u", "nope"};
  static constexpr const char* kOps[] = {"=", "!=", "<>", "<", "<=", ">", ">="};
  static constexpr const char* kLiterals[] = {"1",
                                              "-2",
                                              "2147483648",
                                              "2.5e3",
                                              ".5",
                                              "1.",
                                              "'a'",
                                              "'it''s'",
                                              "TRUE",
                                              "DATE '2024-01-01'",
                                              "TIMESTAMP '2024-01-01 10:00:00Z'",
                                              "'2024-02-30'",
                                              "'12345678-1234-1234-1234-123456789abc'"};
  static constexpr const char* kNoise[] = {"(",  ")",        "AND",  "NOT", ",", "'",  "\"", "NULL",
                                           "IS", "\xc3\xa9", "\x01", ".",   "`", "1e", "%"};

  int Pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  template <size_t N>
  std::string Any(const char* const (&options)[N]) {
    return options[Pick(0, static_cast<int>(N) - 1)];
  }

  void Filter(int depth, std::vector<std::string>* out) {
    const int kind = Pick(0, depth > 0 ? 9 : 6);
    if (kind == 7) {
      out->push_back("NOT");
      Filter(depth - 1, out);
    } else if (kind >= 8) {
      out->push_back("(");
      Filter(depth - 1, out);
      out->push_back(kind == 8 ? "AND" : "OR");
      Filter(depth - 1, out);
      out->push_back(")");
    } else {
      Predicate(kind, out);
    }
  }

  void Predicate(int kind, std::vector<std::string>* out) {
    out->push_back(Any(kColumns));
    switch (kind) {
      case 0:
        out->insert(out->end(),
                    {Pick(0, 1) ? "IN" : "NOT IN", "(", Any(kLiterals), ",", Any(kLiterals), ")"});
        return;
      case 1:
        out->insert(out->end(), {"BETWEEN", Any(kLiterals), "AND", Any(kLiterals)});
        return;
      case 2:
        out->insert(out->end(), {"IS", Pick(0, 1) ? "NOT" : "", Pick(0, 1) ? "NULL" : "NAN"});
        return;
      case 3:
        out->insert(out->end(), {Pick(0, 1) ? "LIKE" : "NOT LIKE", Pick(0, 1) ? "'a%'" : "'a_'"});
        return;
      default:
        out->insert(out->end(), {Any(kOps), Any(kLiterals)});
    }
  }

  std::mt19937 rng_;
};

}  // namespace

TEST(ParseFilter, RandomTextParsesOrFailsCleanly) {
  // ICEFLOE_TEST_SEED=<seed> replays a failure.
  const char* forced = std::getenv("ICEFLOE_TEST_SEED");
  const uint32_t seed = forced ? static_cast<uint32_t>(std::stoul(forced)) : std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed) + " (replay with ICEFLOE_TEST_SEED)");
  RandomFilterText gen(seed);
  int parsed = 0, bound_ok = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const std::string text = gen.Next();
    SCOPED_TRACE(text);
    auto expr = ParseFilter(text);
    if (!expr.ok()) {
      ASSERT_TRUE(expr.status().IsInvalid());
      ASSERT_EQ(expr.status().message().rfind("filter syntax error at position ", 0), 0u);
      continue;
    }
    ++parsed;
    const std::string once = (*expr)->ToString();
    ASSERT_EQ(Parsed(once), once);
    auto bound = Bind(*expr, TestSchema());
    if (!bound.ok()) {
      ASSERT_TRUE(bound.status().IsInvalid()) << bound.status();
      ASSERT_NE(bound.status().message().find(" at position "), std::string::npos);
      continue;
    }
    ++bound_ok;
    ASSERT_EQ(Bound(bound->ToString()), bound->ToString());
  }
  // Both outcomes are common, so the test is not vacuous.
  EXPECT_GT(parsed, 5000);
  EXPECT_GT(bound_ok, 1000);
}

TEST(Bind, ResolvesColumns) {
  auto bound = *ParseAndBind("I = 1");
  EXPECT_EQ(bound.field_id, 1);
  EXPECT_EQ(bound.column_path, std::vector<std::string>{"i"});
  EXPECT_EQ(bound.type->id, TypeId::kInt);
  bound = *ParseAndBind("LOC.Name = 'x'");
  EXPECT_EQ(bound.field_id, 15);
  EXPECT_EQ(bound.column_path, (std::vector<std::string>{"loc", "name"}));
  EXPECT_EQ(bound.ToString(), "loc.name = 'x'");
  bound = *ParseAndBind("\"my col\" > 3");
  EXPECT_EQ(bound.field_id, 19);
  EXPECT_EQ(bound.ToString(), "\"my col\" > 3");
  EXPECT_EQ((*ParseAndBind("date = '2024-01-01'")).field_id, 21);
}

TEST(Bind, RejectsUnknownAndNestedColumns) {
  auto status = ParseAndBind("i = 1 AND foo = 2").status();
  EXPECT_TRUE(status.IsInvalid());
  EXPECT_EQ(status.message().rfind("unknown column 'foo' at position 11 (columns: i, l, f, d, ", 0),
            0u)
      << status.message();
  status = ParseAndBind("loc = 1").status();
  EXPECT_NE(status.message().find("column 'loc' at position 1 is a struct<"), std::string::npos)
      << status.message();
  status = ParseAndBind("tags IS NULL").status();
  EXPECT_NE(status.message().find("is a list<string>"), std::string::npos) << status.message();
  EXPECT_FALSE(ParseAndBind("tags.element = 'a'").ok());
}

TEST(Bind, RejectsTypeMismatches) {
  const std::pair<const char*, const char*> cases[] = {
      {"l = 'abc'", "cannot compare long column 'l' with string literal 'abc' at position 5"},
      {"s = 5", "cannot compare string column 's' with integer literal 5 at position 5"},
      {"b = 1", "cannot compare boolean column 'b' with integer literal 1"},
      {"i = 2.5", "cannot compare int column 'i' with float literal 2.5"},
      {"day = 5", "cannot compare date column 'day' with integer literal 5"},
      {"day = TIMESTAMP '2024-01-01 00:00:00'", "cannot compare date column 'day' with TIMESTAMP"},
      {"l IN (1, 'a')", "string literal 'a' at position 10"},
      {"day = '2024-13-01'",
       "string literal '2024-13-01' at position 7 is not a date 'YYYY-MM-DD' for date column "
       "'day'"},
      {"l LIKE 'a%'", "LIKE needs a string column; 'l' at position 1 is long"},
      {"l IS NAN", "IS NAN needs a float or double column; 'l' at position 1 is long"},
      {"u = 'not-a-uuid'", "is not a UUID"},
      {"fx = 'ab'", "does not have exactly 3 bytes"},
      {"t = '25:00:00'", "is not a time"},
      {"ts = '2024-01-01 00:00:00+02:00'", "has a time-zone offset, which needs a timestamptz"},
      {"ts = '2024-01-01 00:00:00.1234567'", "has more fractional digits than the column keeps"},
      {"dec = 1.234", "has more than 2 digits after the point for decimal(9,2) column 'dec'"},
      {"dec = 10000000", "is out of range for decimal(9,2)"},
      {"dec = 1e40", "is out of range for decimal(9,2)"},
      {"f = 1e39", "is out of range for float column 'f'"},
      {"d = 1e309", "is out of range for double column 'd'"},
  };
  for (const auto& [text, message] : cases) {
    auto status = ParseAndBind(text).status();
    EXPECT_TRUE(status.IsInvalid()) << text;
    EXPECT_NE(status.message().find(message), std::string::npos) << text << " -> " << status;
  }
}

TEST(Bind, ChecksIntRange) {
  EXPECT_EQ(std::get<int64_t>(BoundLiteral("i = 2147483647").value), 2147483647);
  EXPECT_EQ(std::get<int64_t>(BoundLiteral("i = -2147483648").value), -2147483648LL);
  auto status = ParseAndBind("i = 2147483648").status();
  EXPECT_NE(status.message().find(
                "integer literal 2147483648 at position 5 is out of range for int column 'i'"),
            std::string::npos)
      << status;
  EXPECT_FALSE(ParseAndBind("i > -2147483649").ok());
  EXPECT_EQ(std::get<int64_t>(BoundLiteral("l = 2147483648").value), 2147483648LL);
  EXPECT_FALSE(ParseAndBind("l = 9223372036854775808").ok());
  EXPECT_EQ(std::get<int64_t>(BoundLiteral("l = +7").value), 7);
}

TEST(Bind, CoercesLiterals) {
  Literal d = BoundLiteral("d = 5");
  EXPECT_EQ(d.type, TypeId::kDouble);
  EXPECT_EQ(std::get<double>(d.value), 5.0);
  EXPECT_EQ(std::get<double>(BoundLiteral("d > -1.5e-3").value), -1.5e-3);
  EXPECT_EQ(std::get<double>(BoundLiteral("d > 1.").value), 1.0);
  EXPECT_EQ(std::get<double>(BoundLiteral("d > -.5").value), -0.5);
  EXPECT_EQ(std::get<double>(BoundLiteral("d > +2.e1").value), 20.0);
  // A float column compares with the float32 nearest the literal.
  EXPECT_EQ(std::get<double>(BoundLiteral("f = 0.1").value), static_cast<double>(0.1f));

  Literal dec = BoundLiteral("dec = 1.5");
  EXPECT_EQ(std::get<arrow::Decimal128>(dec.value), arrow::Decimal128(150));
  EXPECT_EQ(dec.scale, 2);
  EXPECT_EQ(std::get<arrow::Decimal128>(BoundLiteral("dec = -3").value), arrow::Decimal128(-300));
  EXPECT_EQ(std::get<arrow::Decimal128>(BoundLiteral("dec = 1.50").value), arrow::Decimal128(150));
  EXPECT_EQ(std::get<arrow::Decimal128>(BoundLiteral("dec = 1.5e1").value),
            arrow::Decimal128(1500));
  EXPECT_EQ(std::get<arrow::Decimal128>(BoundLiteral("dec = -.5").value), arrow::Decimal128(-50));
  EXPECT_EQ(std::get<arrow::Decimal128>(BoundLiteral("dec = 2.").value), arrow::Decimal128(200));

  EXPECT_EQ(std::get<int64_t>(BoundLiteral("day = '2024-01-31'").value), 19753);
  EXPECT_EQ(std::get<int64_t>(BoundLiteral("day = DATE '1969-12-31'").value), -1);
  EXPECT_EQ(std::get<int64_t>(BoundLiteral("ts = '2024-01-01 00:00:01.5'").value),
            1704067201500000);
  EXPECT_EQ(std::get<int64_t>(BoundLiteral("ts = TIMESTAMP '2024-01-01T00:00:00Z'").value),
            1704067200000000);
  EXPECT_EQ(std::get<int64_t>(BoundLiteral("ts = TIMESTAMP '2024-01-01 00:00:00+00:00'").value),
            1704067200000000);
  EXPECT_EQ(std::get<int64_t>(BoundLiteral("ts = DATE '2024-01-01'").value), 1704067200000000);
  EXPECT_EQ(std::get<int64_t>(BoundLiteral("ts = '2024-01-01'").value), 1704067200000000);
  EXPECT_EQ(std::get<int64_t>(BoundLiteral("tstz = '2024-01-01 02:30:00+02:30'").value),
            1704067200000000);
  EXPECT_EQ(std::get<int64_t>(BoundLiteral("tstz = '2023-12-31 22:00:00-02:00'").value),
            1704067200000000);
  EXPECT_EQ(std::get<int64_t>(BoundLiteral("tsns = '2024-01-01 00:00:00.123456789'").value),
            1704067200123456789);
  EXPECT_EQ(std::get<int64_t>(BoundLiteral("ts = '1969-12-31 23:59:59.999999'").value), -1);
  EXPECT_EQ(std::get<int64_t>(BoundLiteral("t = '01:02:03.5'").value), 3723500000);
  EXPECT_EQ(std::get<bool>(BoundLiteral("b = TRUE").value), true);
  EXPECT_EQ(std::get<std::string>(BoundLiteral("s = 'it''s'").value), "it's");
  EXPECT_EQ(std::get<std::string>(BoundLiteral("fx = 'abc'").value), "abc");
  std::string uuid =
      std::get<std::string>(BoundLiteral("u = '12345678-9abc-DEF0-1234-567812345678'").value);
  EXPECT_EQ(uuid,
            std::string("\x12\x34\x56\x78\x9a\xbc\xde\xf0\x12\x34\x56\x78\x12\x34\x56\x78", 16));
  EXPECT_EQ(Bound("u = '12345678-9abc-DEF0-1234-567812345678'"),
            "u = '12345678-9abc-def0-1234-567812345678'");
}

TEST(Bind, NormalizesTheTree) {
  EXPECT_EQ(Bound("NOT (i < 5)"), "i >= 5");
  EXPECT_EQ(Bound("NOT (d < 5)"), "(d >= 5 OR d IS NAN)");
  EXPECT_EQ(Bound("NOT (d = 5)"), "d != 5");
  EXPECT_EQ(Bound("NOT (i = 1 AND s LIKE 'a%')"), "(i != 1 OR s NOT LIKE 'a%')");
  EXPECT_EQ(Bound("NOT i IN (1, 2)"), "i NOT IN (1, 2)");
  EXPECT_EQ(Bound("NOT NOT i IS NULL"), "i IS NULL");
  EXPECT_EQ(Bound("NOT d IS NAN"), "d IS NOT NAN");
  EXPECT_EQ(Bound("i NOT BETWEEN 1 AND 5"), "(i < 1 OR i > 5)");
  EXPECT_EQ(Bound("i = 1 AND FALSE"), "FALSE");
  EXPECT_EQ(Bound("i = 1 OR TRUE"), "TRUE");
  EXPECT_EQ(Bound("i = 1 AND TRUE"), "i = 1");
  EXPECT_EQ(Bound("NOT FALSE"), "TRUE");
  EXPECT_EQ(Bound("NOT (i = 1 OR FALSE)"), "i != 1");
  EXPECT_EQ(Bound("i = 1 AND (l = 2 AND (s = 'x' AND TRUE))"), "(i = 1 AND l = 2 AND s = 'x')");
  EXPECT_EQ(Bound("s IN ('b', 'a', 'b')"), "s IN ('a', 'b')");
  EXPECT_EQ(Bound("d NOT IN (2, 1.5, 2.0)"), "d NOT IN (1.5, 2)");
  EXPECT_EQ(Bound("s IN ('a', 'a')"), "s = 'a'");
  EXPECT_EQ(Bound("s NOT IN ('a')"), "s != 'a'");
  EXPECT_EQ(Bound("day BETWEEN '2024-01-01' AND DATE '2024-01-31'"),
            "(day >= DATE '2024-01-01' AND day <= DATE '2024-01-31')");
  EXPECT_EQ(Bound("tstz = '2024-01-01 02:00:00.5+02:00'"),
            "tstz = TIMESTAMP '2024-01-01 00:00:00.500000+00:00'");
  EXPECT_EQ(Bound("dec > 1.5 AND t < '10:00:00'"), "(dec > 1.50 AND t < '10:00:00')");
}

TEST(Bind, BoundToStringParsesBack) {
  for (const char* text :
       {"i = 1 OR NOT (l < 2 AND d >= 1.5)",
        "ts >= '2024-01-01 10:00:00.25' AND day < '2024-02-01'",
        "tsns = '2024-01-01 00:00:00.000000001'", "tstz < '2024-01-01 00:00:00Z'",
        "dec IN (1.5, -2) AND loc.lat > 0", "\"my col\" NOT IN (1, 2) OR s NOT LIKE 'it''s%'",
        "u = '12345678-9abc-def0-1234-567812345678' AND b = FALSE AND f < 0.1"}) {
    std::string once = Bound(text);
    EXPECT_EQ(Bound(once), once) << text;
  }
}

TEST(Bind, ReferencedFieldIds) {
  auto bound = *ParseAndBind("i = 1 OR (l = 2 AND i = 3) OR loc.lat > 1");
  EXPECT_EQ(ReferencedFieldIds(bound), (std::vector<int32_t>{1, 2, 14}));
  EXPECT_TRUE(ReferencedFieldIds(BoundExpr::True()).empty());
}

TEST(BoundExpr, Helpers) {
  TypePtr long_type = MakePrimitive(TypeId::kLong);
  Literal five{TypeId::kLong, int64_t{5}};
  BoundExpr e =
      BoundExpr::Not(BoundExpr::And({BoundExpr::Compare(ExprOp::kLt, 2, long_type, five, {"l"}),
                                     BoundExpr::Predicate(ExprOp::kIsNull, 7, long_type, {})}));
  EXPECT_EQ(e.ToString(), "(NOT (l < 5 AND \"field#7\" IS NULL))");
  EXPECT_EQ(Normalize(e).ToString(), "(l >= 5 OR \"field#7\" IS NOT NULL)");
  EXPECT_EQ(Negate(ExprOp::kLe), ExprOp::kGt);
  EXPECT_EQ(Flip(ExprOp::kLe), ExprOp::kGe);
  EXPECT_EQ(std::string(OpName(ExprOp::kNotStartsWith)), "NOT LIKE");
}

TEST(LiteralFromJson, ReadsTheSpecsJsonSingleValues) {
  auto read = [](TypePtr type, const char* text) {
    auto lit = LiteralFromJson(*type, text, "initial-default of 'x'");
    EXPECT_TRUE(lit.ok()) << text << ": " << lit.status();
    return lit.ok() ? *lit : Literal{};
  };
  EXPECT_EQ(std::get<bool>(read(MakePrimitive(TypeId::kBoolean), "true").value), true);
  EXPECT_EQ(std::get<int64_t>(read(MakePrimitive(TypeId::kInt), "34").value), 34);
  EXPECT_EQ(std::get<double>(read(MakePrimitive(TypeId::kFloat), "1.1").value),
            static_cast<double>(1.1f));
  EXPECT_EQ(read(MakeDecimal(9, 2), R"("14.20")").ToString(), "14.20");
  EXPECT_EQ(std::get<int64_t>(read(MakePrimitive(TypeId::kDate), R"("2017-11-16")").value), 17486);
  EXPECT_EQ(std::get<int64_t>(read(MakePrimitive(TypeId::kTime), R"("22:31:08.123456")").value),
            81068123456);
  EXPECT_EQ(
      std::get<int64_t>(
          read(MakePrimitive(TypeId::kTimestampTz), R"("2017-11-16T22:31:08.123456+00:00")").value),
      1510871468123456);
  EXPECT_EQ(std::get<std::string>(read(MakePrimitive(TypeId::kBinary), R"("0102ff")").value),
            std::string("\x01\x02\xff", 3));
  EXPECT_EQ(
      std::get<std::string>(
          read(MakePrimitive(TypeId::kUuid), R"("f79c3e09-677c-4bbd-a479-3f349cb785e7")").value)
          .size(),
      16u);
  EXPECT_TRUE(read(MakePrimitive(TypeId::kString), "null").is_null());
  for (auto [type, text] : std::vector<std::pair<TypePtr, const char*>>{
           {MakePrimitive(TypeId::kInt), "3000000000"},
           {MakePrimitive(TypeId::kInt), R"("5")"},
           {MakePrimitive(TypeId::kDate), R"("2017-13-01")"},
           {MakePrimitive(TypeId::kTimestamp), R"("2017-11-16T22:31:08+01:00")"},
           {MakeFixed(2), R"("010203")"},
           {MakePrimitive(TypeId::kBinary), R"("0g")"},
           {MakePrimitive(TypeId::kLong), "{"}}) {
    auto bad = LiteralFromJson(*type, text, "initial-default of 'x'");
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(bad.status().message().find("'x'"), std::string::npos) << bad.status();
  }
}

}  // namespace icefloe::iceberg
