// Binds the positional and keyword arguments of a filter, test, method or builtin call to its
// parameter names, with Python's errors for missing, extra or duplicate arguments.
#pragma once

#include <fmt/core.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "chat/value.h"

namespace specd::chat {

class BoundArgs {
 public:
  // `params` are the parameter names in order; the first `required` must be given.
  BoundArgs(const std::string& function, const CallArgs& args,
            std::initializer_list<const char*> params, size_t required = 0)
      : values_(params.size(), nullptr) {
    if (args.positional.size() > params.size()) {
      throw RuntimeError(fmt::format("{}() takes at most {} argument(s) ({} given)", function,
                                     params.size(), args.positional.size()));
    }
    for (size_t i = 0; i < args.positional.size(); ++i) values_[i] = &args.positional[i];
    for (const auto& [name, value] : args.named) {
      size_t index = 0;
      for (const char* param : params) {
        if (name == param) break;
        ++index;
      }
      if (index == params.size()) {
        throw RuntimeError(
            fmt::format("{}() got an unexpected keyword argument '{}'", function, name));
      }
      if (values_[index] != nullptr) {
        throw RuntimeError(
            fmt::format("{}() got multiple values for argument '{}'", function, name));
      }
      values_[index] = &value;
    }
    for (size_t i = 0; i < required; ++i) {
      if (values_[i] == nullptr) {
        throw RuntimeError(
            fmt::format("{}() missing required argument '{}'", function, params.begin()[i]));
      }
    }
  }

  bool has(size_t i) const { return values_[i] != nullptr; }
  const Value& get(size_t i) const { return values_[i] != nullptr ? *values_[i] : missing_; }
  Value get_or(size_t i, Value fallback) const {
    return values_[i] != nullptr ? *values_[i] : fallback;
  }

 private:
  std::vector<const Value*> values_;
  Value missing_;
};

}  // namespace specd::chat
