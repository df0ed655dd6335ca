// The dynamic value type of the chat-template interpreter, with Python semantics for truth,
// equality, ordering, str() and repr().
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace specd::chat {

// A template runtime error without a location; the interpreter adds the template line.
class RuntimeError : public std::runtime_error {
 public:
  explicit RuntimeError(const std::string& message) : std::runtime_error(message) {}
};

// Throws specd::Error("chat template line <line>: <message>").
[[noreturn]] void throw_at_line(int line, const std::string& message);

class Value;
class Object;
class Interpreter;

// Lists and dicts are immutable once built (the sandbox jinja2 of transformers forbids mutating
// them), so they are shared, never copied.
struct List {
  std::vector<Value> items;
  bool is_tuple = false;
  // Non-empty for what Python would hold as an iterator or view rather than a list:
  // "generator" (map/select/... results), "list_reverseiterator", "dict_items", "dict_keys",
  // "dict_values". They iterate like lists but are not subscriptable, and generators have no
  // len() and are always true.
  std::string iter_type;
};
// An insertion-ordered dict (Python 3.7+ order), usually with string keys.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
};
using ListPtr = std::shared_ptr<const List>;
using DictPtr = std::shared_ptr<const Dict>;
using ObjectPtr = std::shared_ptr<Object>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kObject };

  Value() : kind_(Kind::kUndefined), data_(std::string()) {}
  // An undefined value; `hint` is the message used if the value is used in a way that fails.
  static Value undefined(std::string hint) {
    Value v;
    v.data_ = std::move(hint);
    return v;
  }
  static Value none() { return Value(Kind::kNone); }
  Value(bool b) : kind_(Kind::kBool), data_(b) {}                      // NOLINT: implicit by design
  Value(int64_t i) : kind_(Kind::kInt), data_(i) {}                    // NOLINT
  Value(int i) : kind_(Kind::kInt), data_(static_cast<int64_t>(i)) {}  // NOLINT
  Value(double f) : kind_(Kind::kFloat), data_(f) {}                   // NOLINT
  Value(std::string s) : kind_(Kind::kString), data_(std::move(s)) {}  // NOLINT
  Value(const char* s) : kind_(Kind::kString), data_(std::string(s)) {}  // NOLINT
  Value(ListPtr l) : kind_(Kind::kList), data_(std::move(l)) {}          // NOLINT
  Value(DictPtr d) : kind_(Kind::kDict), data_(std::move(d)) {}          // NOLINT
  Value(ObjectPtr o) : kind_(Kind::kObject), data_(std::move(o)) {}      // NOLINT

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // int, float or bool (bool is an int subclass in Python).
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }  // list or tuple
  bool is_tuple() const { return is_list() && list().is_tuple; }
  // A list or tuple proper (not an iterator or dict view).
  bool is_sequence() const { return is_list() && list().iter_type.empty(); }
  bool is_iterator() const { return is_list() && !list().iter_type.empty(); }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_object() const { return kind_ == Kind::kObject; }

  bool as_bool() const { return std::get<bool>(data_); }
  // int value of an int or bool.
  int64_t as_int() const { return is_bool() ? as_bool() : std::get<int64_t>(data_); }
  // float value of any number.
  double as_float() const {
    return is_float() ? std::get<double>(data_) : static_cast<double>(as_int());
  }
  const std::string& str() const { return std::get<std::string>(data_); }
  const std::string& undefined_hint() const { return std::get<std::string>(data_); }
  const List& list() const { return *std::get<ListPtr>(data_); }
  const ListPtr& list_ptr() const { return std::get<ListPtr>(data_); }
  const Dict& dict() const { return *std::get<DictPtr>(data_); }
  const DictPtr& dict_ptr() const { return std::get<DictPtr>(data_); }
  Object& object() const { return *std::get<ObjectPtr>(data_); }
  const ObjectPtr& object_ptr() const { return std::get<ObjectPtr>(data_); }

 private:
  using Data =
      std::variant<std::monostate, bool, int64_t, double, std::string, ListPtr, DictPtr, ObjectPtr>;
  explicit Value(Kind kind) : kind_(kind) {}
  Kind kind_;
  Data data_;  // std::monostate for None
};

Value make_list(std::vector<Value> items, bool is_tuple = false);
// An iterator or dict view (see List::iter_type) over `items`.
Value make_iterator(std::vector<Value> items, const char* iter_type = "generator");
Value make_dict(std::vector<std::pair<Value, Value>> items);

// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
};

// Namespaces, macros, builtin functions, bound methods, loop objects.
class Object {
 public:
  virtual ~Object() = default;
  // Python's type name, used in error messages ("namespace", "LoopContext", ...).
  virtual std::string type_name() const = 0;
  virtual std::string repr() const;
  // `obj.name`; undefined if there is no such attribute.
  virtual Value get_attr(const std::string& name) const;
  virtual bool callable() const { return false; }
  virtual Value call(Interpreter& interp, CallArgs args);
  // Drops the references this object holds, breaking reference cycles (a macro and the scope it
  // is defined in, a namespace stored in itself) when a render ends.
  virtual void release() {}
};

// Python's type name of any value ("str", "int", "list", "dict", "NoneType", ...).
std::string type_name(const Value& v);
// Python bool(v); an undefined value is false.
bool truthy(const Value& v);
// Python str(v) (an undefined value renders as "").
std::string to_str(const Value& v);
// Python repr(v).
std::string repr(const Value& v);
// Python repr() of a str, with its quoting and escaping rules.
std::string repr_string(const std::string& s);
// Python ==.
bool equals(const Value& a, const Value& b);
// Python ordering (<0, 0, >0); throws RuntimeError for unorderable types.
int compare(const Value& a, const Value& b);
// Throws the RuntimeError an undefined value carries when it is used in a way that fails.
[[noreturn]] void fail_undefined(const Value& v);

}  // namespace specd::chat
