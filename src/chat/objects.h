// Callable and attribute-bearing template objects: namespaces, macros, builtin functions, bound
// methods of str/dict/list, and the `loop` variable of for loops.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/ast.h"
#include "chat/interpreter.h"
#include "chat/value.h"

namespace specd::chat {

// jinja2's namespace(): the one mutable object (`{% set ns.x = ... %}`).
class Namespace : public Object {
 public:
  std::string type_name() const override { return "Namespace"; }
  std::string repr() const override;
  Value get_attr(const std::string& name) const override;
  void set_attr(const std::string& name, Value value);
  void release() override { attrs_.clear(); }

 private:
  std::vector<std::pair<std::string, Value>> attrs_;
};

class BuiltinFunction : public Object {
 public:
  using Fn = std::function<Value(Interpreter&, CallArgs&)>;
  BuiltinFunction(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string type_name() const override { return "builtin_function_or_method"; }
  std::string repr() const override { return "<built-in function " + name_ + ">"; }
  bool callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs args) override { return fn_(interp, args); }

 private:
  std::string name_;
  Fn fn_;
};

// `"abc".upper`, `d.items`: a method of a str, list or dict bound to its object.
class BoundMethod : public Object {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  std::string type_name() const override { return "builtin_function_or_method"; }
  std::string repr() const override;
  bool callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs args) override;

 private:
  Value self_;
  std::string name_;
};

class Macro : public Object {
 public:
  Macro(const MacroDef* def, ScopePtr closure) : def_(def), closure_(std::move(closure)) {}
  std::string type_name() const override { return "Macro"; }
  std::string repr() const override { return "<Macro '" + def_->name + "'>"; }
  Value get_attr(const std::string& name) const override;
  bool callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs args) override {
    if (!closure_) throw RuntimeError("macro called after its template finished rendering");
    return interp.call_macro(*def_, closure_, std::move(args));
  }
  void release() override { closure_.reset(); }

 private:
  const MacroDef* def_;
  ScopePtr closure_;
};

// The `loop` variable: one object per for loop, advanced each iteration.
class LoopContext : public Object, public std::enable_shared_from_this<LoopContext> {
 public:
  explicit LoopContext(std::shared_ptr<const std::vector<Value>> items)
      : items_(std::move(items)) {}
  std::string type_name() const override { return "LoopContext"; }
  std::string repr() const override;
  Value get_attr(const std::string& name) const override;
  void set_index(size_t index0) { index0_ = index0; }
  Value cycle(const CallArgs& args) const;
  bool changed(const CallArgs& args);
  void release() override { last_changed_ = Value(); }

 private:
  std::shared_ptr<const std::vector<Value>> items_;
  size_t index0_ = 0;
  bool have_last_ = false;
  Value last_changed_;
};

// True if `name` is a method of Python's str, dict or list that templates may call (the sandbox
// refuses the mutating ones); `unsafe` reports a mutating method.
bool has_method(const Value& self, const std::string& name, bool* unsafe);
Value call_method(Interpreter& interp, const Value& self, const std::string& name, CallArgs& args);

// The globals transformers' environment defines: range, dict, namespace, joiner, cycler,
// raise_exception and strftime_now.
void add_globals(Scope* scope);

// Exception thrown by raise_exception(); the interpreter reports it with the template line.
class RaisedError : public RuntimeError {
 public:
  explicit RaisedError(const std::string& message) : RuntimeError(message) {}
};

}  // namespace specd::chat
