// Recursive-descent parser from tokens to the syntax tree, following jinja2's grammar and
// operator precedence; syntax errors name the template line. This file: expressions.
#include <fmt/core.h>

#include "chat/filters.h"
#include "chat/parser.h"

namespace specd::chat {
namespace {

bool is_compare_op(const Token& token) {
  if (token.type != TokenType::kOperator) return false;
  const std::string& v = token.value;
  return v == "==" || v == "!=" || v == "<" || v == "<=" || v == ">" || v == ">=";
}

}  // namespace

void Parser::mark_soft(Expr* expr) {
  if (expr == nullptr) return;
  expr->soft = true;
  for (Expr* child : {expr->a.get(), expr->b.get(), expr->c.get(), expr->dyn_args.get(),
                      expr->dyn_kwargs.get()}) {
    mark_soft(child);
  }
  for (auto& item : expr->items) mark_soft(item.get());
  for (auto& [name, value] : expr->kwargs) mark_soft(value.get());
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(this);
  if (!with_condexpr) return parse_or();
  ExprPtr expr = parse_or();
  while (at_name("if")) {
    const int line = next().line;
    const bool saved_soft = soft_;
    soft_ = true;
    auto cond = make(ExprKind::kCondExpr, line);
    cond->a = parse_or();  // the condition
    mark_soft(expr.get());
    cond->b = std::move(expr);
    if (skip_name("else")) cond->c = parse_expression();
    soft_ = saved_soft;
    expr = std::move(cond);
  }
  return expr;
}

bool Parser::is_tuple_end(const std::vector<std::string>& extra_end) const {
  const Token& token = current();
  if (token.type == TokenType::kVariableEnd || token.type == TokenType::kBlockEnd ||
      (token.type == TokenType::kOperator && token.value == ")")) {
    return true;
  }
  if (token.type != TokenType::kName) return false;
  for (const auto& name : extra_end) {
    if (token.value == name) return true;
  }
  return false;
}

ExprPtr Parser::parse_tuple(bool simplified, bool with_condexpr,
                            const std::vector<std::string>& extra_end, bool explicit_parentheses) {
  const int line = current().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
    if (at_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parentheses) {
      fail(fmt::format("Expected an expression, got '{}'", describe_token(current())));
    }
  }
  auto tuple = make(ExprKind::kTuple, line);
  tuple->items = std::move(items);
  return tuple;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (at_name("or")) {
    auto node = make(ExprKind::kOr, next().line);
    node->a = std::move(left);
    node->b = parse_and();
    left = std::move(node);
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (at_name("and")) {
    auto node = make(ExprKind::kAnd, next().line);
    node->a = std::move(left);
    node->b = parse_not();
    left = std::move(node);
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (at_name("not")) {
    DepthGuard guard(this);
    auto node = make(ExprKind::kNot, next().line);
    node->a = parse_not();
    return node;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const int line = current().line;
  ExprPtr expr = parse_math1();
  std::vector<std::string> ops;
  std::vector<ExprPtr> operands;
  while (true) {
    if (is_compare_op(current())) {
      ops.push_back(next().value);
    } else if (at_name("in")) {
      next();
      ops.push_back("in");
    } else if (at_name("not") && look().type == TokenType::kName && look().value == "in") {
      next();
      next();
      ops.push_back("notin");
    } else {
      break;
    }
    operands.push_back(parse_math1());
  }
  if (ops.empty()) return expr;
  auto node = make(ExprKind::kCompare, line);
  node->a = std::move(expr);
  node->ops = std::move(ops);
  node->items = std::move(operands);
  return node;
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (at_op("+") || at_op("-")) {
    auto node = make(ExprKind::kBinary, current().line);
    node->name = next().value;
    node->a = std::move(left);
    node->b = parse_concat();
    left = std::move(node);
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  ExprPtr left = parse_math2();
  while (at_op("~")) {
    auto node = make(ExprKind::kBinary, next().line);
    node->name.assign(1, '~');
    node->a = std::move(left);
    node->b = parse_math2();
    left = std::move(node);
  }
  return left;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
    auto node = make(ExprKind::kBinary, current().line);
    node->name = next().value;
    node->a = std::move(left);
    node->b = parse_pow();
    left = std::move(node);
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (at_op("**")) {
    auto node = make(ExprKind::kBinary, next().line);
    node->name = "**";
    node->a = std::move(left);
    node->b = parse_unary(true);
    left = std::move(node);
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(this);
  ExprPtr node;
  if (at_op("-") || at_op("+")) {
    const bool neg = current().value == "-";
    node = make(neg ? ExprKind::kNeg : ExprKind::kPos, next().line);
    node->a = parse_unary(false);
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  DepthGuard guard(this);
  const Token& token = current();
  if (token.type == TokenType::kName) {
    ExprPtr node;
    if (token.value == "true" || token.value == "True" || token.value == "false" ||
        token.value == "False") {
      node = make(ExprKind::kConst, token.line);
      node->value = Value(token.value == "true" || token.value == "True");
    } else if (token.value == "none" || token.value == "None") {
      node = make(ExprKind::kConst, token.line);
      node->value = Value::none();
    } else {
      node = make(ExprKind::kName, token.line);
      node->name = token.value;
    }
    next();
    return node;
  }
  if (token.type == TokenType::kString) {
    auto node = make(ExprKind::kConst, token.line);
    std::string text;
    while (current().type == TokenType::kString) text += next().value;  // "a" "b" == "ab"
    node->value = Value(std::move(text));
    return node;
  }
  if (token.type == TokenType::kInteger || token.type == TokenType::kFloat) {
    auto node = make(ExprKind::kConst, token.line);
    node->value =
        token.type == TokenType::kInteger ? Value(token.int_value) : Value(token.float_value);
    next();
    return node;
  }
  if (at_op("(")) {
    next();
    ExprPtr node = parse_tuple(false, true, {}, true);
    expect_op(")");
    return node;
  }
  if (at_op("[")) return parse_list();
  if (at_op("{")) return parse_dict();
  if (token.type == TokenType::kEof) fail("unexpected end of template");
  fail(fmt::format("unexpected '{}'", describe_token(token)));
}

ExprPtr Parser::parse_list() {
  auto node = make(ExprKind::kList, expect_op("[").line);
  while (!at_op("]")) {
    if (!node->items.empty()) expect_op(",");
    if (at_op("]")) break;
    node->items.push_back(parse_expression());
  }
  expect_op("]");
  return node;
}

ExprPtr Parser::parse_dict() {
  auto node = make(ExprKind::kDict, expect_op("{").line);
  while (!at_op("}")) {
    if (!node->items.empty()) expect_op(",");
    if (at_op("}")) break;
    node->items.push_back(parse_expression());
    expect_op(":");
    node->items.push_back(parse_expression());
  }
  expect_op("}");
  return node;
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (at_op(".") || at_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (at_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (at_op("|")) {
      node = parse_filter(std::move(node), false);
    } else if (at_name("is")) {
      node = parse_test(std::move(node));
    } else if (at_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  DepthGuard guard(this);
  const Token& token = next();
  if (token.value == ".") {
    const Token& attr = next();
    if (attr.type == TokenType::kName) {
      auto get = make(ExprKind::kGetAttr, token.line);
      get->a = std::move(node);
      get->name = attr.value;
      return get;
    }
    if (attr.type != TokenType::kInteger) fail("expected name or number", attr.line);
    auto get = make(ExprKind::kGetItem, token.line);
    get->a = std::move(node);
    get->b = make(ExprKind::kConst, attr.line);
    get->b->value = Value(attr.int_value);
    return get;
  }
  std::vector<ExprPtr> args;
  while (!at_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  auto get = make(ExprKind::kGetItem, token.line);
  get->a = std::move(node);
  if (args.size() == 1) {
    get->b = std::move(args[0]);
  } else {
    get->b = make(ExprKind::kTuple, token.line);
    get->b->items = std::move(args);
  }
  return get;
}

ExprPtr Parser::parse_subscribed() {
  const int line = current().line;
  ExprPtr start;
  if (at_op(":")) {
    next();
  } else {
    start = parse_expression();
    if (!at_op(":")) return start;
    next();
  }
  auto slice = make(ExprKind::kSlice, line);
  slice->items.push_back(std::move(start));
  if (at_op(":") || at_op("]") || at_op(",")) {
    slice->items.push_back(nullptr);
  } else {
    slice->items.push_back(parse_expression());
  }
  if (at_op(":")) {
    next();
    slice->items.push_back(at_op("]") || at_op(",") ? nullptr : parse_expression());
  } else {
    slice->items.push_back(nullptr);
  }
  return slice;
}

ExprPtr Parser::parse_call(ExprPtr node) {
  DepthGuard guard(this);
  auto call = make(ExprKind::kCall, current().line);
  call->a = std::move(node);
  parse_call_args(call.get());
  return call;
}

void Parser::parse_call_args(Expr* call) {
  const int line = expect_op("(").line;
  const auto ensure = [&](bool ok) {
    if (!ok) fail("invalid syntax for function call expression", line);
  };
  bool require_comma = false;
  while (!at_op(")")) {
    if (require_comma) {
      expect_op(",");
      if (at_op(")")) break;  // trailing comma
    }
    if (at_op("*")) {
      ensure(!call->dyn_args && !call->dyn_kwargs);
      next();
      call->dyn_args = parse_expression();
    } else if (at_op("**")) {
      ensure(!call->dyn_kwargs);
      next();
      call->dyn_kwargs = parse_expression();
    } else if (current().type == TokenType::kName && look().type == TokenType::kOperator &&
               look().value == "=") {
      ensure(!call->dyn_kwargs);
      std::string key = next().value;
      next();
      call->kwargs.emplace_back(std::move(key), parse_expression());
    } else {
      ensure(!call->dyn_args && !call->dyn_kwargs && call->kwargs.empty());
      call->items.push_back(parse_expression());
    }
    require_comma = true;
  }
  expect_op(")");
}

ExprPtr Parser::parse_filter(ExprPtr node, bool start_inline) {
  while (at_op("|") || start_inline) {
    if (!start_inline) next();
    const Token& token = expect_name();
    std::string name = token.value;
    while (at_op(".")) {
      next();
      name += "." + expect_name().value;
    }
    auto filter = make(ExprKind::kFilter, token.line);
    filter->a = std::move(node);
    filter->soft = soft_;
    if (!is_known_filter(name)) unknown_names_.push_back(filter.get());
    filter->name = std::move(name);
    if (at_op("(")) parse_call_args(filter.get());
    node = std::move(filter);
    start_inline = false;
  }
  return node;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  const int line = expect_name("is").line;
  const bool negated = skip_name("not");
  std::string name = expect_name().value;
  while (at_op(".")) {
    next();
    name += "." + expect_name().value;
  }
  auto test = make(ExprKind::kTest, line);
  test->a = std::move(node);
  test->soft = soft_;
  if (!is_known_test(name)) unknown_names_.push_back(test.get());
  test->name = std::move(name);
  const Token& token = current();
  if (at_op("(")) {
    parse_call_args(test.get());
  } else if ((token.type == TokenType::kName || token.type == TokenType::kString ||
              token.type == TokenType::kInteger || token.type == TokenType::kFloat || at_op("[") ||
              at_op("{")) &&
             !(token.type == TokenType::kName &&
               (token.value == "else" || token.value == "or" || token.value == "and"))) {
    if (at_name("is")) fail("You cannot chain multiple tests with is");
    test->items.push_back(parse_postfix(parse_primary()));
  }
  if (!negated) return test;
  auto inverted = make(ExprKind::kNot, line);
  inverted->a = std::move(test);
  return inverted;
}

}  // namespace specd::chat
