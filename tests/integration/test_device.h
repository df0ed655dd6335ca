// The device the integration tests run on (SPECD_TEST_DEVICE, default cpu) and host copies.
#pragma once

#include <cstdlib>
#include <vector>

#include "backend/backend.h"

namespace specd::testing_support {

inline Device test_device() {
  const char* name = std::getenv("SPECD_TEST_DEVICE");
  return parse_device(name != nullptr && *name != '\0' ? name : "cpu");
}

inline bool on_cpu() { return test_device().kind == DeviceKind::kCpu; }

// A contiguous f32 tensor's values on the host.
inline std::vector<float> host_copy(Backend& backend, const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  backend.copy_to_host(out.data(), t.data, t.bytes());
  return out;
}

}  // namespace specd::testing_support
