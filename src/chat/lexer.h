// Splits a Jinja2 template into tokens, applying whitespace control exactly as jinja2 does with
// trim_blocks=True and lstrip_blocks=True (the environment transformers renders chat templates in).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace specd::chat {

enum class TokenType {
  kData,           // template text outside tags
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string value;  // data text, name, unescaped string literal, operator
  int64_t int_value = 0;
  double float_value = 0.0;
  int line = 1;
};

// Tokenizes `source`; throws specd::Error "chat template line N: ..." on lexical errors
// (unterminated comment or string, unexpected character, unbalanced brackets).
std::vector<Token> tokenize_template(const std::string& source);

// A short description of a token for syntax error messages, e.g. "end of statement block".
std::string describe_token(const Token& token);

}  // namespace specd::chat
