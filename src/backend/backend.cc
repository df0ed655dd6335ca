// make_backend(): picks the backend implementation for a device; download tickets and marks.
#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/timer.h"
#ifdef SPECD_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace specd {

bool cuda_available() {
#ifdef SPECD_WITH_CUDA
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

uint64_t Backend::mark() {
  mark_seconds_[next_mark_ % kMarkSlots] = now_seconds();
  return next_mark_++;
}

double Backend::seconds_between(uint64_t a, uint64_t b) {
  return mark_seconds_[mark_slot(b)] - mark_seconds_[mark_slot(a)];
}

int Backend::mark_slot(uint64_t mark) const {
  SPECD_CHECK(mark < next_mark_ && mark + kMarkSlots >= next_mark_,
              "mark {} is not among the last {} made", mark, kMarkSlots);
  return static_cast<int>(mark % kMarkSlots);
}

uint64_t DownloadTickets::start(size_t bytes) {
  SPECD_CHECK(bytes <= Backend::kMaxDownload, "a download of {} bytes (at most {})", bytes,
              Backend::kMaxDownload);
  bytes_[next_ % Backend::kDownloadSlots] = bytes;
  return next_++;
}

int DownloadTickets::slot(uint64_t ticket) const {
  SPECD_CHECK(ticket < next_ && ticket + Backend::kDownloadSlots >= next_,
              "download {} is not among the last {} started", ticket, Backend::kDownloadSlots);
  return static_cast<int>(ticket % Backend::kDownloadSlots);
}

std::unique_ptr<Backend> make_backend(Device device, int threads, bool map_weights) {
  switch (device.kind) {
    case DeviceKind::kCpu:
      return std::make_unique<CpuBackend>(threads, map_weights);
    case DeviceKind::kCuda:
#ifdef SPECD_WITH_CUDA
      return std::make_unique<CudaBackend>(device.index);
#else
      fail("this build of specd has no CUDA backend (nvcc was not found when it was built)");
#endif
  }
  fail("unknown device kind");
}

}  // namespace specd
