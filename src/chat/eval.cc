// Executes a parsed chat template: scopes, statements and expressions with jinja2's semantics
// (the sandboxed environment of transformers' apply_chat_template). This file: expressions.
#include <fmt/core.h>

#include <cmath>

#include "chat/filters.h"
#include "chat/interpreter.h"
#include "chat/objects.h"
#include "chat/py_format.h"
#include "chat/utf8.h"

namespace specd::chat {
namespace {

[[noreturn]] void overflow() {
  throw RuntimeError("integer overflow (templates use 64-bit integers)");
}

[[noreturn]] void unsupported(const char* op, const Value& a, const Value& b) {
  throw RuntimeError(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op,
                                 type_name(a), type_name(b)));
}

// Python's float floor division and modulo (float_divmod).
std::pair<double, double> float_divmod(double x, double y) {
  if (y == 0.0) throw RuntimeError("float division by zero");
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0.0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  double floordiv;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, x / y);
  }
  return {floordiv, mod};
}

std::pair<int64_t, int64_t> int_divmod(int64_t a, int64_t b) {
  if (b == 0) throw RuntimeError("integer division or modulo by zero");
  if (a == INT64_MIN && b == -1) overflow();
  int64_t q = a / b, r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) {
    q -= 1;
    r += b;
  }
  return {q, r};
}

Value repeat(const Value& sequence, int64_t count, const Interpreter& interp) {
  if (count < 0) count = 0;
  if (sequence.is_string()) {
    interp.check_size(sequence.str().size() * static_cast<size_t>(count));
    std::string out;
    out.reserve(sequence.str().size() * static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) out += sequence.str();
    return Value(std::move(out));
  }
  const auto& items = sequence.list().items;
  if (items.size() * static_cast<size_t>(count) > interp.limits().max_items) {
    throw RuntimeError("list repetition result is too large");
  }
  std::vector<Value> out;
  for (int64_t i = 0; i < count; ++i) out.insert(out.end(), items.begin(), items.end());
  return make_list(std::move(out), sequence.is_tuple());
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b, const Interpreter& interp) {
  if (op == "~") {
    std::string out = to_str(a);
    const std::string right = to_str(b);
    interp.check_size(out.size() + right.size());
    return Value(out + right);
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool numbers = a.is_number() && b.is_number();
  const bool ints = numbers && !a.is_float() && !b.is_float();
  const char c = op[0];
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) overflow();
      return Value(r);
    }
    if (numbers) return Value(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) {
      interp.check_size(a.str().size() + b.str().size());
      return Value(a.str() + b.str());
    }
    if (a.is_sequence() && b.is_sequence() && a.is_tuple() == b.is_tuple()) {
      std::vector<Value> items = a.list().items;
      items.insert(items.end(), b.list().items.begin(), b.list().items.end());
      return make_list(std::move(items), a.is_tuple());
    }
    if (a.is_string()) {
      throw RuntimeError(fmt::format("can only concatenate str (not \"{}\") to str", type_name(b)));
    }
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) {
      int64_t r;
      if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) overflow();
      return Value(r);
    }
    if (numbers) return Value(a.as_float() - b.as_float());
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) {
      int64_t r;
      if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) overflow();
      return Value(r);
    }
    if (numbers) return Value(a.as_float() * b.as_float());
    if ((a.is_string() || a.is_sequence()) && (b.is_int() || b.is_bool())) {
      return repeat(a, b.as_int(), interp);
    }
    if ((b.is_string() || b.is_sequence()) && (a.is_int() || a.is_bool())) {
      return repeat(b, a.as_int(), interp);
    }
    unsupported("*", a, b);
  }
  if (op == "/") {
    if (!numbers) unsupported("/", a, b);
    if (b.as_float() == 0.0) throw RuntimeError("division by zero");
    return Value(a.as_float() / b.as_float());
  }
  if (op == "//") {
    if (ints) return Value(int_divmod(a.as_int(), b.as_int()).first);
    if (numbers) return Value(float_divmod(a.as_float(), b.as_float()).first);
    unsupported("//", a, b);
  }
  if (c == '%') {
    if (a.is_string()) return Value(percent_format(a.str(), b));
    if (ints) return Value(int_divmod(a.as_int(), b.as_int()).second);
    if (numbers) return Value(float_divmod(a.as_float(), b.as_float()).second);
    unsupported("%", a, b);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t result = 1, base = a.as_int();
      for (int64_t e = b.as_int(); e > 0; e >>= 1) {
        if ((e & 1) && __builtin_mul_overflow(result, base, &result)) overflow();
        if (e > 1 && __builtin_mul_overflow(base, base, &base)) overflow();
      }
      return Value(result);
    }
    if (numbers) {
      if (a.as_float() == 0.0 && b.as_float() < 0) {
        throw RuntimeError("0.0 cannot be raised to a negative power");
      }
      if (a.as_float() < 0 && std::floor(b.as_float()) != b.as_float()) {
        throw RuntimeError("complex results of ** are not supported");
      }
      return Value(std::pow(a.as_float(), b.as_float()));
    }
    unsupported("** or pow()", a, b);
  }
  throw RuntimeError("unknown operator " + op);
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        throw RuntimeError(
            fmt::format("'in <string>' requires string as left operand, not {}", type_name(item)));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& element : container.list().items) {
        if (equals(element, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return container.dict().find(item) != nullptr;
    default:
      throw RuntimeError(
          fmt::format("argument of type '{}' is not iterable", type_name(container)));
  }
}

Value Interpreter::eval(const Expr& expr, const ScopePtr& scope) {
  try {
    return eval_impl(expr, scope);
  } catch (const RaisedError& error) {
    throw_at_line(expr.line, std::string("template raised an error: ") + error.what());
  } catch (const RuntimeError& error) {
    throw_at_line(expr.line, error.what());
  }
}

CallArgs Interpreter::eval_args(const Expr& expr, const ScopePtr& scope) {
  CallArgs args;
  for (const ExprPtr& item : expr.items) args.positional.push_back(eval(*item, scope));
  if (expr.dyn_args) {
    for (Value& v : iterate(eval(*expr.dyn_args, scope))) args.positional.push_back(std::move(v));
  }
  for (const auto& [name, value] : expr.kwargs) args.named.emplace_back(name, eval(*value, scope));
  if (expr.dyn_kwargs) {
    const Value kwargs = eval(*expr.dyn_kwargs, scope);
    if (!kwargs.is_dict()) throw RuntimeError("argument after ** must be a mapping");
    for (const auto& [key, value] : kwargs.dict().items) {
      if (!key.is_string()) throw RuntimeError("keywords must be strings");
      args.named.emplace_back(key.str(), value);
    }
  }
  return args;
}

Value Interpreter::eval_filter_chain(const Expr& expr, const ScopePtr& scope,
                                     const Value* block_input) {
  Value input =
      expr.a ? (expr.a->kind == ExprKind::kFilter ? eval_filter_chain(*expr.a, scope, block_input)
                                                  : eval(*expr.a, scope))
             : *block_input;
  try {
    return apply_filter(expr.name, input, eval_args(expr, scope));
  } catch (const RuntimeError& error) {
    throw_at_line(expr.line, error.what());
  }
}

Value Interpreter::eval_compare(const Expr& expr, const ScopePtr& scope) {
  Value left = eval(*expr.a, scope);
  for (size_t i = 0; i < expr.ops.size(); ++i) {
    Value right = eval(*expr.items[i], scope);
    const std::string& op = expr.ops[i];
    bool result;
    if (op == "==") {
      result = equals(left, right);
    } else if (op == "!=") {
      result = !equals(left, right);
    } else if (op == "in") {
      result = contains(right, left);
    } else if (op == "notin") {
      result = !contains(right, left);
    } else {
      const int c = compare(left, right);
      result = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    }
    if (!result) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Interpreter::eval_slice(const Value& object, const Expr& slice, const ScopePtr& scope) {
  Value bounds[3];
  for (int i = 0; i < 3; ++i) {
    if (slice.items[i]) bounds[i] = eval(*slice.items[i], scope);
  }
  if (object.is_undefined()) fail_undefined(object);
  for (const Value& bound : bounds) {
    if (!bound.is_undefined() && !bound.is_none() && !bound.is_int() && !bound.is_bool()) {
      return Value::undefined("slice indices must be integers or None");
    }
  }
  if (!object.is_string() && !object.is_sequence()) {
    return Value::undefined(fmt::format("'{}' object is not subscriptable", type_name(object)));
  }
  const auto given = [](const Value& v) { return v.is_int() || v.is_bool(); };
  const int64_t step = given(bounds[2]) ? bounds[2].as_int() : 1;
  if (step == 0) throw RuntimeError("slice step cannot be zero");
  std::vector<char32_t> cps;
  if (object.is_string()) cps = to_code_points(object.str());
  const int64_t len = object.is_string() ? static_cast<int64_t>(cps.size())
                                         : static_cast<int64_t>(object.list().items.size());
  const auto adjust = [&](const Value& v, int64_t fallback) {
    if (!given(v)) return fallback;
    int64_t x = v.as_int();
    if (x < 0) {
      x += len;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= len) {
      x = step < 0 ? len - 1 : len;
    }
    return x;
  };
  const int64_t start = adjust(bounds[0], step < 0 ? len - 1 : 0);
  const int64_t stop = adjust(bounds[1], step < 0 ? -1 : len);
  std::vector<size_t> picked;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    picked.push_back(static_cast<size_t>(i));
  }
  if (object.is_string()) {
    std::string out;
    for (const size_t i : picked) append_utf8(cps[i], &out);
    return Value(std::move(out));
  }
  std::vector<Value> out;
  out.reserve(picked.size());
  for (const size_t i : picked) out.push_back(object.list().items[i]);
  return make_list(std::move(out), object.is_tuple());
}

Value Interpreter::eval_impl(const Expr& expr, const ScopePtr& scope) {
  switch (expr.kind) {
    case ExprKind::kConst:
      return expr.value;
    case ExprKind::kName: {
      const Value* value = scope->find(expr.name);
      if (value != nullptr) return *value;
      return Value::undefined(fmt::format("'{}' is undefined", expr.name));
    }
    case ExprKind::kGetAttr:
      return get_attr(eval(*expr.a, scope), expr.name);
    case ExprKind::kGetItem: {
      const Value object = eval(*expr.a, scope);
      if (expr.b->kind == ExprKind::kSlice) return eval_slice(object, *expr.b, scope);
      return get_item(object, eval(*expr.b, scope));
    }
    case ExprKind::kSlice:
      throw RuntimeError("slice outside of a subscript");
    case ExprKind::kCall: {
      const Value callee = eval(*expr.a, scope);
      return call(callee, eval_args(expr, scope));
    }
    case ExprKind::kFilter:
      return eval_filter_chain(expr, scope, nullptr);
    case ExprKind::kTest: {
      const Value input = eval(*expr.a, scope);
      return Value(apply_test(expr.name, input, eval_args(expr, scope)));
    }
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      const Value v = eval(*expr.a, scope);
      if (v.is_undefined()) fail_undefined(v);
      if (!v.is_number()) {
        throw RuntimeError(fmt::format("bad operand type for unary {}: '{}'",
                                       expr.kind == ExprKind::kNeg ? '-' : '+', type_name(v)));
      }
      if (expr.kind == ExprKind::kPos) return v.is_bool() ? Value(v.as_int()) : v;
      if (v.is_float()) return Value(-v.as_float());
      if (v.as_int() == INT64_MIN) overflow();
      return Value(-v.as_int());
    }
    case ExprKind::kNot:
      return Value(!truthy(eval(*expr.a, scope)));
    case ExprKind::kAnd: {
      Value left = eval(*expr.a, scope);
      return truthy(left) ? eval(*expr.b, scope) : left;
    }
    case ExprKind::kOr: {
      Value left = eval(*expr.a, scope);
      return truthy(left) ? left : eval(*expr.b, scope);
    }
    case ExprKind::kBinary:
      return binary_op(expr.name, eval(*expr.a, scope), eval(*expr.b, scope), *this);
    case ExprKind::kCompare:
      return eval_compare(expr, scope);
    case ExprKind::kCondExpr:
      if (truthy(eval(*expr.a, scope))) return eval(*expr.b, scope);
      if (expr.c) return eval(*expr.c, scope);
      return Value::undefined(fmt::format(
          "the inline if-expression on line {} evaluated to false and no else section was "
          "defined.",
          expr.line));
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      for (const ExprPtr& item : expr.items) items.push_back(eval(*item, scope));
      return make_list(std::move(items), expr.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      std::vector<std::pair<Value, Value>> items;
      for (size_t i = 0; i + 1 < expr.items.size(); i += 2) {
        Value key = eval(*expr.items[i], scope);
        Value value = eval(*expr.items[i + 1], scope);
        if (key.is_list() && !key.is_tuple()) throw RuntimeError("unhashable type: 'list'");
        if (key.is_dict()) throw RuntimeError("unhashable type: 'dict'");
        bool replaced = false;
        for (auto& [existing, old] : items) {
          if (equals(existing, key)) {
            old = std::move(value);
            replaced = true;
            break;
          }
        }
        if (!replaced) items.emplace_back(std::move(key), std::move(value));
      }
      return make_dict(std::move(items));
    }
  }
  throw RuntimeError("unknown expression");
}

Value Interpreter::call(const Value& callee, CallArgs args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (!callee.is_object() || !callee.object().callable()) {
    throw RuntimeError(fmt::format("'{}' object is not callable", type_name(callee)));
  }
  CallGuard guard(this);
  step();
  const ObjectPtr keep = callee.object_ptr();  // the callee may be reassigned during the call
  return keep->call(*this, std::move(args));
}

Value Interpreter::get_attr(const Value& object, const std::string& name) {
  if (object.is_undefined()) fail_undefined(object);
  if (object.is_object()) return object.object().get_attr(name);
  bool unsafe = false;
  if (has_method(object, name, &unsafe)) {
    if (unsafe) {
      return Value::undefined(fmt::format("access to attribute '{}' of '{}' object is unsafe.",
                                          name, type_name(object)));
    }
    return Value(ObjectPtr(std::make_shared<BoundMethod>(object, name)));
  }
  if (object.is_dict()) {
    if (const Value* value = object.dict().find(name)) return *value;
  }
  return Value::undefined(
      fmt::format("'{} object' has no attribute '{}'", type_name(object), name));
}

Value Interpreter::get_item(const Value& object, const Value& key) {
  if (object.is_undefined()) fail_undefined(object);
  if (object.is_dict()) {
    if (const Value* value = object.dict().find(key)) return *value;
  } else if ((object.is_sequence() || object.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t index = key.as_int();
    if (object.is_list()) {
      const auto& items = object.list().items;
      const int64_t size = static_cast<int64_t>(items.size());
      if (index < 0) index += size;
      if (index >= 0 && index < size) return items[static_cast<size_t>(index)];
    } else {
      const std::vector<size_t> offsets = code_point_offsets(object.str());
      const int64_t size = static_cast<int64_t>(offsets.size()) - 1;
      if (index < 0) index += size;
      if (index >= 0 && index < size) {
        const size_t begin = offsets[static_cast<size_t>(index)];
        return Value(object.str().substr(begin, offsets[static_cast<size_t>(index) + 1] - begin));
      }
    }
    return Value::undefined(
        fmt::format("'{} object' has no element {}", type_name(object), key.as_int()));
  }
  if (key.is_string()) return get_attr(object, key.str());  // jinja2 falls back to getattr
  return Value::undefined(
      fmt::format("'{} object' has no element {}", type_name(object), repr(key)));
}

Value Interpreter::apply_filter(const std::string& name, const Value& input, CallArgs args) {
  const FilterFn fn = find_filter(name);
  if (fn == nullptr) throw RuntimeError(fmt::format("No filter named '{}' found.", name));
  CallGuard guard(this);
  step();
  return fn(*this, input, args);
}

bool Interpreter::apply_test(const std::string& name, const Value& input, CallArgs args) {
  const TestFn fn = find_test(name);
  if (fn == nullptr) throw RuntimeError(fmt::format("No test named '{}' found.", name));
  step();
  return fn(*this, input, args);
}

}  // namespace specd::chat
