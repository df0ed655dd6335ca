// Python methods of str, dict and list values that templates call (`s.split('x')`, `d.items()`),
// with the sandbox's refusal of the mutating ones.
#include <fmt/core.h>

#include <algorithm>
#include <cstring>

#include "chat/call_args.h"
#include "chat/objects.h"
#include "chat/py_format.h"
#include "chat/utf8.h"

namespace specd::chat {
namespace {

const char* const kStrMethods[] = {
    "capitalize", "casefold",   "center",     "count",        "endswith",     "find",
    "format",     "index",      "isalnum",    "isalpha",      "isdigit",      "islower",
    "isnumeric",  "isspace",    "istitle",    "isupper",      "join",         "ljust",
    "lower",      "lstrip",     "partition",  "removeprefix", "removesuffix", "replace",
    "rfind",      "rindex",     "rjust",      "rpartition",   "rsplit",       "rstrip",
    "split",      "splitlines", "startswith", "strip",        "swapcase",     "title",
    "upper",      "zfill"};
const char* const kDictMethods[] = {"copy", "get", "items", "keys", "values"};
const char* const kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
const char* const kListMethods[] = {"copy", "count", "index"};
const char* const kListUnsafe[] = {"append", "clear",  "extend",  "insert",
                                   "pop",    "remove", "reverse", "sort"};

template <size_t N>
bool in(const char* const (&names)[N], const std::string& name) {
  return std::any_of(std::begin(names), std::end(names), [&](const char* n) { return name == n; });
}

const std::string& need_str(const Value& v, const char* method) {
  if (!v.is_string()) {
    throw RuntimeError(fmt::format("{}() argument must be str, not {}", method, type_name(v)));
  }
  return v.str();
}

// Python slice bounds [start, end) of a code-point sequence of length `len`.
std::pair<size_t, size_t> sub_range(const BoundArgs& a, size_t start_index, size_t len) {
  const auto bound = [&](size_t i, int64_t fallback) -> int64_t {
    if (!a.has(i) || a.get(i).is_none()) return fallback;
    int64_t x = a.get(i).as_int();
    if (x < 0) x = std::max<int64_t>(0, x + static_cast<int64_t>(len));
    return std::min<int64_t>(x, static_cast<int64_t>(len));
  };
  const int64_t start = bound(start_index, 0);
  const int64_t end = bound(start_index + 1, static_cast<int64_t>(len));
  return {static_cast<size_t>(start), static_cast<size_t>(std::max(start, end))};
}

Value split(const std::string& s, const Value& sep_value, int64_t maxsplit, bool from_right) {
  std::vector<Value> parts;
  if (sep_value.is_undefined() || sep_value.is_none()) {
    const std::vector<char32_t> cps = to_code_points(s);
    std::vector<std::pair<size_t, size_t>> words;  // code point ranges
    if (!from_right) {
      size_t i = 0;
      while (i < cps.size()) {
        while (i < cps.size() && py_isspace(cps[i])) ++i;
        if (i == cps.size()) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          words.emplace_back(i, cps.size());  // the rest, trailing whitespace included
          break;
        }
        size_t j = i;
        while (j < cps.size() && !py_isspace(cps[j])) ++j;
        words.emplace_back(i, j);
        i = j;
      }
    } else {
      size_t i = cps.size();
      while (i > 0) {
        while (i > 0 && py_isspace(cps[i - 1])) --i;
        if (i == 0) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          words.emplace_back(0, i);  // the rest, leading whitespace included
          break;
        }
        size_t j = i;
        while (j > 0 && !py_isspace(cps[j - 1])) --j;
        words.emplace_back(j, i);
        i = j;
      }
      std::reverse(words.begin(), words.end());
    }
    for (const auto& [b, e] : words) parts.emplace_back(from_code_points(cps, b, e));
    return make_list(std::move(parts));
  }
  const std::string& sep = need_str(sep_value, "split");
  if (sep.empty()) throw RuntimeError("empty separator");
  std::vector<std::string> pieces;
  if (!from_right) {
    size_t start = 0;
    while (true) {
      const size_t found = maxsplit >= 0 && static_cast<int64_t>(pieces.size()) == maxsplit
                               ? std::string::npos
                               : s.find(sep, start);
      if (found == std::string::npos) {
        pieces.push_back(s.substr(start));
        break;
      }
      pieces.push_back(s.substr(start, found - start));
      start = found + sep.size();
    }
  } else {
    size_t end = s.size();
    while (true) {
      const size_t found =
          maxsplit >= 0 && static_cast<int64_t>(pieces.size()) == maxsplit
              ? std::string::npos
              : (end < sep.size() ? std::string::npos : s.rfind(sep, end - sep.size()));
      if (found == std::string::npos) {
        pieces.push_back(s.substr(0, end));
        break;
      }
      pieces.push_back(s.substr(found + sep.size(), end - found - sep.size()));
      end = found;
    }
    std::reverse(pieces.begin(), pieces.end());
  }
  for (std::string& piece : pieces) parts.emplace_back(std::move(piece));
  return make_list(std::move(parts));
}

Value str_replace(Interpreter& interp, const std::string& s, const std::string& old_s,
                  const std::string& new_s, int64_t count) {
  std::string out;
  int64_t done = 0;
  if (old_s.empty()) {
    const std::vector<size_t> offsets = code_point_offsets(s);
    for (size_t i = 0; i + 1 < offsets.size(); ++i) {
      if (count < 0 || done < count) {
        out += new_s;
        ++done;
      }
      out.append(s, offsets[i], offsets[i + 1] - offsets[i]);
      interp.check_size(out.size());
    }
    if (count < 0 || done < count) out += new_s;
    return Value(std::move(out));
  }
  size_t start = 0;
  while (count < 0 || done < count) {
    const size_t found = s.find(old_s, start);
    if (found == std::string::npos) break;
    out.append(s, start, found - start);
    out += new_s;
    interp.check_size(out.size());
    start = found + old_s.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return Value(std::move(out));
}

bool all_code_points(const std::string& s, bool (*pred)(char32_t)) {
  if (s.empty()) return false;
  for (size_t pos = 0; pos < s.size();) {
    if (!pred(decode_utf8(s, &pos))) return false;
  }
  return true;
}

bool is_ascii_digit(char32_t c) { return c >= '0' && c <= '9'; }
bool is_alpha(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0xC0; }
bool is_alnum(char32_t c) { return is_ascii_digit(c) || is_alpha(c); }
bool is_space(char32_t c) { return py_isspace(c); }

Value pad_to(const std::string& s, const BoundArgs& a, char mode) {
  const int64_t width = std::min<int64_t>(a.get(0).as_int(), 1 << 20);
  const std::string fill = a.has(1) ? need_str(a.get(1), "fill") : " ";
  if (utf8_length(fill) != 1)
    throw RuntimeError("The fill character must be exactly one character long");
  const int64_t len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return Value(s);
  const int64_t margin = width - len;
  int64_t left = mode == 'l' ? 0 : mode == 'r' ? margin : margin / 2 + (margin & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < margin - left; ++i) out += fill;
  return Value(std::move(out));
}

Value str_method(Interpreter& interp, const std::string& s, const std::string& name,
                 CallArgs& args) {
  if (name == "upper" || name == "lower" || name == "casefold" || name == "title" ||
      name == "capitalize" || name == "swapcase") {
    BoundArgs(name, args, {});
    if (name == "upper") return Value(ascii_upper(s));
    if (name == "lower" || name == "casefold") return Value(ascii_lower(s));
    if (name == "title") return Value(py_title(s));
    if (name == "capitalize") return Value(py_capitalize(s));
    std::string out = s;
    for (char& c : out) {
      if (c >= 'a' && c <= 'z')
        c = static_cast<char>(c - 'a' + 'A');
      else if (c >= 'A' && c <= 'Z')
        c = static_cast<char>(c - 'A' + 'a');
    }
    return Value(std::move(out));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const BoundArgs a(name, args, {"chars"});
    const bool left = name != "rstrip", right = name != "lstrip";
    if (a.has(0) && !a.get(0).is_none()) {
      const std::string& chars = need_str(a.get(0), name.c_str());
      return Value(py_strip(s, &chars, left, right));
    }
    return Value(py_strip(s, nullptr, left, right));
  }
  if (name == "split" || name == "rsplit") {
    const BoundArgs a(name, args, {"sep", "maxsplit"});
    return split(s, a.get(0), a.get_or(1, Value(-1)).as_int(), name == "rsplit");
  }
  if (name == "splitlines") {
    const BoundArgs a(name, args, {"keepends"});
    const bool keep = truthy(a.get(0));
    std::vector<Value> lines;
    std::string line;
    for (size_t pos = 0; pos < s.size();) {
      const size_t start = pos;
      const char32_t cp = decode_utf8(s, &pos);
      if (py_is_linebreak(cp)) {
        if (cp == '\r' && pos < s.size() && s[pos] == '\n') ++pos;
        if (keep) line.append(s, start, pos - start);
        lines.emplace_back(line);
        line.clear();
      } else {
        line.append(s, start, pos - start);
      }
    }
    if (!line.empty()) lines.emplace_back(line);
    return make_list(std::move(lines));
  }
  if (name == "startswith" || name == "endswith") {
    const BoundArgs a(name, args, {"prefix", "start", "end"}, 1);
    const std::vector<char32_t> cps = to_code_points(s);
    const auto [b, e] = sub_range(a, 1, cps.size());
    const std::string sub = from_code_points(cps, b, e);
    std::vector<Value> candidates;
    if (a.get(0).is_tuple()) {
      candidates = a.get(0).list().items;
    } else if (a.get(0).is_string()) {
      candidates.push_back(a.get(0));
    } else {
      throw RuntimeError(fmt::format("{} first arg must be str or a tuple of str, not {}", name,
                                     type_name(a.get(0))));
    }
    for (const Value& c : candidates) {
      const std::string& p = need_str(c, name.c_str());
      if (p.size() > sub.size()) continue;
      if (name == "startswith" ? sub.compare(0, p.size(), p) == 0
                               : sub.compare(sub.size() - p.size(), p.size(), p) == 0) {
        return Value(true);
      }
    }
    return Value(false);
  }
  if (name == "replace") {
    const BoundArgs a(name, args, {"old", "new", "count"}, 2);
    return str_replace(interp, s, need_str(a.get(0), "replace"), need_str(a.get(1), "replace"),
                       a.get_or(2, Value(-1)).as_int());
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    const BoundArgs a(name, args, {"sub", "start", "end"}, 1);
    const std::string& sub = need_str(a.get(0), name.c_str());
    const std::vector<char32_t> cps = to_code_points(s);
    const auto [b, e] = sub_range(a, 1, cps.size());
    const std::string hay = from_code_points(cps, b, e);
    if (name == "count") {
      if (sub.empty()) return Value(static_cast<int64_t>(e - b + 1));
      int64_t n = 0;
      for (size_t p = hay.find(sub); p != std::string::npos; p = hay.find(sub, p + sub.size())) ++n;
      return Value(n);
    }
    const bool reverse = name[0] == 'r';
    const size_t found = reverse ? hay.rfind(sub) : hay.find(sub);
    if (found == std::string::npos) {
      if (name == "index" || name == "rindex") throw RuntimeError("substring not found");
      return Value(-1);
    }
    return Value(static_cast<int64_t>(b + utf8_length(std::string_view(hay).substr(0, found))));
  }
  if (name == "join") {
    const BoundArgs a(name, args, {"iterable"}, 1);
    std::string out;
    size_t i = 0;
    for (const Value& item : interp.iterate(a.get(0))) {
      if (!item.is_string()) {
        throw RuntimeError(
            fmt::format("sequence item {}: expected str instance, {} found", i, type_name(item)));
      }
      if (i++ > 0) out += s;
      out += item.str();
      interp.check_size(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "format") return Value(str_format(s, args));
  if (name == "isdigit" || name == "isnumeric") {
    BoundArgs(name, args, {});
    return Value(all_code_points(s, is_ascii_digit));
  }
  if (name == "isalpha") return BoundArgs(name, args, {}), Value(all_code_points(s, is_alpha));
  if (name == "isalnum") return BoundArgs(name, args, {}), Value(all_code_points(s, is_alnum));
  if (name == "isspace") return BoundArgs(name, args, {}), Value(all_code_points(s, is_space));
  if (name == "islower" || name == "isupper" || name == "istitle") {
    BoundArgs(name, args, {});
    if (name == "istitle") return Value(!s.empty() && py_title(s) == s && ascii_lower(s) != s);
    const std::string mapped = name == "islower" ? ascii_lower(s) : ascii_upper(s);
    return Value(mapped == s && ascii_lower(s) != ascii_upper(s));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const BoundArgs a(name, args, {"affix"}, 1);
    const std::string& affix = need_str(a.get(0), name.c_str());
    if (affix.size() <= s.size()) {
      if (name == "removeprefix" && s.compare(0, affix.size(), affix) == 0) {
        return Value(s.substr(affix.size()));
      }
      if (name == "removesuffix" && s.compare(s.size() - affix.size(), affix.size(), affix) == 0) {
        return Value(s.substr(0, s.size() - affix.size()));
      }
    }
    return Value(s);
  }
  if (name == "ljust" || name == "rjust" || name == "center") {
    const BoundArgs a(name, args, {"width", "fillchar"}, 1);
    return pad_to(s, a, name == "ljust" ? 'l' : name == "rjust" ? 'r' : 'c');
  }
  if (name == "zfill") {
    const BoundArgs a(name, args, {"width"}, 1);
    const int64_t width = std::min<int64_t>(a.get(0).as_int(), 1 << 20);
    const int64_t len = static_cast<int64_t>(utf8_length(s));
    if (width <= len) return Value(s);
    const std::string zeros(static_cast<size_t>(width - len), '0');
    if (!s.empty() && (s[0] == '+' || s[0] == '-'))
      return Value(s.substr(0, 1) + zeros + s.substr(1));
    return Value(zeros + s);
  }
  if (name == "partition" || name == "rpartition") {
    const BoundArgs a(name, args, {"sep"}, 1);
    const std::string& sep = need_str(a.get(0), name.c_str());
    if (sep.empty()) throw RuntimeError("empty separator");
    const size_t found = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (found == std::string::npos) {
      return name == "partition" ? make_list({Value(s), Value(""), Value("")}, true)
                                 : make_list({Value(""), Value(""), Value(s)}, true);
    }
    return make_list({Value(s.substr(0, found)), Value(sep), Value(s.substr(found + sep.size()))},
                     true);
  }
  throw RuntimeError(fmt::format("'str' object has no attribute '{}'", name));
}

Value dict_method(const Value& self, const std::string& name, CallArgs& args) {
  const Dict& dict = self.dict();
  if (name == "get") {
    const BoundArgs a(name, args, {"key", "default"}, 1);
    const Value* found = dict.find(a.get(0));
    return found != nullptr ? *found : a.get_or(1, Value::none());
  }
  BoundArgs(name, args, {});
  if (name == "copy") return self;
  std::vector<Value> out;
  for (const auto& [key, value] : dict.items) {
    if (name == "items") {
      out.push_back(make_list({key, value}, true));
    } else {
      out.push_back(name == "keys" ? key : value);
    }
  }
  return make_iterator(std::move(out), name == "items"  ? "dict_items"
                                       : name == "keys" ? "dict_keys"
                                                        : "dict_values");
}

Value list_method(const Value& self, const std::string& name, CallArgs& args) {
  const auto& items = self.list().items;
  if (name == "copy") {
    BoundArgs(name, args, {});
    return make_list(items, self.is_tuple());
  }
  if (name == "count") {
    const BoundArgs a(name, args, {"value"}, 1);
    return Value(static_cast<int64_t>(std::count_if(
        items.begin(), items.end(), [&](const Value& v) { return equals(v, a.get(0)); })));
  }
  const BoundArgs a(name, args, {"value", "start", "stop"}, 1);
  const auto [b, e] = sub_range(a, 1, items.size());
  for (size_t i = b; i < e; ++i) {
    if (equals(items[i], a.get(0))) return Value(static_cast<int64_t>(i));
  }
  throw RuntimeError(fmt::format("{} is not in list", repr(a.get(0))));
}

}  // namespace

bool has_method(const Value& self, const std::string& name, bool* unsafe) {
  *unsafe = false;
  if (self.is_string()) return in(kStrMethods, name);
  if (self.is_dict()) {
    *unsafe = in(kDictUnsafe, name);
    return *unsafe || in(kDictMethods, name);
  }
  if (self.is_sequence()) {
    if (self.is_tuple()) return name == "count" || name == "index";
    *unsafe = in(kListUnsafe, name);
    return *unsafe || in(kListMethods, name);
  }
  return false;
}

Value call_method(Interpreter& interp, const Value& self, const std::string& name, CallArgs& args) {
  if (self.is_string()) return str_method(interp, self.str(), name, args);
  if (self.is_dict()) return dict_method(self, name, args);
  if (self.is_sequence()) return list_method(self, name, args);
  throw RuntimeError(fmt::format("'{}' object has no attribute '{}'", type_name(self), name));
}

}  // namespace specd::chat
