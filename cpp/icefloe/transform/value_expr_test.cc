#include "icefloe/transform/value_expr.h"

#include <arrow/api.h>
#include <arrow/compute/exec.h>
#include <gtest/gtest.h>

#include "icefloe/transform/test_util.h"

namespace icefloe::transform {
namespace {

namespace cp = arrow::compute;

std::shared_ptr<arrow::RecordBatch> Table() {
  auto schema = arrow::schema(
      {arrow::field("stars", arrow::int32()), arrow::field("price", arrow::float64()),
       arrow::field("title", arrow::utf8()), arrow::field("user_id", arrow::int64())});
  arrow::Int32Builder stars;
  arrow::DoubleBuilder price;
  arrow::StringBuilder title;
  arrow::Int64Builder user;
  EXPECT_TRUE(stars.AppendValues({1, 5, 3}).ok());
  EXPECT_TRUE(price.AppendValues({10.0, 20.5, 0.0}).ok());
  EXPECT_TRUE(title.AppendValues({"Great Film", "bad", "Iceberg"}).ok());
  EXPECT_TRUE(user.AppendValues({1, 2, 34}).ok());
  return arrow::RecordBatch::Make(schema, 3,
                                  {stars.Finish().ValueOrDie(), price.Finish().ValueOrDie(),
                                   title.Finish().ValueOrDie(), user.Finish().ValueOrDie()});
}

// Parses, binds and evaluates `text` over Table(); the result column.
arrow::Result<std::shared_ptr<arrow::Array>> Eval(const std::string& text) {
  auto batch = Table();
  ARROW_ASSIGN_OR_RAISE(auto expr, ParseValueExpr(text));
  ARROW_ASSIGN_OR_RAISE(expr, expr.Bind(*batch->schema()));
  ARROW_ASSIGN_OR_RAISE(auto datum, cp::ExecuteScalarExpression(expr, cp::ExecBatch(*batch)));
  if (datum.is_scalar()) return arrow::MakeArrayFromScalar(*datum.scalar(), batch->num_rows());
  return datum.make_array();
}

std::string Json(const std::string& text) {
  auto a = Eval(text);
  if (!a.ok()) return "error: " + a.status().ToString();
  return (*a)->type()->ToString() + " " + (*a)->ToString();
}

TEST(ValueExpr, Arithmetic) {
  auto a = Eval("stars - 1");
  ASSERT_OK(a.status());
  // Arrow binds the literal to the column's type where it fits.
  EXPECT_EQ((*a)->type()->id(), arrow::Type::INT32);
  ASSERT_ARRAYS_EQUAL(*ArrayFromJSON(arrow::int32(), "[0, 4, 2]"), **a);

  ASSERT_OK_AND_ASSIGN(auto norm, Eval("(price - 10.5) / 2.0"));
  ASSERT_ARRAYS_EQUAL(*ArrayFromJSON(arrow::float64(), "[-0.25, 5.0, -5.25]"), *norm);

  ASSERT_OK_AND_ASSIGN(auto prec, Eval("1 + stars * 2 - -1"));
  ASSERT_ARRAYS_EQUAL(*ArrayFromJSON(arrow::int32(), "[4, 12, 8]"), *prec);
}

// docs/transforms.md, "Types" (issue 42: the docs said `stars - 1` was
// int64). Where a call has no kernel for the literal's own type, Arrow's Bind
// narrows the literal to the smallest type that holds its value, then
// promotes the arguments to their common type.
TEST(ValueExpr, ALiteralTakesTheSmallestTypeThatHoldsItsValue) {
  EXPECT_EQ(Json("stars - 1"), "int32 [\n  0,\n  4,\n  2\n]");
  EXPECT_EQ(Json("stars * 1000000000"), "error: Invalid: overflow");
  EXPECT_EQ(Json("cast(stars, 'int64') * 1000000000"),
            "int64 [\n  1000000000,\n  5000000000,\n  3000000000\n]");
  EXPECT_EQ(Json("stars * 3000000000"), "int64 [\n  3000000000,\n  15000000000,\n  9000000000\n]");
  EXPECT_EQ(Json("stars + 1.5"), "float [\n  2.5,\n  6.5,\n  4.5\n]");
  EXPECT_EQ(Json("stars + 0.1").substr(0, 7), "double ");
  EXPECT_EQ(Json("cast(stars, 'float64') + 1.5").substr(0, 7), "double ");
  EXPECT_EQ(Json("user_id - 1").substr(0, 6), "int64 ");
  EXPECT_EQ(Json("if_else(stars >= 4, 1, 0)").substr(0, 6), "int64 ");
  EXPECT_EQ(Json("hash_bucket(stars, 16)").substr(0, 6), "int32 ");
}

TEST(ValueExpr, ComparisonsLogicAndIfElse) {
  ASSERT_OK_AND_ASSIGN(auto a, Eval("if_else(stars >= 4, 1, 0)"));
  ASSERT_ARRAYS_EQUAL(*ArrayFromJSON(arrow::int64(), "[0, 1, 0]"), *a);
  ASSERT_OK_AND_ASSIGN(auto b, Eval("stars > 1 AND NOT price = 0.0 OR title IS NULL"));
  ASSERT_ARRAYS_EQUAL(*ArrayFromJSON(arrow::boolean(), "[false, true, false]"), *b);
}

TEST(ValueExpr, FunctionsWithOptions) {
  ASSERT_OK_AND_ASSIGN(auto lower, Eval("utf8_lower(title)"));
  ASSERT_ARRAYS_EQUAL(*ArrayFromJSON(arrow::utf8(), R"j(["great film", "bad", "iceberg"])j"),
                      *lower);
  ASSERT_OK_AND_ASSIGN(auto cast, Eval("cast(stars, 'float32')"));
  ASSERT_ARRAYS_EQUAL(*ArrayFromJSON(arrow::float32(), "[1, 5, 3]"), *cast);
  ASSERT_OK_AND_ASSIGN(auto sub, Eval("substr(title, 0, 3)"));
  ASSERT_ARRAYS_EQUAL(*ArrayFromJSON(arrow::utf8(), R"j(["Gre", "bad", "Ice"])j"), *sub);
  ASSERT_OK_AND_ASSIGN(auto rep, Eval("replace_substring(title, 'a', '@')"));
  ASSERT_ARRAYS_EQUAL(*ArrayFromJSON(arrow::utf8(), R"j(["Gre@t Film", "b@d", "Iceberg"])j"), *rep);
  ASSERT_OK_AND_ASSIGN(auto rounded, Eval("round(price / 3.0, 1)"));
  ASSERT_ARRAYS_EQUAL(*ArrayFromJSON(arrow::float64(), "[3.3, 6.8, 0.0]"), *rounded);
}

TEST(ValueExpr, HashBucketIsIcebergsBucketTransform) {
  // Iceberg spec appendix B: bucket hash of 34L is 2017239379; "iceberg" is 1210000089.
  ASSERT_OK_AND_ASSIGN(auto ids, Eval("hash_bucket(user_id, 1000000000)"));
  EXPECT_EQ(std::static_pointer_cast<arrow::Int32Array>(ids)->Value(2), 2017239379 % 1000000000);
  ASSERT_OK_AND_ASSIGN(auto names, Eval("hash_bucket(utf8_lower(title), 2147483647)"));
  EXPECT_EQ(std::static_pointer_cast<arrow::Int32Array>(names)->Value(2), 1210000089);
  ASSERT_OK_AND_ASSIGN(auto small, Eval("hash_bucket(stars, 16)"));
  for (int i = 0; i < 3; ++i) {
    auto v = std::static_pointer_cast<arrow::Int32Array>(small)->Value(i);
    EXPECT_GE(v, 0);
    EXPECT_LT(v, 16);
  }
  EXPECT_NE(Json("hash_bucket(user_id, 0)").find("bucket count must be in 1..2147483647"),
            std::string::npos);
}

TEST(ValueExpr, OverflowIsAnErrorNotAWrappedValue) {
  EXPECT_NE(Json("user_id * 9223372036854775807").find("overflow"), std::string::npos)
      << Json("user_id * 9223372036854775807");
  EXPECT_NE(Json("stars / 0").find("divide by zero"), std::string::npos);
  EXPECT_NE(Json("stars + 99999999999999999999").find("does not fit a 64-bit integer"),
            std::string::npos);
  EXPECT_EQ(Json("-9223372036854775808 + stars - stars").substr(0, 5), "int64");
}

TEST(ValueExpr, ErrorsNameWhatIsWrong) {
  EXPECT_NE(Json("stars -").find("expression syntax error at position 8"), std::string::npos)
      << Json("stars -");
  EXPECT_NE(Json("no_such_fn(stars)").find("unknown function 'no_such_fn'"), std::string::npos);
  EXPECT_NE(Json("sum(stars)").find("'sum' is not an element-wise function"), std::string::npos)
      << Json("sum(stars)");
  EXPECT_NE(Json("cast(stars, 'int128')").find("unknown type 'int128'"), std::string::npos);
  EXPECT_NE(Json("cast(stars, 3)").find("argument 2 must be a type name string"),
            std::string::npos);
  EXPECT_NE(Json("title - 1").find("subtract_checked"), std::string::npos) << Json("title - 1");
  EXPECT_NE(Json("(stars").find("expected ')'"), std::string::npos);
  EXPECT_NE(Json("stars % 2").find("'%' is not supported"), std::string::npos) << Json("stars % 2");
}

// A chain of operators is one tree level per operator: `stars+1+1+...` of
// 32,000 terms once overflowed the stack in Arrow's Bind (issue 42). The
// bound is the tree's depth, whatever mix of chains, calls and parentheses.
TEST(ValueExpr, ALongChainOfOperatorsIsRefusedByDepth) {
  for (const char* op : {"+", "*", "-", "/", " AND ", " OR "}) {
    std::string text = "stars";
    for (int i = 1; i < 32000 && text.size() + 8 < kMaxExprBytes; ++i)
      text += op + std::string("1");
    auto parsed = ParseValueExpr(text);
    ASSERT_FALSE(parsed.ok()) << op;
    EXPECT_NE(parsed.status().message().find("deeper than 64 levels"), std::string::npos)
        << parsed.status().ToString();
  }
  auto chain = [](int ops) {
    std::string text = "stars";
    for (int i = 0; i < ops; ++i) text += "+1";
    return text;
  };
  // Exactly at the bound: 64 operators bind and evaluate; 65 are refused at
  // the 65th operator.
  ASSERT_OK_AND_ASSIGN(auto at_bound, Eval(chain(64)));
  EXPECT_EQ(at_bound->ToString(), ArrayFromJSON(arrow::int64(), "[65, 69, 67]")->ToString());
  auto over = ParseValueExpr(chain(65));
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("position 134"), std::string::npos)
      << over.status().ToString();
  // Calls and parenthesized chains add up: 10 calls over a chain of 55 is 65.
  std::string calls = chain(55);
  for (int i = 0; i < 10; ++i) calls = "abs(" + calls + ")";
  EXPECT_FALSE(ParseValueExpr(calls).ok());
  EXPECT_FALSE(ParseValueExpr("(" + chain(40) + ")" + chain(25).substr(5)).ok());
  ASSERT_OK(ParseValueExpr("(" + chain(40) + ")" + chain(24).substr(5)).status());
  // Grouping keeps a long sum shallow: ((1+1)+(1+1))+... is log2(n) deep.
  std::string balanced = "stars";
  for (int i = 0; i < 12; ++i) balanced = "(" + balanced + ")+(" + balanced + ")";
  ASSERT_OK(ParseValueExpr(balanced).status());
}

TEST(ValueExpr, ColumnsOfListsEachReadColumnOnce) {
  ASSERT_OK_AND_ASSIGN(auto e,
                       ParseValueExpr("if_else(stars > 3, price, price * stars + \"user_id\")"));
  EXPECT_EQ(ColumnsOf(e), (std::vector<std::string>{"stars", "price", "user_id"}));
}

}  // namespace
}  // namespace icefloe::transform
