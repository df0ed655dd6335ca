// Test fixture for the CUDA backend tests: skips without a CUDA backend or GPU, uploads host
// tensors and weights (float or quantised blocks), downloads results, and runs the checks every
// weight format's kernels share (matmul against the reference, batch invariance, grouped launches,
// embedding rows).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/reference.h"
#include "test_util.h"

namespace specd::backend_test {

// True if the two host tensors have the same shape and hold the same bytes.
inline bool same_tensor(const HostTensor& a, const HostTensor& b) {
  const Tensor &x = a.t(), &y = b.t();
  return x.rows == y.rows && x.stride == y.stride && x.dtype == y.dtype &&
         std::memcmp(x.data, y.data,
                     static_cast<size_t>(x.rows * x.stride) * dtype_size(x.dtype)) == 0;
}

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
  // Placed by the backend, which may rearrange the bytes (int8/int4 rows are split on the GPU).
  Tensor upload_weight(const Tensor& view) {
    buffers_.emplace_back();
    return backend_->place_weight(view, &buffers_.back());
  }
  // The device tensor's values, in a host tensor shaped like `like`.
  HostTensor download(const Tensor& device, const HostTensor& like) {
    HostTensor out = like.clone();
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(1, device.rows) * device.stride) *
                         dtype_size(device.dtype);
    backend_->copy_to_host(out.t().data, device.data, bytes);
    return out;
  }

  // Largest relative error of y = x·wᵀ + bias (or y += ...) on the device against the reference.
  double matmul_error(const HostTensor& x, const Tensor& w, const HostTensor& bias,
                      const HostTensor& y, bool accumulate) {
    HostTensor want = y.clone();
    Tensor dx = upload(x), dw = upload_weight(w), db = upload(bias), dy = upload(y);
    backend_->matmul(dx, dw, &db, dy, accumulate);
    HostTensor got = download(dy, y);
    reference::matmul(x.t(), w, &bias.t(), want.t(), accumulate);
    return max_rel_error(got.t(), want.t());
  }

  // x (kSmallBatch rows) times w: each row of a product of its first M rows, for every M, has the
  // bits of that row multiplied alone.
  void expect_batch_invariant(const HostTensor& x, const Tensor& w) {
    const int64_t n = w.rows;
    Tensor dx = upload(x), dw = upload_weight(w);
    HostTensor alone(DType::kF32, kSmallBatch, n);
    Tensor dalone = upload(alone);
    for (int64_t r = 0; r < kSmallBatch; ++r) {
      Tensor yr = dalone.slice_rows(r, 1);
      backend_->matmul(dx.slice_rows(r, 1), dw, nullptr, yr, false);
    }
    HostTensor single = download(dalone, alone);
    for (int64_t m = 1; m <= kSmallBatch; ++m) {
      HostTensor y(DType::kF32, m, n);
      Tensor dy = upload(y);
      backend_->matmul(dx.slice_rows(0, m), dw, nullptr, dy, false);
      HostTensor got = download(dy, y);
      for (int64_t r = 0; r < m; ++r) {
        ASSERT_TRUE(same_bits(got.t(), r, single.t(), r))
            << dtype_name(w.dtype) << " K=" << w.cols << " M=" << m << " row " << r;
      }
    }
  }

  // One matmul_group over `weights` (same K, any N) gives the bits of separate matmuls.
  void expect_group_equals_separate(const HostTensor& x, const std::vector<Tensor>& weights) {
    Tensor dx = upload(x);
    std::vector<Tensor> dw, grouped, separate;
    std::vector<HostTensor> shapes;
    for (const Tensor& w : weights) {
      shapes.emplace_back(DType::kF32, x.t().rows, w.rows);
      dw.push_back(upload_weight(w));
      grouped.push_back(upload(shapes.back()));
      separate.push_back(upload(shapes.back()));
    }
    std::vector<MatmulPart> parts;
    for (size_t i = 0; i < weights.size(); ++i) parts.push_back({&dw[i], nullptr, &grouped[i]});
    backend_->matmul_group(dx, parts);
    for (size_t i = 0; i < weights.size(); ++i) {
      backend_->matmul(dx, dw[i], nullptr, separate[i], false);
      HostTensor a = download(grouped[i], shapes[i]), b = download(separate[i], shapes[i]);
      for (int64_t r = 0; r < x.t().rows; ++r) {
        EXPECT_TRUE(same_bits(a.t(), r, b.t(), r)) << dtype_name(weights[i].dtype) << " part " << i;
      }
    }
  }

  // gated_matmul (fused into the matmul where the kernels can) gives the bits of silu_mul or
  // gelu_tanh_mul followed by matmul, for 1 to kSmallBatch rows, with and without accumulate.
  void expect_gated_equals_separate(const Tensor& w) {
    const int64_t n = w.rows, k = w.cols;
    Tensor dw = upload_weight(w);
    HostTensor bias = HostTensor(DType::kBF16, 1, n).random(7);
    Tensor db = upload(bias);
    uint32_t seed = 100;
    for (Activation act : {Activation::kSilu, Activation::kGeluTanh}) {
      for (int64_t m = 1; m <= kSmallBatch; ++m) {
        for (bool accumulate : {false, true}) {
          seed += 3;
          HostTensor gate = HostTensor(DType::kF32, m, k).random(seed, -6.0f, 6.0f);
          HostTensor up = HostTensor(DType::kF32, m, k).random(seed + 1);
          HostTensor y = HostTensor(DType::kF32, m, n).random(seed + 2);
          Tensor dgate = upload(gate), dup = upload(up), fused = upload(y);
          backend_->gated_matmul(act, dgate, dup, dw, &db, fused, accumulate);
          Tensor dgate2 = upload(gate), separate = upload(y);
          if (act == Activation::kSilu) {
            backend_->silu_mul(dgate2, dup, dgate2);
          } else {
            backend_->gelu_tanh_mul(dgate2, dup, dgate2);
          }
          backend_->matmul(dgate2, dw, &db, separate, accumulate);
          HostTensor a = download(fused, y), b = download(separate, y);
          for (int64_t r = 0; r < m; ++r) {
            ASSERT_TRUE(same_bits(a.t(), r, b.t(), r))
                << dtype_name(w.dtype) << " act=" << static_cast<int>(act) << " M=" << m
                << " accumulate=" << accumulate << " row " << r;
          }
        }
      }
    }
  }

  // Embedding rows `ids` of `table` on the device: bit-exact against the reference.
  void expect_exact_embedding(const Tensor& table, const std::vector<int32_t>& ids) {
    HostTensor host_ids = i32_vector(ids);
    const int64_t m = static_cast<int64_t>(ids.size());
    HostTensor got(DType::kF32, m, table.cols), want(DType::kF32, m, table.cols);
    Tensor dt = upload_weight(table), di = upload(host_ids), dout = upload(got);
    backend_->embedding(di, dt, dout);
    HostTensor host = download(dout, got);
    reference::embedding(host_ids.t(), table, want.t());
    EXPECT_EQ(max_rel_error(host.t(), want.t()), 0.0)
        << dtype_name(table.dtype) << " D=" << table.cols;
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
