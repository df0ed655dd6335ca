// Times the CPU backend's matmul and attention against the machine's streaming-read bandwidth.
//
// Usage: specd_kernel_bench [threads] [section...]; sections: bw, matmul (bf16 weights),
// matmul-all (f32, f16, bf16), matmul-hot (bf16, cache-resident weights), placement (placed
// against memory-mapped weights), quant (block-quantised weights), quant-hot (the same,
// cache-resident), gemm, attention, attention-cold (KV cache read from DRAM), fma (default: all
// but matmul-all and placement). Except in matmul-hot, weights are cycled through
// copies larger than the last-level cache, so every matmul reads its weight from DRAM as in a real
// forward pass.
#include <cblas.h>
#include <sys/mman.h>

#include <algorithm>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kernels.h"
#include "backend/quant_ref.h"
#include "core/memory_bandwidth.h"
#include "core/thread_pool.h"
#include "core/timer.h"

namespace specd {
namespace {

constexpr size_t kColdBytes = size_t{512} << 20;  // weight copies cycled per shape

// Times `calls` calls of fn(i) one by one (after `calls / 10 + 1` warm-up calls) and returns
// {median, best} in seconds. The machine may be shared, so single calls are timed and the median
// and best reported rather than a mean that one preemption can spoil.
template <typename Fn>
std::pair<double, double> time_calls(int calls, Fn&& fn) {
  for (int i = 0; i < calls / 10 + 1; ++i) fn(i);
  std::vector<double> times(calls);
  for (int i = 0; i < calls; ++i) {
    double t0 = now_seconds();
    fn(i);
    times[i] = now_seconds() - t0;
  }
  std::sort(times.begin(), times.end());
  return {times[calls / 2], times[0]};
}

// Median and best of fn on the backend's bf16 path, and the median on the Highway path
// (CpuBackend::Bf16Path::kSimd) with the calls alternating between them, where the CPU has the
// AVX512-BF16 path (else 0).
template <typename Fn>
std::tuple<double, double, double> time_paths(CpuBackend& backend, int calls, Fn&& fn) {
  if (!cpu::have_bf16_dot()) {
    auto [median, best] = time_calls(calls, fn);
    return {median, best, 0.0};
  }
  std::vector<double> dot(calls), simd(calls);
  const int warm_up = 2 * (calls / 10 + 1);
  for (int i = -warm_up; i < 2 * calls; ++i) {
    const bool is_dot = i % 2 == 0;
    backend.set_bf16_path(is_dot ? CpuBackend::Bf16Path::kDot : CpuBackend::Bf16Path::kSimd);
    const double t0 = now_seconds();
    fn(i + warm_up);  // each call its own index: cold data stays cold for both paths
    if (i >= 0) (is_dot ? dot : simd)[i / 2] = now_seconds() - t0;
  }
  backend.set_bf16_path(CpuBackend::Bf16Path::kDot);
  std::sort(dot.begin(), dot.end());
  std::sort(simd.begin(), simd.end());
  return {dot[calls / 2], dot[0], simd[calls / 2]};
}

void fill_random(void* data, DType dtype, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) store_from_f32(data, dtype, i, dist(rng));
}

// A streaming read of a 1 GiB buffer with the pool's threads, one 64 MiB piece per call. Each
// thread reads its share as 4 interleaved streams with software prefetch 1 KiB ahead: the best of
// the plain-C++ variants tried on Zen 3 (1 stream per thread reaches about half of it).
class StreamingRead {
 public:
  explicit StreamingRead(ThreadPool& pool) : pool_(pool), buffer_(kBytes / 8), sums_(pool.size()) {
    for (size_t i = 0; i < buffer_.size(); ++i) buffer_[i] = i * 0x9e3779b97f4a7c15ull;
  }
  static constexpr size_t kBytes = size_t{1} << 30, kPiece = size_t{64} << 20;

  // Reads piece `call` mod 16.
  void read_piece(int call) {
    const size_t words = kPiece / 8;
    const uint64_t* p = buffer_.data() + (call % (kBytes / kPiece)) * words;
    sums_[0] += streaming_read(pool_, p, words);
  }

 private:
  ThreadPool& pool_;
  std::vector<uint64_t> buffer_;
  std::vector<uint64_t> sums_;
};

double streaming_read_gbps(StreamingRead& reader, int threads) {
  auto [median, best] = time_calls(64, [&](int call) { reader.read_piece(call); });
  std::printf(
      "streaming read, 1 GiB in 64 MiB pieces, %d threads: median %.2f GB/s, best %.2f "
      "GB/s\n",
      threads, StreamingRead::kPiece / median / 1e9, StreamingRead::kPiece / best / 1e9);
  return StreamingRead::kPiece / median / 1e9;
}

// Weight matrices [n, k] of the Qwen3-0.6B shape: gate/up, down, and the LM head.
struct WeightShape {
  int64_t n, k;
};
constexpr WeightShape kQwen3Shapes[] = {{3072, 1024}, {1024, 3072}, {151936, 1024}};

// Matmul calls alternate with streaming-read pieces, so both come from the same minutes of a
// machine whose bandwidth drifts; "ratio" is the median over adjacent (read, matmul) pairs of
// matmul GB/s / read GB/s.
void bench_matmul(CpuBackend& backend, StreamingRead& reader, bool all_dtypes) {
  const DType dtypes[] = {DType::kBF16, DType::kF16, DType::kF32};
  for (DType dtype : dtypes) {
    if (!all_dtypes && dtype != DType::kBF16) continue;
    for (const WeightShape& s : kQwen3Shapes) {
      const size_t w_bytes = static_cast<size_t>(s.n * s.k) * dtype_size(dtype);
      const size_t copies = std::max<size_t>(1, kColdBytes / w_bytes);
      std::vector<DeviceBuffer> weights;
      for (size_t c = 0; c < copies; ++c) {
        weights.push_back(backend.alloc(w_bytes));
        fill_random(weights.back().data(), dtype, static_cast<size_t>(s.n * s.k), 7 + c);
      }
      std::vector<float> x(16 * s.k), y(16 * s.n);
      fill_random(x.data(), DType::kF32, x.size(), 3);
      for (int64_t m : {1, 2, 4, 5, 8, 9, 16}) {
        Tensor xt = Tensor::make(x.data(), DType::kF32, m, s.k);
        Tensor yt = Tensor::make(y.data(), DType::kF32, m, s.n);
        const int calls = static_cast<int>(std::clamp<size_t>(2 * copies, 20, 200));
        std::vector<double> read_times;
        std::vector<double> times, ratios;
        for (int call = -calls / 10 - 1; call < calls; ++call) {
          double t0 = now_seconds();
          reader.read_piece(call + calls);
          double t1 = now_seconds();
          backend.matmul(xt, weights[(call + calls) % copies].view(dtype, s.n, s.k), nullptr, yt,
                         false);
          double t2 = now_seconds();
          if (call < 0) continue;
          read_times.push_back(t1 - t0);
          times.push_back(t2 - t1);
          ratios.push_back((w_bytes / (t2 - t1)) / (StreamingRead::kPiece / (t1 - t0)));
        }
        std::sort(read_times.begin(), read_times.end());
        std::sort(times.begin(), times.end());
        std::sort(ratios.begin(), ratios.end());
        const double t = times[times.size() / 2], best = times[0];
        const double bw = StreamingRead::kPiece / read_times[read_times.size() / 2] / 1e9;
        const double ratio = ratios[ratios.size() / 2];
        const double gbps = static_cast<double>(w_bytes) / t / 1e9;
        std::printf(
            "matmul %-4s N=%-6lld K=%-5lld M=%-2lld %8.1f us %6.2f GB/s (best %5.2f) "
            "read %5.2f GB/s, ratio %5.1f%%  %6.1f GFLOP/s\n",
            std::string(dtype_name(dtype)).c_str(), static_cast<long long>(s.n),
            static_cast<long long>(s.k), static_cast<long long>(m), t * 1e6, gbps,
            w_bytes / best / 1e9, bw, 100.0 * ratio, 2.0 * m * s.n * s.k / t / 1e9);
      }
    }
  }
}

// The bf16 matmul on weights as the CPU backend places them (a copy in 2 MiB pages, 64-byte
// aligned) against the same weights as a memory-mapped safetensors file gives them (4 KiB pages,
// rows 56 bytes past a cache line, as in the random Qwen3-0.6B checkpoint), the two taking turns
// call by call; "mapped / placed" = median over adjacent pairs of the ratio of their times.
void bench_matmul_placement(CpuBackend& backend) {
  constexpr size_t kPage = size_t{2} << 20, kOffset = 56;
  for (const WeightShape& s : kQwen3Shapes) {
    const size_t w_bytes = static_cast<size_t>(s.n * s.k) * 2;
    const size_t copies = std::max<size_t>(1, kColdBytes / w_bytes);
    const size_t mapped_bytes = (w_bytes + kOffset + kPage - 1) / kPage * kPage;
    std::vector<DeviceBuffer> placed;
    std::vector<std::unique_ptr<uint8_t, decltype(&std::free)>> mapped;
    for (size_t c = 0; c < copies; ++c) {
      placed.push_back(backend.alloc(w_bytes));
      fill_random(placed.back().data(), DType::kBF16, static_cast<size_t>(s.n * s.k), 7 + c);
      mapped.emplace_back(static_cast<uint8_t*>(std::aligned_alloc(kPage, mapped_bytes)),
                          &std::free);
      madvise(mapped.back().get(), mapped_bytes, MADV_NOHUGEPAGE);
      std::memcpy(mapped.back().get() + kOffset, placed.back().data(), w_bytes);
    }
    std::vector<float> x(16 * s.k), y(16 * s.n);
    fill_random(x.data(), DType::kF32, x.size(), 3);
    for (int64_t m : {1, 5, 9}) {
      Tensor xt = Tensor::make(x.data(), DType::kF32, m, s.k);
      Tensor yt = Tensor::make(y.data(), DType::kF32, m, s.n);
      const int calls = static_cast<int>(std::clamp<size_t>(2 * copies, 20, 200));
      std::vector<double> t_placed, t_mapped, ratios;
      for (int call = -calls / 10 - 1; call < calls; ++call) {
        const size_t c = static_cast<size_t>(call + calls) % copies;
        const double t0 = now_seconds();
        backend.matmul(xt, placed[c].view(DType::kBF16, s.n, s.k), nullptr, yt, false);
        const double t1 = now_seconds();
        backend.matmul(xt, Tensor::make(mapped[c].get() + kOffset, DType::kBF16, s.n, s.k), nullptr,
                       yt, false);
        const double t2 = now_seconds();
        if (call < 0) continue;
        t_placed.push_back(t1 - t0);
        t_mapped.push_back(t2 - t1);
        ratios.push_back((t2 - t1) / (t1 - t0));
      }
      for (auto* v : {&t_placed, &t_mapped, &ratios}) std::sort(v->begin(), v->end());
      std::printf(
          "matmul bf16 N=%-6lld K=%-5lld M=%-2lld placed %8.1f us  mapped %8.1f us  "
          "mapped / placed %.3f\n",
          static_cast<long long>(s.n), static_cast<long long>(s.k), static_cast<long long>(m),
          t_placed[t_placed.size() / 2] * 1e6, t_mapped[t_mapped.size() / 2] * 1e6,
          ratios[ratios.size() / 2]);
    }
  }
}

// bf16 matmul on weights that stay in each core's L2 ([192 x threads, 1024], 384 KiB a thread):
// the kernel's arithmetic rate without DRAM, for M = 1 to 16. Best of 200 timings of 10 calls
// (a shared machine only ever slows a call down).
void bench_matmul_hot(CpuBackend& backend, int threads) {
  const int64_t n = 192 * threads, k = 1024;
  std::vector<uint16_t> w(n * k);
  fill_random(w.data(), DType::kBF16, w.size(), 1);
  std::vector<float> x(16 * k), y(16 * n);
  fill_random(x.data(), DType::kF32, x.size(), 2);
  Tensor wt = Tensor::make(w.data(), DType::kBF16, n, k);
  for (int64_t m : {1, 2, 3, 4, 5, 8, 9, 16}) {
    Tensor xt = Tensor::make(x.data(), DType::kF32, m, k);
    Tensor yt = Tensor::make(y.data(), DType::kF32, m, n);
    auto [t, best] = time_calls(200, [&](int) {
      for (int i = 0; i < 10; ++i) backend.matmul(xt, wt, nullptr, yt, false);
    });
    std::printf("matmul-hot bf16 N=%-5lld K=%lld M=%-2lld best %7.2f us  %6.1f GFLOP/s\n",
                static_cast<long long>(n), static_cast<long long>(k), static_cast<long long>(m),
                best / 10 * 1e6, 2.0 * m * n * k / (best / 10) / 1e9);
  }
}

// Random blocks of `dtype` whose f16 scales are set to small finite values (about 0.008 to
// 0.016).
void fill_random_blocks(void* data, DType dtype, size_t w_bytes, std::mt19937& rng) {
  auto* bytes = static_cast<uint8_t*>(data);
  for (size_t i = 0; i < w_bytes; ++i) bytes[i] = static_cast<uint8_t>(rng());
  const size_t block_bytes = dtype_block_bytes(dtype);
  for (size_t b = 0; b < w_bytes / block_bytes; ++b) {
    for (size_t off : block_half_offsets(dtype)) {
      const uint16_t half = 0x2000 | (rng() & 0x3ff);
      std::memcpy(bytes + b * block_bytes + off, &half, 2);
    }
  }
}

// Block-quantised weights that stay in each core's L2 ([256 x threads, 2048]): the kernels'
// arithmetic rate without DRAM, in weight elements per nanosecond. Best of 200 timings of 10
// calls.
void bench_matmul_quant_hot(CpuBackend& backend, int threads) {
  const DType formats[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                           DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  const int64_t n = 256 * threads, k = 2048;
  std::vector<float> x(16 * k), y(16 * n);
  fill_random(x.data(), DType::kF32, x.size(), 3);
  for (DType dtype : formats) {
    const size_t w_bytes = dtype_row_bytes(dtype, k) * static_cast<size_t>(n);
    DeviceBuffer w = backend.alloc(w_bytes);
    std::mt19937 rng(11);
    fill_random_blocks(w.data(), dtype, w_bytes, rng);
    for (int64_t m : {1, 5}) {
      Tensor xt = Tensor::make(x.data(), DType::kF32, m, k);
      Tensor yt = Tensor::make(y.data(), DType::kF32, m, n);
      auto [t, best] = time_calls(200, [&](int) {
        for (int i = 0; i < 10; ++i) backend.matmul(xt, w.view(dtype, n, k), nullptr, yt, false);
      });
      std::printf("matmul-hot %-4s N=%-5lld K=%lld M=%-2lld best %7.2f us %6.2f elem/ns\n",
                  std::string(dtype_name(dtype)).c_str(), static_cast<long long>(n),
                  static_cast<long long>(k), static_cast<long long>(m), best / 10 * 1e6,
                  static_cast<double>(n * k) / (best / 10) / 1e9);
    }
  }
}

// Block-quantised weights at SmolLM2 / Gemma 3 shapes: random blocks whose f16 scales are set to
// small finite values. Reports the best call (the machine may be shared) in GB/s of weight bytes
// and weight elements per nanosecond.
void bench_matmul_quant(CpuBackend& backend) {
  const DType formats[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                           DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  struct Shape {
    int64_t n, k;
  };
  // SmolLM2-sized layers, a 49k-token head, and Gemma 3 270M's 262k-token head (q8_0 there).
  const Shape shapes[] = {{2048, 768}, {768, 2048}, {49152, 512}, {262144, 640}};
  for (DType dtype : formats) {
    for (const Shape& s : shapes) {
      const size_t w_bytes = dtype_row_bytes(dtype, s.k) * static_cast<size_t>(s.n);
      const size_t copies = std::max<size_t>(1, kColdBytes / 4 / w_bytes);
      std::vector<DeviceBuffer> weights;
      std::mt19937 rng(11);
      for (size_t c = 0; c < copies; ++c) {
        weights.push_back(backend.alloc(w_bytes));
        fill_random_blocks(weights.back().data(), dtype, w_bytes, rng);
      }
      std::vector<float> x(16 * s.k), y(16 * s.n);
      fill_random(x.data(), DType::kF32, x.size(), 3);
      for (int64_t m : {1, 5, 9}) {
        Tensor xt = Tensor::make(x.data(), DType::kF32, m, s.k);
        Tensor yt = Tensor::make(y.data(), DType::kF32, m, s.n);
        const int calls = static_cast<int>(std::clamp<size_t>(4 * copies, 40, 400));
        auto [t, best] = time_calls(calls, [&](int call) {
          backend.matmul(xt, weights[call % copies].view(dtype, s.n, s.k), nullptr, yt, false);
        });
        std::printf(
            "matmul %-4s N=%-6lld K=%-5lld M=%-2lld best %8.1f us %6.2f GB/s %6.2f elem/ns\n",
            std::string(dtype_name(dtype)).c_str(), static_cast<long long>(s.n),
            static_cast<long long>(s.k), static_cast<long long>(m), best * 1e6,
            w_bytes / best / 1e9, static_cast<double>(s.n * s.k) / best / 1e9);
      }
    }
  }
}

void bench_gemm(CpuBackend& backend, int threads) {
  const int64_t m = 128, k = 1024, n = 3072;
  std::vector<float> x(m * k), y(m * n), w32(n * k);
  std::vector<uint16_t> w16(n * k);
  fill_random(x.data(), DType::kF32, x.size(), 1);
  fill_random(w32.data(), DType::kF32, w32.size(), 2);
  fill_random(w16.data(), DType::kBF16, w16.size(), 2);
  Tensor xt = Tensor::make(x.data(), DType::kF32, m, k);
  Tensor yt = Tensor::make(y.data(), DType::kF32, m, n);
  const double flop = 2.0 * m * n * k;
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    Tensor wt = Tensor::make(dtype == DType::kF32 ? static_cast<void*>(w32.data()) : w16.data(),
                             dtype, n, k);
    auto [t, best] = time_calls(40, [&](int) { backend.matmul(xt, wt, nullptr, yt, false); });
    std::printf(
        "gemm M=%lld K=%lld N=%lld %-4s (backend: pool x 1-thread sgemm): median %6.1f, "
        "best %6.1f GFLOP/s\n",
        static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n),
        std::string(dtype_name(dtype)).c_str(), flop / t / 1e9, flop / best / 1e9);
  }
  openblas_set_num_threads(threads);
  auto [t, best] = time_calls(40, [&](int) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x.data(), k, w32.data(), k,
                0.0f, y.data(), n);
  });
  openblas_set_num_threads(1);
  std::printf(
      "gemm M=%lld K=%lld N=%lld f32  (one cblas_sgemm, OpenBLAS %d threads): median "
      "%6.1f, best %6.1f GFLOP/s\n",
      static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n), threads,
      flop / t / 1e9, flop / best / 1e9);
}

// Causal rows over host vectors of slots and cache indexes (positions = cache indexes).
AttentionRows causal_rows(std::vector<int32_t>& slots, std::vector<int32_t>& index) {
  const auto m = static_cast<int64_t>(slots.size());
  AttentionRows rows;
  rows.count = m;
  rows.slots = Tensor::make(slots.data(), DType::kI32, 1, m);
  rows.cache_index = Tensor::make(index.data(), DType::kI32, 1, m);
  rows.positions = rows.cache_index;
  return rows;
}

// n random bf16 values in the backend's memory (64-byte aligned, as the KV cache is).
DeviceBuffer random_bf16(CpuBackend& backend, size_t n, uint32_t seed) {
  DeviceBuffer buffer = backend.alloc(n * sizeof(uint16_t));
  fill_random(buffer.data(), DType::kBF16, n, seed);
  return buffer;
}

void bench_attention(CpuBackend& backend) {
  const int n_heads = 16, n_kv = 8, dh = 128;
  const int64_t capacity = 1024;
  const int64_t elems = capacity * n_kv * dh;
  DeviceBuffer kc = random_bf16(backend, elems, 5), vc = random_bf16(backend, elems, 6);
  KvLayerView cache{kc.data(), vc.data(), DType::kBF16, capacity, 1, capacity * n_kv * dh,
                    n_kv,      dh};
  struct Case {
    int64_t rows, ctx;  // rows: the last `rows` entries of a context of ctx (prefill: from 0)
    const char* name;
  };
  const Case cases[] = {{1, 256, "decode, 1 row at context 256"},
                        {5, 1024, "verify, 5 rows at context 1024"},
                        {128, 128, "prefill, 128 rows causal from 0"}};
  for (const Case& c : cases) {
    const int64_t m = c.rows;
    std::vector<float> q(m * n_heads * dh), out(q.size());
    fill_random(q.data(), DType::kF32, q.size(), 8);
    std::vector<int32_t> slots(m, 0), index(m);
    for (int64_t i = 0; i < m; ++i) index[i] = static_cast<int32_t>(c.ctx - m + i);
    const AttentionRows rows = causal_rows(slots, index);
    Tensor qt = Tensor::make(q.data(), DType::kF32, m, n_heads * dh);
    Tensor ot = Tensor::make(out.data(), DType::kF32, m, n_heads * dh);
    auto [t, best, t_simd] = time_paths(
        backend, 200, [&](int) { backend.attention(qt, n_heads, cache, rows, 0.088f, ot); });
    std::printf("attention %s: median %8.1f us, best %8.1f us", c.name, t * 1e6, best * 1e6);
    if (t_simd > 0) std::printf("; Highway f32 path %8.1f us", t_simd * 1e6);
    std::printf("\n");
  }
}

// Decode (1 row) and verification (5 and 9 consecutive rows of one sequence) attention with the
// cache read from DRAM, as in a forward pass where the weights evict it: the KV cache is cycled
// through copies larger than the last-level cache. Shapes: (heads, KV heads, head_dim).
void bench_attention_cold(CpuBackend& backend) {
  struct Shape {
    const char* name;
    int n_heads, n_kv, dh;
  };
  const Shape shapes[] = {
      {"demo target", 6, 2, 64}, {"qwen3-0.6b", 16, 8, 128}, {"gemma3-270m", 4, 1, 256}};
  for (const Shape& sh : shapes) {
    for (int64_t ctx : {768, 2048}) {
      const int64_t capacity = ctx + 16;
      const auto elems = static_cast<size_t>(capacity * sh.n_kv * sh.dh);
      const size_t copies = std::max<size_t>(2, kColdBytes / (4 * elems) + 1);
      // As in the KV cache, entries start on 64-byte lines.
      DeviceBuffer kc_buffer = random_bf16(backend, elems * copies, 5);
      DeviceBuffer vc_buffer = random_bf16(backend, elems * copies, 6);
      auto* kc = static_cast<uint16_t*>(kc_buffer.data());
      auto* vc = static_cast<uint16_t*>(vc_buffer.data());
      for (int64_t m : {1, 5, 9}) {
        std::vector<float> q(m * sh.n_heads * sh.dh), out(q.size());
        fill_random(q.data(), DType::kF32, q.size(), 8);
        std::vector<int32_t> slots(m, 0), index(m);
        for (int64_t i = 0; i < m; ++i) index[i] = static_cast<int32_t>(ctx - m + i);
        const AttentionRows rows = causal_rows(slots, index);
        Tensor qt = Tensor::make(q.data(), DType::kF32, m, sh.n_heads * sh.dh);
        Tensor ot = Tensor::make(out.data(), DType::kF32, m, sh.n_heads * sh.dh);
        auto [t, best, t_simd] = time_paths(backend, 200, [&](int i) {
          const size_t c = static_cast<size_t>(i) % copies;
          const auto slot_stride = static_cast<int64_t>(elems);
          KvLayerView cache{kc + c * elems, vc + c * elems, DType::kBF16, capacity, 1,
                            slot_stride,    sh.n_kv,        sh.dh};
          backend.attention(qt, sh.n_heads, cache, rows, 0.088f, ot);
        });
        const double bytes = 2.0 * ctx * sh.n_kv * sh.dh * 2;
        std::printf(
            "attention-cold %-11s ctx %5lld M=%lld: median %7.1f us, best %7.1f us, %5.1f GB/s",
            sh.name, static_cast<long long>(ctx), static_cast<long long>(m), t * 1e6, best * 1e6,
            bytes / t / 1e9);
        if (t_simd > 0) std::printf("; Highway f32 path %7.1f us", t_simd * 1e6);
        std::printf("\n");
      }
    }
  }
}

#if defined(__x86_64__)
// Peak f32 multiply-add rate: 12 independent 8-lane FMA chains per thread (enough to cover the
// FMA latency on two pipes), no memory traffic. The bound that prefill (a GEMM) cannot pass.
__attribute__((target("avx2,fma"))) float fma_chains(int64_t iterations, float seed) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(seed + static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  float out[8];
  __m256 sum = acc[0];
  for (int i = 1; i < 12; ++i) sum = _mm256_add_ps(sum, acc[i]);
  _mm256_storeu_ps(out, sum);
  return out[0];
}

void bench_fma_peak(ThreadPool& pool) {
  constexpr int64_t kIterations = 20'000'000;
  std::vector<float> sink(pool.size());
  std::vector<double> rates;
  for (int rep = 0; rep < 5; ++rep) {
    const double start = now_seconds();
    pool.parallel_for(pool.size(), [&](int64_t begin, int64_t end, int thread) {
      for (int64_t t = begin; t < end; ++t) sink[thread] += fma_chains(kIterations, 1.0f + t);
    });
    const double seconds = now_seconds() - start;
    rates.push_back(static_cast<double>(pool.size()) * kIterations * 12 * 8 * 2 / seconds / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  std::printf("f32 FMA peak, %d threads (AVX2, 12 chains each): median %.1f GFLOP/s, best %.1f\n",
              pool.size(), rates[rates.size() / 2], rates.back());
}
#endif

}  // namespace
}  // namespace specd

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  auto want = [&](const char* name) {
    if (argc <= 2) return true;
    for (int i = 2; i < argc; ++i) {
      if (std::strcmp(argv[i], name) == 0) return true;
    }
    return false;
  };
  specd::CpuBackend backend(threads);
  std::printf("%s\n", backend.describe().c_str());
  const bool all = want("matmul-all");
  specd::StreamingRead reader(backend.pool());
  if (want("bw")) specd::streaming_read_gbps(reader, threads);
  if (want("matmul") || all) specd::bench_matmul(backend, reader, all);
  if (want("matmul-hot")) specd::bench_matmul_hot(backend, threads);
  if (argc > 2 && want("placement")) specd::bench_matmul_placement(backend);
  if (want("quant")) specd::bench_matmul_quant(backend);
  if (want("quant-hot")) specd::bench_matmul_quant_hot(backend, threads);
  if (want("gemm")) specd::bench_gemm(backend, threads);
  if (want("attention")) specd::bench_attention(backend);
  if (want("attention-cold")) specd::bench_attention_cold(backend);
#if defined(__x86_64__)
  if (want("fma")) specd::bench_fma_peak(backend.pool());
#endif
  return 0;
}
