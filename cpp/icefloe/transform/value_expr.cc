// ParseValueExpr: a precedence-climbing parser over the filter language's
// lexer (iceberg/expr_lex.h), building Arrow compute expressions.
#include "icefloe/transform/value_expr.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <mutex>
#include <set>

#include <arrow/compute/api_scalar.h>
#include <arrow/compute/cast.h>
#include <arrow/compute/initialize.h>
#include <arrow/compute/registry.h>
#include <arrow/scalar.h>

#include "icefloe/iceberg/expr_lex.h"

namespace icefloe::transform {

namespace cp = arrow::compute;
using iceberg::internal::Token;

namespace {

arrow::Result<std::shared_ptr<arrow::DataType>> CastTarget(const std::string& name) {
  static const std::pair<std::string_view, std::shared_ptr<arrow::DataType>> kTypes[] = {
      {"bool", arrow::boolean()},
      {"boolean", arrow::boolean()},
      {"int8", arrow::int8()},
      {"int16", arrow::int16()},
      {"int32", arrow::int32()},
      {"int64", arrow::int64()},
      {"uint8", arrow::uint8()},
      {"uint16", arrow::uint16()},
      {"uint32", arrow::uint32()},
      {"uint64", arrow::uint64()},
      {"float32", arrow::float32()},
      {"float", arrow::float32()},
      {"float64", arrow::float64()},
      {"double", arrow::float64()},
      {"string", arrow::utf8()},
      {"utf8", arrow::utf8()},
      {"large_string", arrow::large_utf8()},
      {"binary", arrow::binary()},
      {"date32", arrow::date32()},
  };
  std::string lower;
  for (char c : name) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  for (const auto& [n, type] : kTypes) {
    if (lower == n) return type;
  }
  return arrow::Status::Invalid("unknown type '", name,
                                "' (bool, int8..int64, uint8..uint64, float32, float64, string, "
                                "large_string, binary, date32)");
}

// A parsed subexpression and its height in the tree: 0 for a column or a
// literal, one more than its highest argument for an operator or a call.
// Arrow's Bind recurses once per level, so the height is what is bounded.
struct Node {
  cp::Expression expr;
  int height = 0;
};

class Parser {
 public:
  Parser(std::string_view text, std::vector<Token> tokens)
      : text_(text), cursor_(std::move(tokens)) {}

  arrow::Result<cp::Expression> Run() {
    if (Peek().kind == Token::Kind::kEnd) return Error(Peek(), "the expression is empty");
    ARROW_ASSIGN_OR_RAISE(Node e, ParseOr(0));
    if (Peek().kind == Token::Kind::kRParen) return Error(Peek(), "unmatched ')'");
    if (Peek().kind != Token::Kind::kEnd) {
      return Error(Peek(),
                   "expected an operator or the end of the expression, found " + Describe(Peek()));
    }
    return std::move(e.expr);
  }

 private:
  const Token& Peek() const { return cursor_.Peek(); }
  const Token& Take() { return cursor_.Take(); }
  static bool IsKeyword(const Token& t, std::string_view upper) {
    return iceberg::internal::TokenCursor::IsKeyword(t, upper);
  }
  bool IsOp(const Token& t, std::string_view op) const {
    return t.kind == Token::Kind::kOp && t.text == op;
  }
  std::string Describe(const Token& t) const {
    if (t.kind == Token::Kind::kEnd) return "the end of the expression";
    std::string raw(text_.substr(t.offset, std::min<size_t>(t.length, 24)));
    return "'" + raw + (t.length > 24 ? "...'" : "'");
  }
  arrow::Status Error(const Token& at, const std::string& message) const {
    return iceberg::internal::SyntaxError(
        text_, at.offset, at.kind == Token::Kind::kError ? at.text : message, "expression");
  }
  // Bounds the parser's own recursion (parentheses nest it, add no level).
  arrow::Status CheckDepth(const Token& at, int depth) const {
    if (depth <= kMaxExprDepth) return arrow::Status::OK();
    return Error(at, "the expression nests deeper than " + std::to_string(kMaxExprDepth) +
                         " levels of parentheses, calls and operators");
  }
  // `call` (the operator or call at `at`) over arguments at most `below`
  // high; refused past kMaxExprDepth.
  arrow::Result<Node> Level(const Token& at, int below, cp::Expression call) const {
    if (below < kMaxExprDepth) return Node{std::move(call), below + 1};
    return Error(at, "the expression is deeper than " + std::to_string(kMaxExprDepth) +
                         " levels of operators and calls (each operator of a chain such as "
                         "a + b + c is a level; grouping, (a + b) + (c + d), is shallower)");
  }

  // A left-associative chain of binary operators at one precedence level:
  // one tree level per operator, so its length counts against the height.
  template <typename Operand, typename Match>
  arrow::Result<Node> Chain(int depth, Operand operand, Match match) {
    ARROW_ASSIGN_OR_RAISE(Node left, operand(depth));
    while (true) {
      std::string function = match(Peek());
      if (function.empty()) return left;
      if (function == "%") return Error(Peek(), "'%' is not supported");
      const Token& op = Take();
      ARROW_RETURN_NOT_OK(CheckDepth(op, depth + 1));
      ARROW_ASSIGN_OR_RAISE(Node right, operand(depth + 1));
      ARROW_ASSIGN_OR_RAISE(
          left, Level(op, std::max(left.height, right.height),
                      cp::call(function, {std::move(left.expr), std::move(right.expr)})));
    }
  }

  arrow::Result<Node> ParseOr(int depth) {
    return Chain(
        depth, [this](int d) { return ParseAnd(d); },
        [](const Token& t) { return IsKeyword(t, "OR") ? "or_kleene" : ""; });
  }
  arrow::Result<Node> ParseAnd(int depth) {
    return Chain(
        depth, [this](int d) { return ParseNot(d); },
        [](const Token& t) { return IsKeyword(t, "AND") ? "and_kleene" : ""; });
  }
  arrow::Result<Node> ParseNot(int depth) {
    if (IsKeyword(Peek(), "NOT")) {
      const Token& op = Take();
      ARROW_RETURN_NOT_OK(CheckDepth(op, depth + 1));
      ARROW_ASSIGN_OR_RAISE(Node inner, ParseNot(depth + 1));
      return Level(op, inner.height, cp::call("invert", {std::move(inner.expr)}));
    }
    return ParseComparison(depth);
  }
  arrow::Result<Node> ParseComparison(int depth) {
    ARROW_ASSIGN_OR_RAISE(Node left, ParseSum(depth));
    const Token& t = Peek();
    if (IsKeyword(t, "IS")) {
      Take();
      const bool negated = IsKeyword(Peek(), "NOT");
      if (negated) Take();
      if (!IsKeyword(Peek(), "NULL")) {
        return Error(Peek(), "expected NULL after IS" + std::string(negated ? " NOT" : "") +
                                 ", found " + Describe(Peek()));
      }
      Take();
      return Level(t, left.height,
                   cp::call(negated ? "is_valid" : "is_null", {std::move(left.expr)}));
    }
    if (t.kind != Token::Kind::kOp) return left;
    static const std::pair<std::string_view, std::string_view> kComparisons[] = {
        {"=", "equal"},       {"!=", "not_equal"}, {"<", "less"},
        {"<=", "less_equal"}, {">", "greater"},    {">=", "greater_equal"}};
    for (const auto& [op, function] : kComparisons) {
      if (t.text != op) continue;
      Take();
      ARROW_ASSIGN_OR_RAISE(Node right, ParseSum(depth + 1));
      return Level(t, std::max(left.height, right.height),
                   cp::call(std::string(function), {std::move(left.expr), std::move(right.expr)}));
    }
    return left;
  }
  arrow::Result<Node> ParseSum(int depth) {
    return Chain(
        depth, [this](int d) { return ParseProduct(d); },
        [this](const Token& t) -> std::string {
          if (IsOp(t, "+")) return "add_checked";
          if (IsOp(t, "-")) return "subtract_checked";
          return "";
        });
  }
  arrow::Result<Node> ParseProduct(int depth) {
    return Chain(
        depth, [this](int d) { return ParseUnary(d); },
        [this](const Token& t) -> std::string {
          if (IsOp(t, "*")) return "multiply_checked";
          if (IsOp(t, "/")) return "divide_checked";
          if (IsOp(t, "%")) return "%";  // no modulo kernel in Arrow
          return "";
        });
  }
  arrow::Result<Node> ParseUnary(int depth) {
    const Token& t = Peek();
    if (IsOp(t, "%")) return Error(t, "'%' is not supported");
    if (IsOp(t, "-") || IsOp(t, "+")) {
      const bool minus = t.text == "-";
      ARROW_RETURN_NOT_OK(CheckDepth(Take(), depth + 1));
      if (minus && Peek().kind == Token::Kind::kNumber) {
        // A negative literal: -9223372036854775808 must not overflow on the way.
        return Leaf(Number(Take(), true));
      }
      ARROW_ASSIGN_OR_RAISE(Node inner, ParseUnary(depth + 1));
      if (!minus) return inner;
      return Level(t, inner.height, cp::call("negate_checked", {std::move(inner.expr)}));
    }
    return ParsePrimary(depth);
  }

  static arrow::Result<Node> Leaf(arrow::Result<cp::Expression> e) {
    ARROW_ASSIGN_OR_RAISE(cp::Expression expr, std::move(e));
    return Node{std::move(expr), 0};
  }

  arrow::Result<cp::Expression> Number(const Token& t, bool negative) {
    std::string text = (negative ? "-" : "") + t.text;
    if (!t.is_float) {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size()) {
        return Error(t, "integer " + text + " does not fit a 64-bit integer");
      }
      return cp::literal(v);
    }
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || !std::isfinite(v)) {
      return Error(t, "number " + text + " is not a finite 64-bit float");
    }
    return cp::literal(v);
  }

  arrow::Result<Node> ParsePrimary(int depth) {
    const Token& t = Peek();
    switch (t.kind) {
      case Token::Kind::kNumber:
        return Leaf(Number(Take(), false));
      case Token::Kind::kString:
        return Leaf(cp::literal(Take().text));
      case Token::Kind::kQuotedIdent:
        return Leaf(cp::field_ref(Take().text));
      case Token::Kind::kLParen: {
        ARROW_RETURN_NOT_OK(CheckDepth(Take(), depth + 1));
        ARROW_ASSIGN_OR_RAISE(Node inner, ParseOr(depth + 1));
        if (Peek().kind != Token::Kind::kRParen) {
          return Error(Peek(), "expected ')', found " + Describe(Peek()));
        }
        Take();
        return inner;
      }
      case Token::Kind::kIdent:
        break;
      default:
        return Error(t,
                     "expected a column, a literal, a function call or '(', found " + Describe(t));
    }
    if (IsKeyword(t, "TRUE") || IsKeyword(t, "FALSE"))
      return Leaf(cp::literal(IsKeyword(Take(), "TRUE")));
    if (IsKeyword(t, "NULL")) {
      Take();
      return Leaf(cp::literal(arrow::MakeNullScalar(arrow::null())));
    }
    const Token& name = Take();
    if (Peek().kind != Token::Kind::kLParen) return Leaf(cp::field_ref(name.text));
    return ParseCall(name, depth);
  }

  arrow::Result<Node> ParseCall(const Token& name, int depth) {
    const Token& open = Take();
    ARROW_RETURN_NOT_OK(CheckDepth(open, depth + 1));
    std::vector<cp::Expression> args;
    std::vector<const Token*> starts;
    int below = 0;
    if (Peek().kind != Token::Kind::kRParen) {
      while (true) {
        starts.push_back(&Peek());
        ARROW_ASSIGN_OR_RAISE(Node arg, ParseOr(depth + 1));
        below = std::max(below, arg.height);
        args.push_back(std::move(arg.expr));
        if (Peek().kind == Token::Kind::kRParen) break;
        if (Peek().kind != Token::Kind::kComma) {
          return Error(Peek(), "expected ',' or ')' in the arguments of " + name.text + ", found " +
                                   Describe(Peek()));
        }
        Take();
      }
    }
    Take();
    std::string function;
    for (char c : name.text)
      function += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    ARROW_ASSIGN_OR_RAISE(cp::Expression call, Call(name, function, std::move(args), starts));
    return Level(name, below, std::move(call));
  }

  // The literal argument `i` of `name`, of type T.
  template <typename T>
  arrow::Result<T> LiteralArg(const Token& name, const std::vector<cp::Expression>& args,
                              const std::vector<const Token*>& starts, size_t i,
                              std::string_view what) {
    const arrow::Datum* d = i < args.size() ? args[i].literal() : nullptr;
    if constexpr (std::is_same_v<T, std::string>) {
      if (d != nullptr && d->is_scalar() && d->type()->id() == arrow::Type::STRING) {
        return d->scalar_as<arrow::StringScalar>().ToString();
      }
    } else {
      if (d != nullptr && d->is_scalar() && d->type()->id() == arrow::Type::INT64) {
        return d->scalar_as<arrow::Int64Scalar>().value;
      }
    }
    const Token& at = i < starts.size() ? *starts[i] : name;
    return Error(
        at, name.text + "'s argument " + std::to_string(i + 1) + " must be " + std::string(what));
  }

  arrow::Status Arity(const Token& name, const std::vector<cp::Expression>& args, size_t min,
                      size_t max, std::string_view usage) const {
    if (args.size() >= min && args.size() <= max) return arrow::Status::OK();
    return Error(name, name.text + " takes " + std::string(usage));
  }

  arrow::Result<cp::Expression> Call(const Token& name, const std::string& function,
                                     std::vector<cp::Expression> args,
                                     const std::vector<const Token*>& starts) {
    if (function == "cast") {
      ARROW_RETURN_NOT_OK(Arity(name, args, 2, 2, "(value, 'type')"));
      ARROW_ASSIGN_OR_RAISE(auto type_name,
                            LiteralArg<std::string>(name, args, starts, 1, "a type name string"));
      auto type = CastTarget(type_name);
      if (!type.ok()) return Error(*starts[1], type.status().message());
      return cp::call("cast", {std::move(args[0])}, cp::CastOptions::Safe(*type));
    }
    if (function == "round") {
      ARROW_RETURN_NOT_OK(Arity(name, args, 1, 2, "(value[, ndigits])"));
      int64_t digits = 0;
      if (args.size() == 2) {
        ARROW_ASSIGN_OR_RAISE(digits, LiteralArg<int64_t>(name, args, starts, 1, "an integer"));
      }
      if (digits < -64 || digits > 64) return Error(*starts[1], "ndigits must be in -64..64");
      return cp::call("round", {std::move(args[0])},
                      cp::RoundOptions(static_cast<int64_t>(digits), cp::RoundMode::HALF_TO_EVEN));
    }
    if (function == "utf8_slice_codeunits" || function == "substr") {
      ARROW_RETURN_NOT_OK(Arity(name, args, 2, 3, "(string, start[, stop])"));
      ARROW_ASSIGN_OR_RAISE(auto start, LiteralArg<int64_t>(name, args, starts, 1, "an integer"));
      int64_t stop = std::numeric_limits<int64_t>::max();
      if (args.size() == 3) {
        ARROW_ASSIGN_OR_RAISE(stop, LiteralArg<int64_t>(name, args, starts, 2, "an integer"));
      }
      return cp::call("utf8_slice_codeunits", {std::move(args[0])}, cp::SliceOptions(start, stop));
    }
    if (function == "replace_substring" || function == "replace_substring_regex") {
      ARROW_RETURN_NOT_OK(Arity(name, args, 3, 3, "(string, 'pattern', 'replacement')"));
      ARROW_ASSIGN_OR_RAISE(auto pattern,
                            LiteralArg<std::string>(name, args, starts, 1, "a string"));
      ARROW_ASSIGN_OR_RAISE(auto replacement,
                            LiteralArg<std::string>(name, args, starts, 2, "a string"));
      return cp::call(function, {std::move(args[0])},
                      cp::ReplaceSubstringOptions(pattern, replacement));
    }
    if (function == "hash_bucket") {
      ARROW_RETURN_NOT_OK(Arity(name, args, 2, 2, "(value, buckets)"));
      ARROW_ASSIGN_OR_RAISE(auto n, LiteralArg<int64_t>(name, args, starts, 1, "an integer"));
      if (n < 1 || n > std::numeric_limits<int32_t>::max()) {
        return Error(*starts[1], "the bucket count must be in 1..2147483647");
      }
    }
    auto found = cp::GetFunctionRegistry()->GetFunction(function);
    if (!found.ok()) return Error(name, "unknown function '" + name.text + "'");
    if ((*found)->kind() != cp::Function::SCALAR) {
      return Error(name, "'" + name.text + "' is not an element-wise function");
    }
    return cp::call(function, std::move(args));
  }

  std::string_view text_;
  iceberg::internal::TokenCursor cursor_;
};

}  // namespace

arrow::Result<cp::Expression> ParseValueExpr(std::string_view text) {
  if (text.size() > kMaxExprBytes) {
    return arrow::Status::Invalid("the expression is ", text.size(),
                                  " bytes, more than the limit of ", kMaxExprBytes);
  }
  ARROW_RETURN_NOT_OK(RegisterFunctions());
  return Parser(text, iceberg::internal::Lex(text, iceberg::internal::LexMode::kArithmetic)).Run();
}

std::vector<std::string> ColumnsOf(const cp::Expression& expr) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const arrow::FieldRef& ref : cp::FieldsInExpression(expr)) {
    const std::string* name = ref.name();
    if (name != nullptr && seen.insert(*name).second) out.push_back(*name);
  }
  return out;
}

}  // namespace icefloe::transform
