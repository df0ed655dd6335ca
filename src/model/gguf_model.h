// Models from GGUF files: the ModelConfig from the architecture's metadata and the tensors under
// their Hugging Face names (quantised blocks kept as stored).
#pragma once

#include <string>

#include "io/gguf.h"
#include "io/tensor_store.h"
#include "model/model_config.h"

namespace specd {

// True if `path` names a GGUF file (by its magic), as the commands accept in place of a
// model directory.
bool is_gguf_model(const std::string& path);

// The config of a GGUF model of architecture llama, qwen2, qwen3 or gemma3
// (general.architecture),
// read from its `<arch>.*` metadata, the tokenizer's BOS/EOS ids and the tensors present
// (output.weight absent = tied embeddings, attention biases, q/k norms). Throws specd::Error
// naming `what` and the key for missing or invalid metadata or an unsupported architecture.
ModelConfig gguf_model_config(const GgufHeader& header, const std::string& what);

// Opens a GGUF model: its tensors under the Hugging Face names that bind_weights expects, with
// GGUF shapes reversed to [rows, cols]. The Q and K projections of `llama` models, which GGUF
// stores with each head's rows interleaved for llama.cpp's RoPE, are copied back to the
// rotate-half order. Tensors of types specd cannot compute with fail at binding time.
TensorStore open_gguf_store(const std::string& path, const ModelConfig& config);

// The GGUF name of a Hugging Face tensor name ("model.layers.3.mlp.up_proj.weight" ->
// "blk.3.ffn_up.weight"), or "" if it has none. Gemma 3 maps its extra norms differently
// (ffn_norm is pre_feedforward_layernorm there).
std::string gguf_tensor_name(const std::string& hf_name, Architecture arch = Architecture::kLlama);

}  // namespace specd
