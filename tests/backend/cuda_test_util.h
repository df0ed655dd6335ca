// Test fixture for the CUDA backend tests: skips without a CUDA backend or GPU, uploads host
// tensors and weights (float or quantised blocks), downloads results.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "test_util.h"

namespace specd::backend_test {

class CudaTest : public testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA backend or no GPU";
    backend_ = make_backend(Device{DeviceKind::kCuda, 0}, 1);
  }

  // A device copy of `host` (same shape and stride).
  Tensor upload(const HostTensor& host) {
    const Tensor& t = host.t();
    return upload_bytes(
        t, t.data,
        static_cast<size_t>(std::max<int64_t>(1, t.rows) * t.stride) * dtype_size(t.dtype));
  }
  // A device copy of a contiguous weight `view` (any dtype, quantised blocks included).
  Tensor upload_weight(const Tensor& view) { return upload_bytes(view, view.data, view.bytes()); }
  // The device tensor's values, in a host tensor shaped like `like`.
  HostTensor download(const Tensor& device, const HostTensor& like) {
    HostTensor out = like.clone();
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(1, device.rows) * device.stride) *
                         dtype_size(device.dtype);
    backend_->copy_to_host(out.t().data, device.data, bytes);
    return out;
  }

  std::unique_ptr<Backend> backend_;
  std::vector<DeviceBuffer> buffers_;

 private:
  Tensor upload_bytes(const Tensor& t, const void* data, size_t bytes) {
    buffers_.push_back(backend_->alloc(bytes));
    backend_->copy_to_device(buffers_.back().data(), data, bytes);
    Tensor out = t;
    out.data = buffers_.back().data();
    out.device = backend_->device();
    return out;
  }
};

}  // namespace specd::backend_test
