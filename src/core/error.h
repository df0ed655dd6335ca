// Error type and checking macros: load, config and argument errors throw specd::Error.
#pragma once

#include <fmt/core.h>

#include <stdexcept>
#include <string>

namespace specd {

// An error whose message names the problem (file, tensor, argument) for the user.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace specd

// Throws specd::Error with a formatted message when `cond` is false.
#define SPECD_CHECK(cond, ...)                 \
  do {                                         \
    if (!(cond)) ::specd::fail(__VA_ARGS__);   \
  } while (0)
