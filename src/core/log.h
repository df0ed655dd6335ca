// Minimal leveled logging to stderr.
#pragma once

#include <fmt/core.h>

#include <cstdio>

namespace specd {

enum class LogLevel { kDebug, kInfo, kWarn, kError, kQuiet };
void set_log_level(LogLevel level);
LogLevel log_level();

template <typename... Args>
void log_at(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (level < log_level()) return;
  fmt::print(stderr, format, std::forward<Args>(args)...);
  std::fputc('\n', stderr);
}

#define SPECD_LOG_INFO(...) ::specd::log_at(::specd::LogLevel::kInfo, __VA_ARGS__)
#define SPECD_LOG_WARN(...) ::specd::log_at(::specd::LogLevel::kWarn, __VA_ARGS__)
#define SPECD_LOG_DEBUG(...) ::specd::log_at(::specd::LogLevel::kDebug, __VA_ARGS__)

}  // namespace specd
