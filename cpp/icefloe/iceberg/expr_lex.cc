#include "icefloe/iceberg/expr_lex.h"

#include <algorithm>
#include <cstdio>

namespace icefloe::iceberg::internal {

namespace {

bool IsIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsIdentChar(char c) { return IsIdentStart(c) || IsDigit(c); }
bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

}  // namespace

bool EqualsKeyword(std::string_view word, std::string_view upper) {
  if (word.size() != upper.size()) return false;
  for (size_t i = 0; i < word.size(); ++i) {
    char c = word[i];
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (c != upper[i]) return false;
  }
  return true;
}

namespace {

// Splits the text into tokens. A lexical error becomes a kError token where it
// happens, so errors are reported left to right whichever stage finds them.
class Lexer {
 public:
  Lexer(std::string_view text, LexMode mode) : text_(text), mode_(mode) {}

  std::vector<Token> Run() {
    std::vector<Token> tokens;
    while (true) {
      while (pos_ < text_.size() && IsSpace(text_[pos_])) ++pos_;
      Token t = Next();
      tokens.push_back(t);
      if (t.kind == Token::Kind::kEnd || t.kind == Token::Kind::kError) break;
    }
    return tokens;
  }

 private:
  Token Make(Token::Kind kind, size_t start, std::string text) {
    Token t;
    t.kind = kind;
    t.offset = start;
    t.length = pos_ - start;
    t.text = std::move(text);
    return t;
  }

  Token Error(size_t start, std::string message) {
    pos_ = std::max(pos_, start + 1);
    return Make(Token::Kind::kError, start, std::move(message));
  }

  Token Next() {
    const size_t start = pos_;
    if (pos_ >= text_.size()) return Make(Token::Kind::kEnd, start, "");
    const char c = text_[pos_];
    const char next = pos_ + 1 < text_.size() ? text_[pos_ + 1] : '\0';
    switch (c) {
      case '(':
        ++pos_;
        return Make(Token::Kind::kLParen, start, "(");
      case ')':
        ++pos_;
        return Make(Token::Kind::kRParen, start, ")");
      case ',':
        ++pos_;
        return Make(Token::Kind::kComma, start, ",");
      case '=':
        pos_ += next == '=' ? 2 : 1;
        return Make(Token::Kind::kOp, start, "=");
      case '!':
        if (next != '=') break;
        pos_ += 2;
        return Make(Token::Kind::kOp, start, "!=");
      case '<':
        pos_ += next == '=' || next == '>' ? 2 : 1;
        return Make(Token::Kind::kOp, start, next == '=' ? "<=" : next == '>' ? "!=" : "<");
      case '>':
        pos_ += next == '=' ? 2 : 1;
        return Make(Token::Kind::kOp, start, next == '=' ? ">=" : ">");
      case '\'':
        return Quoted(Token::Kind::kString, '\'', "string literal");
      case '"':
        return Quoted(Token::Kind::kQuotedIdent, '"', "quoted column name");
      case '`':
        return Quoted(Token::Kind::kQuotedIdent, '`', "quoted column name");
      case '+':
      case '-':
      case '*':
      case '/':
      case '%':
        if (mode_ != LexMode::kArithmetic) break;  // a filter's sign is the number's
        ++pos_;
        return Make(Token::Kind::kOp, start, std::string(1, c));
      default:
        break;
    }
    const bool sign = c == '+' || c == '-';
    const size_t digits_at = sign ? pos_ + 1 : pos_;
    if (digits_at < text_.size() &&
        (IsDigit(text_[digits_at]) || (text_[digits_at] == '.' && digits_at + 1 < text_.size() &&
                                       IsDigit(text_[digits_at + 1])))) {
      return Number();
    }
    if (IsIdentStart(c)) return Identifier();
    if (c >= 0x21 && c <= 0x7e)
      return Error(start, std::string("unexpected character '") + c + "'");
    char buf[48];
    std::snprintf(buf, sizeof(buf), "unexpected byte 0x%02x", static_cast<unsigned char>(c));
    return Error(start, buf);
  }

  // '...' or "..." or `...`; a doubled quote stands for one.
  Token Quoted(Token::Kind kind, char quote, const char* what) {
    const size_t start = pos_++;
    std::string value;
    while (true) {
      if (pos_ >= text_.size()) return Error(start, std::string("unterminated ") + what);
      char c = text_[pos_++];
      if (c != quote) {
        value += c;
      } else if (pos_ < text_.size() && text_[pos_] == quote) {
        value += quote;
        ++pos_;
      } else {
        break;
      }
    }
    if (kind == Token::Kind::kQuotedIdent && value.empty()) {
      return Error(start, "empty quoted column name");
    }
    return Make(kind, start, std::move(value));
  }

  // [+-] (digits [. digits] | . digits) [e [+-] digits]
  Token Number() {
    const size_t start = pos_;
    bool is_float = false;
    if (text_[pos_] == '+' || text_[pos_] == '-') ++pos_;
    while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      is_float = true;
      ++pos_;
      while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
    }
    bool ok = true;
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      is_float = true;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      ok = pos_ < text_.size() && IsDigit(text_[pos_]);
      while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
    }
    if (!ok || (pos_ < text_.size() && (IsIdentChar(text_[pos_]) || text_[pos_] == '.'))) {
      while (pos_ < text_.size() && (IsIdentChar(text_[pos_]) || text_[pos_] == '.')) ++pos_;
      return Error(start,
                   "invalid number '" + std::string(text_.substr(start, pos_ - start)) + "'");
    }
    Token t = Make(Token::Kind::kNumber, start, std::string(text_.substr(start, pos_ - start)));
    t.is_float = is_float;
    return t;
  }

  // Parts of identifier characters joined by dots: a, a.b, a_1.b2.
  Token Identifier() {
    const size_t start = pos_;
    while (true) {
      while (pos_ < text_.size() && IsIdentChar(text_[pos_])) ++pos_;
      if (pos_ >= text_.size() || text_[pos_] != '.') break;
      ++pos_;
      if (pos_ >= text_.size() || !IsIdentChar(text_[pos_])) {
        return Error(
            start, "invalid column name '" + std::string(text_.substr(start, pos_ - start)) + "'");
      }
    }
    return Make(Token::Kind::kIdent, start, std::string(text_.substr(start, pos_ - start)));
  }

  std::string_view text_;
  LexMode mode_;
  size_t pos_ = 0;
};

}  // namespace

// 1-based character (code point) position of byte `offset`.
int64_t CharPosition(std::string_view text, size_t offset) {
  int64_t chars = 1;
  for (size_t i = 0; i < std::min(offset, text.size()); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++chars;
  }
  return chars;
}

arrow::Status SyntaxError(std::string_view text_, size_t offset, std::string_view what,
                          std::string_view language) {
  constexpr size_t kContextBytes = 40;
  auto is_start = [&](size_t i) {
    return i >= text_.size() || (static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80;
  };
  size_t from = offset > kContextBytes ? offset - kContextBytes : 0;
  while (!is_start(from)) ++from;
  size_t to = std::min(text_.size(), offset + kContextBytes);
  while (!is_start(to)) ++to;
  std::string snippet = from > 0 ? "..." : "";
  size_t caret = snippet.size();
  for (size_t i = from; i < to; ++i) {
    char c = text_[i];
    snippet += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
    if (i < offset && is_start(i)) ++caret;
  }
  if (to < text_.size()) snippet += "...";
  return arrow::Status::Invalid(language, " syntax error at position ", CharPosition(text_, offset),
                                ": ", what, "\n  ", snippet, "\n  ", std::string(caret, ' '), "^");
}

std::vector<Token> Lex(std::string_view text, LexMode mode) { return Lexer(text, mode).Run(); }

}  // namespace icefloe::iceberg::internal
