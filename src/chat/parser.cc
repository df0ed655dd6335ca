// Recursive-descent parser from tokens to the syntax tree, following jinja2's grammar and
// operator precedence; syntax errors name the template line. This file: statements.
#include "chat/parser.h"

#include <fmt/core.h>

#include <algorithm>
#include <functional>

namespace specd::chat {
namespace {

constexpr int kMaxNesting = 200;

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

Body parse_template(const std::vector<Token>& tokens) { return Parser(tokens).parse(); }

Parser::DepthGuard::DepthGuard(Parser* p) : parser(p) {
  if (++parser->depth_ > kMaxNesting) {
    parser->fail(fmt::format("template nested too deeply (more than {} levels)", kMaxNesting));
  }
}

const Token& Parser::next() {
  const Token& token = tokens_[pos_];
  if (pos_ + 1 < tokens_.size()) ++pos_;
  return token;
}

bool Parser::at_op(const char* op) const {
  return current().type == TokenType::kOperator && current().value == op;
}

bool Parser::at_name(const char* name) const {
  return current().type == TokenType::kName && current().value == name;
}

bool Parser::skip_op(const char* op) {
  if (!at_op(op)) return false;
  next();
  return true;
}

bool Parser::skip_name(const char* name) {
  if (!at_name(name)) return false;
  next();
  return true;
}

const Token& Parser::expect_op(const char* op) {
  if (!at_op(op)) {
    fail(fmt::format("expected token '{}', got '{}'", op, describe_token(current())));
  }
  return next();
}

const Token& Parser::expect_name(const char* name) {
  if (current().type != TokenType::kName || (name != nullptr && current().value != name)) {
    fail(fmt::format("expected token '{}', got '{}'", name != nullptr ? name : "name",
                     describe_token(current())));
  }
  return next();
}

const Token& Parser::expect(TokenType type) {
  if (current().type != type) {
    Token wanted;
    wanted.type = type;
    if (current().type == TokenType::kEof) {
      fail(fmt::format("unexpected end of template, expected '{}'", describe_token(wanted)));
    }
    fail(fmt::format("expected token '{}', got '{}'", describe_token(wanted),
                     describe_token(current())));
  }
  return next();
}

void Parser::fail(const std::string& message, int line) const {
  throw_at_line(line >= 0 ? line : current().line, message);
}

ExprPtr Parser::make(ExprKind kind, int line) const {
  auto expr = std::make_unique<Expr>();
  expr->kind = kind;
  expr->line = line;
  return expr;
}

Body Parser::parse() {
  Body body = subparse({});
  if (current().type != TokenType::kEof) fail("unexpected tokens after the end of the template");
  for (const Expr* expr : unknown_names_) {
    if (!expr->soft) {
      fail(fmt::format("No {} named '{}'.", expr->kind == ExprKind::kFilter ? "filter" : "test",
                       expr->name),
           expr->line);
    }
  }
  return body;
}

Body Parser::subparse(const std::vector<std::string>& end_tags) {
  Body body;
  while (current().type != TokenType::kEof) {
    const Token& token = current();
    if (token.type == TokenType::kData) {
      auto node = std::make_unique<Node>();
      node->kind = NodeKind::kData;
      node->line = token.line;
      node->text = token.value;
      body.push_back(std::move(node));
      next();
    } else if (token.type == TokenType::kVariableBegin) {
      next();
      auto node = std::make_unique<Node>();
      node->kind = NodeKind::kOutput;
      node->line = token.line;
      node->expr = parse_tuple(false, true, {}, false);
      expect(TokenType::kVariableEnd);
      body.push_back(std::move(node));
    } else if (token.type == TokenType::kBlockBegin) {
      next();
      if (!end_tags.empty() && current().type == TokenType::kName &&
          contains(end_tags, current().value)) {
        return body;
      }
      NodePtr node = parse_statement();
      expect(TokenType::kBlockEnd);
      if (node) body.push_back(std::move(node));
    } else {
      fail(fmt::format("unexpected '{}'", describe_token(token)));
    }
  }
  return body;
}

std::string Parser::end_tags_message(const std::vector<std::string>& end_tags) const {
  std::string names;
  for (size_t i = 0; i < end_tags.size(); ++i) {
    names += (i == 0 ? "'" : i + 1 == end_tags.size() ? " or '" : ", '") + end_tags[i] + "'";
  }
  return names;
}

Body Parser::parse_statements(const std::vector<std::string>& end_tags, bool drop_needle) {
  skip_op(":");
  expect(TokenType::kBlockEnd);
  Body body = subparse(end_tags);
  if (current().type == TokenType::kEof) {
    fail("unexpected end of template, expected " + end_tags_message(end_tags));
  }
  if (drop_needle) next();
  return body;
}

NodePtr Parser::parse_statement() {
  DepthGuard guard(this);
  const Token& token = current();
  if (token.type != TokenType::kName) fail("tag name expected");
  const std::string& tag = token.value;
  if (tag == "if") return parse_if();
  if (tag == "for") return parse_for();
  if (tag == "set") return parse_set();
  if (tag == "macro") return parse_macro();
  if (tag == "call") return parse_call_block();
  if (tag == "filter") return parse_filter_block();
  if (tag == "with") return parse_with();
  if (tag == "print") {
    auto node = std::make_unique<Node>();
    node->kind = NodeKind::kOutput;
    node->line = next().line;
    node->expr = parse_tuple(false, true, {}, false);
    return node;
  }
  if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) fail(fmt::format("'{}' outside loop", tag));
    auto node = std::make_unique<Node>();
    node->kind = tag == "break" ? NodeKind::kBreak : NodeKind::kContinue;
    node->line = next().line;
    return node;
  }
  if (tag == "generation") {
    auto node = std::make_unique<Node>();
    node->kind = NodeKind::kGeneration;
    node->line = next().line;
    node->body = parse_statements({"endgeneration"}, true);
    return node;
  }
  if (tag == "block" || tag == "extends" || tag == "include" || tag == "import" || tag == "from" ||
      tag == "autoescape" || tag == "do") {
    fail(fmt::format("unsupported tag '{}' (chat templates are single, self-contained templates)",
                     tag));
  }
  fail(fmt::format("Encountered unknown tag '{}'.", tag));
}

NodePtr Parser::parse_if() {
  auto node = std::make_unique<Node>();
  node->kind = NodeKind::kIf;
  node->line = expect_name("if").line;
  const bool saved_soft = soft_;
  soft_ = true;
  while (true) {
    node->conds.push_back(parse_tuple(false, false, {}, false));
    node->branches.push_back(parse_statements({"elif", "else", "endif"}, false));
    const Token& token = next();
    if (token.value == "elif") continue;
    if (token.value == "else") node->else_body = parse_statements({"endif"}, true);
    break;
  }
  soft_ = saved_soft;
  return node;
}

NodePtr Parser::parse_for() {
  auto node = std::make_unique<Node>();
  node->kind = NodeKind::kFor;
  node->line = expect_name("for").line;
  node->target = parse_assign_target(true, false, false, {"in"});
  expect_name("in");
  node->expr = parse_tuple(false, false, {"recursive"}, false);
  if (skip_name("if")) node->cond = parse_expression();
  if (at_name("recursive")) fail("recursive for loops are not supported");
  const bool saved_soft = soft_;
  soft_ = false;
  ++loop_depth_;
  node->body = parse_statements({"endfor", "else"}, false);
  --loop_depth_;
  if (next().value == "else") node->else_body = parse_statements({"endfor"}, true);
  soft_ = saved_soft;
  return node;
}

NodePtr Parser::parse_set() {
  auto node = std::make_unique<Node>();
  node->line = expect_name("set").line;
  node->target = parse_assign_target(true, false, true, {});
  if (skip_op("=")) {
    node->kind = NodeKind::kSet;
    node->expr = parse_tuple(false, true, {}, false);
    return node;
  }
  node->kind = NodeKind::kSetBlock;
  if (at_op("|")) node->expr = parse_filter(nullptr, false);
  const bool saved_soft = soft_;
  soft_ = false;
  node->body = parse_statements({"endset"}, true);
  soft_ = saved_soft;
  return node;
}

void Parser::parse_signature(MacroDef* macro) {
  expect_op("(");
  bool have_default = false;
  while (!at_op(")")) {
    if (!macro->params.empty()) expect_op(",");
    const Target param = parse_assign_target(false, true, false, {});
    macro->params.push_back(param.name);
    if (skip_op("=")) {
      macro->defaults.push_back(parse_expression());
      have_default = true;
    } else {
      if (have_default) fail("non-default argument follows default argument");
      macro->defaults.push_back(nullptr);
    }
  }
  expect_op(")");
}

NodePtr Parser::parse_macro() {
  auto node = std::make_unique<Node>();
  node->kind = NodeKind::kMacro;
  node->line = expect_name("macro").line;
  node->macro = std::make_unique<MacroDef>();
  node->macro->line = node->line;
  node->macro->name = parse_assign_target(false, true, false, {}).name;
  parse_signature(node->macro.get());
  const bool saved_soft = soft_;
  const int saved_loops = loop_depth_;
  soft_ = false;
  loop_depth_ = 0;
  node->macro->body = parse_statements({"endmacro"}, true);
  soft_ = saved_soft;
  loop_depth_ = saved_loops;
  return node;
}

NodePtr Parser::parse_call_block() {
  auto node = std::make_unique<Node>();
  node->kind = NodeKind::kCallBlock;
  node->line = expect_name("call").line;
  node->macro = std::make_unique<MacroDef>();
  node->macro->name = "caller";
  node->macro->line = node->line;
  if (at_op("(")) parse_signature(node->macro.get());
  node->expr = parse_expression();
  if (node->expr->kind != ExprKind::kCall) fail("expected call", node->line);
  const bool saved_soft = soft_;
  const int saved_loops = loop_depth_;
  soft_ = false;
  loop_depth_ = 0;
  node->macro->body = parse_statements({"endcall"}, true);
  soft_ = saved_soft;
  loop_depth_ = saved_loops;
  return node;
}

NodePtr Parser::parse_filter_block() {
  auto node = std::make_unique<Node>();
  node->kind = NodeKind::kFilterBlock;
  node->line = expect_name("filter").line;
  node->expr = parse_filter(nullptr, true);
  const bool saved_soft = soft_;
  soft_ = false;
  node->body = parse_statements({"endfilter"}, true);
  soft_ = saved_soft;
  return node;
}

NodePtr Parser::parse_with() {
  auto node = std::make_unique<Node>();
  node->kind = NodeKind::kWith;
  node->line = expect_name("with").line;
  while (current().type != TokenType::kBlockEnd) {
    if (!node->targets.empty()) expect_op(",");
    node->targets.push_back(parse_assign_target(true, false, false, {}));
    expect_op("=");
    node->values.push_back(parse_expression());
  }
  const bool saved_soft = soft_;
  soft_ = false;
  node->body = parse_statements({"endwith"}, true);
  soft_ = saved_soft;
  return node;
}

Target Parser::parse_assign_target(bool with_tuple, bool name_only, bool with_namespace,
                                   const std::vector<std::string>& extra_end) {
  const auto check_name = [this](const Token& token) {
    static const char* const kConstants[] = {"true", "false", "none", "True", "False", "None"};
    for (const char* constant : kConstants) {
      if (token.value == constant) fail("can't assign to 'const'", token.line);
    }
  };
  Target target;
  if (name_only) {
    const Token& token = expect_name();
    check_name(token);
    target.name = token.value;
    return target;
  }
  if (with_namespace && current().type == TokenType::kName && look().type == TokenType::kOperator &&
      look().value == ".") {
    target.kind = Target::Kind::kNamespaceAttr;
    target.name = next().value;
    next();  // the dot
    target.attr = expect_name().value;
    return target;
  }
  if (!with_tuple) fail("expected an assignment target");
  // A "simplified" tuple of primaries: names or parenthesised tuples of names.
  const std::function<Target()> parse_one = [&]() -> Target {
    if (skip_op("(")) {
      Target inner;
      inner.kind = Target::Kind::kTuple;
      while (!at_op(")")) {
        if (!inner.items.empty()) expect_op(",");
        if (at_op(")")) break;
        inner.items.push_back(parse_one());
        if (!at_op(",")) break;
      }
      expect_op(")");
      if (inner.items.size() == 1 && tokens_[pos_ - 2].value != ",") return inner.items[0];
      return inner;
    }
    if (current().type != TokenType::kName) {
      fail(fmt::format("can't assign to '{}'", describe_token(current())));
    }
    check_name(current());
    Target name;
    name.name = next().value;
    return name;
  };
  std::vector<Target> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (current().type == TokenType::kBlockEnd || at_op(")") ||
        (current().type == TokenType::kName && contains(extra_end, current().value)) ||
        at_op("=") || at_op("|")) {
      break;
    }
    items.push_back(parse_one());
    if (at_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (items.empty())
    fail(fmt::format("expected an assignment target, got '{}'", describe_token(current())));
  if (!is_tuple) return items[0];
  target.kind = Target::Kind::kTuple;
  target.items = std::move(items);
  return target;
}

}  // namespace specd::chat
