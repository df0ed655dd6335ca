// Forward pass: embedding, N x (attention + gated MLP) with pre-RMSNorm (Gemma 3: also post-norms,
// sliding-window layers), final norm, LM head.
#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "model/rope.h"

namespace specd {

Transformer::Transformer(Backend& backend, ModelConfig config, const TensorStore& store,
                         const TransformerLimits& limits, const WeightQuantOptions& quant)
    : backend_(backend), config_(std::move(config)), limits_(limits) {
  SPECD_CHECK(limits_.max_rows > 0 && limits_.max_logit_rows > 0 && limits_.max_positions > 0,
              "invalid transformer limits");
  weights_ = bind_weights(config_, store, backend_, quant);

  // RoPE tables: the global one, then (Gemma 3) the sliding layers' default RoPE of base
  // rope_local_theta.
  ModelConfig local = config_;
  local.rope_theta = config_.rope_local_theta;
  local.rope = RopeScaling{};
  const bool has_local = !config_.sliding_layers.empty();
  const int half = config_.head_dim / 2;
  const size_t table_floats = static_cast<size_t>(limits_.max_positions) * half;
  const size_t table_bytes = table_floats * sizeof(float);
  rope_storage_ = backend_.alloc((has_local ? 4 : 2) * table_bytes);
  auto* base = static_cast<char*>(rope_storage_.data());
  Device dev = backend_.device();
  std::vector<float> cos_table(table_floats), sin_table(table_floats);
  for (int t = 0; t < (has_local ? 2 : 1); ++t) {
    fill_rope_tables(compute_rope_frequencies(t == 0 ? config_ : local), limits_.max_positions,
                     cos_table.data(), sin_table.data());
    char* at = base + 2 * t * table_bytes;
    backend_.copy_to_device(at, cos_table.data(), table_bytes);
    backend_.copy_to_device(at + table_bytes, sin_table.data(), table_bytes);
    RopeTable& table = t == 0 ? rope_ : rope_local_;
    table.cos = Tensor::make(at, DType::kF32, limits_.max_positions, half, dev);
    table.sin = Tensor::make(at + table_bytes, DType::kF32, limits_.max_positions, half, dev);
  }

  const size_t rows = limits_.max_rows;
  auto f32 = [&](size_t cols) { return backend_.alloc(rows * cols * sizeof(float)); };
  indices_ = backend_.alloc((4 * rows + limits_.max_logit_rows) * sizeof(int32_t));
  zero_slots_.assign(rows, 0);
  staged_.resize(4 * rows + limits_.max_logit_rows);
  x_ = f32(config_.hidden_size);
  h_ = f32(config_.hidden_size);
  q_ = f32(config_.q_dim());
  k_ = f32(config_.kv_dim());
  v_ = f32(config_.kv_dim());
  attn_ = f32(config_.q_dim());
  gate_ = f32(config_.intermediate_size);
  up_ = f32(config_.intermediate_size);
  norm_sums_ = f32((config_.hidden_size + 15) / 16);
  normed_ = backend_.alloc(static_cast<size_t>(limits_.max_logit_rows) * config_.hidden_size * 4);
  logits_ = backend_.alloc(static_cast<size_t>(limits_.max_logit_rows) * config_.vocab_size * 4);
}

void Transformer::set_hidden_capture(std::vector<int> layers) {
  for (int layer : layers) {
    SPECD_CHECK(layer >= 0 && layer <= config_.n_layers, "hidden-state layer {} out of [0, {}]",
                layer, config_.n_layers);
  }
  capture_layers_ = std::move(layers);
  captured_ = backend_.alloc(std::max<size_t>(1, capture_layers_.size()) * limits_.max_rows *
                             config_.hidden_size * sizeof(float));
}

Tensor Transformer::hidden(size_t capture_index) const {
  SPECD_CHECK(capture_index < capture_layers_.size(), "no hidden-state capture {}", capture_index);
  const int64_t d = config_.hidden_size;
  auto* base = static_cast<float*>(captured_.data()) + capture_index * limits_.max_rows * d;
  return Tensor::make(base, DType::kF32, last_rows_, d, backend_.device());
}

uint64_t Transformer::recording_key(const ForwardBatch& batch, const KvCache& kv) const {
  // Everything that changes which kernels run on which addresses: row counts, whether logit rows
  // are picked (which ones is read from device memory), the cache and the hidden-state captures.
  // Every layer's K and V buffer and the cache's layout count: a cache allocated after another
  // was freed may reuse some of its addresses and not others, and a graph replayed on stale ones
  // would read and write freed memory.
  const int n_logits = batch.logit_rows ? batch.n_logit_rows : batch.n_rows;
  uint64_t key = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { key = (key ^ v) * 1099511628211ull; };
  mix(static_cast<uint64_t>(batch.n_rows));
  mix(static_cast<uint64_t>(n_logits));
  mix(batch.logit_rows != nullptr);
  mix(static_cast<uint64_t>(kv.shape().capacity));
  mix(static_cast<uint64_t>(kv.shape().n_slots));
  mix(static_cast<uint64_t>(kv.shape().dtype));
  for (int layer = 0; layer < kv.shape().n_layers; ++layer) {
    const KvLayerView view = kv.layer(layer);
    mix(reinterpret_cast<uintptr_t>(view.k));
    mix(reinterpret_cast<uintptr_t>(view.v));
  }
  mix(capture_layers_.size());
  for (int layer : capture_layers_) mix(static_cast<uint64_t>(layer));
  return key;
}

Tensor Transformer::forward(const ForwardBatch& batch, KvCache& kv) {
  const int m = batch.n_rows;
  SPECD_CHECK(m > 0 && m <= limits_.max_rows, "forward of {} rows (limit {})", m, limits_.max_rows);
  const int n_logits = batch.logit_rows ? batch.n_logit_rows : m;
  SPECD_CHECK(n_logits >= 0 && n_logits <= limits_.max_logit_rows,
              "{} logit rows requested (limit {})", n_logits, limits_.max_logit_rows);
  const ModelConfig& c = config_;
  const Device dev = backend_.device();
  const float eps = static_cast<float>(c.rms_norm_eps);
  const float scale = static_cast<float>(
      c.attention_scale > 0 ? c.attention_scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  last_rows_ = m;

  // Check the rows on the host (device kernels skip out-of-range rows instead of failing), then
  // stage the index arrays on the device in one copy:
  // [tokens | positions | slots | cache_index | logit rows]; device tokens are copied in after.
  const KvCacheShape& kv_shape = kv.shape();
  const int32_t* slots = batch.slots ? batch.slots : zero_slots_.data();
  const int32_t* cache_index = batch.cache_index ? batch.cache_index : batch.positions;
  // Rows [0, host_rows) take their tokens from the host.
  const int host_rows = batch.device_tokens != nullptr ? batch.device_tokens_from : m;
  SPECD_CHECK(host_rows >= 0 && host_rows <= m && (host_rows == 0 || batch.tokens != nullptr),
              "a forward of {} rows with host tokens for {}", m, host_rows);
  for (int i = 0; i < m; ++i) {
    SPECD_CHECK(i >= host_rows || (batch.tokens[i] >= 0 && batch.tokens[i] < c.vocab_size),
                "token id {} is outside the vocabulary [0, {})", batch.tokens[i], c.vocab_size);
    SPECD_CHECK(batch.positions[i] >= 0 && batch.positions[i] < limits_.max_positions,
                "position {} is outside the context of {} positions", batch.positions[i],
                limits_.max_positions);
    SPECD_CHECK(slots[i] >= 0 && slots[i] < kv_shape.n_slots, "KV slot {} is outside [0, {})",
                slots[i], kv_shape.n_slots);
    SPECD_CHECK(cache_index[i] >= 0 && cache_index[i] < kv_shape.capacity,
                "KV entry {} is outside the cache capacity {}", cache_index[i], kv_shape.capacity);
  }
  for (int i = 0; batch.logit_rows != nullptr && i < n_logits; ++i) {
    SPECD_CHECK(batch.logit_rows[i] >= 0 && batch.logit_rows[i] < m, "logit row {} out of range",
                batch.logit_rows[i]);
  }
  // Rows with device tokens stage zeros, overwritten on the device after the upload.
  if (host_rows > 0) std::copy_n(batch.tokens, host_rows, staged_.begin());
  std::fill(staged_.begin() + host_rows, staged_.begin() + m, 0);
  const int32_t* host[3] = {batch.positions, slots, cache_index};
  for (int a = 0; a < 3; ++a) std::memcpy(&staged_[(a + 1) * m], host[a], m * sizeof(int32_t));
  const int n_picked = batch.logit_rows != nullptr ? n_logits : 0;
  if (n_picked > 0) std::memcpy(&staged_[4 * m], batch.logit_rows, n_picked * sizeof(int32_t));
  auto* idx = static_cast<int32_t*>(indices_.data());
  backend_.copy_to_device(idx, staged_.data(), (4 * m + n_picked) * sizeof(int32_t));
  if (host_rows < m) {
    backend_.copy_on_device(idx + host_rows, batch.device_tokens,
                            (m - host_rows) * sizeof(int32_t));
  }
  const size_t stride = m;
  auto index_view = [&](int a) { return Tensor::make(idx + a * stride, DType::kI32, 1, m, dev); };
  const Tensor picked_rows = Tensor::make(idx + 4 * stride, DType::kI32, 1, n_picked, dev);
  AttentionRows rows;
  rows.count = m;
  rows.positions = index_view(1);
  rows.slots = index_view(2);
  rows.cache_index = index_view(3);
  rows.one_slot = std::all_of(slots, slots + m, [&](int32_t s) { return s == slots[0]; });

  auto act = [&](const DeviceBuffer& buf, int64_t cols) {
    return Tensor::make(buf.data(), DType::kF32, m, cols, dev);
  };
  Tensor x = act(x_, c.hidden_size), h = act(h_, c.hidden_size);
  Tensor q = act(q_, c.q_dim()), k = act(k_, c.kv_dim()), v = act(v_, c.kv_dim());
  Tensor attn = act(attn_, c.q_dim());
  Tensor gate = act(gate_, c.intermediate_size), up = act(up_, c.intermediate_size);
  Tensor norm_sums = act(norm_sums_, (c.hidden_size + 15) / 16);
  // The RMSNorms before attention and MLP, folded into the ops around them (Backend::fold_norm):
  // each is written by the op that updates x and read by the matmuls that follow.
  auto folded = [&](const Tensor& weight, const Tensor& reader) {
    return FoldedNorm{&weight, eps, &h, &norm_sums, false, &reader};
  };
  auto bias = [](const Tensor& t) { return t.data ? &t : nullptr; };
  auto capture = [&](int layer) {
    for (size_t i = 0; i < capture_layers_.size(); ++i) {
      if (capture_layers_[i] != layer) continue;
      Tensor dst = hidden(i);
      backend_.copy_on_device(dst.data, x.data, x.bytes());
    }
  };

  Tensor normed = Tensor::make(normed_.data(), DType::kF32, n_logits, c.hidden_size, dev);
  Tensor logits = Tensor::make(logits_.data(), DType::kF32, n_logits, c.vocab_size, dev);
  auto layers = [&] {
    backend_.embedding(index_view(0), weights_.embed, x);
    if (c.embed_scale != 0.0f) backend_.scale(x, c.embed_scale);
    capture(0);
    FoldedNorm input_norm = folded(weights_.layers[0].input_norm, weights_.layers[0].wq);
    backend_.fold_norm(x, input_norm);
    for (int l = 0; l < c.n_layers; ++l) {
      const LayerWeights& w = weights_.layers[l];
      const KvLayerView cache = kv.layer(l);
      const bool sliding = c.is_sliding(l);
      const RopeTable& rope = sliding ? rope_local_ : rope_;
      const MatmulPart qkv[] = {
          {&w.wq, bias(w.bq), &q}, {&w.wk, bias(w.bk), &k}, {&w.wv, bias(w.bv), &v}};
      // q/k/v, RoPE and the K/V store in one op where the backend can (not between a per-head
      // norm, which needs whole heads).
      if (c.qk_norm || !backend_.qkv_rope_store_kv(input_norm, qkv, c.n_heads, rope, cache, rows)) {
        backend_.matmul_group_folded(input_norm, qkv);
        if (c.qk_norm) {
          backend_.qk_norm_rope_store_kv(q, k, v, w.q_norm, w.k_norm, eps, c.n_heads, rope, cache,
                                         rows);
        } else {
          backend_.rope_store_kv(q, k, v, c.n_heads, rope, cache, rows);
        }
      }
      AttentionRows layer_rows = rows;
      layer_rows.window = sliding ? c.sliding_window : 0;
      layer_rows.settled = true;  // the op just before wrote only these rows' K/V
      layer_rows.reader = &w.wo;
      backend_.attention(q, c.n_heads, cache, layer_rows, scale, attn);
      FoldedNorm post_norm = folded(w.post_norm, w.w_gate);
      if (c.gemma_norms) {  // x += norm(attn · woᵀ)
        backend_.matmul(attn, w.wo, bias(w.bo), h, false);
        backend_.rms_norm(h, w.attn_out_norm, eps, h);
        backend_.add(h, x);
        backend_.fold_norm(x, post_norm);
      } else {
        backend_.matmul_norm_out(attn, w.wo, bias(w.bo), x, post_norm);
      }
      // gate = act(h · w_gateᵀ) * (h · w_upᵀ), fused by the backend where it can.
      const bool activated =
          bias(w.b_gate) == nullptr && bias(w.b_up) == nullptr &&
          backend_.gate_up_act_folded(c.hidden_act, post_norm, w.w_gate, w.w_up, gate);
      if (!activated) {
        const MatmulPart gate_up[] = {{&w.w_gate, bias(w.b_gate), &gate},
                                      {&w.w_up, bias(w.b_up), &up}};
        backend_.matmul_group_folded(post_norm, gate_up);
      }
      // x += mlp, writing the next layer's input norm, or x += norm(mlp) (gemma_norms, with h
      // as the scratch). The last layer's x goes to the final norm.
      const bool last = l + 1 == c.n_layers, fold_next = !last && !c.gemma_norms;
      if (!last) input_norm = folded(weights_.layers[l + 1].input_norm, weights_.layers[l + 1].wq);
      Tensor& mlp = c.gemma_norms ? h : x;
      if (fold_next && activated) {
        backend_.matmul_norm_out(gate, w.w_down, bias(w.b_down), x, input_norm);
      } else if (fold_next) {
        backend_.gated_matmul_norm_out(c.hidden_act, gate, up, w.w_down, bias(w.b_down), x,
                                       input_norm);
      } else if (activated) {
        backend_.matmul(gate, w.w_down, bias(w.b_down), mlp, !c.gemma_norms);
      } else {
        backend_.gated_matmul(c.hidden_act, gate, up, w.w_down, bias(w.b_down), mlp,
                              !c.gemma_norms);
      }
      if (c.gemma_norms) {
        backend_.rms_norm(h, w.ffn_out_norm, eps, h);
        backend_.add(h, x);
        if (!last) backend_.fold_norm(x, input_norm);
      }
      capture(l + 1);
    }

    if (batch.logit_rows == nullptr) {
      backend_.rms_norm(x, weights_.final_norm, eps, normed);
    } else if (n_logits > 0) {
      // Gather the picked rows of x (a row lookup, as for token embeddings), then normalise them.
      backend_.embedding(picked_rows, x, normed);
      backend_.rms_norm(normed, weights_.final_norm, eps, normed);
    }
    if (n_logits > 0) backend_.matmul(normed, weights_.lm_head, nullptr, logits, false);
  };
  if (m <= kSmallBatch) {
    backend_.run_recorded(recording_key(batch, kv), layers);  // decode and verification
  } else {
    layers();
  }
  return logits;
}

void Transformer::run_shapes(std::span<const ForwardShape> shapes, KvCache& kv, int slot) {
  std::vector<int32_t> tokens(limits_.max_rows, 0), positions(limits_.max_rows);
  std::vector<int32_t> slots(limits_.max_rows, slot), picked(limits_.max_logit_rows);
  std::iota(positions.begin(), positions.end(), 0);
  // A prompt chunk first: its scratch needs are the largest, so none grows (which would drop the
  // recordings) while the small shapes run.
  const ForwardShape chunk{std::min(limits_.max_rows, kv.shape().capacity), 1};
  std::vector<ForwardShape> all{chunk};
  all.insert(all.end(), shapes.begin(), shapes.end());
  for (const ForwardShape& shape : all) {
    const int rows = shape.rows;
    SPECD_CHECK(rows > 0 && rows <= limits_.max_rows && shape.picked_logit_rows <= rows &&
                    shape.picked_logit_rows <= limits_.max_logit_rows,
                "forward shape of {} rows, {} logit rows", rows, shape.picked_logit_rows);
    if (rows > kv.shape().capacity) continue;
    ForwardBatch batch{rows, tokens.data(), positions.data(), slots.data()};
    if (shape.picked_logit_rows >= 0) {
      std::iota(picked.begin(), picked.begin() + shape.picked_logit_rows,
                rows - shape.picked_logit_rows);
      batch.logit_rows = picked.data();
      batch.n_logit_rows = shape.picked_logit_rows;
    }
    forward(batch, kv);
  }
  backend_.synchronize();
  kv.truncate(slot, 0);
}

}  // namespace specd
