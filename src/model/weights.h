// Binds a checkpoint's tensors to the transformer's weights, checking names, shapes and dtypes.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "backend/quantize.h"
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
  std::vector<DeviceBuffer> storage;  // device copies (GPU backends), quantised or f32 norm copies
  int quantized_tensors = 0;          // tensors converted by WeightQuantOptions
  int unquantized_linear = 0;         // linear weights left as stored (input dim % 128 != 0)
};

// Load-time weight quantisation. With kInt8 or kInt4, every linear weight (attention q/k/v/o,
// MLP gate/up/down) and the LM head (the embedding table when tied, whose lookups then
// dequantise rows) is quantised from f32/f16/bf16; an untied embedding table, norms and biases
// stay as stored. Linear weights whose input dimension is not a multiple of 128 stay as stored.
// Block-quantised (GGUF) weights are rejected: they are quantised already.
struct WeightQuantOptions {
  WeightQuant mode = WeightQuant::kNone;
  int threads = 1;        // quantise rows on this many threads
  bool progress = false;  // a progress line on a terminal
};

// Throws specd::Error naming the tensor when one is missing, misshapen or of an unusable dtype.
// With config.gemma_norms every RMSNorm weight is bound as an f32 copy of (1 + w), computed as
// transformers does (from a GGUF file that stores 1 + w: (stored - 1) + 1 in f32).
ModelWeights bind_weights(const ModelConfig& config, const TensorStore& store, Backend& backend,
                          const WeightQuantOptions& quant = {});

// Bytes the weights would take after quantisation with `mode` (same policy as bind_weights;
// lm_head counted once when tied). Reads only shapes and dtypes.
uint64_t quantized_weight_bytes(const ModelConfig& config, const TensorStore& store,
                                WeightQuant mode);

}  // namespace specd
