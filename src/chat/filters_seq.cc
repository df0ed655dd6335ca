// Registries of jinja2's builtin filters and tests. This file: sequence filters (map, select,
// reject, selectattr, rejectattr, sort, unique, min, max, sum, batch, reverse).
#include <fmt/core.h>

#include <algorithm>
#include <functional>
#include <unordered_map>

#include "chat/call_args.h"
#include "chat/filters.h"
#include "chat/utf8.h"

namespace specd::chat {
namespace {

std::vector<Value> attribute_parts(const Value& attribute) {
  if (attribute.is_undefined() || attribute.is_none()) return {};
  if (!attribute.is_string()) return {attribute};
  std::vector<Value> parts;
  const std::string& path = attribute.str();
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    if (digits && part.size() < 18) {
      parts.emplace_back(static_cast<int64_t>(std::stoll(part)));
    } else {
      parts.emplace_back(std::move(part));
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

// make_attrgetter: each part through getitem; `fallback` replaces undefined results.
Value get_path(Interpreter& interp, Value item, const std::vector<Value>& parts,
               const Value* fallback) {
  for (const Value& part : parts) {
    item = interp.get_item(item, part);
    if (fallback != nullptr && item.is_undefined()) item = *fallback;
  }
  return item;
}

Value ignore_case(const Value& v) { return v.is_string() ? Value(ascii_lower(v.str())) : v; }

Value f_map(Interpreter& interp, const Value& v, CallArgs& args) {
  std::vector<Value> out;
  if (args.positional.empty()) {
    Value attribute, fallback = Value::none();
    bool have_attribute = false;
    for (const auto& [name, value] : args.named) {
      if (name == "attribute") {
        attribute = value;
        have_attribute = true;
      } else if (name == "default") {
        fallback = value;
      } else {
        throw RuntimeError(fmt::format("Unexpected keyword argument '{}'", name));
      }
    }
    if (!have_attribute) throw RuntimeError("map requires a filter argument");
    const std::vector<Value> parts = attribute_parts(attribute);
    for (const Value& item : interp.iterate(v)) {
      out.push_back(get_path(interp, item, parts, fallback.is_none() ? nullptr : &fallback));
    }
    return make_iterator(std::move(out));
  }
  const std::string name = to_str(args.positional[0]);
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.named = args.named;
  for (const Value& item : interp.iterate(v)) out.push_back(interp.apply_filter(name, item, rest));
  return make_iterator(std::move(out));
}

// select / reject / selectattr / rejectattr.
Value select_or_reject(Interpreter& interp, const Value& v, CallArgs& args, bool select,
                       bool by_attribute) {
  size_t offset = 0;
  std::vector<Value> parts;
  if (by_attribute) {
    if (args.positional.empty()) throw RuntimeError("Missing parameter for attribute name");
    parts = attribute_parts(args.positional[0]);
    offset = 1;
  }
  const bool have_test = args.positional.size() > offset;
  std::string test;
  CallArgs test_args;
  if (have_test) {
    test = to_str(args.positional[offset]);
    test_args.positional.assign(args.positional.begin() + offset + 1, args.positional.end());
    test_args.named = args.named;
  }
  std::vector<Value> out;
  for (const Value& item : interp.iterate(v)) {
    const Value subject = by_attribute ? get_path(interp, item, parts, nullptr) : item;
    const bool passed = have_test ? interp.apply_test(test, subject, test_args) : truthy(subject);
    if (passed == select) out.push_back(item);
  }
  return make_iterator(std::move(out));
}

Value f_select(Interpreter& i, const Value& v, CallArgs& a) {
  return select_or_reject(i, v, a, true, false);
}
Value f_reject(Interpreter& i, const Value& v, CallArgs& a) {
  return select_or_reject(i, v, a, false, false);
}
Value f_selectattr(Interpreter& i, const Value& v, CallArgs& a) {
  return select_or_reject(i, v, a, true, true);
}
Value f_rejectattr(Interpreter& i, const Value& v, CallArgs& a) {
  return select_or_reject(i, v, a, false, true);
}

// Sort keys for `attribute` (comma-separated for sort), lower-cased unless case_sensitive.
std::function<Value(const Value&)> key_getter(Interpreter& interp, const Value& attribute,
                                              bool case_sensitive, bool multi) {
  std::vector<std::vector<Value>> paths;
  if (multi && attribute.is_string()) {
    size_t start = 0;
    const std::string& s = attribute.str();
    while (true) {
      const size_t comma = s.find(',', start);
      paths.push_back(attribute_parts(
          Value(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start))));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else {
    paths.push_back(attribute_parts(attribute));
  }
  return [&interp, paths, case_sensitive](const Value& item) {
    std::vector<Value> keys;
    for (const auto& parts : paths) {
      const Value key = get_path(interp, item, parts, nullptr);
      keys.push_back(case_sensitive ? key : ignore_case(key));
    }
    return keys.size() == 1 ? keys[0] : make_list(std::move(keys));
  };
}

Value f_sort(Interpreter& interp, const Value& v, CallArgs& args) {
  const BoundArgs a("sort", args, {"reverse", "case_sensitive", "attribute"});
  const auto key = key_getter(interp, a.get(2), truthy(a.get(1)), true);
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : interp.iterate(v)) keyed.emplace_back(key(item), item);
  const bool reverse = truthy(a.get(0));
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& x, const auto& y) {
    return reverse ? compare(y.first, x.first) < 0 : compare(x.first, y.first) < 0;
  });
  std::vector<Value> out;
  for (auto& [k, item] : keyed) out.push_back(std::move(item));
  return make_list(std::move(out));
}

Value f_unique(Interpreter& interp, const Value& v, CallArgs& args) {
  const BoundArgs a("unique", args, {"case_sensitive", "attribute"});
  const auto key = key_getter(interp, a.get(1), truthy(a.get(0)), false);
  std::vector<Value> seen, out;
  for (const Value& item : interp.iterate(v)) {
    const Value k = key(item);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
      continue;
    }
    seen.push_back(k);
    out.push_back(item);
  }
  return make_iterator(std::move(out));
}

Value min_or_max(Interpreter& interp, const Value& v, CallArgs& args, bool want_max) {
  const BoundArgs a(want_max ? "max" : "min", args, {"case_sensitive", "attribute"});
  const std::vector<Value> items = interp.iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const auto key = key_getter(interp, a.get(1), truthy(a.get(0)), false);
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    const Value k = key(items[i]);
    const int c = compare(k, best_key);
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}

Value f_min(Interpreter& i, const Value& v, CallArgs& a) { return min_or_max(i, v, a, false); }
Value f_max(Interpreter& i, const Value& v, CallArgs& a) { return min_or_max(i, v, a, true); }

Value f_sum(Interpreter& interp, const Value& v, CallArgs& args) {
  const BoundArgs a("sum", args, {"attribute", "start"});
  const std::vector<Value> parts = attribute_parts(a.get(0));
  Value total = a.get_or(1, Value(0));
  for (const Value& item : interp.iterate(v)) {
    total = binary_op("+", total, get_path(interp, item, parts, nullptr), interp);
  }
  return total;
}

Value f_batch(Interpreter& interp, const Value& v, CallArgs& args) {
  const BoundArgs a("batch", args, {"linecount", "fill_with"}, 1);
  const int64_t count = a.get(0).as_int();
  if (count <= 0) throw RuntimeError("batch: linecount must be positive");
  std::vector<Value> batches, current;
  for (const Value& item : interp.iterate(v)) {
    current.push_back(item);
    if (static_cast<int64_t>(current.size()) == count) {
      batches.push_back(make_list(std::move(current)));
      current.clear();
    }
  }
  if (!current.empty()) {
    if (a.has(1) && !a.get(1).is_none()) {
      while (static_cast<int64_t>(current.size()) < count) current.push_back(a.get(1));
    }
    batches.push_back(make_list(std::move(current)));
  }
  return make_iterator(std::move(batches));
}

Value f_reverse(Interpreter& interp, const Value& v, CallArgs& args) {
  BoundArgs("reverse", args, {});
  if (v.is_string()) {
    std::vector<char32_t> cps = to_code_points(v.str());
    std::reverse(cps.begin(), cps.end());
    return Value(from_code_points(cps, 0, cps.size()));
  }
  std::vector<Value> items = interp.iterate(v);
  std::reverse(items.begin(), items.end());
  return v.is_sequence() ? make_iterator(std::move(items), "list_reverseiterator")
                         : make_list(std::move(items));
}

}  // namespace

Value lookup_attribute(Interpreter& interp, const Value& item, const Value& attribute) {
  return get_path(interp, item, attribute_parts(attribute), nullptr);
}

FilterFn find_sequence_filter(const std::string& name) {
  static const auto* const table = new std::unordered_map<std::string, FilterFn>{
      {"batch", f_batch},     {"map", f_map},       {"max", f_max},
      {"min", f_min},         {"reject", f_reject}, {"rejectattr", f_rejectattr},
      {"reverse", f_reverse}, {"select", f_select}, {"selectattr", f_selectattr},
      {"sort", f_sort},       {"sum", f_sum},       {"unique", f_unique},
  };
  const auto it = table->find(name);
  return it == table->end() ? nullptr : it->second;
}

}  // namespace specd::chat
