// store_kv and attention on the CPU backend vs the double reference; batch invariance; masks;
// sliding windows.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kernels.h"
#include "backend/reference.h"
#include "core/error.h"
#include "test_util.h"

namespace specd {
namespace {

using backend_test::HostTensor;
using backend_test::i32_vector;
using backend_test::max_rel_error;
using backend_test::same_bits;

// f32 scores, exp and weighted sums vs double, relative to max |reference|.
constexpr double kAttentionTolerance = 1e-5;
// The AVX512-BF16 path against the reference that rounds its weights to bf16 too: a weight from
// f32 arithmetic sometimes rounds to the neighbouring bf16 value (2^-8 apart) where the double
// one does not. Without that rounding in the reference the errors were 1.2e-4 to 4.5e-3.
constexpr double kDotTolerance = 1e-4;

const DType kCacheTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

using Path = CpuBackend::Bf16Path;

CpuBackend& backend() {
  static CpuBackend instance(2);
  return instance;
}

// How a bf16 cache is scored: f32 multiply-adds (kSimd; kSimdF32 is the same) and, where the CPU
// has them, AVX512-BF16 dot products on the query rounded to bf16 (kDot).
std::vector<Path> bf16_paths() {
  std::vector<Path> paths = {Path::kSimd};
  if (cpu::have_bf16_dot()) paths.push_back(Path::kDot);
  return paths;
}

// A backend on the given bf16 path.
CpuBackend& backend(Path path) {
  static CpuBackend simd(2), dot(2);
  CpuBackend& b = path == Path::kDot ? dot : simd;
  b.set_bf16_path(path);
  return b;
}

const char* path_name(Path path) { return path == Path::kDot ? "dot" : "simd"; }

double tolerance(Path path, DType cache) {
  return path == Path::kDot && cache == DType::kBF16 ? kDotTolerance : kAttentionTolerance;
}

// A KV cache with random contents in every slot.
struct Cache {
  Cache(DType dtype, int64_t slots, int64_t capacity, int n_kv, int dh, uint32_t seed)
      : k(HostTensor(dtype, slots * capacity, n_kv * dh).random(seed)),
        v(HostTensor(dtype, slots * capacity, n_kv * dh).random(seed + 1)) {
    view =
        KvLayerView{k.t().data, v.t().data, dtype, capacity, slots, capacity * n_kv * dh, n_kv, dh};
  }
  Cache(HostTensor k_in, HostTensor v_in, KvLayerView view_in)
      : k(std::move(k_in)), v(std::move(v_in)), view(view_in) {
    view.k = k.t().data;
    view.v = v.t().data;
  }
  Cache clone() const { return Cache(k.clone(), v.clone(), view); }
  HostTensor k, v;
  KvLayerView view;
};

// Rows with the given slots and cache indexes (causal); the tensors live in the struct.
struct Rows {
  Rows(std::vector<int32_t> slot_list, std::vector<int32_t> index_list)
      : slots(i32_vector(slot_list)), index(i32_vector(index_list)) {
    rows.count = static_cast<int64_t>(slot_list.size());
    rows.slots = slots.t();
    rows.cache_index = index.t();
    rows.positions = index.t();
  }
  HostTensor slots, index;
  HostTensor mask_start, mask;
  AttentionRows rows;
};

TEST(StoreKv, WritesRowsInTheCacheDtype) {
  uint32_t seed = 10;
  for (DType dtype : kCacheTypes) {
    Cache got(dtype, 3, 20, 2, 24, seed += 5);
    Cache want = got.clone();
    Rows r({2, 0, 2, 1}, {0, 19, 7, 3});
    HostTensor k = HostTensor(DType::kF32, 4, 48).random(seed + 2, -4.0f, 4.0f);
    HostTensor v = HostTensor(DType::kF32, 4, 48).random(seed + 3, -4.0f, 4.0f);
    backend().store_kv(k.t(), v.t(), got.view, r.rows);
    reference::store_kv(k.t(), v.t(), want.view, r.rows);
    EXPECT_EQ(std::memcmp(got.k.t().data, want.k.t().data, got.k.t().bytes()), 0);
    EXPECT_EQ(std::memcmp(got.v.t().data, want.v.t().data, got.v.t().bytes()), 0);
    // Entries are rounded to nearest even (bf16 / f16) from the f32 rows.
    const int64_t entry = 2 * 20 + 7;  // row 2: slot 2, index 7
    if (dtype == DType::kBF16) {
      EXPECT_EQ(got.k.at(entry, 5), bf16_to_f32(f32_to_bf16(k.at(2, 5))));
    } else if (dtype == DType::kF16) {
      EXPECT_EQ(got.v.at(entry, 5), f16_to_f32(f32_to_f16(v.at(2, 5))));
    } else {
      EXPECT_EQ(got.k.at(entry, 5), k.at(2, 5));
    }
  }
}

TEST(StoreKv, RejectsOutOfRangeRows) {
  Cache c(DType::kBF16, 2, 16, 1, 8, 1);
  HostTensor k = HostTensor(DType::kF32, 1, 8).random(2), v = HostTensor(DType::kF32, 1, 8);
  EXPECT_THROW(backend().store_kv(k.t(), v.t(), c.view, Rows({0}, {16}).rows), Error);
  EXPECT_THROW(backend().store_kv(k.t(), v.t(), c.view, Rows({0}, {-1}).rows), Error);
  EXPECT_THROW(backend().store_kv(k.t(), v.t(), c.view, Rows({2}, {0}).rows), Error);
  EXPECT_THROW(backend().store_kv(k.t(), v.t(), c.view, Rows({-1}, {0}).rows), Error);
  EXPECT_THROW(backend().store_kv(k.t(), v.t(), c.view, Rows({0, 0}, {1, 2}).rows), Error);
  HostTensor wide = HostTensor(DType::kF32, 1, 16).random(3);
  EXPECT_THROW(backend().store_kv(wide.t(), wide.t(), c.view, Rows({0}, {0}).rows), Error);
  EXPECT_NO_THROW(backend().store_kv(k.t(), v.t(), c.view, Rows({1}, {15}).rows));
}

// The backend on `path` against the reference, relative to max |reference|. Where the path
// multiplies a bf16 cache with dot products, the reference gets the query rounded to bf16 and
// rounds the weights of the values to bf16 (the rest is f32 arithmetic either way).
double attention_error(const Cache& c, int n_heads, const AttentionRows& rows, uint32_t seed,
                       Path path) {
  const int64_t m = rows.count, width = int64_t{n_heads} * c.view.head_dim;
  HostTensor q = HostTensor(DType::kF32, m, width).random(seed, -2.0f, 2.0f);
  HostTensor out(DType::kF32, m, width), want(DType::kF32, m, width);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.view.head_dim));
  backend(path).attention(q.t(), n_heads, c.view, rows, scale, out.t());
  const bool dot = path == Path::kDot && c.view.dtype == DType::kBF16;
  HostTensor q_ref = dot ? backend_test::rounded_to_bf16(q.t()) : q.clone();
  reference::attention(q_ref.t(), n_heads, c.view, rows, scale, want.t(), dot);
  return max_rel_error(out.t(), want.t());
}

TEST(Attention, CausalMatchesReference) {
  uint32_t seed = 100;
  struct Heads {
    int q, kv, dh;
  };
  for (DType dtype : kCacheTypes) {
    // dh 112: value chunks of 4, 2 and 1 vectors (16 lanes) or 8, 4 and 2 (8 lanes).
    // dh 20, 5 and 1: one masked chunk of 32 on the dot path; 112: three chunks and a masked one.
    for (Heads h :
         {Heads{16, 8, 128}, Heads{6, 2, 112}, Heads{4, 1, 20}, Heads{3, 3, 5}, Heads{2, 1, 1}}) {
      Cache c(dtype, 2, 300, h.kv, h.dh, seed += 5);
      for (Path path : bf16_paths()) {
        // Decode rows of different slots and lengths, then a verify block.
        Rows decode({1, 0, 1}, {0, 255, 299});
        EXPECT_LE(attention_error(c, h.q, decode.rows, seed + 2, path), tolerance(path, dtype))
            << backend_test::name(dtype) << " " << path_name(path) << " heads " << h.q << "/"
            << h.kv << " dh " << h.dh;
        Rows verify({0, 0, 0, 0, 0}, {40, 41, 42, 43, 44});
        EXPECT_LE(attention_error(c, h.q, verify.rows, seed + 3, path), tolerance(path, dtype))
            << backend_test::name(dtype) << " " << path_name(path) << " verify, heads " << h.q
            << "/" << h.kv;
      }
    }
  }
}

TEST(Attention, PrefillMatchesReference) {
  Cache c(DType::kBF16, 1, 128, 2, 128, 77);
  std::vector<int32_t> slots(128, 0), index(128);
  for (int i = 0; i < 128; ++i) index[i] = i;
  Rows prefill(slots, index);
  for (Path path : bf16_paths()) {
    EXPECT_LE(attention_error(c, 4, prefill.rows, 78, path), tolerance(path, DType::kBF16))
        << path_name(path);
  }
}

// Rows in the mask form: row m sees [0, start[m]) and start[m] + j where mask[m][j] != 0.
Rows masked_rows(const std::vector<int32_t>& slots, const std::vector<int32_t>& start,
                 const std::vector<std::vector<int32_t>>& mask) {
  Rows r(slots, std::vector<int32_t>(slots.size(), 0));
  r.mask_start = i32_vector(start);
  int64_t cols = mask.empty() ? 0 : static_cast<int64_t>(mask[0].size());
  r.mask = HostTensor(DType::kI32, static_cast<int64_t>(slots.size()), cols);
  for (size_t i = 0; i < mask.size(); ++i) {
    for (int64_t j = 0; j < cols; ++j) r.mask.i32()[i * cols + j] = mask[i][j];
  }
  r.rows.cache_index = Tensor{};
  r.rows.mask_start = r.mask_start.t();
  r.rows.mask = r.mask.t();
  return r;
}

TEST(Attention, TreeMaskMatchesReference) {
  uint32_t seed = 200;
  for (DType dtype : kCacheTypes) {
    Cache c(dtype, 2, 64, 2, 32, seed += 5);
    // A tree of 5 nodes after 30 committed entries: 0 -> {1, 2}, 1 -> 3, 2 -> 4.
    Rows r = masked_rows(
        {1, 1, 1, 1, 1}, {30, 30, 30, 30, 30},
        {{1, 0, 0, 0, 0}, {1, 1, 0, 0, 0}, {1, 0, 1, 0, 0}, {1, 1, 0, 1, 0}, {1, 0, 1, 0, 1}});
    for (Path path : bf16_paths()) {
      EXPECT_LE(attention_error(c, 4, r.rows, seed + 2, path), tolerance(path, dtype))
          << backend_test::name(dtype) << " " << path_name(path);
    }
  }
}

TEST(Attention, CausalMaskGivesTheCausalBits) {
  Cache c(DType::kBF16, 2, 64, 2, 64, 300);
  const int64_t m = 6, width = 4 * 64;
  std::vector<std::vector<int32_t>> tri(m, std::vector<int32_t>(m, 0));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j <= i; ++j) tri[i][j] = 1;
  }
  Rows masked = masked_rows(std::vector<int32_t>(m, 1), std::vector<int32_t>(m, 20), tri);
  Rows causal(std::vector<int32_t>(m, 1), {20, 21, 22, 23, 24, 25});
  HostTensor q = HostTensor(DType::kF32, m, width).random(301);
  for (Path path : bf16_paths()) {
    HostTensor a(DType::kF32, m, width), b(DType::kF32, m, width);
    backend(path).attention(q.t(), 4, c.view, causal.rows, 0.125f, a.t());
    backend(path).attention(q.t(), 4, c.view, masked.rows, 0.125f, b.t());
    for (int64_t r = 0; r < m; ++r) {
      EXPECT_TRUE(same_bits(a.t(), r, b.t(), r)) << path_name(path) << " row " << r;
    }
  }
}

TEST(Attention, BatchInvariantUpToSmallBatch) {
  for (DType dtype : kCacheTypes) {
    Cache c(dtype, 4, 320, 8, 128, 400);
    const int n_heads = 16;
    const int64_t width = int64_t{n_heads} * 128;
    // Rows 0-7: a verify block in slot 2 (row m sees entries up to 250 + m); rows 8-15: decode
    // rows of other slots and lengths.
    std::vector<int32_t> slots = {2, 2, 2, 2, 2, 2, 2, 2, 0, 1, 3, 0, 1, 3, 0, 1};
    std::vector<int32_t> index = {250, 251, 252, 253, 254, 255, 256, 257,
                                  0,   9,   300, 77,  128, 319, 5,   200};
    HostTensor q = HostTensor(DType::kF32, kSmallBatch, width).random(401);
    for (Path path : bf16_paths()) {
      CpuBackend& b = backend(path);
      HostTensor alone(DType::kF32, kSmallBatch, width);
      for (int64_t r = 0; r < kSmallBatch; ++r) {
        Rows one({slots[r]}, {index[r]});
        Tensor out = alone.t().slice_rows(r, 1);
        b.attention(q.t().slice_rows(r, 1), n_heads, c.view, one.rows, 0.088f, out);
      }
      for (int64_t m = 1; m <= kSmallBatch; ++m) {
        Rows batch(std::vector<int32_t>(slots.begin(), slots.begin() + m),
                   std::vector<int32_t>(index.begin(), index.begin() + m));
        HostTensor out(DType::kF32, m, width);
        b.attention(q.t().slice_rows(0, m), n_heads, c.view, batch.rows, 0.088f, out.t());
        for (int64_t r = 0; r < m; ++r) {
          ASSERT_TRUE(same_bits(out.t(), r, alone.t(), r))
              << backend_test::name(dtype) << " " << path_name(path) << ": row " << r
              << " of M=" << m;
        }
      }
    }
  }
}

TEST(Attention, InPlaceOutput) {
  Cache c(DType::kBF16, 1, 40, 2, 16, 500);
  Rows r({0, 0, 0}, {10, 11, 39});
  HostTensor q = HostTensor(DType::kF32, 3, 64).random(501);
  HostTensor want(DType::kF32, 3, 64);
  backend().attention(q.t(), 4, c.view, r.rows, 0.25f, want.t());
  backend().attention(q.t(), 4, c.view, r.rows, 0.25f, q.t());
  for (int64_t i = 0; i < 3; ++i) EXPECT_TRUE(same_bits(q.t(), i, want.t(), i));
}

TEST(Attention, RejectsBadRows) {
  Cache c(DType::kBF16, 2, 16, 2, 8, 600);
  HostTensor q = HostTensor(DType::kF32, 1, 32).random(601), out(DType::kF32, 1, 32);
  EXPECT_THROW(backend().attention(q.t(), 4, c.view, Rows({0}, {16}).rows, 1.0f, out.t()), Error);
  EXPECT_THROW(backend().attention(q.t(), 4, c.view, Rows({5}, {1}).rows, 1.0f, out.t()), Error);
  EXPECT_THROW(backend().attention(q.t(), 3, c.view, Rows({0}, {1}).rows, 1.0f, out.t()), Error);
  Rows beyond = masked_rows({0}, {14}, {{1, 1, 1}});  // sees entry 16
  EXPECT_THROW(backend().attention(q.t(), 4, c.view, beyond.rows, 1.0f, out.t()), Error);
  Rows empty = masked_rows({0}, {0}, {{0, 0}});  // sees nothing
  EXPECT_THROW(backend().attention(q.t(), 4, c.view, empty.rows, 1.0f, out.t()), Error);
}

// Sliding window (Gemma 3): row m sees entries j with position - window < j <= cache_index.
TEST(SlidingWindow, MatchesReference) {
  uint32_t seed = 700;
  for (DType dtype : kCacheTypes) {
    Cache c(dtype, 2, 300, 2, 64, seed += 5);
    for (int64_t window : {1, 4, 37, 512}) {
      for (Path path : bf16_paths()) {
        Rows decode({1, 0, 1, 0}, {0, 3, 255, 299});
        decode.rows.window = window;
        EXPECT_LE(attention_error(c, 4, decode.rows, seed + 2, path), tolerance(path, dtype))
            << backend_test::name(dtype) << " " << path_name(path) << " window " << window;
        std::vector<int32_t> slots(40, 1), index(40);
        for (int i = 0; i < 40; ++i) index[i] = 10 + i;
        Rows prefill(slots, index);
        prefill.rows.window = window;
        EXPECT_LE(attention_error(c, 4, prefill.rows, seed + 3, path), tolerance(path, dtype))
            << backend_test::name(dtype) << " " << path_name(path) << " prefill, window " << window;
      }
    }
  }
}

// The reference's window is Hugging Face's sliding mask (kv_idx > q_idx - window).
TEST(SlidingWindow, ReferenceVisibility) {
  Rows r({0, 0}, {9, 3});
  r.rows.window = 4;
  for (int64_t j = 0; j < 12; ++j) {
    EXPECT_EQ(reference::visible(r.rows, 0, j), j > 9 - 4 && j <= 9) << j;
    EXPECT_EQ(reference::visible(r.rows, 1, j), j <= 3) << j;
  }
}

// A window gives the bits of the mask form listing the same entries, and no window (or one
// wider than the position) gives the causal bits; a narrow window changes the result.
TEST(SlidingWindow, SameBitsAsTheEquivalentMask) {
  Cache c(DType::kBF16, 1, 64, 2, 32, 800);
  const int64_t m = 5, width = 4 * 32, window = 6;
  std::vector<int32_t> index = {20, 21, 22, 23, 40};
  std::vector<std::vector<int32_t>> mask(m, std::vector<int32_t>(41, 0));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = index[i] - window + 1; j <= index[i]; ++j) mask[i][j] = 1;
  }
  Rows masked = masked_rows(std::vector<int32_t>(m, 0), std::vector<int32_t>(m, 0), mask);
  Rows windowed(std::vector<int32_t>(m, 0), index), wide(std::vector<int32_t>(m, 0), index),
      causal(std::vector<int32_t>(m, 0), index);
  windowed.rows.window = window;
  wide.rows.window = 41;
  HostTensor q = HostTensor(DType::kF32, m, width).random(801);
  for (Path path : bf16_paths()) {
    HostTensor a(DType::kF32, m, width), b(DType::kF32, m, width), d(DType::kF32, m, width),
        e(DType::kF32, m, width);
    backend(path).attention(q.t(), 4, c.view, windowed.rows, 0.2f, a.t());
    backend(path).attention(q.t(), 4, c.view, masked.rows, 0.2f, b.t());
    backend(path).attention(q.t(), 4, c.view, wide.rows, 0.2f, d.t());
    backend(path).attention(q.t(), 4, c.view, causal.rows, 0.2f, e.t());
    for (int64_t r = 0; r < m; ++r) {
      EXPECT_TRUE(same_bits(a.t(), r, b.t(), r)) << path_name(path) << " row " << r;
      EXPECT_TRUE(same_bits(d.t(), r, e.t(), r)) << path_name(path) << " row " << r;
      EXPECT_FALSE(same_bits(a.t(), r, e.t(), r)) << path_name(path) << " row " << r;
    }
  }
}

TEST(SlidingWindow, BatchInvariantUpToSmallBatch) {
  Cache c(DType::kBF16, 4, 320, 2, 128, 900);
  const int n_heads = 8;
  const int64_t width = int64_t{n_heads} * 128;
  std::vector<int32_t> slots = {2, 2, 2, 2, 2, 2, 2, 2, 0, 1, 3, 0, 1, 3, 0, 1};
  std::vector<int32_t> index = {250, 251, 252, 253, 254, 255, 256, 257,
                                0,   9,   300, 77,  128, 319, 5,   200};
  HostTensor q = HostTensor(DType::kF32, kSmallBatch, width).random(901);
  for (Path path : bf16_paths()) {
    CpuBackend& b = backend(path);
    HostTensor alone(DType::kF32, kSmallBatch, width);
    for (int64_t r = 0; r < kSmallBatch; ++r) {
      Rows one({slots[r]}, {index[r]});
      one.rows.window = 64;
      Tensor out = alone.t().slice_rows(r, 1);
      b.attention(q.t().slice_rows(r, 1), n_heads, c.view, one.rows, 0.088f, out);
    }
    // The verify rows' windows start at different entries, so a key's place among the keys
    // scored together moves with M.
    for (int64_t m = 1; m <= kSmallBatch; ++m) {
      Rows batch(std::vector<int32_t>(slots.begin(), slots.begin() + m),
                 std::vector<int32_t>(index.begin(), index.begin() + m));
      batch.rows.window = 64;
      HostTensor out(DType::kF32, m, width);
      b.attention(q.t().slice_rows(0, m), n_heads, c.view, batch.rows, 0.088f, out.t());
      for (int64_t r = 0; r < m; ++r) {
        ASSERT_TRUE(same_bits(out.t(), r, alone.t(), r))
            << path_name(path) << ": row " << r << " of M=" << m;
      }
    }
  }
}

TEST(SlidingWindow, RejectsBadRows) {
  Cache c(DType::kBF16, 1, 16, 2, 8, 1000);
  HostTensor q = HostTensor(DType::kF32, 1, 32).random(1001), out(DType::kF32, 1, 32);
  Rows negative({0}, {5});
  negative.rows.window = -1;
  EXPECT_THROW(backend().attention(q.t(), 4, c.view, negative.rows, 1.0f, out.t()), Error);
  Rows no_positions({0}, {5});
  no_positions.rows.window = 4;
  no_positions.rows.positions = Tensor{};
  EXPECT_THROW(backend().attention(q.t(), 4, c.view, no_positions.rows, 1.0f, out.t()), Error);
  // Entry 5 at position 9 with window 4: the row would see nothing.
  Rows outside({0}, {5});
  HostTensor pos = i32_vector({9});
  outside.rows.positions = pos.t();
  outside.rows.window = 4;
  EXPECT_THROW(backend().attention(q.t(), 4, c.view, outside.rows, 1.0f, out.t()), Error);
}

}  // namespace
}  // namespace specd
