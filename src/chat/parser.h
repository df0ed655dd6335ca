// Recursive-descent parser from tokens to the syntax tree, following jinja2's grammar and
// operator precedence; syntax errors name the template line.
#pragma once

#include <string>
#include <vector>

#include "chat/ast.h"
#include "chat/lexer.h"

namespace specd::chat {

// Parses a whole template; throws specd::Error "chat template line N: ..." on syntax errors and
// unsupported constructs (template inheritance, include/import, unknown tags).
Body parse_template(const std::vector<Token>& tokens);

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}
  Body parse();

 private:
  // Statements (parser.cc).
  Body subparse(const std::vector<std::string>& end_tags);
  Body parse_statements(const std::vector<std::string>& end_tags, bool drop_needle);
  NodePtr parse_statement();
  NodePtr parse_if();
  NodePtr parse_for();
  NodePtr parse_set();
  NodePtr parse_macro();
  NodePtr parse_call_block();
  NodePtr parse_filter_block();
  NodePtr parse_with();
  void parse_signature(MacroDef* macro);
  Target parse_assign_target(bool with_tuple, bool name_only, bool with_namespace,
                             const std::vector<std::string>& extra_end);
  std::string end_tags_message(const std::vector<std::string>& end_tags) const;

  // Expressions (parser_expr.cc).
  ExprPtr parse_expression(bool with_condexpr = true);
  ExprPtr parse_tuple(bool simplified, bool with_condexpr,
                      const std::vector<std::string>& extra_end, bool explicit_parentheses);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  ExprPtr parse_call(ExprPtr node);
  void parse_call_args(Expr* call);
  ExprPtr parse_filter(ExprPtr node, bool start_inline);
  ExprPtr parse_test(ExprPtr node);
  bool is_tuple_end(const std::vector<std::string>& extra_end) const;
  // Marks the filters and tests of an inline if's true branch as soft.
  void mark_soft(Expr* expr);

  // Token stream.
  const Token& current() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_]; }
  const Token& next();
  bool at_op(const char* op) const;
  bool at_name(const char* name) const;
  bool skip_op(const char* op);
  bool skip_name(const char* name);
  const Token& expect_op(const char* op);
  const Token& expect_name(const char* name = nullptr);
  const Token& expect(TokenType type);
  [[noreturn]] void fail(const std::string& message, int line = -1) const;
  ExprPtr make(ExprKind kind, int line) const;

  // Limits recursion on hostile input.
  struct DepthGuard {
    DepthGuard(Parser* parser);
    ~DepthGuard() { --parser->depth_; }
    Parser* parser;
  };

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;                      // for break/continue
  bool soft_ = false;                       // inside an if or inline if (see Expr::soft)
  std::vector<const Expr*> unknown_names_;  // filters and tests with unknown names
};

}  // namespace specd::chat
