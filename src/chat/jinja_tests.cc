// Registries of jinja2's builtin filters and tests. This file: the tests (`x is defined`, ...).
#include <unordered_map>

#include "chat/call_args.h"
#include "chat/filters.h"
#include "chat/interpreter.h"

namespace specd::chat {
namespace {

#define SPECD_SIMPLE_TEST(fn, name, expr)                 \
  bool fn(Interpreter&, const Value& v, CallArgs& args) { \
    BoundArgs(name, args, {});                            \
    return (expr);                                        \
  }

SPECD_SIMPLE_TEST(t_defined, "defined", !v.is_undefined())
SPECD_SIMPLE_TEST(t_undefined, "undefined", v.is_undefined())
SPECD_SIMPLE_TEST(t_none, "none", v.is_none())
SPECD_SIMPLE_TEST(t_boolean, "boolean", v.is_bool())
SPECD_SIMPLE_TEST(t_true, "true", v.is_bool() && v.as_bool())
SPECD_SIMPLE_TEST(t_false, "false", v.is_bool() && !v.as_bool())
SPECD_SIMPLE_TEST(t_integer, "integer", v.is_int())
SPECD_SIMPLE_TEST(t_float, "float", v.is_float())
SPECD_SIMPLE_TEST(t_number, "number", v.is_number())
SPECD_SIMPLE_TEST(t_string, "string", v.is_string())
SPECD_SIMPLE_TEST(t_mapping, "mapping", v.is_dict())
SPECD_SIMPLE_TEST(t_iterable, "iterable",
                  v.is_string() || v.is_list() || v.is_dict() || v.is_undefined())
SPECD_SIMPLE_TEST(t_sequence, "sequence",
                  v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined())
SPECD_SIMPLE_TEST(t_callable, "callable", v.is_object() && v.object().callable())
SPECD_SIMPLE_TEST(t_escaped, "escaped", false)

#undef SPECD_SIMPLE_TEST

// jinja2: `value % 2 == 1` (odd) and `value % 2 == 0` (even), with Python's float modulo.
bool t_odd(Interpreter& interp, const Value& v, CallArgs& args) {
  BoundArgs("odd", args, {});
  return equals(binary_op("%", v, Value(2), interp), Value(1));
}

bool t_even(Interpreter& interp, const Value& v, CallArgs& args) {
  BoundArgs("even", args, {});
  return equals(binary_op("%", v, Value(2), interp), Value(0));
}

bool t_divisibleby(Interpreter& interp, const Value& v, CallArgs& args) {
  const BoundArgs a("divisibleby", args, {"num"}, 1);
  const Value r = binary_op("%", v, a.get(0), interp);
  return r.is_float() ? r.as_float() == 0.0 : r.as_int() == 0;
}

bool t_sameas(Interpreter&, const Value& v, CallArgs& args) {
  const BoundArgs a("sameas", args, {"other"}, 1);
  const Value& other = a.get(0);
  if (v.kind() != other.kind()) return false;
  switch (v.kind()) {
    case Value::Kind::kNone:
    case Value::Kind::kUndefined:
      return true;
    case Value::Kind::kBool:
      return v.as_bool() == other.as_bool();
    case Value::Kind::kInt:  // CPython caches the small ints
      return v.as_int() == other.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    case Value::Kind::kList:
      return &v.list() == &other.list();
    case Value::Kind::kDict:
      return &v.dict() == &other.dict();
    case Value::Kind::kObject:
      return v.object_ptr() == other.object_ptr();
    default:
      return false;
  }
}

template <int kOp>
bool t_compare(Interpreter&, const Value& v, CallArgs& args) {
  const BoundArgs a("compare", args, {"b"}, 1);
  const Value& b = a.get(0);
  switch (kOp) {
    case 0:
      return equals(v, b);
    case 1:
      return !equals(v, b);
    case 2:
      return compare(v, b) < 0;
    case 3:
      return compare(v, b) <= 0;
    case 4:
      return compare(v, b) > 0;
    default:
      return compare(v, b) >= 0;
  }
}

bool t_in(Interpreter&, const Value& v, CallArgs& args) {
  const BoundArgs a("in", args, {"seq"}, 1);
  return contains(a.get(0), v);
}

// str.islower() / str.isupper() on ASCII letters.
bool cased_test(const Value& v, bool want_lower) {
  bool cased = false;
  for (const char c : to_str(v)) {
    if (c >= 'a' && c <= 'z') {
      if (!want_lower) return false;
      cased = true;
    } else if (c >= 'A' && c <= 'Z') {
      if (want_lower) return false;
      cased = true;
    }
  }
  return cased;
}

bool t_lower(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs("lower", args, {});
  return cased_test(v, true);
}

bool t_upper(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs("upper", args, {});
  return cased_test(v, false);
}

bool t_filter(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs("filter", args, {});
  return v.is_string() && find_filter(v.str()) != nullptr;
}

bool t_test(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs("test", args, {});
  return v.is_string() && find_test(v.str()) != nullptr;
}

}  // namespace

TestFn find_test(const std::string& name) {
  static const auto* const table = new std::unordered_map<std::string, TestFn>{
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"none", t_none},
      {"boolean", t_boolean},
      {"true", t_true},
      {"false", t_false},
      {"integer", t_integer},
      {"float", t_float},
      {"number", t_number},
      {"string", t_string},
      {"mapping", t_mapping},
      {"iterable", t_iterable},
      {"sequence", t_sequence},
      {"callable", t_callable},
      {"escaped", t_escaped},
      {"odd", t_odd},
      {"even", t_even},
      {"divisibleby", t_divisibleby},
      {"sameas", t_sameas},
      {"eq", t_compare<0>},
      {"equalto", t_compare<0>},
      {"==", t_compare<0>},
      {"ne", t_compare<1>},
      {"!=", t_compare<1>},
      {"lt", t_compare<2>},
      {"lessthan", t_compare<2>},
      {"<", t_compare<2>},
      {"le", t_compare<3>},
      {"<=", t_compare<3>},
      {"gt", t_compare<4>},
      {"greaterthan", t_compare<4>},
      {">", t_compare<4>},
      {"ge", t_compare<5>},
      {">=", t_compare<5>},
      {"in", t_in},
      {"lower", t_lower},
      {"upper", t_upper},
      {"filter", t_filter},
      {"test", t_test},
  };
  const auto it = table->find(name);
  return it == table->end() ? nullptr : it->second;
}

}  // namespace specd::chat
