// CpuBackend: argument checks, work splitting over the thread pool, dispatch to the kernels.
#include "backend/cpu/cpu_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "backend/cpu/kernels.h"
#include "backend/op_checks.h"
#include "backend/reference.h"
#include "core/error.h"
#include "core/memory_bandwidth.h"

namespace specd {

namespace {

// Rows from which matmul uses OpenBLAS: below it the Highway kernel is faster on Zen 3 (bf16
// [3072, 1024], 2 threads: M=17 93 vs 31 GFLOP/s, M=32 113 vs 83, M=64 109 vs 102, M=128 106
// vs 116). The Highway kernel is batch-invariant for any M, so every M < kGemmMinRows (which
// includes M <= kSmallBatch) gets results independent of the other rows.
constexpr int64_t kGemmMinRows = 65;
// Column chunks of the small-M matmul are multiples of this (whole register tiles).
constexpr int64_t kMatmulGrain = 8;
// Column chunks per pool thread in a small-M matmul, and the least work (multiply-adds) of a
// chunk: below it, claiming chunks costs more than it balances (Zen 3, 2 threads).
constexpr int64_t kColumnChunksPerThread = 4;
constexpr int64_t kMinChunkWork = int64_t{1} << 18;
// silu_mul splits rows into column chunks of this many elements.
constexpr int64_t kSiluChunk = 2048;
// Allocations of at least this size are 2 MiB aligned and advised to use huge pages.
constexpr size_t kHugeAllocBytes = size_t{4} << 20;
constexpr size_t kHugePageBytes = size_t{2} << 20;

void check_host(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    SPECD_CHECK(t->device.kind == DeviceKind::kCpu, "{}: tensor on {} passed to the CPU backend",
                op, device_name(t->device));
  }
}

template <typename T>
void grow(std::vector<T>& buffer, size_t size) {
  if (buffer.size() < size) buffer.resize(size);
}

// The first 64-byte aligned element of a buffer grown by grow_aligned (vector loads that straddle
// cache lines cost two).
template <typename T>
T* aligned(std::vector<T>& buffer) {
  const auto address = reinterpret_cast<uintptr_t>(buffer.data());
  return buffer.data() + ((64 - address % 64) % 64) / sizeof(T);
}
// grow() with 64 bytes to spare, for aligned().
template <typename T>
void grow_aligned(std::vector<T>& buffer, int64_t size) {
  grow(buffer, static_cast<size_t>(size) + 64 / sizeof(T));
}

}  // namespace

CpuBackend::CpuBackend(int threads, bool map_weights)
    : pool_(ThreadPool::shared(std::max(1, threads))),
      scratch_(pool_->size()),
      map_weights_(map_weights) {
  cpu::gemm_init();
  bf16_path_ = cpu::have_bf16_dot() ? Bf16Path::kDot : Bf16Path::kSimd;
  if (const char* env = std::getenv("SPECD_CPU_BF16"); env != nullptr && *env != '\0') {
    const std::string_view name = env;
    SPECD_CHECK(name == "dot" || name == "simd" || name == "f32",
                "SPECD_CPU_BF16 is '{}': expected dot, simd or f32", name);
    set_bf16_path(name == "dot"    ? Bf16Path::kDot
                  : name == "simd" ? Bf16Path::kSimd
                                   : Bf16Path::kSimdF32);
  }
}

void CpuBackend::set_bf16_path(Bf16Path path) {
  SPECD_CHECK(path != Bf16Path::kDot || cpu::have_bf16_dot(),
              "cpu: this CPU has no AVX512-BF16 dot products (SPECD_CPU_BF16=dot)");
  bf16_path_ = path;
}

std::string CpuBackend::describe() const {
  return fmt::format("cpu ({}{}, {} thread{})", cpu::simd_target_name(),
                     bf16_path_ == Bf16Path::kDot ? " + BF16 dot" : "", pool_->size(),
                     pool_->size() == 1 ? "" : "s");
}

DeviceBuffer CpuBackend::alloc(size_t bytes) {
  size_t align = bytes >= kHugeAllocBytes ? kHugePageBytes : 64;
  size_t rounded = std::max<size_t>(align, (bytes + align - 1) / align * align);
  void* data = std::aligned_alloc(align, rounded);
  SPECD_CHECK(data != nullptr, "cpu: out of host memory allocating {} bytes", bytes);
#ifdef MADV_HUGEPAGE
  if (align == kHugePageBytes) madvise(data, rounded, MADV_HUGEPAGE);
#endif
  return DeviceBuffer(data, bytes, device(), [](void* p) { std::free(p); });
}

void CpuBackend::copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes != 0) std::memcpy(dst, src, bytes);
}

void CpuBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes != 0) std::memcpy(dst, src, bytes);
}

uint64_t CpuBackend::start_download(const void* src, size_t bytes) {
  const uint64_t ticket = download_tickets_.start(bytes);
  if (bytes != 0) std::memcpy(downloads_[download_tickets_.slot(ticket)].data(), src, bytes);
  return ticket;
}

void CpuBackend::finish_download(uint64_t ticket, void* dst) {
  const size_t bytes = download_tickets_.bytes(ticket);
  if (bytes != 0) std::memcpy(dst, downloads_[download_tickets_.slot(ticket)].data(), bytes);
}

double CpuBackend::measure_bandwidth() { return measure_read_bandwidth(pool_->size()); }

void CpuBackend::copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes != 0) std::memmove(dst, src, bytes);
}

// Weights straight from a mapped file sit at arbitrary offsets in 4 KiB pages: an aligned copy in
// 2 MiB pages made 5-row matmuls 3-11% faster on Zen 3 (specd_kernel_bench placement).
Tensor CpuBackend::place_weight(const Tensor& host, DeviceBuffer* /*storage*/) {
  if (map_weights_ || !host.contiguous()) return host;
  Tensor placed = host;
  placed.data = weights_.copy(host.data, host.bytes());
  return placed;
}

void CpuBackend::embedding(const Tensor& ids, const Tensor& table, Tensor& out) {
  check_host("embedding", {&ids, &table, &out});
  op_checks::embedding(ids, table, out);
  const size_t row_bytes = table.row_bytes();
  run(ids.cols, ids.cols * table.cols, [&](int64_t begin, int64_t end, int) {
    for (int64_t m = begin; m < end; ++m) {
      const char* src =
          static_cast<const char*>(table.data) + op_checks::i32_at(ids, m) * row_bytes;
      cpu::widen_rows(src, table.dtype, 0, 1, table.cols, out.row<float>(m), 0);
    }
  });
}

namespace {

cpu::MatmulArgs matmul_args(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
                            bool accumulate) {
  cpu::MatmulArgs a;
  a.x = x.ptr<const float>();
  a.x_stride = x.stride;
  a.w = w.data;
  a.w_dtype = w.dtype;
  a.w_stride = w.stride;
  a.bias = bias != nullptr ? bias->data : nullptr;
  a.bias_dtype = bias != nullptr ? bias->dtype : DType::kF32;
  a.y = y.ptr<float>();
  a.y_stride = y.stride;
  a.m = x.rows;
  a.n = w.rows;
  a.k = w.cols;
  a.accumulate = accumulate;
  return a;
}

}  // namespace

bool CpuBackend::small_path(const cpu::MatmulArgs& a) const {
  const bool dot = a.w_dtype == DType::kBF16 && bf16_path_ == Bf16Path::kDot;
  return dot || a.m < kGemmMinRows || a.k == 0 || !cpu::have_gemm();
}

void CpuBackend::small_columns(const cpu::MatmulArgs& a, int64_t begin, int64_t end) {
  if (is_quantized(a.w_dtype)) {
    cpu::matmul_quant(a, quant_x_, begin, end);
  } else if (a.w_dtype == DType::kBF16 && bf16_path_ == Bf16Path::kDot) {
    cpu::MatmulArgs packed = a;
    packed.x_bf16 = reinterpret_cast<const uint16_t*>(aligned(split_x_));
    cpu::matmul_bf16_dot(packed, begin, end);
  } else if (a.w_dtype == DType::kBF16) {
    cpu::MatmulArgs split = a;
    split.x_split = aligned(split_x_);
    cpu::matmul_small(split, begin, end);
  } else {
    cpu::matmul_small(a, begin, end);
  }
}

void CpuBackend::prepare_x(const cpu::MatmulArgs& a) {
  if (is_quantized(a.w_dtype)) {
    grow(quant_x_scratch_, static_cast<size_t>(cpu::matmul_quant_scratch(a)));
    quant_x_ = cpu::quantize_x(a, quant_x_scratch_.data());
  } else if (a.w_dtype == DType::kBF16 && bf16_path_ == Bf16Path::kDot) {
    const int64_t halves = a.m * cpu::bf16_x_stride(a.k);  // two bf16 values per float
    grow_aligned(split_x_, halves / 2);
    cpu::pack_x_bf16(a, reinterpret_cast<uint16_t*>(aligned(split_x_)));
  } else if (a.w_dtype == DType::kBF16) {
    grow_aligned(split_x_, a.m * cpu::split_x_stride(a.k));
    cpu::split_x(a, bf16_path_ == Bf16Path::kSimd, aligned(split_x_));
  }
}

// The GEMM path's x: for bf16 weights rounded to bf16 into rounded_x_ (unless kSimdF32), as the
// small-M path multiplies it, so that prompt and decode steps share one precision.
cpu::MatmulArgs CpuBackend::gemm_x(const cpu::MatmulArgs& a) {
  if (a.w_dtype != DType::kBF16 || bf16_path_ == Bf16Path::kSimdF32) return a;
  grow(rounded_x_, static_cast<size_t>(a.m * a.k));
  run(a.m, a.m * a.k, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = a.x + r * a.x_stride;
      float* out = rounded_x_.data() + r * a.k;
      for (int64_t c = 0; c < a.k; ++c) out[c] = round_to_bf16(in[c]);
    }
  });
  cpu::MatmulArgs g = a;
  g.x = rounded_x_.data();
  g.x_stride = a.k;
  return g;
}

// Column chunks are claimed by the threads as they free up (each column's result does not depend
// on the thread or the chunk), so a core slowed down by the machine does not hold up the others.
template <typename Fn>
void CpuBackend::run_columns(int64_t n, int64_t work, const Fn& fn) {
  const int64_t chunks = std::min(pool_->size() * kColumnChunksPerThread, work / kMinChunkWork);
  if (chunks <= pool_->size()) {  // small products: one static share per thread
    return run(
        n, work, [&fn](int64_t begin, int64_t end, int) { fn(begin, end); }, kMatmulGrain);
  }
  const int64_t chunk = std::max(kMatmulGrain, n / chunks / kMatmulGrain * kMatmulGrain);
  pool_->parallel_chunks(n, chunk, [&fn](int64_t begin, int64_t end, int) { fn(begin, end); });
}

void CpuBackend::matmul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
                        bool accumulate) {
  check_host("matmul", {&x, &w, &y});
  if (bias != nullptr) check_host("matmul", {bias});
  op_checks::matmul(x, w, bias, y);
  const cpu::MatmulArgs a = matmul_args(x, w, bias, y, accumulate);
  if (a.m == 0 || a.n == 0) return;
  const int64_t work = a.m * a.n * std::max<int64_t>(a.k, 1);
  if (small_path(a)) {
    prepare_x(a);
    run_columns(a.n, work, [&](int64_t begin, int64_t end) { small_columns(a, begin, end); });
    return;
  }
  const cpu::MatmulArgs g = gemm_x(a);
  if (a.w_dtype != DType::kF32) {
    const auto size = static_cast<size_t>(cpu::gemm_block_rows(a.k) * a.k);
    for (Scratch& s : scratch_) grow(s.gemm, size);
  }
  run(
      a.n, work,
      [&](int64_t begin, int64_t end, int t) {
        cpu::matmul_gemm(g, begin, end, scratch_[t].gemm.data());
      },
      16);
}

// Small-M products of one x run as one loop over their concatenated columns: one pool wake-up
// instead of one per part, and the parts balance across threads. Each column is computed exactly
// as by matmul().
void CpuBackend::matmul_group(const Tensor& x, std::span<const MatmulPart> parts) {
  constexpr size_t kMaxParts = 4;
  if (parts.size() > kMaxParts || x.rows == 0) return Backend::matmul_group(x, parts);
  std::array<cpu::MatmulArgs, kMaxParts> args;
  std::array<int64_t, kMaxParts + 1> first{};  // first concatenated column of each part
  int64_t work = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    const MatmulPart& part = parts[p];
    check_host("matmul", {&x, part.w, part.y});
    if (part.bias != nullptr) check_host("matmul", {part.bias});
    op_checks::matmul(x, *part.w, part.bias, *part.y);
    args[p] = matmul_args(x, *part.w, part.bias, *part.y, false);
    if (!small_path(args[p])) return Backend::matmul_group(x, parts);
    first[p + 1] = first[p] + args[p].n;
    work += args[p].m * args[p].n * std::max<int64_t>(args[p].k, 1);
  }
  // x is quantised or split once for all parts (they share it and its k).
  bool quantized = false, split = false;
  for (size_t p = 0; p < parts.size(); ++p) {
    const bool q = is_quantized(args[p].w_dtype), s = args[p].w_dtype == DType::kBF16;
    if ((q && !quantized) || (s && !split)) prepare_x(args[p]);
    quantized = quantized || q;
    split = split || s;
  }
  run_columns(first[parts.size()], work, [&](int64_t begin, int64_t end) {
    for (size_t p = 0; p < parts.size(); ++p) {
      const int64_t lo = std::max(begin, first[p]), hi = std::min(end, first[p + 1]);
      if (lo < hi) small_columns(args[p], lo - first[p], hi - first[p]);
    }
  });
}

void CpuBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y) {
  check_host("rms_norm", {&x, &weight, &y});
  op_checks::rms_norm(x, weight, y);
  run(x.rows, x.numel(), [&](int64_t begin, int64_t end, int) {
    cpu::rms_norm_rows(x.row<const float>(begin), x.stride, weight.data, weight.dtype, eps,
                       y.row<float>(begin), y.stride, end - begin, x.cols);
  });
}

void CpuBackend::rope(Tensor& x, int n_heads, const Tensor& positions, const RopeTable& table) {
  check_host("rope", {&x, &positions, &table.cos, &table.sin});
  op_checks::rope(x, n_heads, positions, table);
  run(x.rows, x.numel(), [&](int64_t begin, int64_t end, int) {
    cpu::rope_rows(x.row<float>(begin), x.stride, end - begin, n_heads, table.cos.cols,
                   positions.ptr<const int32_t>() + begin, table.cos.ptr<const float>(),
                   table.sin.ptr<const float>(), table.cos.stride);
  });
}

void CpuBackend::argmax_rows(const Tensor& logits, Tensor& ids) {
  check_host("argmax_rows", {&logits, &ids});
  op_checks::argmax_rows(logits, ids);
  for (int64_t r = 0; r < logits.rows; ++r) {
    ids.ptr<int32_t>()[r] =
        static_cast<int32_t>(cpu::argmax_row(logits.row<const float>(r), logits.cols));
  }
}

void CpuBackend::silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  check_host("silu_mul", {&gate, &up, &out});
  op_checks::silu_mul(gate, up, out);
  const int64_t chunks = (gate.cols + kSiluChunk - 1) / kSiluChunk;
  run(gate.rows * chunks, gate.numel(), [&](int64_t begin, int64_t end, int) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t r = item / chunks, c = item % chunks * kSiluChunk;
      const int64_t n = std::min(kSiluChunk, gate.cols - c);
      cpu::silu_mul_row(gate.row<const float>(r) + c, up.row<const float>(r) + c,
                        out.row<float>(r) + c, n);
    }
  });
}

void CpuBackend::gelu_tanh_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  check_host("gelu_tanh_mul", {&gate, &up, &out});
  op_checks::gelu_tanh_mul(gate, up, out);
  const int64_t chunks = (gate.cols + kSiluChunk - 1) / kSiluChunk;
  run(gate.rows * chunks, 4 * gate.numel(), [&](int64_t begin, int64_t end, int) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t r = item / chunks, c = item % chunks * kSiluChunk;
      const int64_t n = std::min(kSiluChunk, gate.cols - c);
      cpu::gelu_tanh_mul_row(gate.row<const float>(r) + c, up.row<const float>(r) + c,
                             out.row<float>(r) + c, n);
    }
  });
}

void CpuBackend::scale(Tensor& x, float s) {
  check_host("scale", {&x});
  op_checks::scale(x);
  for (int64_t r = 0; r < x.rows; ++r) cpu::scale_row(x.row<float>(r), x.cols, s);
}

void CpuBackend::add(const Tensor& x, Tensor& y) {
  check_host("add", {&x, &y});
  op_checks::add(x, y);
  for (int64_t r = 0; r < x.rows; ++r) cpu::add_row(x.row<const float>(r), y.row<float>(r), x.cols);
}

void CpuBackend::store_kv(const Tensor& k, const Tensor& v, const KvLayerView& cache,
                          const AttentionRows& rows) {
  check_host("store_kv", {&k, &v, &rows.slots, &rows.cache_index});
  op_checks::store_kv(k, v, cache, rows);
  const int64_t width = static_cast<int64_t>(cache.n_kv_heads) * cache.head_dim;
  const size_t elem = dtype_size(cache.dtype);
  for (int64_t m = 0; m < k.rows; ++m) {
    const int64_t offset = op_checks::i32_at(rows.slots, m) * cache.slot_stride +
                           op_checks::i32_at(rows.cache_index, m) * width;
    cpu::narrow_row(k.row<const float>(m), width, cache.dtype,
                    static_cast<char*>(cache.k) + offset * elem);
    cpu::narrow_row(v.row<const float>(m), width, cache.dtype,
                    static_cast<char*>(cache.v) + offset * elem);
  }
}

void CpuBackend::attention(const Tensor& q, int n_heads, const KvLayerView& cache,
                           const AttentionRows& rows, float scale, Tensor& out) {
  check_host("attention", {&q, &out, &rows.slots});
  if (rows.window > 0) check_host("attention", {&rows.positions});
  op_checks::attention(q, n_heads, cache, rows, out);
  const bool masked = rows.mask_start.data != nullptr;
  cpu::AttentionArgs a;
  a.q = q.ptr<const float>();
  a.q_stride = q.stride;
  a.out = out.ptr<float>();
  a.out_stride = out.stride;
  a.k = cache.k;
  a.v = cache.v;
  a.cache_dtype = cache.dtype;
  a.slot_stride = cache.slot_stride;
  a.n_heads = n_heads;
  a.n_kv_heads = cache.n_kv_heads;
  a.head_dim = cache.head_dim;
  a.m = q.rows;
  a.scale = scale;
  a.slots = rows.slots.ptr<const int32_t>();
  a.cache_index = masked ? nullptr : rows.cache_index.ptr<const int32_t>();
  a.positions = rows.window > 0 ? rows.positions.ptr<const int32_t>() : nullptr;
  a.window = rows.window;
  a.mask_start = masked ? rows.mask_start.ptr<const int32_t>() : nullptr;
  a.mask = masked && rows.mask.cols > 0 ? rows.mask.ptr<const int32_t>() : nullptr;
  a.mask_cols = masked ? rows.mask.cols : 0;
  a.mask_stride = masked ? rows.mask.stride : 0;
  a.capacity = cache.capacity;
  a.bf16_dot = cache.dtype == DType::kBF16 && bf16_path_ == Bf16Path::kDot &&
               cache.head_dim <= cpu::kMaxBf16DotHeadDim;
  if (a.m == 0) return;
  // Row blocks: each run of consecutive rows of one slot (a sequence's verification rows, or a
  // chunk of its prompt: they read the same cache entries) in near-equal blocks of at most
  // kMaxRowsPerItem rows.
  row_blocks_.clear();
  int64_t max_block_rows = 0;
  for (int64_t run_begin = 0, run_end = 0; run_begin < a.m; run_begin = run_end) {
    while (run_end < a.m && a.slots[run_end] == a.slots[run_begin]) ++run_end;
    const int64_t rows = run_end - run_begin;
    const int64_t n_blocks = (rows + cpu::kMaxRowsPerItem - 1) / cpu::kMaxRowsPerItem;
    for (int64_t b = 0; b < n_blocks; ++b) {
      row_blocks_.push_back(static_cast<int32_t>(run_begin + rows * b / n_blocks));
    }
    max_block_rows = std::max(max_block_rows, (rows + n_blocks - 1) / n_blocks);
  }
  a.n_row_blocks = static_cast<int64_t>(row_blocks_.size());
  row_blocks_.push_back(static_cast<int32_t>(a.m));
  a.row_blocks = row_blocks_.data();
  // Query heads per item: as many as keep the items a multiple of the threads (or at least four
  // per thread), so that one item reads a long contiguous part of each cache entry.
  const int group = n_heads / cache.n_kv_heads;
  const int64_t threads = pool_->size();
  a.heads_per_item = 0;
  for (int h = n_heads; h >= 1 && a.heads_per_item == 0; --h) {
    const bool fits = n_heads % h == 0 && (group % h == 0 || h % group == 0) &&
                      max_block_rows * h <= cpu::kMaxQueriesPerItem;
    const int64_t items = a.n_row_blocks * (n_heads / h);
    if (fits && (items % threads == 0 || items >= 4 * threads || h == 1)) a.heads_per_item = h;
  }
  const int64_t width = std::max(1, a.heads_per_item / group) * cache.head_dim;
  // Work estimate: entries seen by all rows times head_dim times heads (times 2 for K and V).
  int64_t entries = 0;
  for (int64_t m = 0; m < a.m; ++m) {
    entries += masked ? a.mask_start[m] + a.mask_cols : a.cache_index[m] + 1;
  }
  for (Scratch& s : scratch_) {
    grow_aligned(s.scores, cpu::attention_scores_floats(cache.capacity));
    grow_aligned(s.block, cpu::attention_block_floats(width));
    grow_aligned(s.acc, cpu::attention_acc_floats(cache.head_dim));
    grow(s.entries, static_cast<size_t>(cpu::kMaxRowsPerItem * cache.capacity));
    if (a.bf16_dot) grow_aligned(s.q_bf16, cpu::attention_query_bf16_elements(cache.head_dim));
  }
  run(a.n_row_blocks * (n_heads / a.heads_per_item), 2 * entries * n_heads * cache.head_dim,
      [&](int64_t begin, int64_t end, int t) {
        Scratch& s = scratch_[t];
        cpu::attention_items(a, begin, end,
                             {aligned(s.scores), aligned(s.block), aligned(s.acc), s.entries.data(),
                              aligned(s.q_bf16)});
      });
}

}  // namespace specd
