// Splits a Jinja2 template into tokens, applying whitespace control exactly as jinja2 does with
// trim_blocks=True and lstrip_blocks=True (the environment transformers renders chat templates in).
#include "chat/lexer.h"

#include <fmt/core.h>

#include <string_view>

#include "chat/literals.h"
#include "chat/utf8.h"
#include "chat/value.h"

namespace specd::chat {
namespace {

// jinja2 turns \r\n, \r and \n into \n and drops one trailing newline
// (keep_trailing_newline=False).
std::string normalize_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

int count_newlines(std::string_view s) {
  int n = 0;
  for (const char c : s) n += c == '\n';
  return n;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) lex_root();
    push(TokenType::kEof, "");
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const { throw_at_line(line_, message); }

  void push(TokenType type, std::string value) {
    Token token;
    token.type = type;
    token.value = std::move(value);
    token.line = line_;
    tokens_.push_back(std::move(token));
  }

  // Length of Python whitespace starting at `pos`.
  size_t whitespace_at(size_t pos) const {
    size_t end = pos;
    while (end < src_.size()) {
      size_t next = end;
      if (!py_isspace(decode_utf8(src_, &next))) break;
      end = next;
    }
    return end - pos;
  }

  // Root state: template data up to the next tag, with the tag's left whitespace control.
  void lex_root() {
    size_t tag = pos_;
    char kind = 0;
    for (; tag + 1 < src_.size(); ++tag) {
      if (src_[tag] == '{' &&
          (src_[tag + 1] == '{' || src_[tag + 1] == '%' || src_[tag + 1] == '#')) {
        kind = src_[tag + 1];
        break;
      }
    }
    if (kind == 0) {
      emit_data(src_.substr(pos_), 0);
      pos_ = src_.size();
      return;
    }
    std::string text = src_.substr(pos_, tag - pos_);
    const char sign =
        tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
    int newlines_stripped = 0;
    if (sign == '-') {
      const std::string stripped = py_strip(text, nullptr, false, true);
      newlines_stripped = count_newlines(std::string_view(text).substr(stripped.size()));
      text = stripped;
    } else if (sign != '+' && kind != '{') {
      // lstrip_blocks: drop spaces and tabs between the start of the line and a block tag.
      const size_t newline = text.rfind('\n');
      const size_t l_pos = newline == std::string::npos ? 0 : newline + 1;
      if ((l_pos > 0 || line_starting_) && l_pos < text.size() &&
          whitespace_at(pos_ + l_pos) == text.size() - l_pos) {
        text.resize(l_pos);
      }
    }
    emit_data(text, newlines_stripped);
    pos_ = tag + 2 + (sign != 0 ? 1 : 0);
    line_starting_ = false;
    if (kind == '#') {
      lex_comment();
    } else if (kind == '%' && lex_raw()) {
      // raw block handled
    } else {
      lex_tag(kind == '{');
    }
  }

  void emit_data(const std::string& text, int newlines_stripped) {
    if (!text.empty()) push(TokenType::kData, text);
    line_ += count_newlines(text) + newlines_stripped;
  }

  // Consumes a tag's right side: `+%}` keeps what follows, `-%}` strips all following
  // whitespace, plain `%}` (and `#}`) drops one newline (trim_blocks; not after `}}`).
  void consume_end(char sign, size_t delimiter_end, bool trim_newline) {
    pos_ = delimiter_end;
    if (sign == '-') {
      const size_t ws = whitespace_at(pos_);
      line_ += count_newlines(std::string_view(src_).substr(pos_, ws));
      line_starting_ = ws > 0 && src_[pos_ + ws - 1] == '\n';
      pos_ += ws;
    } else if (sign == 0 && trim_newline && pos_ < src_.size() && src_[pos_] == '\n') {
      ++line_;
      ++pos_;
      line_starting_ = true;
    } else {
      line_starting_ = false;
    }
  }

  void lex_comment() {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail("Missing end of comment tag");
    size_t content_end = end;
    char sign = 0;
    if (end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+')) {
      sign = src_[end - 1];
      content_end = end - 1;
    }
    line_ += count_newlines(std::string_view(src_).substr(pos_, content_end - pos_));
    consume_end(sign, end + 2, true);
  }

  // `{% raw %}...{% endraw %}`: the body is data, verbatim. Returns false if this is not a raw tag.
  bool lex_raw() {
    size_t p = pos_ + whitespace_at(pos_);
    if (src_.compare(p, 3, "raw") != 0 || (p + 3 < src_.size() && is_name_char(src_[p + 3]))) {
      return false;
    }
    p += 3;
    p += whitespace_at(p);
    if (src_.compare(p, 3, "-%}") == 0) {
      p += 3;
      p += whitespace_at(p);  // no trim_blocks after a raw start tag, as in jinja2
    } else if (src_.compare(p, 2, "%}") == 0) {
      p += 2;
    } else {
      return false;
    }
    line_ += count_newlines(std::string_view(src_).substr(pos_, p - pos_));
    // Find `{%[-+]? endraw [-+]?%}`.
    for (size_t search = p;; ++search) {
      search = src_.find("{%", search);
      if (search == std::string::npos) fail("Missing end of raw directive");
      size_t q = search + 2;
      const char open_sign = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : 0;
      if (open_sign != 0) ++q;
      q += whitespace_at(q);
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      q += whitespace_at(q);
      char close_sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) close_sign = src_[q++];
      if (src_.compare(q, 2, "%}") != 0) continue;
      std::string text = src_.substr(p, search - p);
      int newlines_stripped = 0;
      if (open_sign == '-') {
        const std::string stripped = py_strip(text, nullptr, false, true);
        newlines_stripped = count_newlines(std::string_view(text).substr(stripped.size()));
        text = stripped;
      } else if (open_sign != '+') {
        const size_t newline = text.rfind('\n');
        const size_t l_pos = newline == std::string::npos ? 0 : newline + 1;
        if (l_pos > 0 && l_pos < text.size() && whitespace_at(p + l_pos) == text.size() - l_pos) {
          text.resize(l_pos);
        }
      }
      emit_data(text, newlines_stripped);
      line_ += count_newlines(std::string_view(src_).substr(search, q - search));
      consume_end(close_sign, q + 2, true);
      return true;
    }
  }

  // Inside {{ }} or {% %}: expression tokens up to the (bracket-balanced) end delimiter.
  void lex_tag(bool variable) {
    push(variable ? TokenType::kVariableBegin : TokenType::kBlockBegin, "");
    std::string balance;  // expected closing brackets
    const char end_char = variable ? '}' : '%';
    while (true) {
      if (pos_ >= src_.size()) {
        fail(variable ? "unexpected end of template, expected '}}'"
                      : "unexpected end of template, expected '%}'");
      }
      if (balance.empty()) {
        char sign = 0;
        size_t p = pos_;
        if (src_[p] == '-' || (src_[p] == '+' && !variable)) sign = src_[p++];
        if (p + 1 < src_.size() && src_[p] == end_char && src_[p + 1] == '}') {
          push(variable ? TokenType::kVariableEnd : TokenType::kBlockEnd, "");
          consume_end(sign, p + 2, !variable);
          return;
        }
      }
      const char c = src_[pos_];
      if (const size_t ws = whitespace_at(pos_); ws > 0) {
        line_ += count_newlines(std::string_view(src_).substr(pos_, ws));
        pos_ += ws;
      } else if (size_t n = match_float_literal(src_, pos_); n > 0) {
        lex_number(n, true);
      } else if (size_t n = match_integer_literal(src_, pos_); n > 0) {
        lex_number(n, false);
      } else if (is_name_start(c)) {
        size_t end = pos_;
        while (end < src_.size() && is_name_char(src_[end])) ++end;
        push(TokenType::kName, src_.substr(pos_, end - pos_));
        pos_ = end;
      } else if (c == '\'' || c == '"') {
        lex_string();
      } else {
        lex_operator(&balance);
      }
    }
  }

  void lex_number(size_t n, bool is_float) {
    Token token;
    token.line = line_;
    token.value = src_.substr(pos_, n);
    if (is_float) {
      token.type = TokenType::kFloat;
      token.float_value = parse_float_literal(token.value);
    } else {
      token.type = TokenType::kInteger;
      if (!parse_integer_literal(token.value, &token.int_value)) {
        fail("integer literal " + token.value + " is too large");
      }
    }
    tokens_.push_back(std::move(token));
    pos_ += n;
  }

  void lex_string() {
    StringLiteral literal = scan_string_literal(src_, pos_);
    if (!literal.error.empty()) fail(literal.error);
    Token token;
    token.type = TokenType::kString;
    token.value = std::move(literal.value);
    token.line = line_;
    tokens_.push_back(std::move(token));
    line_ += literal.newlines;
    pos_ = literal.end;
  }

  void lex_operator(std::string* balance) {
    static const char* const kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        push(TokenType::kOperator, op);
        pos_ += 2;
        return;
      }
    }
    const char c = src_[pos_];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      size_t next = pos_;
      decode_utf8(src_, &next);
      fail(fmt::format("unexpected char '{}'", src_.substr(pos_, next - pos_)));
    }
    if (c == '(' || c == '[' || c == '{') {
      if (balance->size() >= 256) fail("brackets nested too deeply");
      balance->push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance->empty()) fail(fmt::format("unexpected '{}'", c));
      if (balance->back() != c)
        fail(fmt::format("unexpected '{}', expected '{}'", c, balance->back()));
      balance->pop_back();
    }
    push(TokenType::kOperator, std::string(1, c));
    ++pos_;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize_template(const std::string& source) {
  return Lexer(normalize_newlines(source)).run();
}

std::string describe_token(const Token& token) {
  switch (token.type) {
    case TokenType::kData:
      return "template data";
    case TokenType::kVariableBegin:
      return "begin of print statement";
    case TokenType::kVariableEnd:
      return "end of print statement";
    case TokenType::kBlockBegin:
      return "begin of statement block";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kName:
      return token.value;
    case TokenType::kString:
      return "string";
    case TokenType::kInteger:
      return "integer";
    case TokenType::kFloat:
      return "float";
    case TokenType::kOperator:
      return token.value;
    case TokenType::kEof:
      return "end of template";
  }
  return "token";
}

}  // namespace specd::chat
