// Binds a checkpoint's tensors to the transformer's weights, checking names, shapes and dtypes.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "io/tensor_store.h"
#include "model/model_config.h"

namespace specd {

struct LayerWeights {
  Tensor input_norm;            // [1, D]
  Tensor wq, wk, wv, wo;        // [Hq*Dh, D], [Hkv*Dh, D], [Hkv*Dh, D], [D, Hq*Dh]
  Tensor bq, bk, bv, bo;        // [1, ...] or empty (data == nullptr)
  Tensor q_norm, k_norm;        // [1, Dh] (Qwen3, Gemma 3) or empty
  Tensor post_norm;             // [1, D] the norm before the MLP (Gemma: pre_feedforward_layernorm)
  Tensor attn_out_norm;         // [1, D] f32 Gemma post_attention_layernorm (1 + w), or empty
  Tensor ffn_out_norm;          // [1, D] f32 Gemma post_feedforward_layernorm (1 + w), or empty
  Tensor w_gate, w_up;          // [F, D]
  Tensor w_down;                // [D, F]
  Tensor b_gate, b_up, b_down;  // mlp_bias only
};

struct ModelWeights {
  Tensor embed;  // [V, D]
  std::vector<LayerWeights> layers;
  Tensor final_norm;                  // [1, D]
  Tensor lm_head;                     // [V, D] (the embedding when tied)
  uint64_t bytes = 0;                 // bytes of all bound tensors (lm_head counted once when tied)
  std::vector<DeviceBuffer> storage;  // device copies (GPU backends); empty on the CPU
};

// Throws specd::Error naming the tensor when one is missing, misshapen or of an unusable dtype.
// With config.gemma_norms every RMSNorm weight is bound as an f32 copy of (1 + w), computed as
// transformers does (from a GGUF file that stores 1 + w: (stored - 1) + 1 in f32).
ModelWeights bind_weights(const ModelConfig& config, const TensorStore& store, Backend& backend);

}  // namespace specd
