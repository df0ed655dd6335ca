// GGUF metadata -> ModelConfig, and GGUF tensors -> a TensorStore under Hugging Face names.
#include "model/gguf_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace specd {

namespace {

// Per-layer tensor names: GGUF suffix after "blk.N." and the Hugging Face suffix.
struct NamePair {
  const char* gguf;
  const char* hf;
};
constexpr NamePair kLayerNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.bias", "self_attn.o_proj.bias"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};
// Gemma 3 (llama.cpp's gemma3): the norm after attention, and the norms around the MLP.
constexpr NamePair kGemma3LayerNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};
constexpr NamePair kGlobalNames[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

const GgufValue& require(const GgufHeader& h, const std::string& key, const std::string& what) {
  const GgufValue* v = h.find(key);
  SPECD_CHECK(v != nullptr, "{}: missing GGUF metadata '{}'", what, key);
  return *v;
}

int positive_int(const GgufValue& v, const std::string& key, const std::string& what) {
  int64_t x = v.as_int(key);
  SPECD_CHECK(x > 0 && x <= (int64_t{1} << 30), "{}: GGUF metadata '{}' = {} is out of range", what,
              key, x);
  return static_cast<int>(x);
}

int int_or(const GgufHeader& h, const std::string& key, int fallback, const std::string& what) {
  const GgufValue* v = h.find(key);
  return v == nullptr ? fallback : positive_int(*v, key, what);
}

// GGUF stores llama Q/K rows of each head as (pairs of halves interleaved): GGUF row
// h * hd + 2 * i + j holds Hugging Face row h * hd + j * hd / 2 + i.
std::shared_ptr<std::vector<uint8_t>> unpermute_rows(const GgufTensorInfo& t, int n_heads,
                                                     const std::string& what) {
  const uint64_t rows = t.numel() / t.dims[0];
  SPECD_CHECK(t.dims.size() == 2 && rows % (2 * static_cast<uint64_t>(n_heads)) == 0,
              "{}: tensor '{}' has {} rows, not a whole number of {} heads", what, t.name, rows,
              n_heads);
  const uint64_t row_bytes = t.bytes / rows, head_dim = rows / n_heads, half = head_dim / 2;
  auto out = std::make_shared<std::vector<uint8_t>>(t.bytes);
  for (uint64_t h = 0; h < static_cast<uint64_t>(n_heads); ++h) {
    for (uint64_t j = 0; j < 2; ++j) {
      for (uint64_t i = 0; i < half; ++i) {
        const uint64_t src = h * head_dim + 2 * i + j, dst = h * head_dim + j * half + i;
        std::memcpy(out->data() + dst * row_bytes, t.data + src * row_bytes, row_bytes);
      }
    }
  }
  return out;
}

// Splits "<prefix><digits>.<rest>" into the digits and rest; false for other names.
bool split_layer_name(const std::string& name, std::string_view prefix, std::string* layer,
                      std::string* rest) {
  if (!name.starts_with(prefix)) return false;
  size_t i = prefix.size(), j = i;
  while (j < name.size() && j - i < 9 && name[j] >= '0' && name[j] <= '9') ++j;
  if (j == i || j >= name.size() || name[j] != '.') return false;
  *layer = name.substr(i, j - i);
  *rest = name.substr(j + 1);
  return true;
}

// Gemma 3 as llama.cpp runs it (and transformers loads it): every 6th layer global with RoPE
// base rope.freq_base, the others sliding-window with base 10000; attention scale
// 1 / sqrt(head_dim) (llama.cpp: hidden / heads for the 62-layer 27B); norms stored as 1 + w.
// RoPE scaling from metadata (rope.scaling.type none or linear with rope.scaling.factor) and the
// per-frequency factors of rope_freqs.weight (f32 [head_dim / 2]), which Llama 3.1 style files
// carry instead of their llama3 parameters.
void gguf_rope_scaling(const GgufHeader& h, const std::string& p, const std::string& what,
                       ModelConfig& c) {
  if (const GgufValue* v = h.find(p + "rope.scaling.type")) {
    const std::string type = v->as_string(p + "rope.scaling.type");
    if (type == "linear") {
      const std::string key = p + "rope.scaling.factor";
      c.rope.type = RopeType::kLinear;
      c.rope.factor = require(h, key, what).as_double(key);
      SPECD_CHECK(std::isfinite(c.rope.factor) && c.rope.factor > 0, "{}: bad {} {}", what, key,
                  c.rope.factor);
    } else {
      SPECD_CHECK(type == "none",
                  "{}: rope scaling '{}' from GGUF is not supported (supported: "
                  "none, linear, and rope_freqs.weight factors)",
                  what, type);
    }
  }
  const GgufTensorInfo* t = h.find_tensor("rope_freqs.weight");
  if (t == nullptr) return;
  const size_t half = static_cast<size_t>(c.head_dim / 2);
  SPECD_CHECK(t->ggml_type == 0 && t->dims.size() == 1 && t->dims[0] == half &&
                  t->bytes == half * sizeof(float) && t->data != nullptr,
              "{}: rope_freqs.weight must be f32 [{}] (head_dim / 2)", what, half);
  c.rope.freq_factors.resize(half);
  std::memcpy(c.rope.freq_factors.data(), t->data, t->bytes);
  for (float f : c.rope.freq_factors) {
    SPECD_CHECK(std::isfinite(f) && f > 0, "{}: rope_freqs.weight holds {}", what, f);
  }
}

void gguf_gemma3_config(const GgufHeader& h, const std::string& what, ModelConfig& c) {
  c.hidden_act = Activation::kGeluTanh;
  c.gemma_norms = true;
  c.norms_store_plus_one = true;
  c.embed_scale = static_cast<float>(std::pow(static_cast<double>(c.hidden_size), 0.5));
  c.rope_local_theta = 10000.0;
  const int scalar = c.n_layers == 62 ? c.hidden_size / c.n_heads : c.head_dim;
  c.attention_scale = std::pow(static_cast<double>(scalar), -0.5);
  const std::string window_key = "gemma3.attention.sliding_window";
  c.sliding_window = positive_int(require(h, window_key, what), window_key, what);
  c.sliding_layers.assign(static_cast<size_t>(c.n_layers), 0);
  for (int l = 0; l < c.n_layers; ++l) c.sliding_layers[static_cast<size_t>(l)] = (l + 1) % 6 != 0;
  for (const char* key : {"gemma3.final_logit_softcapping", "gemma3.attn_logit_softcapping"}) {
    SPECD_CHECK(h.find(key) == nullptr, "{}: '{}' is set; logit soft-capping is not supported",
                what, key);
  }
  SPECD_CHECK(c.qk_norm, "{}: gemma3 file without blk.0.attn_q_norm.weight", what);
  SPECD_CHECK(!c.attention_bias && !c.attention_out_bias, "{}: gemma3 file with attention biases",
              what);
}

struct GgufOwner {
  std::unique_ptr<GgufFile> file;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> copies;
};

}  // namespace

bool is_gguf_model(const std::string& path) { return is_gguf_file(path); }

std::span<const NamePair> layer_names(Architecture arch) {
  if (arch == Architecture::kGemma3) return kGemma3LayerNames;
  return kLayerNames;
}

std::string gguf_tensor_name(const std::string& hf_name, Architecture arch) {
  for (const NamePair& p : kGlobalNames) {
    if (hf_name == p.hf) return p.gguf;
  }
  std::string layer, rest;
  if (!split_layer_name(hf_name, "model.layers.", &layer, &rest)) return "";
  for (const NamePair& p : layer_names(arch)) {
    if (rest == p.hf) return "blk." + layer + "." + p.gguf;
  }
  return "";
}

ModelConfig gguf_model_config(const GgufHeader& h, const std::string& what) {
  ModelConfig c;
  const std::string arch =
      require(h, "general.architecture", what).as_string("general.architecture");
  if (arch == "llama") {
    c.arch = Architecture::kLlama;
    c.arch_name = "LlamaForCausalLM";
  } else if (arch == "qwen2") {
    c.arch = Architecture::kQwen2;
    c.arch_name = "Qwen2ForCausalLM";
  } else if (arch == "qwen3") {
    c.arch = Architecture::kQwen3;
    c.arch_name = "Qwen3ForCausalLM";
  } else if (arch == "gemma3") {
    c.arch = Architecture::kGemma3;
    c.arch_name = "Gemma3ForCausalLM";
  } else {
    fail("{}: GGUF architecture '{}' is not supported (supported: llama, qwen2, qwen3, gemma3)",
         what, arch);
  }
  const std::string p = arch + ".";
  auto get = [&](const std::string& key) {
    return positive_int(require(h, p + key, what), p + key, what);
  };
  c.n_layers = get("block_count");
  c.hidden_size = get("embedding_length");
  c.intermediate_size = get("feed_forward_length");
  c.n_heads = get("attention.head_count");
  c.n_kv_heads = int_or(h, p + "attention.head_count_kv", c.n_heads, what);
  SPECD_CHECK(c.hidden_size % c.n_heads == 0 || h.find(p + "attention.key_length") != nullptr,
              "{}: embedding_length {} is not a multiple of head_count {}", what, c.hidden_size,
              c.n_heads);
  c.head_dim = int_or(h, p + "attention.key_length", c.hidden_size / c.n_heads, what);
  SPECD_CHECK(int_or(h, p + "attention.value_length", c.head_dim, what) == c.head_dim,
              "{}: key_length and value_length differ", what);
  SPECD_CHECK(c.n_heads % c.n_kv_heads == 0,
              "{}: head_count {} is not a multiple of head_count_kv {}", what, c.n_heads,
              c.n_kv_heads);
  SPECD_CHECK(c.head_dim % 2 == 0, "{}: head dimension {} is odd", what, c.head_dim);
  if (const GgufValue* v = h.find(p + "rope.dimension_count")) {
    SPECD_CHECK(v->as_int(p + "rope.dimension_count") == c.head_dim,
                "{}: partial rotary embeddings (rope.dimension_count {} of head dim {}) are not "
                "supported",
                what, v->as_int(p + "rope.dimension_count"), c.head_dim);
  }
  if (const GgufValue* v = h.find(p + "rope.freq_base"))
    c.rope_theta = v->as_double(p + "rope.freq_base");
  SPECD_CHECK(c.rope_theta > 0, "{}: rope.freq_base must be positive", what);
  gguf_rope_scaling(h, p, what, c);
  const std::string eps_key = p + "attention.layer_norm_rms_epsilon";
  c.rms_norm_eps = require(h, eps_key, what).as_double(eps_key);
  SPECD_CHECK(c.rms_norm_eps > 0 && c.rms_norm_eps < 1, "{}: bad {}", what, eps_key);
  c.max_position_embeddings = int_or(h, p + "context_length", 0, what);
  const GgufTensorInfo* embd = h.find_tensor("token_embd.weight");
  SPECD_CHECK(embd != nullptr && embd->dims.size() == 2, "{}: missing 2-D token_embd.weight", what);
  SPECD_CHECK(embd->dims[1] <= (uint64_t{1} << 30), "{}: vocabulary too large", what);
  c.vocab_size = static_cast<int>(embd->dims[1]);
  c.tie_word_embeddings = h.find_tensor("output.weight") == nullptr;
  c.attention_bias = h.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.attention_out_bias = h.find_tensor("blk.0.attn_output.bias") != nullptr;
  c.qk_norm = h.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  c.dtype = DType::kF32;
  if (c.arch == Architecture::kGemma3) gguf_gemma3_config(h, what, c);
  if (const GgufValue* v = h.find("tokenizer.ggml.bos_token_id")) {
    c.bos_token_id = static_cast<int>(v->as_int("tokenizer.ggml.bos_token_id"));
  }
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"}) {
    if (const GgufValue* v = h.find(key)) {
      int id = static_cast<int>(v->as_int(key));
      SPECD_CHECK(id >= 0 && id < c.vocab_size, "{}: {} {} is outside the vocabulary", what, key,
                  id);
      if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end()) {
        c.eos_token_ids.push_back(id);
      }
    }
  }
  return c;
}

TensorStore open_gguf_store(const std::string& path, const ModelConfig& config) {
  auto owner = std::make_shared<GgufOwner>();
  owner->file = std::make_unique<GgufFile>(path);
  const GgufHeader& h = owner->file->header();
  const bool permuted = config.arch == Architecture::kLlama;
  std::vector<TensorInfo> tensors;
  auto add = [&](const std::string& hf, const GgufTensorInfo& t) {
    TensorInfo info;
    info.name = hf;
    info.file = path;
    auto dtype = ggml_type_to_dtype(t.ggml_type);
    SPECD_CHECK(dtype.has_value(),
                "{}: tensor '{}' has ggml type {} ({}), which specd cannot "
                "compute with (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, "
                "Q5_K, Q6_K)",
                path, t.name, t.ggml_type, ggml_type_info(t.ggml_type)->name);
    info.dtype = *dtype;
    for (auto it = t.dims.rbegin(); it != t.dims.rend(); ++it) {
      info.shape.push_back(static_cast<int64_t>(*it));
    }
    info.begin = 0;
    info.end = t.bytes;
    info.data = t.data;
    const bool is_q = t.name.ends_with(".attn_q.weight") || t.name.ends_with(".attn_q.bias");
    const bool is_k = t.name.ends_with(".attn_k.weight") || t.name.ends_with(".attn_k.bias");
    if (permuted && (is_q || is_k)) {
      SPECD_CHECK(t.dims.size() <= 2, "{}: tensor '{}' is not 2-D", path, t.name);
      GgufTensorInfo as_rows = t;
      if (t.dims.size() == 1) as_rows.dims = {1, t.dims[0]};  // a bias: one element per row
      if (t.dims.size() == 1) as_rows.bytes = t.bytes;
      auto copy = unpermute_rows(as_rows, is_q ? config.n_heads : config.n_kv_heads, path);
      info.data = copy->data();
      owner->copies.push_back(std::move(copy));
    }
    tensors.push_back(std::move(info));
  };
  for (const GgufTensorInfo& t : h.tensors) {
    std::string hf;
    for (const NamePair& p : kGlobalNames) {
      if (t.name == p.gguf) hf = p.hf;
    }
    std::string layer, rest;
    if (hf.empty() && split_layer_name(t.name, "blk.", &layer, &rest)) {
      for (const NamePair& p : layer_names(config.arch)) {
        if (rest == p.gguf) hf = "model.layers." + layer + "." + p.hf;
      }
    }
    if (hf.empty()) continue;  // tensors specd does not use
    add(hf, t);
  }
  const MappedFile* mapping = &owner->file->mapping();
  return TensorStore::from_tensors(std::move(tensors), std::move(owner), mapping);
}

}  // namespace specd
