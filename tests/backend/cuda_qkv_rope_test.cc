// qkv_rope_store_kv on the CUDA backend (the q/k/v matmul whose tile epilogue applies RoPE and
// writes K/V into the cache) against the ops it replaces, matmul_group_folded then
// rope_store_kv: the same bits in q and in the cache for bf16, int8 and int4 weights, 1 to 16
// rows in two cache slots, with and without biases and a folded input norm, head sizes 64 and
// 128; q also against the double reference. Attention right after it may load older entries
// early (AttentionRows::settled) and sees the new ones. And qk_norm_rope_store_kv (a per-head
// RMSNorm of q and k first) against its separate ops and the reference. Skips without a CUDA
// backend or GPU.
#include <gtest/gtest.h>

#include <vector>

#include "backend/reference.h"
#include "cuda_test_util.h"
#include "int_quant_util.h"
#include "test_util.h"

namespace specd {
namespace {

using backend_test::HostTensor;
using backend_test::max_rel_error;
using backend_test::name;
using backend_test::same_tensor;

constexpr float kEps = 1e-5f;
constexpr double kTolerance = 2e-4;  // the small-M kernels' error against double products of x
                                     // as they multiply it
constexpr int kSlots = 2, kCapacity = 40, kPositions = 64;

struct Shape {
  int n_heads, kv_heads, head_dim;
  bool bias;
};

class CudaQkvRope : public backend_test::CudaTest {
 protected:
  // A weight of `dtype` [rows, cols] on the device and its values on the host (`host`).
  Tensor weight(DType dtype, int64_t rows, int64_t cols, uint32_t seed, Tensor* host) {
    if (dtype == DType::kInt8 || dtype == DType::kInt4) {
      quant_.push_back(backend_test::random_int_quant(dtype, rows, cols, seed));
      *host = quant_.back().view;
    } else {
      floats_.push_back(HostTensor(dtype, rows, cols).random(seed, -0.1f, 0.1f));
      *host = floats_.back().t();
    }
    return upload_weight(*host);
  }

  void check(DType dtype, const Shape& s, bool folded) {
    // int8/int4 rows on tensor cores: multiples of 512 elements.
    const int64_t d = 512, q_dim = s.n_heads * s.head_dim, kv_dim = s.kv_heads * s.head_dim;
    const int64_t half = s.head_dim / 2;
    Tensor hq, hk, hv;
    const Tensor wq = weight(dtype, q_dim, d, 1, &hq), wk = weight(dtype, kv_dim, d, 2, &hk);
    const Tensor wv = weight(dtype, kv_dim, d, 3, &hv);
    HostTensor bq = HostTensor(DType::kF32, 1, q_dim).random(4);
    HostTensor bk = HostTensor(DType::kF32, 1, kv_dim).random(5);
    HostTensor bv = HostTensor(DType::kF32, 1, kv_dim).random(6);
    const Tensor dbq = upload(bq), dbk = upload(bk), dbv = upload(bv);
    HostTensor cos = HostTensor(DType::kF32, kPositions, half).random(7);
    HostTensor sin = HostTensor(DType::kF32, kPositions, half).random(8);
    const RopeTable table{upload(cos), upload(sin)};
    HostTensor r = HostTensor(DType::kF32, kSmallBatch, d).random(9);
    HostTensor g = HostTensor(DType::kBF16, 1, d).random(10, 0.5f, 1.5f);
    const Tensor dg = upload(g);
    // Rows of two slots, their cache entries and positions apart.
    std::vector<int32_t> slots, index, positions;
    for (int i = 0; i < kSmallBatch; ++i) {
      slots.push_back(i % 3 == 1 ? 1 : 0);
      index.push_back(static_cast<int32_t>(3 + 2 * i));
      positions.push_back(static_cast<int32_t>(60 - 3 * i));
    }
    HostTensor cache(DType::kBF16, kSlots * kCapacity, kv_dim);
    for (int64_t m : {16, 1, 2, 5, 8, 9, 13}) {
      const std::string what = std::string(name(dtype)) + " heads " + std::to_string(s.n_heads) +
                               "/" + std::to_string(s.kv_heads) + "x" + std::to_string(s.head_dim) +
                               (s.bias ? " bias" : "") + (folded ? " folded" : "") +
                               " M=" + std::to_string(m);
      const Tensor d_slots = upload(backend_test::i32_vector({slots.begin(), slots.begin() + m}));
      const Tensor d_index = upload(backend_test::i32_vector({index.begin(), index.begin() + m}));
      const Tensor d_pos =
          upload(backend_test::i32_vector({positions.begin(), positions.begin() + m}));
      AttentionRows rows;
      rows.count = m;
      rows.slots = d_slots;
      rows.cache_index = d_index;
      rows.positions = d_pos;
      // Path 0: the fused op; path 1: the q/k/v products, then rope_store_kv.
      HostTensor q_got[2], k_cache[2], v_cache[2];
      for (int path = 0; path < 2; ++path) {
        Tensor dr = upload(r).slice_rows(0, m);
        HostTensor scaled_host(DType::kF32, m, d), sums_host(DType::kF32, m, (d + 15) / 16);
        Tensor scaled = upload(scaled_host), sums = upload(sums_host);
        FoldedNorm norm{&dg, kEps, &scaled, &sums, false, &wq};
        if (folded) {
          backend_->fold_norm(dr, norm);
          ASSERT_TRUE(norm.folded) << what;
        } else {
          backend_->rms_norm(dr, dg, kEps, scaled);
        }
        Tensor kc = upload(cache), vc = upload(cache);
        const KvLayerView view{kc.data,    vc.data,   DType::kBF16,
                               kCapacity,  kSlots,    kCapacity * kv_dim,
                               s.kv_heads, s.head_dim};
        HostTensor qh(DType::kF32, m, q_dim), kh(DType::kF32, m, kv_dim);
        Tensor q = upload(qh), k = upload(kh), v = upload(kh);
        const MatmulPart parts[] = {{&wq, s.bias ? &dbq : nullptr, &q},
                                    {&wk, s.bias ? &dbk : nullptr, &k},
                                    {&wv, s.bias ? &dbv : nullptr, &v}};
        if (path == 0) {
          ASSERT_TRUE(backend_->qkv_rope_store_kv(norm, parts, s.n_heads, table, view, rows))
              << what;
        } else {
          backend_->matmul_group_folded(norm, parts);
          backend_->rope_store_kv(q, k, v, s.n_heads, table, view, rows);
        }
        q_got[path] = download(q, qh);
        k_cache[path] = download(kc, cache);
        v_cache[path] = download(vc, cache);
      }
      EXPECT_TRUE(same_tensor(q_got[0], q_got[1])) << what;
      EXPECT_TRUE(same_tensor(k_cache[0], k_cache[1])) << what;
      EXPECT_TRUE(same_tensor(v_cache[0], v_cache[1])) << what;
      EXPECT_FALSE(same_tensor(k_cache[0], cache)) << what;  // something was stored

      // q against rope(rms_norm(r) · wqᵀ + bq) in double precision, on x as the kernels
      // multiply it (folded: r ⊙ g, else the normed rows; rounded to bf16 for bf16 weights).
      HostTensor r_m(DType::kF32, m, d), q_want(DType::kF32, m, q_dim);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t c = 0; c < d; ++c) r_m.set(i, c, r.at(i, c));
      }
      const Tensor* bias = s.bias ? &bq.t() : nullptr;
      if (folded) {
        q_want = backend_test::reference_folded_products(r_m.t(), g.t(), kEps, hq, bias);
      } else {
        HostTensor h(DType::kF32, m, d);
        reference::rms_norm(r_m.t(), g.t(), kEps, h.t());
        backend_test::reference_matmul_bf16_x(h.t(), hq, bias, q_want.t(), false);
      }
      HostTensor pos_host = backend_test::i32_vector({positions.begin(), positions.begin() + m});
      reference::rope(q_want.t(), s.n_heads, pos_host.t(), RopeTable{cos.t(), sin.t()});
      EXPECT_LE(max_rel_error(q_got[0].t(), q_want.t()), kTolerance) << what;
    }
  }

 private:
  std::vector<HostTensor> floats_;
  std::vector<backend_test::IntQuantWeight> quant_;
};

TEST_F(CudaQkvRope, FusedOpHasTheBitsOfTheSeparateOps) {
  for (DType dtype : {DType::kBF16, DType::kInt8, DType::kInt4}) {
    check(dtype, {6, 2, 128, false}, true);
    check(dtype, {4, 2, 64, true}, false);
  }
}

// Attention right after the fused op, as in a forward (AttentionRows::settled: the op before
// wrote only these rows' K/V, so attention may load older entries before that op finishes): the
// same bits as attention after everything finished. The matmul is long (K = 8192) and writes K/V
// only as its tiles end, while attention blocks start as the first matmul blocks leave; the rows
// are in two slots, and the last row's slot has other new entries far below its own, which a
// bound from the row's own entry alone would read early.
TEST_F(CudaQkvRope, SettledAttentionAfterTheFusedOpSeesTheNewEntries) {
  const int64_t d = 8192;
  const int n_heads = 6, kv_heads = 2, head_dim = 128, capacity = 320;
  const int64_t q_dim = n_heads * head_dim, kv_dim = kv_heads * head_dim;
  Tensor hq, hk, hv;
  const Tensor wq = weight(DType::kBF16, q_dim, d, 21, &hq);
  const Tensor wk = weight(DType::kBF16, kv_dim, d, 22, &hk);
  const Tensor wv = weight(DType::kBF16, kv_dim, d, 23, &hv);
  HostTensor cos = HostTensor(DType::kF32, capacity, head_dim / 2).random(24);
  HostTensor sin = HostTensor(DType::kF32, capacity, head_dim / 2).random(25);
  const RopeTable table{upload(cos), upload(sin)};
  const std::vector<int32_t> slot_of = {0, 0, 0, 0, 0, 1, 1, 0};
  const std::vector<int32_t> index_of = {60, 61, 62, 63, 64, 30, 31, 300};
  const int64_t m = static_cast<int64_t>(slot_of.size());
  AttentionRows rows;
  rows.count = m;
  rows.slots = upload(backend_test::i32_vector(slot_of));
  rows.cache_index = rows.positions = upload(backend_test::i32_vector(index_of));
  HostTensor cache = HostTensor(DType::kBF16, 2 * capacity, kv_dim).random(26, -4.0f, 4.0f);
  Tensor kc = upload(cache), vc = upload(cache);
  const KvLayerView view{kc.data, vc.data,           DType::kBF16, capacity,
                         2,       capacity * kv_dim, kv_heads,     head_dim};
  HostTensor qh(DType::kF32, m, q_dim), kh(DType::kF32, m, kv_dim);
  Tensor q = upload(qh), k = upload(kh), v = upload(kh);
  Tensor settled_out = upload(qh), plain_out = upload(qh);
  const MatmulPart parts[] = {{&wq, nullptr, &q}, {&wk, nullptr, &k}, {&wv, nullptr, &v}};
  for (int round = 0; round < 16; ++round) {
    // New inputs each round, large, so that an entry read before its store changes the result.
    HostTensor x_host = HostTensor(DType::kF32, m, d).random(100 + round, -8.0f, 8.0f);
    Tensor x = upload(x_host);
    FoldedNorm norm{nullptr, kEps, &x, nullptr, false, nullptr};
    ASSERT_TRUE(backend_->qkv_rope_store_kv(norm, parts, n_heads, table, view, rows));
    AttentionRows settled = rows;
    settled.settled = true;
    backend_->attention(q, n_heads, view, settled, 0.09f, settled_out);
    backend_->attention(q, n_heads, view, rows, 0.09f, plain_out);
    const HostTensor got = download(settled_out, qh), want = download(plain_out, qh);
    for (int64_t r = 0; r < m; ++r) {
      ASSERT_TRUE(backend_test::same_bits(got.t(), r, want.t(), r))
          << "round " << round << " row " << r;
    }
  }
}

// qk_norm_rope_store_kv's kernel (RMSNorm of each q and k head, RoPE, K/V into the cache; Qwen3
// and Gemma 3) against the separate ops (rms_norm on the heads, rope_store_kv) and the double
// reference, rows in two slots, head sizes 64, 80 (a partial warp) and 128, bf16 and f32 norm
// weights.
TEST_F(CudaQkvRope, QkNormRopeStoreKvMatchesTheSeparateOps) {
  const int64_t m = 5;
  const int n_heads = 4, kv_heads = 2;
  for (int head_dim : {64, 80, 128}) {
    for (DType norm_dtype : {DType::kBF16, DType::kF32}) {
      const std::string what =
          "head_dim " + std::to_string(head_dim) + " norm " + std::string(name(norm_dtype));
      const int64_t half = head_dim / 2, q_dim = n_heads * head_dim, kv_dim = kv_heads * head_dim;
      HostTensor cos = HostTensor(DType::kF32, kPositions, half).random(31);
      HostTensor sin = HostTensor(DType::kF32, kPositions, half).random(32);
      const RopeTable table{upload(cos), upload(sin)};
      HostTensor qn = HostTensor(norm_dtype, 1, head_dim).random(33, 0.5f, 1.5f);
      HostTensor kn = HostTensor(norm_dtype, 1, head_dim).random(34, 0.5f, 1.5f);
      const Tensor dqn = upload(qn), dkn = upload(kn);
      HostTensor q = HostTensor(DType::kF32, m, q_dim).random(35, -3.0f, 3.0f);
      HostTensor k = HostTensor(DType::kF32, m, kv_dim).random(36, -3.0f, 3.0f);
      HostTensor v = HostTensor(DType::kF32, m, kv_dim).random(37);
      HostTensor slots = backend_test::i32_vector({1, 0, 1, 1, 0});
      HostTensor index = backend_test::i32_vector({7, 8, 9, 39, 0});
      HostTensor pos = backend_test::i32_vector({7, 8, 63, 39, 0});
      AttentionRows rows;
      rows.count = m;
      rows.slots = upload(slots);
      rows.cache_index = upload(index);
      rows.positions = upload(pos);
      HostTensor cache(DType::kF32, kSlots * kCapacity, kv_dim);
      // Path 0: the fused kernel; path 1: rms_norm on the heads, then rope_store_kv.
      HostTensor q_got[2], k_cache[2], v_cache[2];
      for (int path = 0; path < 2; ++path) {
        Tensor dq = upload(q), dk = upload(k), kc = upload(cache), vc = upload(cache);
        const KvLayerView view{kc.data,   vc.data, DType::kF32,
                               kCapacity, kSlots,  kCapacity * kv_dim,
                               kv_heads,  head_dim};
        if (path == 0) {
          backend_->qk_norm_rope_store_kv(dq, dk, upload(v), dqn, dkn, kEps, n_heads, table, view,
                                          rows);
        } else {
          Tensor q_heads = dq.reshape_cols(head_dim), k_heads = dk.reshape_cols(head_dim);
          backend_->rms_norm(q_heads, dqn, kEps, q_heads);
          backend_->rms_norm(k_heads, dkn, kEps, k_heads);
          backend_->rope_store_kv(dq, dk, upload(v), n_heads, table, view, rows);
        }
        q_got[path] = download(dq, q);
        k_cache[path] = download(kc, cache);
        v_cache[path] = download(vc, cache);
      }
      EXPECT_LE(max_rel_error(q_got[0].t(), q_got[1].t()), 1e-6) << what;
      EXPECT_LE(max_rel_error(k_cache[0].t(), k_cache[1].t()), 1e-6) << what;
      EXPECT_TRUE(same_tensor(v_cache[0], v_cache[1])) << what;
      // The reference: rms_norm of each head, rope, then the store.
      HostTensor q_want = q.clone(), k_want = k.clone(), cache_k = cache.clone();
      HostTensor cache_v = cache.clone();
      Tensor q_heads = q_want.t().reshape_cols(head_dim),
             k_heads = k_want.t().reshape_cols(head_dim);
      reference::rms_norm(q_heads, qn.t(), kEps, q_heads);
      reference::rms_norm(k_heads, kn.t(), kEps, k_heads);
      const RopeTable host_table{cos.t(), sin.t()};
      reference::rope(q_want.t(), n_heads, pos.t(), host_table);
      reference::rope(k_want.t(), kv_heads, pos.t(), host_table);
      const KvLayerView host_view{cache_k.t().data, cache_v.t().data,   DType::kF32, kCapacity,
                                  kSlots,           kCapacity * kv_dim, kv_heads,    head_dim};
      AttentionRows host_rows = rows;
      host_rows.slots = slots.t();
      host_rows.cache_index = index.t();
      host_rows.positions = pos.t();
      reference::store_kv(k_want.t(), v.t(), host_view, host_rows);
      EXPECT_LE(max_rel_error(q_got[0].t(), q_want.t()), 1e-5) << what;
      EXPECT_LE(max_rel_error(k_cache[0].t(), cache_k.t()), 1e-5) << what;
      EXPECT_TRUE(same_tensor(v_cache[0], cache_v)) << what;
    }
  }
}

TEST_F(CudaQkvRope, DeclinesWhatItCannotFuse) {
  // Partial rotary (the table covers half of each head) and more than 16 rows: the caller runs
  // the separate ops.
  const int64_t d = 512, head_dim = 64;
  HostTensor w_host = HostTensor(DType::kBF16, 2 * head_dim, d).random(1, -0.1f, 0.1f);
  const Tensor w = upload_weight(w_host.t());
  HostTensor cos = HostTensor(DType::kF32, kPositions, head_dim / 4).random(2);
  const RopeTable partial{upload(cos), upload(cos)};
  for (int64_t m : {int64_t{4}, int64_t{kSmallBatch + 1}}) {
    HostTensor x_host = HostTensor(DType::kF32, m, d).random(3);
    Tensor x = upload(x_host), y = upload(HostTensor(DType::kF32, m, 2 * head_dim));
    HostTensor cache(DType::kBF16, kCapacity, 2 * head_dim);
    Tensor kc = upload(cache);
    const KvLayerView view{kc.data,
                           kc.data,
                           DType::kBF16,
                           kCapacity,
                           1,
                           kCapacity * 2 * head_dim,
                           2,
                           static_cast<int>(head_dim)};
    HostTensor zeros(DType::kI32, 1, m);
    const Tensor dz = upload(zeros);
    AttentionRows rows;
    rows.count = m;
    rows.slots = rows.cache_index = rows.positions = dz;
    FoldedNorm norm{nullptr, kEps, &x, nullptr, false, nullptr};
    const MatmulPart parts[] = {{&w, nullptr, &y}, {&w, nullptr, &y}, {&w, nullptr, &y}};
    const HostTensor full_cos = HostTensor(DType::kF32, kPositions, head_dim / 2).random(4);
    const RopeTable full{upload(full_cos), upload(full_cos)};
    EXPECT_FALSE(
        backend_->qkv_rope_store_kv(norm, parts, 2, m <= kSmallBatch ? partial : full, view, rows))
        << "M=" << m;
    EXPECT_TRUE(same_tensor(download(kc, cache), cache)) << "M=" << m;
  }
}

}  // namespace
}  // namespace specd
