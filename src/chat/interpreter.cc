// Executes a parsed chat template: scopes, statements and expressions with jinja2's semantics
// (the sandboxed environment of transformers' apply_chat_template). This file: statements.
#include "chat/interpreter.h"

#include <fmt/core.h>

#include <algorithm>

#include "chat/filters.h"
#include "chat/objects.h"
#include "chat/utf8.h"

namespace specd::chat {

const Value* Scope::find(const std::string& name) const {
  for (const Scope* scope = this; scope != nullptr; scope = scope->parent_.get()) {
    for (const auto& [key, value] : scope->vars_) {
      if (key == name) return &value;
    }
  }
  return nullptr;
}

void Scope::set(const std::string& name, Value value) {
  for (auto& [key, existing] : vars_) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  vars_.emplace_back(name, std::move(value));
}

Interpreter::CallGuard::CallGuard(Interpreter* i) : interp(i) {
  if (++interp->call_depth_ > interp->limits_.max_call_depth) {
    --interp->call_depth_;
    throw RuntimeError(
        fmt::format("calls nested too deeply (more than {})", interp->limits_.max_call_depth));
  }
}

Interpreter::~Interpreter() {
  for (const auto& weak : tracked_) {
    if (const ObjectPtr object = weak.lock()) object->release();
  }
}

void Interpreter::track(const ObjectPtr& object) {
  if (tracked_.size() == tracked_.capacity() && tracked_.size() >= 64) {
    tracked_.erase(std::remove_if(tracked_.begin(), tracked_.end(),
                                  [](const auto& weak) { return weak.expired(); }),
                   tracked_.end());
  }
  tracked_.push_back(object);
}

void Interpreter::step() {
  if (++steps_ > limits_.max_steps) {
    throw RuntimeError(fmt::format("template exceeded {} steps", limits_.max_steps));
  }
}

void Interpreter::check_size(size_t size) const {
  if (size > limits_.max_output_bytes) {
    throw RuntimeError(fmt::format("template output exceeds {} bytes", limits_.max_output_bytes));
  }
}

void Interpreter::append(std::string* out, const std::string& text) const {
  check_size(out->size() + text.size());
  *out += text;
}

std::string Interpreter::render(const Body& body, const ScopePtr& scope) {
  std::string out;
  exec_body(body, scope, &out);
  return out;
}

Interpreter::Flow Interpreter::exec_body(const Body& body, const ScopePtr& scope,
                                         std::string* out) {
  for (const NodePtr& node : body) {
    const Flow flow = exec(*node, scope, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Node& node, const ScopePtr& scope, std::string* out) {
  try {
    step();
    switch (node.kind) {
      case NodeKind::kData:
        append(out, node.text);
        return Flow::kNormal;
      case NodeKind::kOutput:
        append(out, to_str(eval(*node.expr, scope)));
        return Flow::kNormal;
      case NodeKind::kIf:
        for (size_t i = 0; i < node.conds.size(); ++i) {
          if (truthy(eval(*node.conds[i], scope))) return exec_body(node.branches[i], scope, out);
        }
        return exec_body(node.else_body, scope, out);
      case NodeKind::kFor:
        return exec_for(node, scope, out);
      case NodeKind::kSet:
        assign(node.target, eval(*node.expr, scope), scope);
        return Flow::kNormal;
      case NodeKind::kSetBlock: {
        std::string captured;
        exec_body(node.body, std::make_shared<Scope>(scope), &captured);
        Value value(std::move(captured));
        if (node.expr) value = eval_filter_chain(*node.expr, scope, &value);
        assign(node.target, value, scope);
        return Flow::kNormal;
      }
      case NodeKind::kMacro: {
        const ObjectPtr macro = std::make_shared<Macro>(node.macro.get(), scope);
        track(macro);
        scope->set(node.macro->name, Value(macro));
        return Flow::kNormal;
      }
      case NodeKind::kCallBlock: {
        const Expr& call_expr = *node.expr;
        const Value callee = eval(*call_expr.a, scope);
        CallArgs args = eval_args(call_expr, scope);
        const ObjectPtr caller = std::make_shared<Macro>(node.macro.get(), scope);
        track(caller);
        args.named.emplace_back("caller", Value(caller));
        append(out, to_str(call(callee, std::move(args))));
        return Flow::kNormal;
      }
      case NodeKind::kFilterBlock: {
        std::string captured;
        exec_body(node.body, std::make_shared<Scope>(scope), &captured);
        const Value input(std::move(captured));
        append(out, to_str(eval_filter_chain(*node.expr, scope, &input)));
        return Flow::kNormal;
      }
      case NodeKind::kWith: {
        auto inner = std::make_shared<Scope>(scope);
        for (size_t i = 0; i < node.targets.size(); ++i) {
          assign(node.targets[i], eval(*node.values[i], scope), inner);
        }
        return exec_body(node.body, inner, out);
      }
      case NodeKind::kGeneration:
        return exec_body(node.body, std::make_shared<Scope>(scope), out);
      case NodeKind::kBreak:
        return Flow::kBreak;
      case NodeKind::kContinue:
        return Flow::kContinue;
    }
  } catch (const RuntimeError& error) {
    throw_at_line(node.line, error.what());
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec_for(const Node& node, const ScopePtr& scope, std::string* out) {
  std::vector<Value> items = iterate(eval(*node.expr, scope));
  if (node.cond) {
    std::vector<Value> kept;
    for (Value& item : items) {
      step();
      auto filter_scope = std::make_shared<Scope>(scope);
      assign(node.target, item, filter_scope);
      if (truthy(eval(*node.cond, filter_scope))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec_body(node.else_body, std::make_shared<Scope>(scope), out);
    return Flow::kNormal;
  }
  const auto shared_items = std::make_shared<const std::vector<Value>>(std::move(items));
  auto loop = std::make_shared<LoopContext>(shared_items);
  track(loop);
  const Value loop_value{ObjectPtr(loop)};
  for (size_t i = 0; i < shared_items->size(); ++i) {
    step();
    loop->set_index(i);
    auto body_scope = std::make_shared<Scope>(scope);
    body_scope->set("loop", loop_value);
    assign(node.target, (*shared_items)[i], body_scope);
    if (exec_body(node.body, body_scope, out) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Interpreter::assign(const Target& target, const Value& value, const ScopePtr& scope) {
  switch (target.kind) {
    case Target::Kind::kName:
      scope->set(target.name, value);
      return;
    case Target::Kind::kNamespaceAttr: {
      const Value* object = scope->find(target.name);
      auto* ns = object != nullptr && object->is_object()
                     ? dynamic_cast<Namespace*>(&object->object())
                     : nullptr;
      if (ns == nullptr) throw RuntimeError("cannot assign attribute on non-namespace object");
      ns->set_attr(target.attr, value);
      return;
    }
    case Target::Kind::kTuple: {
      if (!value.is_list() && !value.is_string() && !value.is_dict() && !value.is_undefined()) {
        throw RuntimeError(fmt::format("cannot unpack non-iterable {} object", type_name(value)));
      }
      const std::vector<Value> items = iterate(value);
      if (items.size() < target.items.size()) {
        throw RuntimeError(fmt::format("not enough values to unpack (expected {}, got {})",
                                       target.items.size(), items.size()));
      }
      if (items.size() > target.items.size()) {
        throw RuntimeError(
            fmt::format("too many values to unpack (expected {})", target.items.size()));
      }
      for (size_t i = 0; i < items.size(); ++i) assign(target.items[i], items[i], scope);
      return;
    }
  }
}

std::vector<Value> Interpreter::iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return value.list().items;
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(value.dict().items.size());
      for (const auto& [key, item] : value.dict().items) keys.push_back(key);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      const std::string& s = value.str();
      for (size_t pos = 0; pos < s.size();) {
        const size_t start = pos;
        decode_utf8(s, &pos);
        chars.emplace_back(s.substr(start, pos - start));
      }
      return chars;
    }
    default:
      throw RuntimeError(fmt::format("'{}' object is not iterable", type_name(value)));
  }
}

Value Interpreter::call_macro(const MacroDef& macro, const ScopePtr& closure, CallArgs args) {
  CallGuard guard(this);
  step();
  auto scope = std::make_shared<Scope>(closure);
  const size_t n = macro.params.size();
  std::vector<Value> varargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < n) {
      scope->set(macro.params[i], std::move(args.positional[i]));
    } else {
      varargs.push_back(std::move(args.positional[i]));
    }
  }
  std::vector<std::pair<Value, Value>> kwargs;
  for (size_t i = args.positional.size(); i < n; ++i) {
    bool found = false;
    for (auto& [name, value] : args.named) {
      if (name == macro.params[i]) {
        scope->set(name, std::move(value));
        name.clear();  // consumed
        found = true;
        break;
      }
    }
    if (found) continue;
    if (macro.defaults[i]) {
      scope->set(macro.params[i], eval(*macro.defaults[i], scope));
    } else {
      scope->set(macro.params[i],
                 Value::undefined(fmt::format("parameter '{}' was not provided", macro.params[i])));
    }
  }
  for (auto& [name, value] : args.named) {
    if (name.empty()) continue;
    if (name == "caller") {
      scope->set("caller", std::move(value));
    } else {
      kwargs.emplace_back(Value(name), std::move(value));
    }
  }
  scope->set("varargs", make_list(std::move(varargs), true));
  scope->set("kwargs", make_dict(std::move(kwargs)));
  std::string out;
  exec_body(macro.body, scope, &out);
  return Value(std::move(out));
}

}  // namespace specd::chat
