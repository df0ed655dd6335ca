// Double-precision reference implementations of every backend op.
#include "backend/reference.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/op_checks.h"
#include "backend/quant_ref.h"

namespace specd::reference {

namespace {

double at(const Tensor& t, int64_t r, int64_t c) {
  return load_as_f32(t.data, t.dtype, static_cast<size_t>(r * t.stride + c));
}

// Row r of a weight (float or block-quantised) as f32.
std::vector<float> weight_row(const Tensor& t, int64_t r) {
  std::vector<float> out(static_cast<size_t>(t.cols));
  dequantize_row(t.dtype, static_cast<const char*>(t.data) + r * t.row_bytes(), t.cols, out.data());
  return out;
}

}  // namespace

void embedding(const Tensor& ids, const Tensor& table, Tensor& out) {
  op_checks::embedding(ids, table, out);
  for (int64_t m = 0; m < ids.cols; ++m) {
    std::vector<float> row = weight_row(table, op_checks::i32_at(ids, m));
    for (int64_t d = 0; d < table.cols; ++d) out.row<float>(m)[d] = row[static_cast<size_t>(d)];
  }
}

void matmul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, bool accumulate) {
  op_checks::matmul(x, w, bias, y);
  for (int64_t n = 0; n < w.rows; ++n) {
    std::vector<float> wn = weight_row(w, n);
    for (int64_t m = 0; m < x.rows; ++m) {
      double sum = 0.0;
      for (int64_t k = 0; k < w.cols; ++k) sum += at(x, m, k) * wn[static_cast<size_t>(k)];
      if (bias != nullptr) sum += at(*bias, 0, n);
      if (accumulate) sum += y.row<float>(m)[n];
      y.row<float>(m)[n] = static_cast<float>(sum);
    }
  }
}

void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y) {
  op_checks::rms_norm(x, weight, y);
  for (int64_t r = 0; r < x.rows; ++r) {
    double sum_sq = 0.0;
    for (int64_t d = 0; d < x.cols; ++d) sum_sq += at(x, r, d) * at(x, r, d);
    double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(x.cols) + eps);
    for (int64_t d = 0; d < x.cols; ++d) {
      y.row<float>(r)[d] = static_cast<float>(at(x, r, d) * inv * at(weight, 0, d));
    }
  }
}

void rope(Tensor& x, int n_heads, const Tensor& positions, const RopeTable& table) {
  op_checks::rope(x, n_heads, positions, table);
  int64_t half = table.cos.cols;
  for (int64_t m = 0; m < x.rows; ++m) {
    int32_t pos = op_checks::i32_at(positions, m);
    for (int h = 0; h < n_heads; ++h) {
      float* head = x.row<float>(m) + h * 2 * half;
      for (int64_t i = 0; i < half; ++i) {
        double c = at(table.cos, pos, i), s = at(table.sin, pos, i);
        double x1 = head[i], x2 = head[i + half];
        head[i] = static_cast<float>(x1 * c - x2 * s);
        head[i + half] = static_cast<float>(x2 * c + x1 * s);
      }
    }
  }
}

void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  op_checks::silu_mul(gate, up, out);
  for (int64_t r = 0; r < gate.rows; ++r) {
    for (int64_t c = 0; c < gate.cols; ++c) {
      double g = at(gate, r, c);
      out.row<float>(r)[c] = static_cast<float>(g / (1.0 + std::exp(-g)) * at(up, r, c));
    }
  }
}

void argmax_rows(const Tensor& logits, Tensor& ids) {
  op_checks::argmax_rows(logits, ids);
  for (int64_t r = 0; r < logits.rows; ++r) {
    const float* row = logits.row<const float>(r);
    int32_t best = 0;
    for (int64_t c = 1; c < logits.cols; ++c) {
      if (row[c] > row[best]) best = static_cast<int32_t>(c);
    }
    ids.ptr<int32_t>()[r] = best;
  }
}

void gelu_tanh_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  op_checks::gelu_tanh_mul(gate, up, out);
  const double beta = std::sqrt(2.0 / M_PI), kappa = 0.044715;
  for (int64_t r = 0; r < gate.rows; ++r) {
    for (int64_t c = 0; c < gate.cols; ++c) {
      double g = at(gate, r, c);
      double gelu = 0.5 * g * (1.0 + std::tanh(beta * (g + kappa * g * g * g)));
      out.row<float>(r)[c] = static_cast<float>(gelu * at(up, r, c));
    }
  }
}

void scale(Tensor& x, float s) {
  op_checks::scale(x);
  for (int64_t r = 0; r < x.rows; ++r) {
    for (int64_t c = 0; c < x.cols; ++c) {
      x.row<float>(r)[c] = static_cast<float>(static_cast<double>(x.row<float>(r)[c]) * s);
    }
  }
}

void add(const Tensor& x, Tensor& y) {
  op_checks::add(x, y);
  for (int64_t r = 0; r < x.rows; ++r) {
    for (int64_t c = 0; c < x.cols; ++c) {
      y.row<float>(r)[c] = static_cast<float>(at(x, r, c) + y.row<float>(r)[c]);
    }
  }
}

void store_kv(const Tensor& k, const Tensor& v, const KvLayerView& cache,
              const AttentionRows& rows) {
  op_checks::store_kv(k, v, cache, rows);
  int64_t width = static_cast<int64_t>(cache.n_kv_heads) * cache.head_dim;
  for (int64_t m = 0; m < k.rows; ++m) {
    size_t base = static_cast<size_t>(op_checks::i32_at(rows.slots, m) * cache.slot_stride +
                                      op_checks::i32_at(rows.cache_index, m) * width);
    for (int64_t i = 0; i < width; ++i) {
      store_from_f32(cache.k, cache.dtype, base + i, k.row<float>(m)[i]);
      store_from_f32(cache.v, cache.dtype, base + i, v.row<float>(m)[i]);
    }
  }
}

bool visible(const AttentionRows& rows, int64_t m, int64_t j) {
  const bool in_window = rows.window <= 0 || j > op_checks::i32_at(rows.positions, m) - rows.window;
  if (rows.mask_start.data == nullptr) {
    return j <= op_checks::i32_at(rows.cache_index, m) && in_window;
  }
  int64_t start = op_checks::i32_at(rows.mask_start, m);
  if (j < start) return in_window;
  return j - start < rows.mask.cols && rows.mask.row<const int32_t>(m)[j - start] != 0;
}

void attention(const Tensor& q, int n_heads, const KvLayerView& cache, const AttentionRows& rows,
               float scale, Tensor& out, bool bf16_weights) {
  op_checks::attention(q, n_heads, cache, rows, out);
  int64_t dh = cache.head_dim;
  int64_t width = static_cast<int64_t>(cache.n_kv_heads) * dh;
  int group = n_heads / cache.n_kv_heads;
  std::vector<double> scores(cache.capacity), acc(dh);
  for (int64_t m = 0; m < q.rows; ++m) {
    size_t slot_base = static_cast<size_t>(op_checks::i32_at(rows.slots, m) * cache.slot_stride);
    for (int h = 0; h < n_heads; ++h) {
      size_t head_base = slot_base + static_cast<size_t>((h / group) * dh);
      const float* qh = q.row<const float>(m) + h * dh;
      double max_score = -INFINITY;
      for (int64_t j = 0; j < cache.capacity; ++j) {
        if (!visible(rows, m, j)) continue;
        double dot = 0.0;
        for (int64_t d = 0; d < dh; ++d) {
          dot += qh[d] *
                 static_cast<double>(load_as_f32(cache.k, cache.dtype, head_base + j * width + d));
        }
        scores[j] = dot * scale;
        max_score = std::max(max_score, scores[j]);
      }
      double sum = 0.0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < cache.capacity; ++j) {
        if (!visible(rows, m, j)) continue;
        double p = std::exp(scores[j] - max_score);
        sum += p;
        if (bf16_weights) p = round_to_bf16(static_cast<float>(p));
        for (int64_t d = 0; d < dh; ++d) {
          acc[d] += p * load_as_f32(cache.v, cache.dtype, head_base + j * width + d);
        }
      }
      // q and out may alias: write only after this head's q was read.
      for (int64_t d = 0; d < dh; ++d) out.row<float>(m)[h * dh + d] = acc[d] / sum;
    }
  }
}

}  // namespace specd::reference
