// Wall-clock timing helpers.
#pragma once

#include <chrono>

namespace specd {

inline double now_seconds() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

}  // namespace specd
