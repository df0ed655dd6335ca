// The CPU backend: host memory, Highway kernels and OpenBLAS, parallelised with a ThreadPool.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/weight_arena.h"
#include "core/thread_pool.h"

namespace specd {

class CpuBackend final : public Backend {
 public:
  // `threads` workers including the calling thread (at least 1), from the process-wide pool.
  // Weights are copied into 64-byte aligned blocks of 2 MiB pages when placed, unless
  // `map_weights`: then the kernels read them where the caller has them (a file mapping).
  explicit CpuBackend(int threads, bool map_weights = false);

  // How bf16 weights meet x: kDot (AVX512-BF16 dot products, for every bf16 product, prompts
  // included; the default where the CPU has them) and kSimd (Highway multiply-adds below 65 rows,
  // the f32 GEMM above; the default elsewhere) multiply x rounded to bf16, as bf16 inference does;
  // kSimdF32 is kSimd on x as it is. SPECD_CPU_BF16=dot|simd|f32 picks one.
  enum class Bf16Path { kDot, kSimd, kSimdF32 };
  void set_bf16_path(Bf16Path path);  // kDot only where cpu::have_bf16_dot()

  Device device() const override { return Device{DeviceKind::kCpu, 0}; }
  std::string describe() const override;  // "cpu (AVX2, 2 threads)"
  int threads() const { return pool_->size(); }
  // The backend's workers, for other CPU work of the same process (one pool, no oversubscription).
  ThreadPool& pool() { return *pool_; }

  DeviceBuffer alloc(size_t bytes) override;
  void copy_to_device(void* dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  void copy_on_device(void* dst, const void* src, size_t bytes) override;
  uint64_t start_download(const void* src, size_t bytes) override;  // copies at once
  void finish_download(uint64_t ticket, void* dst) override;
  Tensor place_weight(const Tensor& host, DeviceBuffer* storage) override;
  void synchronize() override {}
  double measure_bandwidth() override;

  void embedding(const Tensor& ids, const Tensor& table, Tensor& out) override;
  void matmul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
              bool accumulate) override;
  void matmul_group(const Tensor& x, std::span<const MatmulPart> parts) override;
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y) override;
  void rope(Tensor& x, int n_heads, const Tensor& positions, const RopeTable& table) override;
  void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) override;
  void argmax_rows(const Tensor& logits, Tensor& ids) override;
  void gelu_tanh_mul(const Tensor& gate, const Tensor& up, Tensor& out) override;
  void scale(Tensor& x, float s) override;
  void add(const Tensor& x, Tensor& y) override;
  void store_kv(const Tensor& k, const Tensor& v, const KvLayerView& cache,
                const AttentionRows& rows) override;
  void attention(const Tensor& q, int n_heads, const KvLayerView& cache, const AttentionRows& rows,
                 float scale, Tensor& out) override;

 private:
  // The batch-invariant small-M kernels (rather than the prefill GEMM) take this product: every
  // bf16 product on kDot (twice the GEMM's f32 arithmetic rate), else those of fewer rows.
  bool small_path(const cpu::MatmulArgs& a) const;
  // Columns [begin, end) of a small-M product (quantised weights: on quant_x_).
  void small_columns(const cpu::MatmulArgs& a, int64_t begin, int64_t end);
  // a.x as the small-M kernel of a.w_dtype reads it, once per product (or group of products):
  // quantised into quant_x_ for block-quantised weights, split into split_x_ for bf16.
  void prepare_x(const cpu::MatmulArgs& a);
  cpu::MatmulArgs gemm_x(const cpu::MatmulArgs& a);
  // Runs fn(begin, end) over the columns [0, n) of a small-M product on the pool (one contiguous
  // share per thread: on tiny models, chunks taken in turn cost more than they balance).
  template <typename Fn>
  void run_columns(int64_t n, int64_t work, const Fn& fn);

  DownloadTickets download_tickets_;
  std::array<std::array<std::byte, kMaxDownload>, kDownloadSlots> downloads_{};

  // Per-thread buffers, grown (never shrunk) on the calling thread before a parallel loop, so
  // steady-state calls allocate nothing.
  struct Scratch {
    std::vector<float> gemm;       // [gemm_block_rows(K), K] widened weight rows
    std::vector<float> scores;     // [attention_scores_floats] attention weights
    std::vector<float> block;      // [attention_block_floats] widened keys or values
    std::vector<float> acc;        // [attention_acc_floats] value sums
    std::vector<int32_t> entries;  // [kMaxRowsPerItem, capacity] visible cache entries
    std::vector<uint16_t> q_bf16;  // [attention_query_bf16_elements] queries rounded to bf16
  };

  // Runs fn(begin, end, thread) over [0, n) on the pool, or on the calling thread alone when
  // `work` (about the number of multiply-adds or elements touched) is too small to be worth
  // waking the workers. fn is passed through a one-reference wrapper, which std::function
  // stores without allocating.
  template <typename Fn>
  void run(int64_t n, int64_t work, const Fn& fn, int64_t grain = 1) {
    if (n <= 0) return;
    if (work < kMinParallelWork || pool_->size() == 1) {
      fn(int64_t{0}, n, 0);
    } else {
      pool_->parallel_for(
          n, [&fn](int64_t begin, int64_t end, int thread) { fn(begin, end, thread); }, grain);
    }
  }

  // Below this much work an op runs on the calling thread only (a pool wake-up costs ~1-2 us).
  static constexpr int64_t kMinParallelWork = 1 << 15;

  std::shared_ptr<ThreadPool> pool_;      // shared by the process's CPU backends
  std::vector<Scratch> scratch_;          // one per pool thread
  std::vector<float> quant_x_scratch_;    // [matmul_quant_scratch] backs quant_x_
  cpu::QuantizedX quant_x_;               // x of the current product with quantised weights
  std::vector<float> split_x_;            // x of the current bf16 product as its kernel reads it
  std::vector<float> rounded_x_;          // [m, k] x of a bf16 GEMM product, rounded to bf16
  std::vector<int32_t> row_blocks_;       // attention: first row of each row block, then m
  bool map_weights_ = false;              // place_weight leaves weights where they are
  Bf16Path bf16_path_ = Bf16Path::kSimd;  // set in the constructor (the CPU, SPECD_CPU_BF16)
  WeightArena weights_{*this};            // placed weights (unless map_weights_)
};

}  // namespace specd
