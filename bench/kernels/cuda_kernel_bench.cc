// Times the CUDA backend's ops on Llama-3.1-8B shapes against the device-copy bandwidth.
//
// Usage: specd_cuda_kernel_bench [device] [bf16|int8|int4|q8_0|...|q6_k] [section...]; sections:
// matmul, attention, elementwise (default: all). Each matmul cycles through weight copies larger
// than the L2 cache, so every call reads its weights from device memory as in a real decode step.
// Prints one line per op: microseconds per call and, for matmuls, GB/s of weight bytes (of the
// chosen format: the quantised ones read fewer) and % of the copy rate.
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/quant_ref.h"
#include "backend/quantize.h"
#include "core/dtype.h"
#include "core/timer.h"

namespace specd {
namespace {

constexpr size_t kColdBytes = size_t{512} << 20;  // weight copies cycled per shape

struct DeviceTensor {
  DeviceBuffer buffer;
  Tensor t;
};

DeviceTensor random_tensor(Backend& b, DType dtype, int64_t rows, int64_t cols, uint32_t seed) {
  std::vector<uint8_t> host(static_cast<size_t>(rows * cols) * dtype_size(dtype));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < rows * cols; ++i)
    store_from_f32(host.data(), dtype, i, dist(rng) * 0.05f);
  DeviceTensor out;
  out.buffer = b.alloc(host.size());
  b.copy_to_device(out.buffer.data(), host.data(), host.size());
  out.t = out.buffer.view(dtype, rows, cols);
  return out;
}

// Seconds per call of fn(i), averaged over `calls` calls queued back to back. The calls are
// recorded once (a CUDA graph, as the decode step is) and the recording is timed, so the result is
// device time without the host's launch overhead.
// A recording key used by no earlier measurement. (One counter for the whole program: a static
// inside the template below would be one counter per lambda type, and two measurements with the
// same key would replay the first one's recording, with its freed buffers.)
uint64_t fresh_recording_key() {
  static uint64_t next_key = uint64_t{1} << 60;
  return next_key++;
}

template <typename Fn>
double time_per_call(Backend& b, int calls, Fn&& fn) {
  const uint64_t key = fresh_recording_key();
  const auto all = [&] {
    for (int i = 0; i < calls; ++i) fn(i);
  };
  b.run_recorded(key, all);  // eager: scratch grows to its size
  b.run_recorded(key, all);  // recorded
  b.synchronize();
  const double start = now_seconds();
  b.run_recorded(key, all);
  b.synchronize();
  return (now_seconds() - start) / calls;
}

// Weight copies of [rows, cols] in `dtype`; int8/int4 quantised once from random bf16 values,
// GGUF block formats random blocks with small finite f16 scales.
std::vector<DeviceTensor> weight_copies(Backend& b, DType dtype, int64_t rows, int64_t cols,
                                        int copies) {
  std::vector<DeviceTensor> out;
  if (!is_quantized(dtype)) {
    for (int c = 0; c < copies; ++c) out.push_back(random_tensor(b, dtype, rows, cols, c + 1));
    return out;
  }
  std::vector<uint8_t> host(static_cast<size_t>(rows) * dtype_row_bytes(dtype, cols));
  std::mt19937 rng(1);
  if (dtype == DType::kInt8 || dtype == DType::kInt4) {
    std::vector<uint16_t> bf16(static_cast<size_t>(rows * cols));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (uint16_t& v : bf16) v = f32_to_bf16(dist(rng) * 0.05f);
    quantize_rows(dtype, bf16.data(), DType::kBF16, rows, cols, host.data());
  } else {
    for (uint8_t& v : host) v = static_cast<uint8_t>(rng());
    const size_t block_bytes = dtype_block_bytes(dtype);
    const std::vector<size_t> halves = block_half_offsets(dtype);
    for (size_t i = 0; i < host.size(); i += block_bytes) {
      for (size_t off : halves) {
        const uint16_t half = 0x2000 | (rng() & 0x3ff);  // about 0.008 to 0.016
        std::memcpy(host.data() + i + off, &half, 2);
      }
    }
  }
  for (int c = 0; c < copies; ++c) {
    DeviceTensor t;  // placed as weights are (the backend's layout)
    t.t = b.place_weight(Tensor::make(host.data(), dtype, rows, cols), &t.buffer);
    out.push_back(std::move(t));
  }
  return out;
}

void bench_matmuls(Backend& b, double bandwidth, DType dtype) {
  struct Shape {
    const char* name;
    int64_t n, k;
  };
  const Shape shapes[] = {{"wq/wo 4096x4096", 4096, 4096},
                          {"wk/wv 1024x4096", 1024, 4096},
                          {"q/k/v 6144x4096", 6144, 4096},
                          {"gate/up 14336x4096", 14336, 4096},
                          {"down 4096x14336", 4096, 14336},
                          {"lm_head 128256x4096", 128256, 4096}};
  for (const Shape& s : shapes) {
    const size_t bytes = static_cast<size_t>(s.n) * dtype_row_bytes(dtype, s.k);
    const int copies = static_cast<int>(std::max<size_t>(1, kColdBytes / bytes + 1));
    std::vector<DeviceTensor> w = weight_copies(b, dtype, s.n, s.k, copies);
    for (int64_t m : {1, 9, 16, 512}) {
      DeviceTensor x = random_tensor(b, DType::kF32, m, s.k, 99);
      DeviceTensor y = random_tensor(b, DType::kF32, m, s.n, 98);
      const int calls = m > 16 ? 20 : 100;
      const double t = time_per_call(
          b, calls, [&](int i) { b.matmul(x.t, w[i % copies].t, nullptr, y.t, false); });
      const double gbs = bytes / t / 1e9;
      std::printf("matmul %-4s %-22s M=%-4lld %9.1f us %8.0f GB/s %6.1f%% of copy %8.1f TFLOP/s\n",
                  dtype_name(dtype).data(), s.name, static_cast<long long>(m), t * 1e6, gbs,
                  100 * gbs * 1e9 / bandwidth, 2.0 * m * s.n * s.k / t / 1e12);
    }
  }
}

void bench_attention(Backend& b) {
  const int kv_heads = 8, heads = 32, head_dim = 128, capacity = 4096;
  const int64_t width = kv_heads * head_dim;
  DeviceTensor k = random_tensor(b, DType::kBF16, capacity, width, 1);
  DeviceTensor v = random_tensor(b, DType::kBF16, capacity, width, 2);
  KvLayerView cache{k.t.data, v.t.data,         DType::kBF16, capacity,
                    1,        capacity * width, kv_heads,     head_dim};
  for (int context : {384, 2048}) {
    for (int m : {1, 9}) {
      std::vector<int32_t> idx(m), slots(m, 0);
      for (int i = 0; i < m; ++i) idx[i] = context - m + i;
      DeviceBuffer rows_buf = b.alloc(2 * m * sizeof(int32_t));
      auto* p = static_cast<int32_t*>(rows_buf.data());
      b.copy_to_device(p, slots.data(), m * 4);
      b.copy_to_device(p + m, idx.data(), m * 4);
      AttentionRows rows;
      rows.count = m;
      rows.slots = Tensor::make(p, DType::kI32, 1, m, b.device());
      rows.cache_index = Tensor::make(p + m, DType::kI32, 1, m, b.device());
      rows.positions = rows.cache_index;
      DeviceTensor q = random_tensor(b, DType::kF32, m, heads * head_dim, 3);
      DeviceTensor out = random_tensor(b, DType::kF32, m, heads * head_dim, 4);
      const double t =
          time_per_call(b, 200, [&](int) { b.attention(q.t, heads, cache, rows, 0.088f, out.t); });
      std::printf("attention context=%-5d M=%-2d %9.1f us\n", context, m, t * 1e6);
    }
  }
}

void bench_elementwise(Backend& b) {
  for (int m : {1, 9}) {
    DeviceTensor x = random_tensor(b, DType::kF32, m, 4096, 1);
    DeviceTensor y = random_tensor(b, DType::kF32, m, 4096, 2);
    DeviceTensor w = random_tensor(b, DType::kBF16, 1, 4096, 3);
    DeviceTensor gate = random_tensor(b, DType::kF32, m, 14336, 4);
    DeviceTensor up = random_tensor(b, DType::kF32, m, 14336, 5);
    std::printf("rms_norm M=%d %9.1f us\n", m,
                1e6 * time_per_call(b, 500, [&](int) { b.rms_norm(x.t, w.t, 1e-5f, y.t); }));
    std::printf("silu_mul M=%d %9.1f us\n", m,
                1e6 * time_per_call(b, 500, [&](int) { b.silu_mul(gate.t, up.t, gate.t); }));
  }
}

// bf16, a --quantize mode (int8, int4) or a GGUF block format (q8_0, ..., q6_k).
DType weight_dtype(const std::string& name) {
  if (name == "bf16") return DType::kBF16;
  const DType gguf[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                        DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  for (DType d : gguf) {
    if (dtype_name(d) == name) return d;
  }
  return weight_quant_dtype(parse_weight_quant(name), DType::kBF16);
}

}  // namespace
}  // namespace specd

int main(int argc, char** argv) {
  using namespace specd;
  try {
    Device device = parse_device(argc > 1 ? argv[1] : "cuda");
    std::unique_ptr<Backend> b = make_backend(device, 1);
    const double bandwidth = b->measure_bandwidth();
    std::printf("%s, device copy %.0f GB/s\n", b->describe().c_str(), bandwidth / 1e9);
    const std::string weights = argc > 2 ? argv[2] : "bf16";
    const DType dtype = weight_dtype(weights);
    auto want = [&](const char* section) {
      if (argc <= 3) return true;
      for (int i = 3; i < argc; ++i) {
        if (std::string(argv[i]) == section) return true;
      }
      return false;
    };
    if (want("matmul")) bench_matmuls(*b, bandwidth, dtype);
    if (want("attention")) bench_attention(*b);
    if (want("elementwise")) bench_elementwise(*b);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
