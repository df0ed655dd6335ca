// Double-precision reference implementations of every backend op: the oracles for kernel tests.
#pragma once

#include "backend/backend.h"

// Plain loops on host tensors, accumulating in double and rounding once to the output dtype.
// Same shapes, semantics and argument checks as the Backend ops of the same name.
namespace specd::reference {

void embedding(const Tensor& ids, const Tensor& table, Tensor& out);
void matmul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, bool accumulate);
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y);
void rope(Tensor& x, int n_heads, const Tensor& positions, const RopeTable& table);
void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out);
void argmax_rows(const Tensor& logits, Tensor& ids);
void gelu_tanh_mul(const Tensor& gate, const Tensor& up, Tensor& out);
void scale(Tensor& x, float s);
void add(const Tensor& x, Tensor& y);
void store_kv(const Tensor& k, const Tensor& v, const KvLayerView& cache,
              const AttentionRows& rows);
// bf16_weights: the softmax weights that multiply the values are rounded to bf16 first (the
// normalising sum is not), as in bf16 inference and the CPU's AVX512-BF16 attention.
void attention(const Tensor& q, int n_heads, const KvLayerView& cache, const AttentionRows& rows,
               float scale, Tensor& out, bool bf16_weights = false);

// True if row m of `rows` may attend to cache entry j (causal or mask form, and the window).
bool visible(const AttentionRows& rows, int64_t m, int64_t j);

}  // namespace specd::reference
