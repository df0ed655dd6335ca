// Binds a checkpoint's tensors to the transformer's weights, checking names, shapes and dtypes.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "io/tensor_store.h"
#include "model/model_config.h"

namespace specd {

struct LayerWeights {
  Tensor input_norm;      // [1, D]
  Tensor wq, wk, wv, wo;  // [Hq*Dh, D], [Hkv*Dh, D], [Hkv*Dh, D], [D, Hq*Dh]
  Tensor bq, bk, bv, bo;  // [1, ...] or empty (data == nullptr)
  Tensor q_norm, k_norm;  // [1, Dh] (Qwen3) or empty
  Tensor post_norm;       // [1, D]
  Tensor w_gate, w_up;    // [F, D]
  Tensor w_down;          // [D, F]
  Tensor b_gate, b_up, b_down;  // mlp_bias only
};

struct ModelWeights {
  Tensor embed;       // [V, D]
  std::vector<LayerWeights> layers;
  Tensor final_norm;  // [1, D]
  Tensor lm_head;     // [V, D] (the embedding when tied)
  uint64_t bytes = 0;  // bytes of all bound tensors (lm_head counted once when tied)
  std::vector<DeviceBuffer> storage;  // device copies (GPU backends); empty on the CPU
};

// Throws specd::Error naming the tensor when one is missing, misshapen or of an unusable dtype.
ModelWeights bind_weights(const ModelConfig& config, const TensorStore& store, Backend& backend);

}  // namespace specd
