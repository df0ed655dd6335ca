// Executes a parsed chat template: scopes, statements and expressions with jinja2's semantics
// (the sandboxed environment of transformers' apply_chat_template).
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/ast.h"
#include "chat/value.h"

namespace specd::chat {

// Bounds that keep hostile templates from exhausting memory, stack or time.
struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;  // any rendered text or built string
  int max_call_depth = 200;                    // nested macro and filter calls
  int64_t max_steps = 5'000'000;               // statements, loop iterations and calls
  size_t max_items = 1'000'000;                // elements of one built list
};

// One frame of template variables. Loop bodies, macros and with-blocks get a child scope; reads
// fall through to the parents, writes stay local (jinja2's scoping rules).
class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}
  const Value* find(const std::string& name) const;
  void set(const std::string& name, Value value);

 private:
  std::shared_ptr<Scope> parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  // `now` is the local time strftime_now() formats.
  Interpreter(const RenderLimits& limits, std::tm now) : limits_(limits), now_(now) {}
  // Releases every tracked object (see Object::release).
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `body` with variables looked up in `scope`.
  std::string render(const Body& body, const ScopePtr& scope);

  // Used by filters, tests, methods and builtins.
  Value eval(const Expr& expr, const ScopePtr& scope);
  Value call(const Value& callee, CallArgs args);
  Value get_attr(const Value& object, const std::string& name);
  Value get_item(const Value& object, const Value& key);
  Value apply_filter(const std::string& name, const Value& input, CallArgs args);
  bool apply_test(const std::string& name, const Value& input, CallArgs args);
  // The elements a for loop (or list()) visits: list items, dict keys, string characters.
  std::vector<Value> iterate(const Value& value);
  Value call_macro(const MacroDef& macro, const ScopePtr& closure, CallArgs args);
  const std::tm& now() const { return now_; }
  const RenderLimits& limits() const { return limits_; }
  // Fails if a string or list of `size` would exceed the limits.
  void check_size(size_t size) const;
  void step();
  // Objects that may end up in reference cycles (macros, namespaces, loops) are released when the
  // render ends.
  void track(const ObjectPtr& object);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec_body(const Body& body, const ScopePtr& scope, std::string* out);
  Flow exec(const Node& node, const ScopePtr& scope, std::string* out);
  Flow exec_for(const Node& node, const ScopePtr& scope, std::string* out);
  void assign(const Target& target, const Value& value, const ScopePtr& scope);
  void append(std::string* out, const std::string& text) const;
  Value eval_impl(const Expr& expr, const ScopePtr& scope);
  Value eval_filter_chain(const Expr& expr, const ScopePtr& scope, const Value* block_input);
  CallArgs eval_args(const Expr& expr, const ScopePtr& scope);
  Value eval_slice(const Value& object, const Expr& slice, const ScopePtr& scope);
  Value eval_compare(const Expr& expr, const ScopePtr& scope);

  struct CallGuard {
    explicit CallGuard(Interpreter* interp);
    ~CallGuard() { --interp->call_depth_; }
    Interpreter* interp;
  };

  RenderLimits limits_;
  std::tm now_;
  int call_depth_ = 0;
  int64_t steps_ = 0;
  std::vector<std::weak_ptr<Object>> tracked_;
};

// Python's binary operators on template values (+ - * / // % ** ~) and `in`.
Value binary_op(const std::string& op, const Value& a, const Value& b, const Interpreter& interp);
bool contains(const Value& container, const Value& item);

}  // namespace specd::chat
