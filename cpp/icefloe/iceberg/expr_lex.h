// The lexer under the filter language (expr_parse.cc) and the transforms'
// value expressions (transform/value_expr.cc): one set of rules for names,
// quoting, numbers and strings.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/status.h>

namespace icefloe::iceberg::internal {

struct Token {
  enum class Kind {
    kIdent,
    kQuotedIdent,
    kString,
    kNumber,
    kOp,
    kLParen,
    kRParen,
    kComma,
    kEnd,
    kError
  };
  Kind kind = Kind::kEnd;
  /// Identifiers and numbers as written, strings and quoted names unescaped,
  /// operators normalized ("<>" -> "!="), the message for kError.
  std::string text;
  bool is_float = false;  ///< kNumber with a point or an exponent
  size_t offset = 0;      ///< byte offset in the filter text
  size_t length = 0;
};

enum class LexMode {
  kFilter,      ///< a sign directly before digits belongs to the number; no + - * / %
  kArithmetic,  ///< + - * / % are operators; numbers are unsigned (the parser negates)
};

/// Splits `text` into tokens ending with kEnd, or with kError (its text the
/// message) at the first lexical error.
std::vector<Token> Lex(std::string_view text, LexMode mode);

/// Invalid("<language> syntax error at position P: what"), P the 1-based
/// character of byte `offset`, then the text around it with a caret.
arrow::Status SyntaxError(std::string_view text, size_t offset, std::string_view what,
                          std::string_view language);

/// Whether `word` is `upper` in any case.
bool EqualsKeyword(std::string_view word, std::string_view upper);

/// A parser's position in Lex's tokens (which end with kEnd or kError):
/// peeking past the end gives the last token; taking it stays there.
class TokenCursor {
 public:
  explicit TokenCursor(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  const Token& Peek(size_t ahead = 0) const {
    return tokens_[std::min(next_ + ahead, tokens_.size() - 1)];
  }
  const Token& Take() {
    const Token& t = tokens_[next_];
    if (next_ + 1 < tokens_.size()) ++next_;
    return t;
  }
  /// Whether `t` is the bare word `upper` (any case).
  static bool IsKeyword(const Token& t, std::string_view upper) {
    return t.kind == Token::Kind::kIdent && EqualsKeyword(t.text, upper);
  }

 private:
  std::vector<Token> tokens_;
  size_t next_ = 0;
};

}  // namespace icefloe::iceberg::internal
