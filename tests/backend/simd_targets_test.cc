// Every op on every SIMD target this machine supports (SSSE3, SSE4, AVX2, ..., scalar), forced
// through Highway's target mock: reference tolerances and batch invariance hold on each.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/reference.h"
#include "hwy/highway.h"
#include "hwy/targets.h"
#include "test_util.h"

namespace specd {
namespace {

using backend_test::HostTensor;
using backend_test::i32_vector;
using backend_test::max_rel_error;
using backend_test::same_bits;

class SimdTargets : public ::testing::Test {
 protected:
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }
};

void check_ops(CpuBackend& be, const std::string& target) {
  uint32_t seed = 7000;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    // matmul, small-M kernel: K with a tail for every lane count, odd N; and batch invariance.
    HostTensor x = HostTensor(DType::kF32, kSmallBatch, 45).random(seed += 10);
    HostTensor w = HostTensor(dtype, 29, 45).random(seed + 1);
    HostTensor bias = HostTensor(DType::kF32, 1, 29).random(seed + 2);
    HostTensor alone(DType::kF32, kSmallBatch, 29), want(DType::kF32, kSmallBatch, 29);
    for (int64_t r = 0; r < kSmallBatch; ++r) {
      Tensor out = alone.t().slice_rows(r, 1);
      be.matmul(x.t().slice_rows(r, 1), w.t(), &bias.t(), out, false);
    }
    // bf16 weights multiply x rounded to bf16 (CpuBackend::Bf16Path::kSimd).
    HostTensor x_used = dtype == DType::kBF16 ? backend_test::rounded_to_bf16(x.t()) : x.clone();
    reference::matmul(x_used.t(), w.t(), &bias.t(), want.t(), false);
    EXPECT_LE(max_rel_error(alone.t(), want.t()), 1e-5)
        << target << " " << backend_test::name(dtype);
    for (int64_t m : {2, 5, 16}) {
      HostTensor batch(DType::kF32, m, 29);
      be.matmul(x.t().slice_rows(0, m), w.t(), &bias.t(), batch.t(), false);
      for (int64_t r = 0; r < m; ++r) {
        ASSERT_TRUE(same_bits(batch.t(), r, alone.t(), r)) << target << " M=" << m << " row " << r;
      }
    }
    // rms_norm and attention with odd sizes.
    HostTensor nx = HostTensor(DType::kF32, 3, 37).random(seed + 3);
    HostTensor nw = HostTensor(dtype, 1, 37).random(seed + 4, 0.5f, 1.5f);
    HostTensor ny(DType::kF32, 3, 37), nwant(DType::kF32, 3, 37);
    be.rms_norm(nx.t(), nw.t(), 1e-6f, ny.t());
    reference::rms_norm(nx.t(), nw.t(), 1e-6f, nwant.t());
    EXPECT_LE(max_rel_error(ny.t(), nwant.t()), 1e-5) << target;

    const int n_kv = 2, dh = 19, n_heads = 4;
    HostTensor kc = HostTensor(dtype, 30, n_kv * dh).random(seed + 5);
    HostTensor vc = HostTensor(dtype, 30, n_kv * dh).random(seed + 6);
    KvLayerView cache{kc.t().data, vc.t().data, dtype, 30, 1, 30 * n_kv * dh, n_kv, dh};
    HostTensor slots = i32_vector({0, 0, 0}), index = i32_vector({0, 17, 29});
    AttentionRows rows;
    rows.count = 3;
    rows.slots = slots.t();
    rows.cache_index = index.t();
    rows.positions = index.t();
    HostTensor q = HostTensor(DType::kF32, 3, n_heads * dh).random(seed + 7);
    HostTensor out(DType::kF32, 3, n_heads * dh), awant(DType::kF32, 3, n_heads * dh);
    be.attention(q.t(), n_heads, cache, rows, 0.3f, out.t());
    reference::attention(q.t(), n_heads, cache, rows, 0.3f, awant.t());
    EXPECT_LE(max_rel_error(out.t(), awant.t()), 1e-5) << target;
  }
  // silu_mul and rope.
  HostTensor g = HostTensor(DType::kF32, 2, 21).random(seed + 8, -10.0f, 10.0f);
  HostTensor u = HostTensor(DType::kF32, 2, 21).random(seed + 9);
  HostTensor s(DType::kF32, 2, 21), swant(DType::kF32, 2, 21);
  be.silu_mul(g.t(), u.t(), s.t());
  reference::silu_mul(g.t(), u.t(), swant.t());
  EXPECT_LE(max_rel_error(s.t(), swant.t()), 2e-6) << target;
  HostTensor cos = HostTensor(DType::kF32, 10, 11).random(seed + 10);
  HostTensor sin = HostTensor(DType::kF32, 10, 11).random(seed + 11);
  HostTensor pos = i32_vector({9, 3});
  HostTensor rx = HostTensor(DType::kF32, 2, 44).random(seed + 12);
  HostTensor rwant = rx.clone();
  be.rope(rx.t(), 2, pos.t(), RopeTable{cos.t(), sin.t()});
  reference::rope(rwant.t(), 2, pos.t(), RopeTable{cos.t(), sin.t()});
  EXPECT_LE(max_rel_error(rx.t(), rwant.t()), 2e-6) << target;
}

TEST_F(SimdTargets, EveryOpOnEverySupportedTarget) {
  CpuBackend be(2);
  be.set_bf16_path(CpuBackend::Bf16Path::kSimd);  // the Highway kernels, not AVX512-BF16's
  int tested = 0;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string name = hwy::TargetName(target);
    ASSERT_NE(be.describe().find(name), std::string::npos) << be.describe() << " vs " << name;
    check_ops(be, name);
    std::printf("checked %s\n", be.describe().c_str());
    ++tested;
  }
  EXPECT_GE(tested, 1);
}

}  // namespace
}  // namespace specd
