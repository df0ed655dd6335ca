// Global log level.
#include "core/log.h"

#include <atomic>

namespace specd {
namespace {
std::atomic<LogLevel> g_level{LogLevel::kInfo};
}
void set_log_level(LogLevel level) { g_level.store(level); }
LogLevel log_level() { return g_level.load(); }
}  // namespace specd
