// Callable and attribute-bearing template objects: namespaces, macros, bound methods and the
// `loop` variable of for loops.
#include "chat/objects.h"

#include <fmt/core.h>

#include "chat/call_args.h"

namespace specd::chat {

std::string Namespace::repr() const {
  std::string out = "<Namespace {";
  for (size_t i = 0; i < attrs_.size(); ++i) {
    if (i > 0) out += ", ";
    out += repr_string(attrs_[i].first) + ": " + chat::repr(attrs_[i].second);
  }
  return out + "}>";
}

Value Namespace::get_attr(const std::string& name) const {
  for (const auto& [key, value] : attrs_) {
    if (key == name) return value;
  }
  return Value::undefined(fmt::format("'Namespace object' has no attribute '{}'", name));
}

void Namespace::set_attr(const std::string& name, Value value) {
  if (!name.empty() && name[0] == '_') {
    throw RuntimeError(fmt::format(
        "Chat templates cannot store underscore-prefixed attributes on a namespace, but got "
        "'{}'. Please rename the attribute.",
        name));
  }
  for (auto& [key, existing] : attrs_) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  attrs_.emplace_back(name, std::move(value));
}

std::string BoundMethod::repr() const {
  return fmt::format("<built-in method {} of {} object>", name_, chat::type_name(self_));
}

Value BoundMethod::call(Interpreter& interp, CallArgs args) {
  return call_method(interp, self_, name_, args);
}

Value Macro::get_attr(const std::string& name) const {
  if (name == "name") return Value(def_->name);
  if (name == "arguments") {
    std::vector<Value> params(def_->params.begin(), def_->params.end());
    return make_list(std::move(params), true);
  }
  return Object::get_attr(name);
}

std::string LoopContext::repr() const {
  return fmt::format("<LoopContext {}/{}>", index0_ + 1, items_->size());
}

Value LoopContext::get_attr(const std::string& name) const {
  const int64_t length = static_cast<int64_t>(items_->size());
  const int64_t index0 = static_cast<int64_t>(index0_);
  if (name == "index0") return Value(index0);
  if (name == "index") return Value(index0 + 1);
  if (name == "revindex0") return Value(length - index0 - 1);
  if (name == "revindex") return Value(length - index0);
  if (name == "first") return Value(index0 == 0);
  if (name == "last") return Value(index0 == length - 1);
  if (name == "length") return Value(length);
  if (name == "depth") return Value(1);
  if (name == "depth0") return Value(0);
  if (name == "previtem") {
    if (index0 == 0) return Value::undefined("there is no previous item");
    return (*items_)[index0_ - 1];
  }
  if (name == "nextitem") {
    if (index0 + 1 >= length) return Value::undefined("there is no next item");
    return (*items_)[index0_ + 1];
  }
  if (name == "cycle" || name == "changed") {
    auto self = std::const_pointer_cast<LoopContext>(shared_from_this());
    const bool is_cycle = name == "cycle";
    return Value(ObjectPtr(std::make_shared<BuiltinFunction>(
        "loop." + name, [self, is_cycle](Interpreter&, CallArgs& args) {
          return is_cycle ? self->cycle(args) : Value(self->changed(args));
        })));
  }
  return Object::get_attr(name);
}

Value LoopContext::cycle(const CallArgs& args) const {
  if (args.positional.empty()) throw RuntimeError("no items for cycling given");
  return args.positional[index0_ % args.positional.size()];
}

bool LoopContext::changed(const CallArgs& args) {
  const Value current = make_list(args.positional, true);
  if (have_last_ && equals(current, last_changed_)) return false;
  have_last_ = true;
  last_changed_ = current;
  return true;
}

}  // namespace specd::chat
