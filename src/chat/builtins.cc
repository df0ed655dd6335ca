// The globals of transformers' chat-template environment: range, dict, namespace, joiner,
// cycler, raise_exception and strftime_now.
#include <fmt/core.h>

#include <ctime>
#include <memory>

#include "chat/call_args.h"
#include "chat/objects.h"

namespace specd::chat {
namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2's sandbox refuses larger ranges

Value range_fn(Interpreter&, CallArgs& args) {
  if (!args.named.empty()) throw RuntimeError("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) throw RuntimeError("range expected 1 to 3 arguments");
  for (const Value& v : p) {
    if (!v.is_int() && !v.is_bool()) {
      throw RuntimeError(
          fmt::format("'{}' object cannot be interpreted as an integer", type_name(v)));
    }
  }
  const int64_t start = p.size() == 1 ? 0 : p[0].as_int();
  const int64_t stop = p.size() == 1 ? p[0].as_int() : p[1].as_int();
  const int64_t step = p.size() == 3 ? p[2].as_int() : 1;
  if (step == 0) throw RuntimeError("range() arg 3 must not be zero");
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(items.size()) >= kMaxRange) {
      throw RuntimeError(fmt::format(
          "Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", kMaxRange));
    }
    items.emplace_back(i);
  }
  return make_list(std::move(items));
}

// dict(mapping_or_pairs, **kwargs) as Python builds it, in insertion order.
std::vector<std::pair<Value, Value>> dict_items(Interpreter& interp, const CallArgs& args,
                                                const char* fn) {
  if (args.positional.size() > 1) {
    throw RuntimeError(
        fmt::format("{} expected at most 1 argument, got {}", fn, args.positional.size()));
  }
  std::vector<std::pair<Value, Value>> items;
  const auto put = [&items](Value key, Value value) {
    for (auto& [k, v] : items) {
      if (equals(k, key)) {
        v = std::move(value);
        return;
      }
    }
    items.emplace_back(std::move(key), std::move(value));
  };
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_dict()) {
      for (const auto& [k, v] : source.dict().items) put(k, v);
    } else {
      for (const Value& pair : interp.iterate(source)) {
        const std::vector<Value> kv = interp.iterate(pair);
        if (kv.size() != 2) {
          throw RuntimeError("dictionary update sequence element has length " +
                             std::to_string(kv.size()) + "; 2 is required");
        }
        put(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [name, value] : args.named) put(Value(name), value);
  return items;
}

Value dict_fn(Interpreter& interp, CallArgs& args) {
  return make_dict(dict_items(interp, args, "dict"));
}

Value namespace_fn(Interpreter& interp, CallArgs& args) {
  auto ns = std::make_shared<Namespace>();
  interp.track(ns);
  for (auto& [key, value] : dict_items(interp, args, "namespace")) {
    if (!key.is_string()) throw RuntimeError("namespace attribute names must be strings");
    ns->set_attr(key.str(), value);
  }
  return Value(ObjectPtr(ns));
}

Value raise_exception_fn(Interpreter&, CallArgs& args) {
  const BoundArgs a("raise_exception", args, {"message"}, 1);
  throw RaisedError(to_str(a.get(0)));
}

// Python's datetime.strftime on a naive local time: %f is microseconds, %z and %Z are empty.
Value strftime_now_fn(Interpreter& interp, CallArgs& args) {
  const BoundArgs a("strftime_now", args, {"format"}, 1);
  if (!a.get(0).is_string()) throw RuntimeError("strftime() argument 1 must be str");
  const std::string& format = a.get(0).str();
  std::string expanded;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size()) {
      const char c = format[i + 1];
      if (c == 'f') {
        expanded += "000000";
        ++i;
        continue;
      }
      if (c == 'z' || c == 'Z') {
        ++i;
        continue;
      }
      expanded += format.substr(i, 2);
      ++i;
      continue;
    }
    expanded += format[i];
  }
  if (expanded.empty()) return Value("");
  std::string out(expanded.size() * 8 + 256, '\0');
  const std::tm now = interp.now();
  const size_t n = std::strftime(out.data(), out.size(), expanded.c_str(), &now);
  out.resize(n);
  return Value(std::move(out));
}

// joiner(sep=", "): returns "" the first time it is called, then sep.
Value joiner_fn(Interpreter&, CallArgs& args) {
  const BoundArgs a("joiner", args, {"sep"});
  const std::string separator = to_str(a.get_or(0, Value(", ")));
  auto used = std::make_shared<bool>(false);
  return Value(ObjectPtr(
      std::make_shared<BuiltinFunction>("joiner", [separator, used](Interpreter&, CallArgs&) {
        if (!*used) {
          *used = true;
          return Value("");
        }
        return Value(separator);
      })));
}

class Cycler : public Object, public std::enable_shared_from_this<Cycler> {
 public:
  explicit Cycler(std::vector<Value> items) : items_(std::move(items)) {}
  std::string type_name() const override { return "Cycler"; }
  Value get_attr(const std::string& name) const override {
    auto self = std::const_pointer_cast<Cycler>(shared_from_this());
    if (name == "current") return items_[pos_];
    if (name == "next") {
      return Value(
          ObjectPtr(std::make_shared<BuiltinFunction>("next", [self](Interpreter&, CallArgs&) {
            Value v = self->items_[self->pos_];
            self->pos_ = (self->pos_ + 1) % self->items_.size();
            return v;
          })));
    }
    if (name == "reset") {
      return Value(
          ObjectPtr(std::make_shared<BuiltinFunction>("reset", [self](Interpreter&, CallArgs&) {
            self->pos_ = 0;
            return Value::none();
          })));
    }
    return Object::get_attr(name);
  }

 private:
  std::vector<Value> items_;
  size_t pos_ = 0;
};

Value cycler_fn(Interpreter&, CallArgs& args) {
  if (args.positional.empty()) throw RuntimeError("at least one item has to be provided");
  return Value(ObjectPtr(std::make_shared<Cycler>(args.positional)));
}

}  // namespace

void add_globals(Scope* scope) {
  const auto add = [scope](const char* name, BuiltinFunction::Fn fn) {
    scope->set(name, Value(ObjectPtr(std::make_shared<BuiltinFunction>(name, std::move(fn)))));
  };
  add("range", range_fn);
  add("dict", dict_fn);
  add("namespace", namespace_fn);
  add("raise_exception", raise_exception_fn);
  add("strftime_now", strftime_now_fn);
  add("joiner", joiner_fn);
  add("cycler", cycler_fn);
}

}  // namespace specd::chat
