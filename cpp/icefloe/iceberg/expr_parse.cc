// ParseFilter: a lexer and a recursive-descent parser for filter text.
#include <algorithm>
#include <cstdio>
#include <utility>

#include "icefloe/iceberg/expr.h"
#include "icefloe/iceberg/expr_internal.h"
#include "icefloe/iceberg/expr_lex.h"

namespace icefloe::iceberg {

namespace {

using internal::Lex;
using internal::LexMode;
using internal::Token;

std::optional<ExprOp> ComparisonOp(const std::string& text) {
  if (text == "=") return ExprOp::kEq;
  if (text == "!=") return ExprOp::kNe;
  if (text == "<") return ExprOp::kLt;
  if (text == "<=") return ExprOp::kLe;
  if (text == ">") return ExprOp::kGt;
  if (text == ">=") return ExprOp::kGe;
  return std::nullopt;
}

class Parser {
 public:
  Parser(std::string_view text, std::vector<Token> tokens)
      : text_(text), cursor_(std::move(tokens)), positions_(text.size() + 1) {
    // 1-based character (code point) positions of every byte offset.
    int32_t chars = 0;
    for (size_t i = 0; i < text_.size(); ++i) {
      if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) ++chars;
      positions_[i + 1] = chars;
    }
    for (auto& p : positions_) ++p;
  }

  arrow::Result<ExprPtr> Run() {
    if (Peek().kind == Token::Kind::kEnd) return Error(Peek(), "the filter is empty");
    ARROW_ASSIGN_OR_RAISE(ExprPtr expr, ParseOr(0));
    if (Peek().kind == Token::Kind::kRParen) return Error(Peek(), "unmatched ')'");
    if (Peek().kind != Token::Kind::kEnd) {
      return Error(Peek(), "expected AND, OR or the end of the filter, found " + Describe(Peek()));
    }
    return expr;
  }

 private:
  const Token& Peek(size_t ahead = 0) const { return cursor_.Peek(ahead); }
  const Token& Take() { return cursor_.Take(); }
  static bool IsKeyword(const Token& t, std::string_view upper) {
    return internal::TokenCursor::IsKeyword(t, upper);
  }
  // DATE '...' and TIMESTAMP '...' are literals; the words alone are names.
  bool IsTypedLiteral(size_t ahead) const {
    const Token& t = Peek(ahead);
    return (IsKeyword(t, "DATE") || IsKeyword(t, "TIMESTAMP")) &&
           Peek(ahead + 1).kind == Token::Kind::kString;
  }
  bool IsColumn(size_t ahead) const {
    const Token& t = Peek(ahead);
    if (t.kind == Token::Kind::kQuotedIdent) return true;
    return t.kind == Token::Kind::kIdent && !internal::IsReservedWord(t.text) &&
           !IsTypedLiteral(ahead);
  }
  bool IsLiteralStart(size_t ahead) const {
    const Token& t = Peek(ahead);
    return t.kind == Token::Kind::kNumber || t.kind == Token::Kind::kString ||
           IsKeyword(t, "TRUE") || IsKeyword(t, "FALSE") || IsTypedLiteral(ahead);
  }

  int32_t Position(size_t offset) const { return positions_[std::min(offset, text_.size())]; }

  std::string Describe(const Token& t) const {
    if (t.kind == Token::Kind::kEnd) return "the end of the filter";
    std::string raw(text_.substr(t.offset, std::min<size_t>(t.length, 24)));
    return "'" + raw + (t.length > 24 ? "...'" : "'");
  }

  arrow::Status Error(const Token& at, const std::string& message) const {
    const std::string& what = at.kind == Token::Kind::kError ? at.text : message;
    return SyntaxError(at.offset, what);
  }

  // "filter syntax error at position P: what", then the text around P with a caret.
  arrow::Status SyntaxError(size_t offset, const std::string& what) const {
    return internal::SyntaxError(text_, offset, what, "filter");
  }

  arrow::Status CheckDepth(const Token& at, int depth) const {
    if (depth <= kMaxFilterDepth) return arrow::Status::OK();
    return Error(at, "the filter nests deeper than " + std::to_string(kMaxFilterDepth) +
                         " parentheses and NOTs");
  }

  static ExprPtr Node(ExprOp op, int32_t position, std::vector<ExprPtr> children) {
    auto e = std::make_shared<Expr>();
    e->op = op;
    e->position = position;
    e->children = std::move(children);
    return e;
  }

  static ExprPtr Leaf(ExprOp op, const std::string& column, int32_t position,
                      std::vector<ParsedLiteral> literals) {
    auto e = std::make_shared<Expr>();
    e->op = op;
    e->column = column;
    e->position = position;
    e->literals = std::move(literals);
    return e;
  }

  // One of `op`-separated operands; a single operand is returned as is.
  template <typename Operand>
  arrow::Result<ExprPtr> ParseChain(ExprOp op, std::string_view keyword, Operand operand) {
    const int32_t position = Position(Peek().offset);
    std::vector<ExprPtr> children;
    ARROW_ASSIGN_OR_RAISE(ExprPtr first, operand());
    children.push_back(std::move(first));
    while (IsKeyword(Peek(), keyword)) {
      Take();
      ARROW_ASSIGN_OR_RAISE(ExprPtr next, operand());
      children.push_back(std::move(next));
    }
    if (children.size() == 1) return children[0];
    return Node(op, position, std::move(children));
  }

  arrow::Result<ExprPtr> ParseOr(int depth) {
    return ParseChain(ExprOp::kOr, "OR", [&] { return ParseAnd(depth); });
  }

  arrow::Result<ExprPtr> ParseAnd(int depth) {
    return ParseChain(ExprOp::kAnd, "AND", [&] { return ParseNot(depth); });
  }

  arrow::Result<ExprPtr> ParseNot(int depth) {
    const Token& t = Peek();
    if (IsKeyword(t, "NOT")) {
      ARROW_RETURN_NOT_OK(CheckDepth(t, depth + 1));
      const int32_t position = Position(Take().offset);
      ARROW_ASSIGN_OR_RAISE(ExprPtr child, ParseNot(depth + 1));
      return Node(ExprOp::kNot, position, {std::move(child)});
    }
    if (t.kind == Token::Kind::kLParen) {
      ARROW_RETURN_NOT_OK(CheckDepth(t, depth + 1));
      const Token& open = Take();
      ARROW_ASSIGN_OR_RAISE(ExprPtr inner, ParseOr(depth + 1));
      if (Peek().kind != Token::Kind::kRParen) {
        return Error(Peek(), "expected ')' to close the '(' at position " +
                                 std::to_string(Position(open.offset)) + ", found " +
                                 Describe(Peek()));
      }
      Take();
      return inner;
    }
    if ((IsKeyword(t, "TRUE") || IsKeyword(t, "FALSE")) && Peek(1).kind != Token::Kind::kOp) {
      const int32_t position = Position(Take().offset);
      return Node(IsKeyword(t, "TRUE") ? ExprOp::kTrue : ExprOp::kFalse, position, {});
    }
    return ParsePredicate();
  }

  arrow::Result<ExprPtr> ParsePredicate() {
    const Token& t = Peek();
    if (IsColumn(0)) {
      const Token& column = Take();
      return ParsePredicateRest(column.text, Position(column.offset));
    }
    if (IsLiteralStart(0)) {
      // literal op column: flipped so the column comes first.
      ARROW_ASSIGN_OR_RAISE(ParsedLiteral literal, ParseLiteral("a filter"));
      const Token& op_token = Peek();
      auto op = op_token.kind == Token::Kind::kOp ? ComparisonOp(op_token.text) : std::nullopt;
      if (!op) {
        return Error(op_token, "expected a comparison operator after the literal " +
                                   literal.ToString() + ", found " + Describe(op_token));
      }
      Take();
      if (!IsColumn(0)) {
        if (IsLiteralStart(0)) return Error(Peek(), "a comparison needs a column on one side");
        return Error(Peek(),
                     "expected a column after '" + op_token.text + "', found " + Describe(Peek()));
      }
      const Token& column = Take();
      return Leaf(Flip(*op), column.text, Position(column.offset), {std::move(literal)});
    }
    if (IsKeyword(t, "NULL")) {
      return Error(t, "NULL is only allowed in IS NULL and IS NOT NULL");
    }
    return Error(t, "expected a column, a predicate or '(', found " + Describe(t));
  }

  arrow::Result<ExprPtr> ParsePredicateRest(const std::string& column, int32_t position) {
    const Token& t = Peek();
    if (t.kind == Token::Kind::kOp) {
      const ExprOp op = *ComparisonOp(Take().text);
      if (IsColumn(0)) {
        return Error(Peek(), "comparisons between two columns are not supported");
      }
      if (IsKeyword(Peek(), "NULL")) {
        return Error(Peek(), "a comparison with NULL is never true; use IS NULL or IS NOT NULL");
      }
      ARROW_ASSIGN_OR_RAISE(ParsedLiteral literal, ParseLiteral("after '" + t.text + "'"));
      return Leaf(op, column, position, {std::move(literal)});
    }
    if (IsKeyword(t, "IS")) {
      Take();
      const bool negated = IsKeyword(Peek(), "NOT");
      if (negated) Take();
      if (IsKeyword(Peek(), "NULL")) {
        Take();
        return Leaf(negated ? ExprOp::kNotNull : ExprOp::kIsNull, column, position, {});
      }
      if (IsKeyword(Peek(), "NAN")) {
        Take();
        return Leaf(negated ? ExprOp::kNotNan : ExprOp::kIsNan, column, position, {});
      }
      return Error(Peek(), std::string("expected NULL or NAN after IS") + (negated ? " NOT" : "") +
                               ", found " + Describe(Peek()));
    }
    const bool negated = IsKeyword(t, "NOT");
    if (negated) Take();
    if (IsKeyword(Peek(), "IN")) return ParseIn(column, position, negated);
    if (IsKeyword(Peek(), "BETWEEN")) return ParseBetween(column, position, negated);
    if (IsKeyword(Peek(), "LIKE")) return ParseLike(column, position, negated);
    if (negated) {
      return Error(Peek(), "expected IN, BETWEEN or LIKE after NOT, found " + Describe(Peek()));
    }
    return Error(t, "expected a comparison operator, IN, BETWEEN, IS or LIKE after column '" +
                        column + "', found " + Describe(t));
  }

  arrow::Result<ExprPtr> ParseIn(const std::string& column, int32_t position, bool negated) {
    Take();
    if (Peek().kind != Token::Kind::kLParen) {
      return Error(Peek(), "expected '(' after IN, found " + Describe(Peek()));
    }
    Take();
    std::vector<ParsedLiteral> literals;
    while (true) {
      ARROW_ASSIGN_OR_RAISE(ParsedLiteral literal,
                            ParseLiteral(literals.empty() ? "after 'IN ('" : "after ','"));
      literals.push_back(std::move(literal));
      if (Peek().kind == Token::Kind::kRParen) break;
      if (Peek().kind != Token::Kind::kComma) {
        return Error(Peek(), "expected ',' or ')' in the IN list, found " + Describe(Peek()));
      }
      Take();
    }
    Take();
    return Leaf(negated ? ExprOp::kNotIn : ExprOp::kIn, column, position, std::move(literals));
  }

  // x BETWEEN a AND b is x >= a AND x <= b; NOT BETWEEN is its NOT.
  arrow::Result<ExprPtr> ParseBetween(const std::string& column, int32_t position, bool negated) {
    Take();
    ARROW_ASSIGN_OR_RAISE(ParsedLiteral low, ParseLiteral("after BETWEEN"));
    if (!IsKeyword(Peek(), "AND")) {
      return Error(Peek(), "expected AND between the BETWEEN bounds, found " + Describe(Peek()));
    }
    Take();
    ARROW_ASSIGN_OR_RAISE(ParsedLiteral high, ParseLiteral("after BETWEEN ... AND"));
    ExprPtr range = Node(ExprOp::kAnd, position,
                         {Leaf(ExprOp::kGe, column, position, {std::move(low)}),
                          Leaf(ExprOp::kLe, column, position, {std::move(high)})});
    if (!negated) return range;
    return Node(ExprOp::kNot, position, {std::move(range)});
  }

  arrow::Result<ExprPtr> ParseLike(const std::string& column, int32_t position, bool negated) {
    Take();
    const Token& pattern = Peek();
    if (pattern.kind != Token::Kind::kString) {
      return Error(pattern, "expected a string pattern after LIKE, found " + Describe(pattern));
    }
    Take();
    const std::string& text = pattern.text;
    const size_t wildcard = text.find_first_of("%_");
    ParsedLiteral literal{ParsedLiteral::Kind::kString, text, Position(pattern.offset)};
    if (wildcard == std::string::npos) {
      return Leaf(negated ? ExprOp::kNe : ExprOp::kEq, column, position, {std::move(literal)});
    }
    if (text[wildcard] != '%' || wildcard + 1 != text.size()) {
      return Error(pattern,
                   "only prefix LIKE patterns are supported, like 'abc%' ('%' at the end only, "
                   "no '_')");
    }
    literal.text.pop_back();
    return Leaf(negated ? ExprOp::kNotStartsWith : ExprOp::kStartsWith, column, position,
                {std::move(literal)});
  }

  arrow::Result<ParsedLiteral> ParseLiteral(const std::string& context) {
    const Token& t = Peek();
    ParsedLiteral literal;
    literal.position = Position(t.offset);
    if (t.kind == Token::Kind::kNumber) {
      literal.kind = t.is_float ? ParsedLiteral::Kind::kFloat : ParsedLiteral::Kind::kInteger;
      literal.text = Take().text;
      return literal;
    }
    if (t.kind == Token::Kind::kString) {
      literal.kind = ParsedLiteral::Kind::kString;
      literal.text = Take().text;
      return literal;
    }
    if (IsKeyword(t, "TRUE") || IsKeyword(t, "FALSE")) {
      literal.kind = ParsedLiteral::Kind::kBoolean;
      literal.text = IsKeyword(Take(), "TRUE") ? "true" : "false";
      return literal;
    }
    if (IsTypedLiteral(0)) {
      const bool date = IsKeyword(Take(), "DATE");
      const Token& value = Take();
      const bool valid = date ? internal::ParseDateText(value.text).has_value()
                              : internal::ParseTimestampText(value.text, true).has_value();
      if (!valid) {
        return Error(value, date ? "invalid DATE literal, expected 'YYYY-MM-DD'"
                                 : "invalid TIMESTAMP literal, expected "
                                   "'YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM]'");
      }
      literal.kind = date ? ParsedLiteral::Kind::kDate : ParsedLiteral::Kind::kTimestamp;
      literal.text = value.text;
      return literal;
    }
    if (IsKeyword(t, "NULL")) {
      return Error(t, "NULL is only allowed in IS NULL and IS NOT NULL");
    }
    return Error(t, "expected a literal " + context + ", found " + Describe(t));
  }

  std::string_view text_;
  internal::TokenCursor cursor_;
  std::vector<int32_t> positions_;
};

}  // namespace

arrow::Result<ExprPtr> ParseFilter(std::string_view text) {
  if (text.size() > kMaxFilterBytes) {
    return arrow::Status::Invalid("the filter is ", text.size(), " bytes, more than the limit of ",
                                  kMaxFilterBytes);
  }
  return Parser(text, Lex(text, LexMode::kFilter)).Run();
}

std::string Expr::ToString() const {
  std::vector<std::string> literal_text, child_text;
  for (const auto& l : literals) {
    literal_text.push_back(op == ExprOp::kStartsWith || op == ExprOp::kNotStartsWith
                               ? internal::QuoteString(l.text + "%")
                               : l.ToString());
  }
  for (const auto& c : children) child_text.push_back(c->ToString());
  return internal::FormatNode(op, internal::QuoteColumn(column), literal_text, child_text);
}

}  // namespace icefloe::iceberg
