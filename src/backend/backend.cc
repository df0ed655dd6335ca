// make_backend(): picks the backend implementation for a device.
#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace specd {

std::unique_ptr<Backend> make_backend(Device device, int threads) {
  switch (device.kind) {
    case DeviceKind::kCpu:
      return std::make_unique<CpuBackend>(threads);
    case DeviceKind::kCuda:
      fail("this build of specd has no CUDA backend");
  }
  fail("unknown device kind");
}

}  // namespace specd
