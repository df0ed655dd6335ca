// Folded RMSNorms on the CUDA backend (Backend's FoldedNorm) against rms_norm then matmul in the
// double reference: every op that writes the folded form (fold_norm, matmul_norm_out,
// gated_matmul_norm_out) with every op that reads it (matmul_group_folded, gate_up_act_folded,
// and the unfolding path for weights the matmul epilogue cannot scale), bf16, int8 and int4
// weights, 1 to 16 rows, and bit-exact batch invariance; readers that cannot scale their rows get
// the normalised rows. Skips without a CUDA backend or GPU.
#include <gtest/gtest.h>

#include <vector>

#include "backend/reference.h"
#include "core/error.h"
#include "cuda_test_util.h"
#include "int_quant_util.h"
#include "test_util.h"

namespace specd {
namespace {

using backend_test::HostTensor;
using backend_test::max_rel_error;
using backend_test::name;
using backend_test::same_bits;

// The small-M kernels' error against the reference on x as they multiply it (bf16 weights: x
// rounded to bf16; int8/int4: two int8 parts per block).
constexpr double kTolerance = 2e-4;
constexpr float kEps = 1e-5f;

// A random weight of `dtype` on the host: the values the reference multiplies (`view`).
struct HostWeight {
  HostTensor floats;
  backend_test::IntQuantWeight quant;
  const Tensor& view() const { return quant.view.data ? quant.view : floats.t(); }
};
HostWeight random_weight(DType dtype, int64_t rows, int64_t cols, uint32_t seed) {
  HostWeight w;
  if (dtype == DType::kInt8 || dtype == DType::kInt4) {
    w.quant = backend_test::random_int_quant(dtype, rows, cols, seed);
  } else {
    w.floats = HostTensor(dtype, rows, cols).random(seed, -0.1f, 0.1f);
  }
  return w;
}

class CudaFoldedNorm : public backend_test::CudaTest {
 protected:
  // Device buffers of one folded norm over [rows, cols] (weight: its norm weight on the device).
  struct Norm {
    HostTensor scaled_host, sums_host;
    Tensor scaled, sums;
    FoldedNorm fold;
  };
  Norm make_norm(int64_t rows, int64_t cols) {
    Norm n;
    n.scaled_host = HostTensor(DType::kF32, rows, cols);
    n.sums_host = HostTensor(DType::kF32, rows, (cols + 15) / 16);
    n.scaled = upload(n.scaled_host);
    n.sums = upload(n.sums_host);
    return n;
  }
  // `reader`: a weight of the matmuls that will read the norm.
  static FoldedNorm& bind(Norm& n, const Tensor& weight, const Tensor* reader) {
    n.fold = FoldedNorm{&weight, kEps, &n.scaled, &n.sums, false, reader};
    return n.fold;
  }

  // The reference: rms_norm(r, g) · wᵀ for each weight (or act(h · gᵀ) * (h · uᵀ)), as a reader
  // of the folded norm computes it.
  static HostTensor reference_products(const HostTensor& r, const HostTensor& g, const Tensor& w) {
    return backend_test::reference_folded_products(r.t(), g.t(), kEps, w, nullptr);
  }
};

TEST_F(CudaFoldedNorm, MatmulWrittenNormReadByMatmulsMatchesTheReference) {
  // r += x · w_outᵀ writes the norm; a group of two products reads it. 520 columns: a last tile
  // of 8 (bf16 only; int blocks need whole 128-element blocks).
  for (DType dtype : {DType::kBF16, DType::kInt8, DType::kInt4}) {
    // int8/int4 rows on tensor cores: multiples of 512 elements.
    const int64_t k = 512, d = dtype == DType::kBF16 ? 520 : 512, n0 = 200, n1 = 48;
    HostTensor x = HostTensor(DType::kF32, kSmallBatch, k).random(11);
    HostTensor r0 = HostTensor(DType::kF32, kSmallBatch, d).random(12);
    HostTensor g = HostTensor(DType::kBF16, 1, d).random(13, 0.5f, 1.5f);
    HostWeight w_out = random_weight(dtype, d, k, 14);
    HostWeight w0 = random_weight(dtype, n0, d, 15), w1 = random_weight(dtype, n1, d, 16);
    Tensor dx = upload(x), dg = upload(g), dw_out = upload_weight(w_out.view());
    Tensor dw0 = upload_weight(w0.view()), dw1 = upload_weight(w1.view());
    HostTensor y0_16, y1_16, r_16;
    for (int64_t m : {16, 1, 2, 5, 8, 9, 13}) {
      HostTensor r = r0.clone();
      Tensor dr = upload(r);
      dr = dr.slice_rows(0, m);
      Norm norm = make_norm(m, d);
      FoldedNorm& fold = bind(norm, dg, &dw0);
      backend_->matmul_norm_out(dx.slice_rows(0, m), dw_out, nullptr, dr, fold);
      EXPECT_TRUE(fold.folded) << name(dtype) << " M=" << m;
      HostTensor y0(DType::kF32, m, n0), y1(DType::kF32, m, n1);
      Tensor dy0 = upload(y0), dy1 = upload(y1);
      const MatmulPart parts[] = {{&dw0, nullptr, &dy0}, {&dw1, nullptr, &dy1}};
      backend_->matmul_group_folded(fold, parts);
      y0 = download(dy0, y0);
      y1 = download(dy1, y1);
      HostTensor r_got = download(dr, HostTensor(DType::kF32, m, d));

      HostTensor r_want = r0.clone();
      Tensor r_rows = r_want.t().slice_rows(0, m);
      backend_test::reference_matmul_bf16_x(x.t().slice_rows(0, m), w_out.view(), nullptr, r_rows,
                                            true);
      HostTensor r_m(DType::kF32, m, d);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t c = 0; c < d; ++c) r_m.set(i, c, r_want.at(i, c));
      }
      EXPECT_LE(max_rel_error(r_got.t(), r_m.t()), kTolerance) << name(dtype) << " M=" << m;
      // The products of rms_norm(r) from the device's r (so that only the fold is measured).
      EXPECT_LE(max_rel_error(y0.t(), reference_products(r_got, g, w0.view()).t()), kTolerance)
          << name(dtype) << " M=" << m;
      EXPECT_LE(max_rel_error(y1.t(), reference_products(r_got, g, w1.view()).t()), kTolerance)
          << name(dtype) << " M=" << m;
      if (m == kSmallBatch) {
        y0_16 = std::move(y0), y1_16 = std::move(y1), r_16 = std::move(r_got);
        continue;
      }
      for (int64_t i = 0; i < m; ++i) {
        EXPECT_TRUE(same_bits(r_got.t(), i, r_16.t(), i)) << name(dtype) << " M=" << m;
        EXPECT_TRUE(same_bits(y0.t(), i, y0_16.t(), i)) << name(dtype) << " M=" << m;
        EXPECT_TRUE(same_bits(y1.t(), i, y1_16.t(), i)) << name(dtype) << " M=" << m;
      }
    }
  }
}

TEST_F(CudaFoldedNorm, StandaloneFoldReadByTheGateUpPairAndByUnscaledMatmuls) {
  // fold_norm (no matmul) read by gate_up_act_folded (bf16 pair), and by f32 weights, which the
  // epilogue does not scale: the backend unfolds the rows first.
  const int64_t d = 256, f = 104;
  HostTensor r = HostTensor(DType::kF32, kSmallBatch, d).random(21, -3.0f, 3.0f);
  HostTensor g = HostTensor(DType::kF32, 1, d).random(22, 0.5f, 1.5f);
  HostTensor wg = HostTensor(DType::kBF16, f, d).random(23, -0.1f, 0.1f);
  HostTensor wu = HostTensor(DType::kBF16, f, d).random(24, -0.1f, 0.1f);
  HostTensor w32 = HostTensor(DType::kF32, 40, d).random(25, -0.1f, 0.1f);
  Tensor dr = upload(r), dg = upload(g), dwg = upload(wg), dwu = upload(wu), dw32 = upload(w32);
  for (int64_t m : {1, 4, 16}) {
    HostTensor r_m(DType::kF32, m, d);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t c = 0; c < d; ++c) r_m.set(i, c, r.at(i, c));
    }
    Norm norm = make_norm(m, d);
    FoldedNorm& fold = bind(norm, dg, &dwg);
    backend_->fold_norm(dr.slice_rows(0, m), fold);
    ASSERT_TRUE(fold.folded);
    HostTensor act(DType::kF32, m, f);
    Tensor dact = upload(act);
    ASSERT_TRUE(backend_->gate_up_act_folded(Activation::kSilu, fold, dwg, dwu, dact));
    EXPECT_TRUE(fold.folded);
    HostTensor gate = reference_products(r_m, g, wg.t()), up = reference_products(r_m, g, wu.t());
    HostTensor want(DType::kF32, m, f);
    reference::silu_mul(gate.t(), up.t(), want.t());
    EXPECT_LE(max_rel_error(download(dact, act).t(), want.t()), kTolerance) << "M=" << m;

    HostTensor y(DType::kF32, m, 40);
    Tensor dy = upload(y);
    const MatmulPart part{&dw32, nullptr, &dy};
    backend_->matmul_group_folded(fold, std::span<const MatmulPart>(&part, 1));
    EXPECT_FALSE(fold.folded);  // unfolded for the f32 kernel
    EXPECT_LE(max_rel_error(download(dy, y).t(), reference_products(r_m, g, w32.t()).t()), 1e-5)
        << "M=" << m;
  }
}

TEST_F(CudaFoldedNorm, GatedDownProjectionWritesTheNorm) {
  // The int formats' down projection reads act(gate) * up while x is quantised; with a folded
  // norm it also writes the norm. bf16 runs the activation, then matmul_norm_out.
  for (DType dtype : {DType::kBF16, DType::kInt8, DType::kInt4}) {
    const int64_t f = 512, d = 512, n = 72;
    for (int64_t m : {1, 7, 16}) {
      HostTensor gate = HostTensor(DType::kF32, m, f).random(31);
      HostTensor up = HostTensor(DType::kF32, m, f).random(32);
      HostTensor r = HostTensor(DType::kF32, m, d).random(33);
      HostTensor g = HostTensor(DType::kBF16, 1, d).random(34, 0.5f, 1.5f);
      HostWeight w_down = random_weight(dtype, d, f, 35), w = random_weight(dtype, n, d, 36);
      Tensor dgate = upload(gate), dup = upload(up), dr = upload(r), dg = upload(g);
      Tensor dw_down = upload_weight(w_down.view()), dw = upload_weight(w.view());
      Norm norm = make_norm(m, d);
      FoldedNorm& fold = bind(norm, dg, &dw);
      backend_->gated_matmul_norm_out(Activation::kSilu, dgate, dup, dw_down, nullptr, dr, fold);
      EXPECT_TRUE(fold.folded) << name(dtype);
      HostTensor y(DType::kF32, m, n);
      Tensor dy = upload(y);
      const MatmulPart part{&dw, nullptr, &dy};
      backend_->matmul_group_folded(fold, std::span<const MatmulPart>(&part, 1));

      HostTensor mlp(DType::kF32, m, f), r_want = r.clone();
      reference::silu_mul(gate.t(), up.t(), mlp.t());
      backend_test::reference_matmul_bf16_x(mlp.t(), w_down.view(), nullptr, r_want.t(), true);
      HostTensor r_got = download(dr, r);
      EXPECT_LE(max_rel_error(r_got.t(), r_want.t()), kTolerance) << name(dtype) << " M=" << m;
      EXPECT_LE(max_rel_error(download(dy, y).t(), reference_products(r_got, g, w.view()).t()),
                kTolerance)
          << name(dtype) << " M=" << m;
    }
  }
}

TEST_F(CudaFoldedNorm, ReadersThatCannotScaleGetTheNormedRows) {
  // A reader weight the epilogue cannot scale (f32), or none: the writing op leaves rms_norm(r)
  // itself (folded false), as the norm kernel would.
  const int64_t d = 128;
  HostTensor r = HostTensor(DType::kF32, 3, d).random(51);
  HostTensor g = HostTensor(DType::kF32, 1, d).random(52, 0.5f, 1.5f);
  HostTensor w32 = HostTensor(DType::kF32, 24, d).random(53, -0.1f, 0.1f);
  Tensor dr = upload(r), dg = upload(g), dw32 = upload(w32);
  for (const Tensor* reader : std::vector<const Tensor*>{&dw32, nullptr}) {
    Norm norm = make_norm(3, d);
    FoldedNorm& fold = bind(norm, dg, reader);
    backend_->fold_norm(dr, fold);
    EXPECT_FALSE(fold.folded);
    HostTensor want(DType::kF32, 3, d);
    reference::rms_norm(r.t(), g.t(), kEps, want.t());
    EXPECT_LE(max_rel_error(download(norm.scaled, want).t(), want.t()), 1e-5);
    HostTensor y(DType::kF32, 3, 24);
    Tensor dy = upload(y);
    const MatmulPart part{&dw32, nullptr, &dy};
    backend_->matmul_group_folded(fold, std::span<const MatmulPart>(&part, 1));
    EXPECT_LE(max_rel_error(download(dy, y).t(), reference_products(r, g, w32.t()).t()), 1e-5);
  }
}

TEST_F(CudaFoldedNorm, RejectsMisshapenSums) {
  HostTensor r = HostTensor(DType::kF32, 2, 64).random(41);
  HostTensor g = HostTensor(DType::kF32, 1, 64).random(42);
  HostTensor w = HostTensor(DType::kBF16, 32, 64).random(43);
  HostTensor scaled(DType::kF32, 2, 64), sums(DType::kF32, 2, 3);  // 4 tiles needed
  Tensor dr = upload(r), dg = upload(g), dw = upload(w), dscaled = upload(scaled);
  Tensor dsums = upload(sums);
  FoldedNorm fold{&dg, kEps, &dscaled, &dsums, false, &dw};
  EXPECT_THROW(backend_->fold_norm(dr, fold), Error);
}

}  // namespace
}  // namespace specd
