// Every op on the CUDA backend against the double reference; batch invariance and graph replay.
// Skips when the build has no CUDA backend or no GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "backend/reference.h"
#include "core/error.h"
#include "cuda_test_util.h"
#include "test_util.h"

namespace specd {
namespace {

using backend_test::HostTensor;
using backend_test::max_rel_error;
using backend_test::same_bits;
using backend_test::same_tensor;

// Small-M kernels against the reference on x as they multiply it (bf16 weights on tensor cores:
// x rounded to bf16; backend_test::reference_matmul_bf16_x). The GEMM's tolerance is that of bf16
// activations against the reference on x as it is.
constexpr double kSmallTolerance = 2e-4;
constexpr double kGemmTolerance = 1e-2;
constexpr double kOpTolerance = 1e-5;

AttentionRows make_rows(int64_t count, const Tensor& slots, const Tensor& index,
                        const Tensor& positions) {
  AttentionRows rows;
  rows.count = count;
  rows.slots = slots;
  rows.cache_index = index;
  rows.positions = positions;
  return rows;
}

class CudaOps : public backend_test::CudaTest {
 protected:
  // `n_slots` slots of `capacity` entries, filled with random K/V (seeds `seed`, `seed + 1`) on
  // the host (for the reference) and on the device through store_kv.
  struct FilledCache {
    HostTensor k, v;  // [n_slots * capacity, kv_heads * head_dim] of cache_dtype
    Tensor dk{}, dv{};
    KvLayerView host{}, dev{};
  };
  FilledCache filled_cache(DType cache_dtype, int capacity, int kv_heads, int head_dim,
                           uint32_t seed, int n_slots = 1) {
    const int width = kv_heads * head_dim, entries = n_slots * capacity;
    FilledCache c{HostTensor(cache_dtype, entries, width), HostTensor(cache_dtype, entries, width)};
    HostTensor keys = HostTensor(DType::kF32, entries, width).random(seed);
    HostTensor values = HostTensor(DType::kF32, entries, width).random(seed + 1);
    c.host = KvLayerView{c.k.t().data, c.v.t().data, cache_dtype,
                         capacity,     n_slots,      int64_t{capacity} * width,
                         kv_heads,     head_dim};
    c.dk = upload(c.k);
    c.dv = upload(c.v);
    c.dev = c.host;
    c.dev.k = c.dk.data;
    c.dev.v = c.dv.data;
    std::vector<int32_t> slot_of(entries), index_of(entries);
    for (int i = 0; i < entries; ++i) slot_of[i] = i / capacity, index_of[i] = i % capacity;
    HostTensor slots = backend_test::i32_vector(slot_of);
    HostTensor index = backend_test::i32_vector(index_of);
    backend_->store_kv(upload(keys), upload(values), c.dev,
                       make_rows(entries, upload(slots), upload(index), upload(index)));
    reference::store_kv(keys.t(), values.t(), c.host,
                        make_rows(entries, slots.t(), index.t(), index.t()));
    return c;
  }
  // Attention of row r of `rows` (causal, device indices) computed as a one-row batch.
  HostTensor attend_alone(const Tensor& q, int n_heads, const KvLayerView& view,
                          const AttentionRows& rows, int64_t r, float scale) {
    auto one_entry = [r](Tensor t) {
      t.data = static_cast<int32_t*>(t.data) + r;
      t.cols = 1;
      return t;
    };
    AttentionRows single = rows;  // keeps the window
    single.count = 1;
    single.slots = one_entry(rows.slots);
    single.cache_index = one_entry(rows.cache_index);
    single.positions = one_entry(rows.positions);
    HostTensor one(DType::kF32, 1, q.cols);
    Tensor done = upload(one);
    backend_->attention(q.slice_rows(r, 1), n_heads, view, single, scale, done);
    return download(done, one);
  }
};

TEST_F(CudaOps, MatmulMatchesReference) {
  const int64_t ms[] = {1, 3, 8, 9, 16, 17, 64, 300};
  // 9000 columns: more tiles than two blocks per multiprocessor, so blocks take several tiles.
  const std::pair<int64_t, int64_t> kn[] = {{64, 48},    {136, 33},   {1024, 1000},
                                            {4096, 256}, {512, 9000}, {13, 9}};
  uint32_t seed = 1;
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (int64_t m : ms) {
      for (auto [k, n] : kn) {
        for (bool accumulate : {false, true}) {
          seed += 7;
          HostTensor x = HostTensor(DType::kF32, m, k).random(seed);
          HostTensor w = HostTensor(dtype, n, k).random(seed + 1);
          HostTensor bias = HostTensor(DType::kBF16, 1, n).random(seed + 2);
          HostTensor y = HostTensor(DType::kF32, m, n).random(seed + 3);
          HostTensor want = y.clone();
          Tensor dx = upload(x), dw = upload(w), db = upload(bias), dy = upload(y);
          backend_->matmul(dx, dw, &db, dy, accumulate);
          HostTensor got = download(dy, y);
          const bool bf16_kernels = dtype == DType::kBF16 && k % 8 == 0;  // GEMM, tensor cores
          const bool gemm = m > kSmallBatch && bf16_kernels;
          if (bf16_kernels && !gemm) {
            backend_test::reference_matmul_bf16_x(x.t(), w.t(), &bias.t(), want.t(), accumulate);
          } else {
            reference::matmul(x.t(), w.t(), &bias.t(), want.t(), accumulate);
          }
          EXPECT_LE(max_rel_error(got.t(), want.t()), gemm ? kGemmTolerance : kSmallTolerance)
              << backend_test::name(dtype) << " M=" << m << " K=" << k << " N=" << n
              << " accumulate=" << accumulate;
        }
      }
    }
  }
}

// More than 16 rows of bf16 weights take the GEMM (cuBLASLt where the build has it): within
// kGemmTolerance of the reference (x is rounded to bf16), and deterministic: the same product gives
// the same bits when it runs again, and on a second backend (which picks its algorithms anew).
TEST_F(CudaOps, GemmMatchesReferenceAndIsDeterministic) {
  struct Shape {
    int64_t m, k, n, y_stride;
  };
  const Shape shapes[] = {{17, 4096, 1024, 1024},
                          {300, 1024, 1000, 1000},
                          {512, 4096, 256, 256},
                          {64, 512, 96, 97}};  // the last: rows of y only 4-byte aligned
  auto second = make_backend(Device{DeviceKind::kCuda, 0}, 1);
  uint32_t seed = 500;
  for (const Shape& s : shapes) {
    for (bool accumulate : {false, true}) {
      seed += 5;
      HostTensor x = HostTensor(DType::kF32, s.m, s.k).random(seed);
      HostTensor w = HostTensor(DType::kBF16, s.n, s.k).random(seed + 1);
      HostTensor bias = HostTensor(DType::kBF16, 1, s.n).random(seed + 2);
      HostTensor y = HostTensor(DType::kF32, s.m, s.n, s.y_stride).random(seed + 3);
      Tensor dx = upload(x), dw = upload(w), db = upload(bias);
      HostTensor runs[2];
      for (HostTensor& got : runs) {
        Tensor dy = upload(y);
        backend_->matmul(dx, dw, &db, dy, accumulate);
        got = download(dy, y);
      }
      HostTensor want = y.clone();
      reference::matmul(x.t(), w.t(), &bias.t(), want.t(), accumulate);
      const std::string what = "M=" + std::to_string(s.m) + " K=" + std::to_string(s.k) +
                               " N=" + std::to_string(s.n) +
                               " accumulate=" + std::to_string(accumulate);
      EXPECT_LE(max_rel_error(runs[0].t(), want.t()), kGemmTolerance) << what;

      // The same product on the second backend, from its own copies of the tensors.
      const size_t y_bytes = static_cast<size_t>(s.m * s.y_stride) * 4;
      DeviceBuffer bx = second->alloc(x.t().bytes()), bw = second->alloc(w.t().bytes()),
                   bb = second->alloc(bias.t().bytes()), by = second->alloc(y_bytes);
      second->copy_to_device(bx.data(), x.t().data, x.t().bytes());
      second->copy_to_device(bw.data(), w.t().data, w.t().bytes());
      second->copy_to_device(bb.data(), bias.t().data, bias.t().bytes());
      second->copy_to_device(by.data(), y.t().data, y_bytes);
      Tensor sx = dx, sw = dw, sb = db, sy = y.t();
      sx.data = bx.data();
      sw.data = bw.data();
      sb.data = bb.data();
      sy.data = by.data();
      sy.device = sx.device = sw.device = sb.device = second->device();
      second->matmul(sx, sw, &sb, sy, accumulate);
      HostTensor other = y.clone();
      second->copy_to_host(other.t().data, by.data(), y_bytes);
      for (int64_t r = 0; r < s.m; ++r) {
        ASSERT_TRUE(same_bits(runs[1].t(), r, runs[0].t(), r)) << what << " row " << r;
        ASSERT_TRUE(same_bits(other.t(), r, runs[0].t(), r)) << what << " row " << r;
      }
    }
  }
}

// A group of GEMMs (x rounded once for all parts) gives the bits of separate matmuls.
TEST_F(CudaOps, GemmGroupEqualsSeparateMatmuls) {
  HostTensor x = HostTensor(DType::kF32, 100, 512).random(61);
  HostTensor a = HostTensor(DType::kBF16, 256, 512).random(62);
  HostTensor b = HostTensor(DType::kBF16, 64, 512).random(63);
  HostTensor c = HostTensor(DType::kBF16, 72, 512).random(64);
  expect_group_equals_separate(x, {a.t(), b.t(), c.t()});
}

#if SPECD_WITH_CUBLASLT
TEST_F(CudaOps, DescribesTheCublasLtGemm) {
  const char* lt = std::getenv("SPECD_CUBLASLT");
  const bool on = lt == nullptr || std::strcmp(lt, "0") != 0;
  EXPECT_EQ(backend_->describe().find("cuBLASLt") != std::string::npos, on) << backend_->describe();
}
#endif

TEST_F(CudaOps, MatmulIsBatchInvariant) {
  for (auto [k, n] :
       std::vector<std::pair<int64_t, int64_t>>{{4096, 1024}, {512, 4096}, {512, 9000}, {72, 40}}) {
    HostTensor x = HostTensor(DType::kF32, kSmallBatch, k).random(11);
    HostTensor w = HostTensor(DType::kBF16, n, k).random(12);
    expect_batch_invariant(x, w.t());
  }
}

TEST_F(CudaOps, GatedMatmulEqualsGateThenMatmul) {
  // bf16 runs silu_mul / gelu_tanh_mul, then the matmul (tensor-core and generic kernels).
  for (auto [k, n] : std::vector<std::pair<int64_t, int64_t>>{{1024, 96}, {72, 40}, {13, 9}}) {
    expect_gated_equals_separate(HostTensor(DType::kBF16, n, k).random(61).t());
  }
}

TEST_F(CudaOps, GateUpActEqualsSeparateOpsAndIsBatchInvariant) {
  // bf16 gate and up projections with the activation in the small-M kernel: the bits of
  // matmul_group and then silu_mul / gelu_tanh_mul, for 1 to 16 rows (204: a half tile; 4500:
  // blocks take several tiles).
  for (auto [k, f] :
       std::vector<std::pair<int64_t, int64_t>>{{512, 204}, {256, 4500}, {1024, 96}, {72, 40}}) {
    HostTensor x = HostTensor(DType::kF32, kSmallBatch, k).random(71);
    HostTensor wg = HostTensor(DType::kBF16, f, k).random(72);
    HostTensor wu = HostTensor(DType::kBF16, f, k).random(73);
    Tensor dx = upload(x), dwg = upload(wg), dwu = upload(wu);
    for (Activation act : {Activation::kSilu, Activation::kGeluTanh}) {
      HostTensor all(DType::kF32, kSmallBatch, f);
      for (int64_t m : {16, 1, 5, 9}) {
        HostTensor g(DType::kF32, m, f), u(DType::kF32, m, f), fused(DType::kF32, m, f);
        Tensor dg = upload(g), du = upload(u), dfused = upload(fused);
        const MatmulPart parts[] = {{&dwg, nullptr, &dg}, {&dwu, nullptr, &du}};
        backend_->matmul_group(dx.slice_rows(0, m), parts);
        if (act == Activation::kSilu) {
          backend_->silu_mul(dg, du, dg);
        } else {
          backend_->gelu_tanh_mul(dg, du, dg);
        }
        ASSERT_TRUE(backend_->gate_up_act(act, dx.slice_rows(0, m), dwg, dwu, dfused));
        HostTensor want = download(dg, g), got = download(dfused, fused);
        for (int64_t r = 0; r < m; ++r) {
          EXPECT_TRUE(same_bits(got.t(), r, want.t(), r)) << "k=" << k << " f=" << f << " M=" << m;
          if (m == kSmallBatch) continue;
          EXPECT_TRUE(same_bits(got.t(), r, all.t(), r)) << "k=" << k << " f=" << f << " M=" << m;
        }
        if (m == kSmallBatch) all = std::move(got);
      }
    }
  }
  // Declined (the caller runs the separate ops): f32 weights, more than 16 rows.
  HostTensor x = HostTensor(DType::kF32, kSmallBatch + 1, 64).random(74);
  HostTensor w32 = HostTensor(DType::kF32, 32, 64).random(75);
  HostTensor w16 = HostTensor(DType::kBF16, 32, 64).random(76);
  HostTensor out(DType::kF32, kSmallBatch + 1, 32);
  Tensor dx = upload(x), dw32 = upload(w32), dw16 = upload(w16), dout = upload(out);
  Tensor one_row = dout.slice_rows(0, 1);
  EXPECT_FALSE(backend_->gate_up_act(Activation::kSilu, dx.slice_rows(0, 1), dw32, dw32, one_row));
  EXPECT_FALSE(backend_->gate_up_act(Activation::kSilu, dx, dw16, dw16, dout));
}

TEST_F(CudaOps, MatmulGroupMatchesReferenceAndIsBatchInvariant) {
  const int64_t k = 512;
  const int64_t ns[] = {256, 64, 72};
  HostTensor x = HostTensor(DType::kF32, kSmallBatch, k).random(41);
  Tensor dx = upload(x);
  std::vector<HostTensor> w, y_all;
  std::vector<Tensor> dw, dy_all;
  for (int i = 0; i < 3; ++i) {
    w.push_back(HostTensor(DType::kBF16, ns[i], k).random(42 + i));
    y_all.emplace_back(DType::kF32, kSmallBatch, ns[i]);
  }
  for (int i = 0; i < 3; ++i) {
    dw.push_back(upload(w[i]));
    dy_all.push_back(upload(y_all[i]));
  }
  std::vector<MatmulPart> parts;
  for (int i = 0; i < 3; ++i) parts.push_back({&dw[i], nullptr, &dy_all[i]});
  backend_->matmul_group(dx, parts);
  for (int i = 0; i < 3; ++i) {
    HostTensor want(DType::kF32, kSmallBatch, ns[i]);
    backend_test::reference_matmul_bf16_x(x.t(), w[i].t(), nullptr, want.t(), false);
    HostTensor got = download(dy_all[i], y_all[i]);
    EXPECT_LE(max_rel_error(got.t(), want.t()), kSmallTolerance) << "part " << i;
    y_all[i] = std::move(got);
  }
  for (int64_t m : {1, 5, 9}) {
    std::vector<HostTensor> y;
    std::vector<Tensor> dy;
    for (int i = 0; i < 3; ++i) y.emplace_back(DType::kF32, m, ns[i]);
    for (int i = 0; i < 3; ++i) dy.push_back(upload(y[i]));
    std::vector<MatmulPart> rows;
    for (int i = 0; i < 3; ++i) rows.push_back({&dw[i], nullptr, &dy[i]});
    backend_->matmul_group(dx.slice_rows(0, m), rows);
    for (int i = 0; i < 3; ++i) {
      HostTensor got = download(dy[i], y[i]);
      for (int64_t r = 0; r < m; ++r) {
        EXPECT_TRUE(same_bits(got.t(), r, y_all[i].t(), r)) << "part " << i << " M=" << m;
      }
    }
  }
}

TEST_F(CudaOps, ElementwiseOpsMatchReference) {
  const int64_t m = 5, d = 96, heads = 3, half = 16, positions = 40;
  // embedding
  HostTensor table = HostTensor(DType::kBF16, 50, d).random(1);
  HostTensor ids = backend_test::i32_vector({3, 0, 49, 7, 7});
  HostTensor emb(DType::kF32, m, d), emb_want(DType::kF32, m, d);
  Tensor demb = upload(emb);
  backend_->embedding(upload(ids), upload(table), demb);
  reference::embedding(ids.t(), table.t(), emb_want.t());
  EXPECT_LE(max_rel_error(download(demb, emb).t(), emb_want.t()), 0.0);
  // rms_norm
  HostTensor x = HostTensor(DType::kF32, m, d).random(2);
  HostTensor weight = HostTensor(DType::kBF16, 1, d).random(3);
  HostTensor y(DType::kF32, m, d), y_want(DType::kF32, m, d);
  Tensor dy = upload(y);
  backend_->rms_norm(upload(x), upload(weight), 1e-6f, dy);
  reference::rms_norm(x.t(), weight.t(), 1e-6f, y_want.t());
  EXPECT_LE(max_rel_error(download(dy, y).t(), y_want.t()), kOpTolerance);
  // rope
  HostTensor cos = HostTensor(DType::kF32, positions, half).random(4);
  HostTensor sin = HostTensor(DType::kF32, positions, half).random(5);
  HostTensor pos = backend_test::i32_vector({0, 39, 5, 5, 17});
  HostTensor r = HostTensor(DType::kF32, m, heads * 2 * half).random(6);
  HostTensor r_want = r.clone();
  Tensor dr = upload(r);
  RopeTable table_dev{upload(cos), upload(sin)};
  backend_->rope(dr, static_cast<int>(heads), upload(pos), table_dev);
  RopeTable table_host{cos.t(), sin.t()};
  reference::rope(r_want.t(), static_cast<int>(heads), pos.t(), table_host);
  EXPECT_LE(max_rel_error(download(dr, r).t(), r_want.t()), kOpTolerance);
  // silu_mul
  HostTensor gate = HostTensor(DType::kF32, m, d).random(7, -8.0f, 8.0f);
  HostTensor up = HostTensor(DType::kF32, m, d).random(8);
  HostTensor out(DType::kF32, m, d), out_want(DType::kF32, m, d);
  Tensor dout = upload(out);
  backend_->silu_mul(upload(gate), upload(up), dout);
  reference::silu_mul(gate.t(), up.t(), out_want.t());
  EXPECT_LE(max_rel_error(download(dout, out).t(), out_want.t()), kOpTolerance);
  // gelu_tanh_mul, scale, add (Gemma 3)
  Tensor dgelu = upload(out);
  backend_->gelu_tanh_mul(upload(gate), upload(up), dgelu);
  reference::gelu_tanh_mul(gate.t(), up.t(), out_want.t());
  EXPECT_LE(max_rel_error(download(dgelu, out).t(), out_want.t()), kOpTolerance);
  Tensor dscaled = upload(x);
  backend_->scale(dscaled, 25.3f);
  HostTensor scaled_want = x.clone();
  reference::scale(scaled_want.t(), 25.3f);
  EXPECT_LE(max_rel_error(download(dscaled, x).t(), scaled_want.t()), 0.0);
  Tensor dsum = upload(up);
  backend_->add(upload(x), dsum);
  HostTensor sum_want = up.clone();
  reference::add(x.t(), sum_want.t());
  EXPECT_LE(max_rel_error(download(dsum, up).t(), sum_want.t()), 0.0);
}

TEST_F(CudaOps, FusedRopeStoreKvMatchesTheSeparateOps) {
  const int64_t m = 4, half = 16, head_dim = 2 * half, positions = 40, capacity = 50;
  const int n_heads = 6, kv_heads = 2;
  const int64_t width = kv_heads * head_dim;
  HostTensor cos = HostTensor(DType::kF32, positions, half).random(31);
  HostTensor sin = HostTensor(DType::kF32, positions, half).random(32);
  HostTensor pos = backend_test::i32_vector({7, 8, 9, 39});
  HostTensor index = backend_test::i32_vector({7, 8, 9, 49});
  HostTensor slots = backend_test::i32_vector({1, 1, 1, 0});
  HostTensor q = HostTensor(DType::kF32, m, n_heads * head_dim).random(33);
  HostTensor k = HostTensor(DType::kF32, m, width).random(34);
  HostTensor v = HostTensor(DType::kF32, m, width).random(35);
  RopeTable table{upload(cos), upload(sin)};
  AttentionRows rows = make_rows(m, upload(slots), upload(index), upload(pos));
  // Two caches of 2 slots: one written by the fused op, one by rope, rope and store_kv.
  HostTensor cache(DType::kBF16, 2 * capacity, width);
  KvLayerView views[2];
  Tensor qs[2], ks[2], caches_k[2], caches_v[2];
  for (int i = 0; i < 2; ++i) {
    caches_k[i] = upload(cache);
    caches_v[i] = upload(cache);
    views[i] = KvLayerView{
        caches_k[i].data, caches_v[i].data,          DType::kBF16, capacity, 2, capacity * width,
        kv_heads,         static_cast<int>(head_dim)};
    qs[i] = upload(q);
    ks[i] = upload(k);
  }
  const Tensor dv = upload(v);
  backend_->rope_store_kv(qs[0], ks[0], dv, n_heads, table, views[0], rows);
  backend_->rope(qs[1], n_heads, rows.positions, table);
  backend_->rope(ks[1], kv_heads, rows.positions, table);
  backend_->store_kv(ks[1], dv, views[1], rows);
  EXPECT_TRUE(same_tensor(download(qs[0], q), download(qs[1], q)));
  EXPECT_TRUE(same_tensor(download(ks[0], k), download(ks[1], k)));
  EXPECT_TRUE(same_tensor(download(caches_k[0], cache), download(caches_k[1], cache)));
  EXPECT_TRUE(same_tensor(download(caches_v[0], cache), download(caches_v[1], cache)));
  // And the reference.
  HostTensor q_want = q.clone();
  RopeTable host_table{cos.t(), sin.t()};
  reference::rope(q_want.t(), n_heads, pos.t(), host_table);
  EXPECT_LE(max_rel_error(download(qs[0], q).t(), q_want.t()), kOpTolerance);
}

TEST_F(CudaOps, ArgmaxRowsMatchesTheReference) {
  const int64_t rows = 9, vocab = 50021;
  HostTensor logits = HostTensor(DType::kF32, rows, vocab).random(41, -20.0f, 20.0f);
  float* l = logits.t().row<float>(0);
  // Ties (row 1: the same maximum twice), NaNs (row 2 in column 0, row 3 elsewhere), -inf rows.
  l[1 * vocab + 17] = l[1 * vocab + 40000] = 100.0f;
  l[2 * vocab + 0] = std::nanf("");
  l[3 * vocab + 5] = std::nanf("");
  l[3 * vocab + 77] = 50.0f;
  for (int64_t c = 0; c < vocab; ++c) l[4 * vocab + c] = -INFINITY;
  l[5 * vocab + vocab - 1] = 200.0f;                  // in the last, partial slice of columns
  l[6 * vocab + 4095] = l[6 * vocab + 4096] = 90.0f;  // a tie across two slices
  HostTensor ids(DType::kI32, 1, rows), want(DType::kI32, 1, rows);
  reference::argmax_rows(logits.t(), want.t());
  EXPECT_EQ(want.i32()[1], 17);
  EXPECT_EQ(want.i32()[2], 0);
  EXPECT_EQ(want.i32()[3], 77);
  EXPECT_EQ(want.i32()[5], vocab - 1);
  EXPECT_EQ(want.i32()[6], 4095);
  const Tensor dlogits = upload(logits);
  // Twice (the launches leave their scratch ready for the next), then each row alone, then views
  // of fewer columns (rows strided past their ends).
  for (int run = 0; run < 2; ++run) {
    Tensor dids = upload(ids);
    backend_->argmax_rows(dlogits, dids);
    HostTensor got = download(dids, ids);
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(got.i32()[r], want.i32()[r]) << "run " << run << " row " << r;
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    HostTensor one(DType::kI32, 1, 1);
    Tensor did = upload(one);
    backend_->argmax_rows(dlogits.slice_rows(r, 1), did);
    EXPECT_EQ(download(did, one).i32()[0], want.i32()[r]) << "row " << r << " alone";
  }
  Tensor narrow = dlogits;
  narrow.cols = 4097;
  HostTensor narrow_host = logits.clone();
  narrow_host.t().cols = 4097;
  reference::argmax_rows(narrow_host.t(), want.t());
  Tensor dids = upload(ids);
  backend_->argmax_rows(narrow, dids);
  HostTensor got = download(dids, ids);
  for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(got.i32()[r], want.i32()[r]) << "narrow row " << r;
  narrow.cols = narrow_host.t().cols = 5000;  // one block a row (a small vocabulary)
  reference::argmax_rows(narrow_host.t(), want.t());
  dids = upload(ids);
  backend_->argmax_rows(narrow, dids);
  got = download(dids, ids);
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_EQ(got.i32()[r], want.i32()[r]) << "5000 cols row " << r;
}

TEST_F(CudaOps, AttentionMatchesReferenceAndIsInvariant) {
  const int kv_heads = 2, head_dim = 64, n_heads = 8, capacity = 300;
  for (DType cache_dtype : {DType::kBF16, DType::kF32}) {
    const FilledCache cache = filled_cache(cache_dtype, capacity, kv_heads, head_dim, 21);
    const KvLayerView &host_view = cache.host, &dev_view = cache.dev;

    // Rows at the end of the context (verification) and one early row.
    const std::vector<int32_t> last = {3, 250, 296, 297, 298, 299};
    const int64_t m = static_cast<int64_t>(last.size());
    HostTensor q = HostTensor(DType::kF32, m, n_heads * head_dim).random(23);
    HostTensor slots = backend_test::i32_vector(std::vector<int32_t>(m, 0));
    HostTensor rows_index = backend_test::i32_vector(last);
    AttentionRows rows = make_rows(m, upload(slots), upload(rows_index), upload(rows_index));
    AttentionRows host_rows = make_rows(m, slots.t(), rows_index.t(), rows_index.t());
    HostTensor out(DType::kF32, m, n_heads * head_dim), want(DType::kF32, m, n_heads * head_dim);
    Tensor dq = upload(q), dout = upload(out);
    backend_->attention(dq, n_heads, dev_view, rows, 0.125f, dout);
    reference::attention(q.t(), n_heads, host_view, host_rows, 0.125f, want.t());
    HostTensor got = download(dout, out);
    EXPECT_LE(max_rel_error(got.t(), want.t()), 1e-5) << backend_test::name(cache_dtype);

    // Each row alone gives the same bits; so does the equivalent mask.
    for (int64_t r = 0; r < m; ++r) {
      EXPECT_TRUE(
          same_bits(attend_alone(dq, n_heads, dev_view, rows, r, 0.125f).t(), 0, got.t(), r))
          << "row " << r;
    }
    // The same visibility as a mask: entries before mask_start plus a 6-wide window.
    HostTensor starts(DType::kI32, 1, m), mask(DType::kI32, m, 6);
    for (int64_t r = 0; r < m; ++r) {
      starts.i32()[r] = std::max(0, last[r] - 5);
      for (int j = 0; j < 6; ++j) mask.i32()[r * 6 + j] = starts.i32()[r] + j <= last[r] ? 1 : 0;
    }
    AttentionRows masked = rows;
    masked.mask_start = upload(starts);
    masked.mask = upload(mask);
    HostTensor out_masked(DType::kF32, m, n_heads * head_dim);
    Tensor dmasked = upload(out_masked);
    backend_->attention(dq, n_heads, dev_view, masked, 0.125f, dmasked);
    HostTensor got_masked = download(dmasked, out_masked);
    for (int64_t r = 0; r < m; ++r) {
      EXPECT_TRUE(same_bits(got_masked.t(), r, got.t(), r)) << "masked row " << r;
    }
  }
}

// Rows whose K/V the op right before attention stored (AttentionRows::settled, as in a forward):
// the kernel loads the older entries before that op finishes and the rows' own after it. Rows of
// two slots; the last row sees its slot's other new entries far below its own (a bound from its
// own entry alone would read them early). The bits must equal those of the same attention without
// `settled`, and the reference. Three query heads per KV head: one head per block, the kernel
// that loads early. (The store kernel is short: its last blocks write right after attention may
// start. The race with a long predecessor is in cuda_qkv_rope_test.)
TEST_F(CudaOps, SettledAttentionReadsOnlyOlderEntriesEarly) {
  const int kv_heads = 2, head_dim = 128, n_heads = 6, capacity = 320;
  for (DType cache_dtype : {DType::kBF16, DType::kF32}) {
    FilledCache cache = filled_cache(cache_dtype, capacity, kv_heads, head_dim, 71, 2);
    const std::vector<int32_t> slot_of = {0, 0, 0, 0, 0, 1, 1, 0};
    const std::vector<int32_t> index_of = {60, 61, 62, 63, 64, 30, 31, 300};
    const int64_t m = static_cast<int64_t>(slot_of.size()), width = kv_heads * head_dim;
    HostTensor slots = backend_test::i32_vector(slot_of);
    HostTensor index = backend_test::i32_vector(index_of);
    AttentionRows rows = make_rows(m, upload(slots), upload(index), upload(index));
    AttentionRows host_rows = make_rows(m, slots.t(), index.t(), index.t());
    HostTensor q = HostTensor(DType::kF32, m, n_heads * head_dim).random(73);
    HostTensor out(DType::kF32, m, n_heads * head_dim), want(DType::kF32, m, n_heads * head_dim);
    Tensor dq = upload(q), dout = upload(out);
    for (int round = 0; round < 8; ++round) {
      // New K/V for the rows, stored right before the settled attention (large values, so that
      // reading an entry's old contents would change the result well beyond the tolerance).
      HostTensor keys = HostTensor(DType::kF32, m, width).random(100 + round, -4.0f, 4.0f);
      HostTensor values = HostTensor(DType::kF32, m, width).random(200 + round, -4.0f, 4.0f);
      backend_->store_kv(upload(keys), upload(values), cache.dev, rows);
      AttentionRows settled = rows;
      settled.settled = true;
      backend_->attention(dq, n_heads, cache.dev, settled, 0.09f, dout);
      HostTensor got = download(dout, out);
      reference::store_kv(keys.t(), values.t(), cache.host, host_rows);
      reference::attention(q.t(), n_heads, cache.host, host_rows, 0.09f, want.t());
      ASSERT_LE(max_rel_error(got.t(), want.t()), 1e-5)
          << backend_test::name(cache_dtype) << " round " << round;
      backend_->attention(dq, n_heads, cache.dev, rows, 0.09f, dout);
      HostTensor plain = download(dout, out);
      for (int64_t r = 0; r < m; ++r) {
        ASSERT_TRUE(same_bits(got.t(), r, plain.t(), r)) << "round " << round << " row " << r;
      }
    }
  }
}

TEST_F(CudaOps, SlidingWindowAttentionMatchesReferenceAndIsInvariant) {
  const int kv_heads = 1, head_dim = 32, n_heads = 4, capacity = 200;
  const int64_t window = 37;
  const FilledCache cache = filled_cache(DType::kBF16, capacity, kv_heads, head_dim, 51);
  const KvLayerView &host_view = cache.host, &dev_view = cache.dev;
  // Rows inside and past the first window, verification-style rows at the end.
  const std::vector<int32_t> last = {5, 36, 37, 120, 196, 197, 198, 199};
  const int64_t m = static_cast<int64_t>(last.size());
  HostTensor q = HostTensor(DType::kF32, m, n_heads * head_dim).random(53);
  HostTensor slots = backend_test::i32_vector(std::vector<int32_t>(m, 0));
  HostTensor rows_index = backend_test::i32_vector(last);
  AttentionRows rows = make_rows(m, upload(slots), upload(rows_index), upload(rows_index));
  AttentionRows host_rows = make_rows(m, slots.t(), rows_index.t(), rows_index.t());
  rows.window = host_rows.window = window;
  HostTensor out(DType::kF32, m, n_heads * head_dim), want(DType::kF32, m, n_heads * head_dim);
  Tensor dq = upload(q), dout = upload(out);
  backend_->attention(dq, n_heads, dev_view, rows, 0.2f, dout);
  reference::attention(q.t(), n_heads, host_view, host_rows, 0.2f, want.t());
  HostTensor got = download(dout, out);
  EXPECT_LE(max_rel_error(got.t(), want.t()), 1e-5);
  for (int64_t r = 0; r < m; ++r) {  // each row alone: the same bits
    EXPECT_TRUE(same_bits(attend_alone(dq, n_heads, dev_view, rows, r, 0.2f).t(), 0, got.t(), r))
        << "row " << r;
  }
}

// Prompt chunks (rows of one slot, more than kSmallBatch) take the tensor-core kernel: q and p
// are rounded to bf16, so the tolerance is the GEMM's. A row's bits must not depend on which
// other rows share the launch (another start, another count, another head dim).
TEST_F(CudaOps, PrefillAttentionMatchesReferenceAndIsInvariant) {
  const int kv_heads = 2, n_heads = 8, capacity = 700;
  for (int head_dim : {64, 128, 256}) {
    for (int64_t window : {int64_t{0}, int64_t{100}}) {
      if (window > 0 && head_dim != 128) continue;
      const FilledCache cache =
          filled_cache(DType::kBF16, capacity, kv_heads, head_dim, 61 + head_dim);
      const KvLayerView &host_view = cache.host, &dev_view = cache.dev;

      // A 300-row chunk at entries [390, 690), then the last 283 and the last 17 of it alone.
      const int64_t start = 390, m = 300;
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      HostTensor q = HostTensor(DType::kF32, m, n_heads * head_dim).random(63 + head_dim);
      Tensor dq = upload(q);
      auto run = [&](int64_t from, int64_t count, HostTensor* want) {
        std::vector<int32_t> at(count);
        std::iota(at.begin(), at.end(), static_cast<int32_t>(start + from));
        HostTensor slots = backend_test::i32_vector(std::vector<int32_t>(count, 0));
        HostTensor rows_index = backend_test::i32_vector(at);
        AttentionRows rows =
            make_rows(count, upload(slots), upload(rows_index), upload(rows_index));
        rows.window = window;
        rows.one_slot = true;
        HostTensor out(DType::kF32, count, n_heads * head_dim);
        Tensor dout = upload(out);
        backend_->attention(dq.slice_rows(from, count), n_heads, dev_view, rows, scale, dout);
        if (want != nullptr) {
          AttentionRows host_rows = make_rows(count, slots.t(), rows_index.t(), rows_index.t());
          host_rows.window = window;
          reference::attention(q.t(), n_heads, host_view, host_rows, scale, want->t());
        }
        return download(dout, out);
      };
      HostTensor want(DType::kF32, m, n_heads * head_dim);
      HostTensor got = run(0, m, &want);
      const std::string what =
          "head dim " + std::to_string(head_dim) + ", window " + std::to_string(window);
      EXPECT_LE(max_rel_error(got.t(), want.t()), kGemmTolerance) << what;
      for (int64_t from : {int64_t{17}, m - 17}) {
        HostTensor part = run(from, m - from, nullptr);
        for (int64_t r = 0; r < m - from; ++r) {
          ASSERT_TRUE(same_bits(part.t(), r, got.t(), from + r)) << what << ", row " << from + r;
        }
      }
    }
  }
}

TEST_F(CudaOps, RecordedGraphReplaysTheSameResults) {
  HostTensor x = HostTensor(DType::kF32, 4, 512).random(31);
  HostTensor w = HostTensor(DType::kBF16, 768, 512).random(32);
  HostTensor y(DType::kF32, 4, 768);
  Tensor dx = upload(x), dw = upload(w), dy = upload(y);
  backend_->matmul(dx, dw, nullptr, dy, false);
  HostTensor eager = download(dy, y);
  for (int i = 0; i < 4; ++i) {  // eager, record, replay, replay
    HostTensor zeros(DType::kF32, 4, 768);
    backend_->copy_to_device(dy.data, zeros.t().data, zeros.t().bytes());
    backend_->run_recorded(42, [&] { backend_->matmul(dx, dw, nullptr, dy, false); });
    HostTensor got = download(dy, y);
    for (int r = 0; r < 4; ++r) EXPECT_TRUE(same_bits(got.t(), r, eager.t(), r)) << "run " << i;
  }
}

TEST_F(CudaOps, RejectsHostTensors) {
  HostTensor x = HostTensor(DType::kF32, 2, 8).random(1);
  HostTensor w = HostTensor(DType::kBF16, 4, 8).random(2);
  HostTensor y(DType::kF32, 2, 4);
  EXPECT_THROW(backend_->matmul(x.t(), w.t(), nullptr, y.t(), false), Error);
}

}  // namespace
}  // namespace specd
