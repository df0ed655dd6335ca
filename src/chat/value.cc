// The dynamic value type of the chat-template interpreter, with Python semantics for truth,
// equality, ordering, str() and repr().
#include "chat/value.h"

#include <fmt/core.h>

#include "chat/py_format.h"
#include "chat/utf8.h"
#include "core/error.h"

namespace specd::chat {

void throw_at_line(int line, const std::string& message) {
  throw Error(fmt::format("chat template line {}: {}", line, message));
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(key.str());
  for (const auto& [k, v] : items) {
    if (equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : items) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

Value make_list(std::vector<Value> items, bool is_tuple) {
  auto list = std::make_shared<List>();
  list->items = std::move(items);
  list->is_tuple = is_tuple;
  return Value(ListPtr(std::move(list)));
}

Value make_iterator(std::vector<Value> items, const char* iter_type) {
  auto list = std::make_shared<List>();
  list->items = std::move(items);
  list->iter_type = iter_type;
  return Value(ListPtr(std::move(list)));
}

Value make_dict(std::vector<std::pair<Value, Value>> items) {
  auto dict = std::make_shared<Dict>();
  dict->items = std::move(items);
  return Value(DictPtr(std::move(dict)));
}

std::string Object::repr() const { return fmt::format("<{} object>", type_name()); }

Value Object::get_attr(const std::string& name) const {
  return Value::undefined(fmt::format("'{}' object has no attribute '{}'", type_name(), name));
}

Value Object::call(Interpreter&, CallArgs) {
  throw RuntimeError(fmt::format("'{}' object is not callable", type_name()));
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "str";
    case Value::Kind::kList:
      if (v.is_iterator()) return v.list().iter_type;
      return v.is_tuple() ? "tuple" : "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kObject:
      return v.object().type_name();
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.as_bool();
    case Value::Kind::kInt:
      return v.as_int() != 0;
    case Value::Kind::kFloat:
      return v.as_float() != 0.0;
    case Value::Kind::kString:
      return !v.str().empty();
    case Value::Kind::kList:
      if (v.is_iterator() && v.list().iter_type.compare(0, 5, "dict_") != 0) return true;
      return !v.list().items.empty();
    case Value::Kind::kDict:
      return !v.dict().items.empty();
    case Value::Kind::kObject:
      return true;
  }
  return false;
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kString:
      return v.str();
    default:
      return repr(v);
  }
}

namespace {

// Code points Python's str.isprintable() rejects (an approximation of categories C* and Z*
// other than the ASCII space, without the full Unicode tables).
bool py_unprintable(char32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return true;
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F)) return true;
  if ((cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF) return true;
  if ((cp >= 0xD800 && cp <= 0xF8FF) || cp == 0xFFF9 || cp == 0xFFFA || cp == 0xFFFB) return true;
  return cp >= 0xF0000;
}

}  // namespace

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const char32_t cp = decode_utf8(s, &pos);
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (py_unprintable(cp)) {
      if (cp < 0x100) {
        out += fmt::format("\\x{:02x}", static_cast<uint32_t>(cp));
      } else if (cp < 0x10000) {
        out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
      } else {
        out += fmt::format("\\U{:08x}", static_cast<uint32_t>(cp));
      }
    } else {
      out.append(s, start, pos - start);
    }
  }
  out += quote;
  return out;
}

std::string repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.as_int());
    case Value::Kind::kFloat:
      return float_repr(v.as_float());
    case Value::Kind::kString:
      return repr_string(v.str());
    case Value::Kind::kList: {
      const List& list = v.list();
      const bool view = list.iter_type.compare(0, 5, "dict_") == 0;
      if (!list.iter_type.empty() && !view) return "<" + list.iter_type + " object>";
      std::string out = view ? list.iter_type + "([" : list.is_tuple ? "(" : "[";
      for (size_t i = 0; i < list.items.size(); ++i) {
        if (i > 0) out += ", ";
        out += repr(list.items[i]);
      }
      if (list.is_tuple && list.items.size() == 1) out += ",";
      out += view ? "])" : list.is_tuple ? ")" : "]";
      return out;
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, value] : v.dict().items) {
        if (!first) out += ", ";
        first = false;
        out += repr(key) + ": " + repr(value);
      }
      return out + "}";
    }
    case Value::Kind::kObject:
      return v.object().repr();
  }
  return "";
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.str() == b.str();
    case Value::Kind::kList: {
      const List& x = a.list();
      const List& y = b.list();
      if (!x.iter_type.empty() || !y.iter_type.empty()) return &x == &y;
      if (x.is_tuple != y.is_tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!equals(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const Dict& x = a.dict();
      const Dict& y = b.dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [key, value] : x.items) {
        const Value* other = y.find(key);
        if (other == nullptr || !equals(value, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kObject:
      return a.object_ptr() == b.object_ptr();
    default:
      return false;
  }
}

void fail_undefined(const Value& v) {
  throw RuntimeError(v.undefined_hint().empty() ? "undefined value" : v.undefined_hint());
}

int compare(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_float(), y = b.as_float();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());  // byte order of UTF-8 is code point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_sequence() && b.is_sequence() && a.is_tuple() == b.is_tuple()) {
    const List& x = a.list();
    const List& y = b.list();
    for (size_t i = 0; i < x.items.size() && i < y.items.size(); ++i) {
      if (!equals(x.items[i], y.items[i])) return compare(x.items[i], y.items[i]);
    }
    return x.items.size() < y.items.size() ? -1 : x.items.size() > y.items.size() ? 1 : 0;
  }
  throw RuntimeError(fmt::format("'<' not supported between instances of '{}' and '{}'",
                                 type_name(a), type_name(b)));
}

}  // namespace specd::chat
