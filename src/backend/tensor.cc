// Parsing and printing of device names ("cpu", "cuda", "cuda:N").
#include "backend/tensor.h"

#include <charconv>

#include "core/error.h"

namespace specd {

Device parse_device(const std::string& text) {
  if (text == "cpu") return Device{DeviceKind::kCpu, 0};
  if (text == "cuda") return Device{DeviceKind::kCuda, 0};
  const std::string prefix = "cuda:";
  if (text.size() > prefix.size() && text.compare(0, prefix.size(), prefix) == 0) {
    const char* begin = text.data() + prefix.size();
    const char* end = text.data() + text.size();
    int index = -1;
    bool digits_only = true;
    for (const char* p = begin; p != end; ++p) digits_only = digits_only && *p >= '0' && *p <= '9';
    auto [ptr, ec] = std::from_chars(begin, end, index);
    if (digits_only && ec == std::errc() && ptr == end && index >= 0) {
      return Device{DeviceKind::kCuda, index};
    }
    fail("bad device '{}': the CUDA device index must be a non-negative integer (e.g. cuda:0)",
         text);
  }
  fail("unknown device '{}' (expected cpu, cuda or cuda:N)", text);
}

std::string device_name(Device device) {
  switch (device.kind) {
    case DeviceKind::kCpu:
      return "cpu";
    case DeviceKind::kCuda:
      return "cuda:" + std::to_string(device.index);
  }
  return "?";
}

}  // namespace specd
