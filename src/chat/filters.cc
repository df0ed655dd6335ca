// Registries of jinja2's builtin filters (`x | name`) and tests (`x is name`), with transformers'
// `tojson` in place of jinja2's. This file: value and string filters, and the registry.
#include "chat/filters.h"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "chat/call_args.h"
#include "chat/objects.h"
#include "chat/py_format.h"
#include "chat/utf8.h"

namespace specd::chat {
namespace {

Value f_default(Interpreter&, const Value& v, CallArgs& args) {
  const BoundArgs a("default", args, {"default_value", "boolean"});
  if (v.is_undefined() || (truthy(a.get(1)) && !truthy(v))) return a.get_or(0, Value(""));
  return v;
}

Value f_length(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs("length", args, {});
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return Value(0);
    case Value::Kind::kString:
      return Value(static_cast<int64_t>(utf8_length(v.str())));
    case Value::Kind::kDict:
      return Value(static_cast<int64_t>(v.dict().items.size()));
    case Value::Kind::kList:
      if (!v.is_iterator() || v.list().iter_type.compare(0, 5, "dict_") == 0) {
        return Value(static_cast<int64_t>(v.list().items.size()));
      }
      [[fallthrough]];
    default:
      throw RuntimeError(fmt::format("object of type '{}' has no len()", type_name(v)));
  }
}

Value f_first(Interpreter& interp, const Value& v, CallArgs& args) {
  BoundArgs("first", args, {});
  if (v.is_string()) {
    if (v.str().empty()) return Value::undefined("No first item, sequence was empty.");
    size_t pos = 0;
    decode_utf8(v.str(), &pos);
    return Value(v.str().substr(0, pos));
  }
  const std::vector<Value> items = interp.iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Interpreter& interp, const Value& v, CallArgs& args) {
  BoundArgs("last", args, {});
  if (v.is_iterator() && v.list().iter_type.compare(0, 5, "dict_") != 0) {
    throw RuntimeError(fmt::format("'{}' object is not reversible", type_name(v)));
  }
  const std::vector<Value> items = interp.iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_join(Interpreter& interp, const Value& v, CallArgs& args) {
  const BoundArgs a("join", args, {"d", "attribute"});
  const std::string separator = to_str(a.get_or(0, Value("")));
  std::string out;
  bool first = true;
  for (const Value& item : interp.iterate(v)) {
    if (!first) out += separator;
    first = false;
    out +=
        to_str(a.has(1) && !a.get(1).is_none() ? lookup_attribute(interp, item, a.get(1)) : item);
    interp.check_size(out.size());
  }
  return Value(std::move(out));
}

Value f_upper(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs("upper", args, {});
  return Value(ascii_upper(to_str(v)));
}

Value f_lower(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs("lower", args, {});
  return Value(ascii_lower(to_str(v)));
}

Value f_capitalize(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs("capitalize", args, {});
  return Value(py_capitalize(to_str(v)));
}

// jinja2's title: capitalizes each piece after a run of `-`, whitespace, `(`, `{`, `[` or `<`.
Value f_title(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs("title", args, {});
  const std::vector<char32_t> cps = to_code_points(to_str(v));
  std::string out;
  bool word_start = true;
  for (const char32_t cp : cps) {
    const bool separator =
        cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || py_isspace(cp);
    if (separator) {
      append_utf8(cp, &out);
      word_start = true;
      continue;
    }
    char32_t mapped = cp;
    if (word_start && cp >= 'a' && cp <= 'z') mapped = cp - 'a' + 'A';
    if (!word_start && cp >= 'A' && cp <= 'Z') mapped = cp - 'A' + 'a';
    append_utf8(mapped, &out);
    word_start = false;
  }
  return Value(std::move(out));
}

Value f_trim(Interpreter&, const Value& v, CallArgs& args) {
  const BoundArgs a("trim", args, {"chars"});
  if (a.has(0) && !a.get(0).is_none()) {
    const std::string chars = to_str(a.get(0));
    return Value(py_strip(to_str(v), &chars, true, true));
  }
  return Value(py_strip(to_str(v), nullptr, true, true));
}

Value f_replace(Interpreter& interp, const Value& v, CallArgs& args) {
  const BoundArgs a("replace", args, {"old", "new", "count"}, 2);
  CallArgs method_args;
  method_args.positional = {Value(to_str(a.get(0))), Value(to_str(a.get(1)))};
  if (a.has(2) && !a.get(2).is_none()) method_args.positional.push_back(a.get(2));
  return call_method(interp, Value(to_str(v)), "replace", method_args);
}

Value f_string(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs("string", args, {});
  return Value(to_str(v));
}

Value f_safe(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs("safe", args, {});
  return Value(to_str(v));
}

Value f_escape(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs("escape", args, {});
  std::string out;
  for (const char c : to_str(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value(std::move(out));
}

Value f_list(Interpreter& interp, const Value& v, CallArgs& args) {
  BoundArgs("list", args, {});
  return make_list(interp.iterate(v));
}

Value f_items(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs("items", args, {});
  if (v.is_undefined()) return make_iterator({});
  if (!v.is_dict()) throw RuntimeError("Can only get item pairs from a mapping.");
  std::vector<Value> pairs;
  for (const auto& [key, value] : v.dict().items) pairs.push_back(make_list({key, value}, true));
  return make_iterator(std::move(pairs));
}

Value f_tojson(Interpreter&, const Value& v, CallArgs& args) {
  const BoundArgs a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions options;
  options.ensure_ascii = truthy(a.get_or(0, Value(false)));
  const Value& indent = a.get(1);
  if (indent.is_int() || indent.is_bool()) {
    options.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, indent.as_int())), ' ');
  } else if (indent.is_string()) {
    options.indent = indent.str();
  } else if (!indent.is_undefined() && !indent.is_none()) {
    throw RuntimeError("tojson: indent must be an int, a string or None");
  }
  const Value& separators = a.get(2);
  if (separators.is_sequence() && separators.list().items.size() == 2 &&
      separators.list().items[0].is_string() && separators.list().items[1].is_string()) {
    options.separators.emplace(separators.list().items[0].str(), separators.list().items[1].str());
  } else if (!separators.is_undefined() && !separators.is_none()) {
    throw RuntimeError("tojson: separators must be a pair of strings");
  }
  options.sort_keys = truthy(a.get(3));
  return Value(json_dumps(v, options));
}

// Python int(str, base) for the `int` filter: optional sign, underscores between digits.
bool parse_python_int(const std::string& text, int base, int64_t* out) {
  const std::string s = py_strip(text, nullptr, true, true);
  std::string digits;
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (base == 16 && s.compare(i, 2, "0x") == 0) i += 2;
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && !digits.empty() && i + 1 < s.size() && s[i + 1] != '_') continue;
    digits += s[i];
  }
  if (digits.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(digits.c_str(), &end, base);
  if (*end != '\0' || errno == ERANGE) return false;
  *out = negative ? -v : v;
  return true;
}

bool parse_python_float(const Value& v, double* out) {
  if (v.is_number()) {
    *out = v.as_float();
    return true;
  }
  if (!v.is_string()) return false;
  const std::string s = py_strip(v.str(), nullptr, true, true);
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return *end == '\0';
}

Value f_int(Interpreter&, const Value& v, CallArgs& args) {
  const BoundArgs a("int", args, {"default", "base"});
  const Value fallback = a.get_or(0, Value(0));
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_string()) {
    int64_t parsed;
    if (parse_python_int(v.str(), static_cast<int>(a.get_or(1, Value(10)).as_int()), &parsed)) {
      return Value(parsed);
    }
  }
  double f;
  if (parse_python_float(v, &f)) {
    if (!std::isfinite(f)) throw RuntimeError("cannot convert float infinity or NaN to integer");
    if (std::fabs(f) >= 9.2e18) throw RuntimeError("integer overflow in int filter");
    return Value(static_cast<int64_t>(std::trunc(f)));
  }
  return fallback;
}

Value f_float(Interpreter&, const Value& v, CallArgs& args) {
  const BoundArgs a("float", args, {"default"});
  double f;
  if (parse_python_float(v, &f)) return Value(f);
  return a.get_or(0, Value(0.0));
}

Value f_abs(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs("abs", args, {});
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) throw RuntimeError("integer overflow");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  throw RuntimeError(fmt::format("bad operand type for abs(): '{}'", type_name(v)));
}

Value f_round(Interpreter&, const Value& v, CallArgs& args) {
  const BoundArgs a("round", args, {"precision", "method"});
  const int64_t precision = a.get_or(0, Value(0)).as_int();
  const std::string method = to_str(a.get_or(1, Value("common")));
  if (!v.is_number())
    throw RuntimeError(fmt::format("type {} doesn't define __round__", type_name(v)));
  if (method == "common") {
    if (!v.is_float()) return Value(v.as_int());  // round(int, n) stays an int
    if (precision < 0 || precision > 300) throw RuntimeError("round: unsupported precision");
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), v.as_float());
    return Value(std::strtod(buf, nullptr));
  }
  if (method != "ceil" && method != "floor") {
    throw RuntimeError("method must be common, ceil or floor");
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_float() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_center(Interpreter&, const Value& v, CallArgs& args) {
  const BoundArgs a("center", args, {"width"});
  const std::string s = to_str(v);
  const int64_t width = std::min<int64_t>(a.get_or(0, Value(80)).as_int(), 1 << 20);
  const int64_t len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return Value(s);
  const int64_t margin = width - len;
  const int64_t left = margin / 2 + (margin & width & 1);
  return Value(std::string(static_cast<size_t>(left), ' ') + s +
               std::string(static_cast<size_t>(margin - left), ' '));
}

Value f_indent(Interpreter&, const Value& v, CallArgs& args) {
  const BoundArgs a("indent", args, {"width", "first", "blank"});
  const Value width = a.get_or(0, Value(4));
  const std::string indention =
      width.is_string()
          ? width.str()
          : std::string(static_cast<size_t>(std::clamp<int64_t>(width.as_int(), 0, 1 << 16)), ' ');
  // Python's str.splitlines() on s + "\n".
  const std::string s = to_str(v) + "\n";
  std::vector<std::string> lines;
  std::string line;
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const char32_t cp = decode_utf8(s, &pos);
    if (py_is_linebreak(cp)) {
      if (cp == '\r' && pos < s.size() && s[pos] == '\n') ++pos;
      lines.push_back(line);
      line.clear();
    } else {
      line.append(s, start, pos - start);
    }
  }
  if (!line.empty()) lines.push_back(line);
  std::string out;
  if (truthy(a.get(2))) {
    for (size_t i = 0; i < lines.size(); ++i) out += (i > 0 ? "\n" + indention : "") + lines[i];
  } else {
    out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      out += '\n';
      if (!lines[i].empty()) out += indention + lines[i];
    }
  }
  if (truthy(a.get(1))) out = indention + out;
  return Value(std::move(out));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs("wordcount", args, {});
  int64_t count = 0;
  bool in_word = false;
  const std::string s = to_str(v);
  for (size_t pos = 0; pos < s.size();) {
    const char32_t cp = decode_utf8(s, &pos);
    const bool word = cp == '_' || (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') ||
                      (cp >= 'A' && cp <= 'Z') || (cp >= 0x80 && !py_isspace(cp));
    if (word && !in_word) ++count;
    in_word = word;
  }
  return Value(count);
}

Value f_format(Interpreter&, const Value& v, CallArgs& args) {
  if (!args.positional.empty() && !args.named.empty()) {
    throw RuntimeError("can't handle positional and keyword arguments at the same time");
  }
  if (!args.named.empty()) {
    std::vector<std::pair<Value, Value>> items;
    for (auto& [name, value] : args.named) items.emplace_back(Value(name), value);
    return Value(percent_format(to_str(v), make_dict(std::move(items))));
  }
  return Value(percent_format(to_str(v), make_list(args.positional, true)));
}

Value f_attr(Interpreter& interp, const Value& v, CallArgs& args) {
  const BoundArgs a("attr", args, {"name"}, 1);
  const std::string name = to_str(a.get(0));
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_object()) return v.object().get_attr(name);
  bool unsafe = false;
  if (has_method(v, name, &unsafe)) return interp.get_attr(v, name);
  return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(v), name));
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& args) {
  const BoundArgs a("dictsort", args, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) throw RuntimeError("dictsort: expected a mapping");
  const bool case_sensitive = truthy(a.get(0));
  const std::string by = to_str(a.get_or(1, Value("key")));
  if (by != "key" && by != "value")
    throw RuntimeError("You can only sort by either \"key\" or \"value\"");
  const size_t pos = by == "key" ? 0 : 1;
  std::vector<std::pair<Value, Value>> items = v.dict().items;
  const auto key_of = [&](const std::pair<Value, Value>& item) {
    const Value& k = pos == 0 ? item.first : item.second;
    return k.is_string() && !case_sensitive ? Value(ascii_lower(k.str())) : k;
  };
  std::stable_sort(items.begin(), items.end(),
                   [&](const auto& x, const auto& y) { return compare(key_of(x), key_of(y)) < 0; });
  if (truthy(a.get(2))) std::reverse(items.begin(), items.end());
  std::vector<Value> pairs;
  for (auto& [key, value] : items) pairs.push_back(make_list({key, value}, true));
  return make_list(std::move(pairs));
}

const std::unordered_map<std::string, FilterFn>& filters() {
  static const auto* const table = new std::unordered_map<std::string, FilterFn>{
      {"abs", f_abs},
      {"attr", f_attr},
      {"capitalize", f_capitalize},
      {"center", f_center},
      {"count", f_length},
      {"d", f_default},
      {"default", f_default},
      {"dictsort", f_dictsort},
      {"e", f_escape},
      {"escape", f_escape},
      {"first", f_first},
      {"float", f_float},
      {"forceescape", f_escape},
      {"format", f_format},
      {"indent", f_indent},
      {"int", f_int},
      {"items", f_items},
      {"join", f_join},
      {"last", f_last},
      {"length", f_length},
      {"list", f_list},
      {"lower", f_lower},
      {"replace", f_replace},
      {"round", f_round},
      {"safe", f_safe},
      {"string", f_string},
      {"title", f_title},
      {"tojson", f_tojson},
      {"trim", f_trim},
      {"upper", f_upper},
      {"wordcount", f_wordcount},
  };
  return *table;
}

}  // namespace

FilterFn find_filter(const std::string& name) {
  const auto it = filters().find(name);
  if (it != filters().end()) return it->second;
  return find_sequence_filter(name);
}

}  // namespace specd::chat
