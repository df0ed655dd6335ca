// config.json parsing for the Llama, Qwen2, Qwen3, Mistral and Gemma 3 families.
#include "model/model_config.h"

#include <cmath>

#include "core/error.h"
#include "io/mapped_file.h"
#include "model/gguf_model.h"

namespace specd {

namespace {

int get_int(const Json& json, const char* key, const std::string& what, int fallback = -1) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) {
    SPECD_CHECK(fallback >= 0, "{}: missing required key '{}'", what, key);
    return fallback;
  }
  SPECD_CHECK(
      it->is_number_integer() && it->get<int64_t>() >= 0 && it->get<int64_t>() <= (1ll << 31) - 1,
      "{}: '{}' must be a non-negative integer", what, key);
  return it->get<int>();
}

double get_double(const Json& json, const char* key, const std::string& what, double fallback) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return fallback;
  SPECD_CHECK(it->is_number(), "{}: '{}' must be a number", what, key);
  return it->get<double>();
}

bool get_bool(const Json& json, const char* key, const std::string& what, bool fallback) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return fallback;
  SPECD_CHECK(it->is_boolean(), "{}: '{}' must be true or false", what, key);
  return it->get<bool>();
}

std::vector<int> get_ids(const Json& json, const char* key, const std::string& what) {
  auto it = json.find(key);
  std::vector<int> ids;
  if (it == json.end() || it->is_null()) return ids;
  auto check = [&](const Json& v) {
    SPECD_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0, "{}: '{}' must hold token ids",
                what, key);
    ids.push_back(v.get<int>());
  };
  if (it->is_array()) {
    for (const auto& v : *it) check(v);
  } else {
    check(*it);
  }
  return ids;
}

RopeScaling parse_rope_scaling(const Json& json, const std::string& what) {
  RopeScaling rope;
  auto it = json.find("rope_scaling");
  if (it == json.end() || it->is_null()) return rope;
  SPECD_CHECK(it->is_object(), "{}: 'rope_scaling' must be an object", what);
  const Json& s = *it;
  std::string type;
  if (s.contains("rope_type") && s["rope_type"].is_string())
    type = s["rope_type"];
  else if (s.contains("type") && s["type"].is_string())
    type = s["type"];
  std::string where = what + " rope_scaling";
  if (type == "default") return rope;
  if (type == "linear") {
    rope.type = RopeType::kLinear;
  } else if (type == "llama3") {
    rope.type = RopeType::kLlama3;
    rope.low_freq_factor = get_double(s, "low_freq_factor", where, 1.0);
    rope.high_freq_factor = get_double(s, "high_freq_factor", where, 4.0);
    rope.original_max_position_embeddings = get_int(s, "original_max_position_embeddings", where);
    SPECD_CHECK(rope.high_freq_factor != rope.low_freq_factor,
                "{}: high_freq_factor must differ from low_freq_factor", where);
  } else if (type == "yarn") {
    rope.type = RopeType::kYarn;
    rope.beta_fast = get_double(s, "beta_fast", where, 32.0);
    rope.beta_slow = get_double(s, "beta_slow", where, 1.0);
    rope.attention_factor = get_double(s, "attention_factor", where, 0.0);
    rope.mscale = get_double(s, "mscale", where, 0.0);
    rope.mscale_all_dim = get_double(s, "mscale_all_dim", where, 0.0);
    rope.truncate = get_bool(s, "truncate", where, true);
    rope.original_max_position_embeddings = get_int(s, "original_max_position_embeddings", where,
                                                    get_int(json, "max_position_embeddings", what));
  } else {
    fail("{}: unsupported rope scaling type '{}' (supported: linear, llama3, yarn)", what, type);
  }
  rope.factor = get_double(s, "factor", where, -1.0);
  SPECD_CHECK(rope.factor > 0, "{}: 'factor' must be a positive number", where);
  return rope;
}

Architecture parse_architecture(const Json& json, const std::string& what, std::string* name) {
  auto it = json.find("architectures");
  SPECD_CHECK(it != json.end() && it->is_array() && !it->empty() && (*it)[0].is_string(),
              "{}: missing 'architectures'", what);
  *name = (*it)[0].get<std::string>();
  if (*name == "LlamaForCausalLM") return Architecture::kLlama;
  if (*name == "Qwen2ForCausalLM") return Architecture::kQwen2;
  if (*name == "Qwen3ForCausalLM") return Architecture::kQwen3;
  if (*name == "MistralForCausalLM") return Architecture::kMistral;
  if (*name == "Gemma3ForCausalLM") return Architecture::kGemma3;
  fail(
      "{}: unsupported architecture '{}' (supported: LlamaForCausalLM, Qwen2ForCausalLM, "
      "Qwen3ForCausalLM, MistralForCausalLM, Gemma3ForCausalLM)",
      what, *name);
}

// RoPE of Gemma 3's two layer types: transformers 5's "rope_parameters" ({"full_attention":
// {...}, "sliding_attention": {...}}) or the classic rope_theta / rope_local_base_freq /
// rope_scaling (the scaling applies to global layers only).
void parse_gemma3_rope(const Json& json, const std::string& what, ModelConfig& c) {
  c.rope_theta = get_double(json, "rope_theta", what, 1000000.0);
  c.rope_local_theta = get_double(json, "rope_local_base_freq", what, 10000.0);
  c.rope = parse_rope_scaling(json, what);
  auto it = json.find("rope_parameters");
  if (it != json.end() && !it->is_null()) {
    SPECD_CHECK(it->is_object(), "{}: 'rope_parameters' must be an object", what);
    for (const char* type : {"full_attention", "sliding_attention"}) {
      auto p = it->find(type);
      if (p == it->end() || p->is_null()) continue;
      const std::string where = what + " rope_parameters." + type;
      SPECD_CHECK(p->is_object(), "{}: must be an object", where);
      Json wrapped = {{"rope_scaling", *p}, {"max_position_embeddings", c.max_position_embeddings}};
      RopeScaling scaling = parse_rope_scaling(wrapped, where);
      double theta = get_double(*p, "rope_theta", where, -1.0);
      if (std::string(type) == "full_attention") {
        c.rope = scaling;
        if (theta > 0) c.rope_theta = theta;
      } else {
        SPECD_CHECK(scaling.type == RopeType::kDefault,
                    "{}: rope scaling on sliding-window layers is not supported", where);
        if (theta > 0) c.rope_local_theta = theta;
      }
    }
  }
  SPECD_CHECK(c.rope_theta > 0 && c.rope_local_theta > 0, "{}: RoPE bases must be positive", what);
}

// Gemma3ForCausalLM (Gemma3TextConfig): sliding and global layers, Gemma norms, GELU-tanh.
void parse_gemma3(const Json& json, const std::string& what, ModelConfig& c) {
  std::string act = json.value("hidden_activation", json.value("hidden_act", std::string()));
  SPECD_CHECK(act == "gelu_pytorch_tanh",
              "{}: unsupported hidden_activation '{}' for Gemma 3 (supported: gelu_pytorch_tanh)",
              what, act);
  c.hidden_act = Activation::kGeluTanh;
  for (const char* key : {"final_logit_softcapping", "attn_logit_softcapping"}) {
    auto it = json.find(key);
    SPECD_CHECK(it == json.end() || it->is_null(),
                "{}: '{}' is set; logit soft-capping is not supported (Gemma 3 checkpoints "
                "have null)",
                what, key);
  }
  SPECD_CHECK(!get_bool(json, "use_bidirectional_attention", what, false),
              "{}: use_bidirectional_attention is not supported", what);
  parse_gemma3_rope(json, what, c);
  c.attention_scale = std::pow(get_double(json, "query_pre_attn_scalar", what, 256.0), -0.5);
  SPECD_CHECK(std::isfinite(c.attention_scale) && c.attention_scale > 0,
              "{}: query_pre_attn_scalar must be positive", what);
  c.embed_scale = static_cast<float>(std::pow(static_cast<double>(c.hidden_size), 0.5));
  c.gemma_norms = true;
  c.qk_norm = true;
  c.attention_bias = get_bool(json, "attention_bias", what, false);
  c.attention_out_bias = c.attention_bias;
  c.tie_word_embeddings = get_bool(json, "tie_word_embeddings", what, true);

  c.sliding_layers.assign(static_cast<size_t>(c.n_layers), 0);
  auto types = json.find("layer_types");
  if (types != json.end() && !types->is_null()) {
    SPECD_CHECK(types->is_array() && types->size() == static_cast<size_t>(c.n_layers),
                "{}: 'layer_types' must list one type per layer ({})", what, c.n_layers);
    for (int l = 0; l < c.n_layers; ++l) {
      const Json& t = (*types)[static_cast<size_t>(l)];
      SPECD_CHECK(t.is_string() && (t == "sliding_attention" || t == "full_attention"),
                  "{}: layer_types[{}] must be 'sliding_attention' or 'full_attention'", what, l);
      c.sliding_layers[static_cast<size_t>(l)] = t == "sliding_attention";
    }
  } else {
    int pattern = get_int(json, "sliding_window_pattern", what, 6);
    SPECD_CHECK(pattern > 0, "{}: sliding_window_pattern must be positive", what);
    for (int l = 0; l < c.n_layers; ++l)
      c.sliding_layers[static_cast<size_t>(l)] = (l + 1) % pattern != 0;
  }
  c.sliding_window = get_int(json, "sliding_window", what, 4096);
  bool any_sliding = false;
  for (uint8_t s : c.sliding_layers) any_sliding = any_sliding || s != 0;
  SPECD_CHECK(!any_sliding || c.sliding_window > 0,
              "{}: sliding_window must be positive when there are sliding_attention layers", what);
}

}  // namespace

std::string architecture_name(Architecture arch) {
  switch (arch) {
    case Architecture::kLlama:
      return "llama";
    case Architecture::kQwen2:
      return "qwen2";
    case Architecture::kQwen3:
      return "qwen3";
    case Architecture::kMistral:
      return "mistral";
    case Architecture::kGemma3:
      return "gemma3";
  }
  return "?";
}

ModelConfig parse_model_config(const Json& json, const std::string& what) {
  SPECD_CHECK(json.is_object(), "{}: not a JSON object", what);
  ModelConfig c;
  c.arch = parse_architecture(json, what, &c.arch_name);
  c.vocab_size = get_int(json, "vocab_size", what);
  c.hidden_size = get_int(json, "hidden_size", what);
  c.intermediate_size = get_int(json, "intermediate_size", what);
  c.n_layers = get_int(json, "num_hidden_layers", what);
  c.n_heads = get_int(json, "num_attention_heads", what);
  c.n_kv_heads = get_int(json, "num_key_value_heads", what, c.n_heads);
  SPECD_CHECK(c.vocab_size > 0 && c.hidden_size > 0 && c.intermediate_size > 0 && c.n_layers > 0 &&
                  c.n_heads > 0 && c.n_kv_heads > 0,
              "{}: sizes must be positive", what);
  SPECD_CHECK(c.n_heads % c.n_kv_heads == 0,
              "{}: num_attention_heads ({}) is not a multiple of num_key_value_heads ({})", what,
              c.n_heads, c.n_kv_heads);
  int default_head_dim = c.arch == Architecture::kGemma3  ? 256
                         : c.hidden_size % c.n_heads == 0 ? c.hidden_size / c.n_heads
                                                          : 0;
  c.head_dim = get_int(json, "head_dim", what, default_head_dim);
  SPECD_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0, "{}: head_dim must be even and positive",
              what);
  c.rms_norm_eps = get_double(json, "rms_norm_eps", what, 1e-6);
  c.rope_theta = get_double(json, "rope_theta", what, 10000.0);
  SPECD_CHECK(c.rope_theta > 0, "{}: rope_theta must be positive", what);
  c.rope = parse_rope_scaling(json, what);
  c.max_position_embeddings = get_int(json, "max_position_embeddings", what, 4096);
  c.tie_word_embeddings = get_bool(json, "tie_word_embeddings", what, false);
  c.mlp_bias = get_bool(json, "mlp_bias", what, false);
  c.qk_norm = c.arch == Architecture::kQwen3;
  if (c.arch == Architecture::kQwen2) {
    c.attention_bias = true;
  } else if (c.arch == Architecture::kLlama) {
    c.attention_bias = get_bool(json, "attention_bias", what, false);
    c.attention_out_bias = c.attention_bias;
  } else if (c.arch == Architecture::kQwen3) {
    c.attention_bias = get_bool(json, "attention_bias", what, false);
  }
  if (c.arch == Architecture::kGemma3) {
    c.max_position_embeddings = get_int(json, "max_position_embeddings", what, 131072);
    parse_gemma3(json, what, c);
  } else {
    std::string act = json.value("hidden_act", std::string("silu"));
    SPECD_CHECK(act == "silu", "{}: unsupported hidden_act '{}' (supported: silu)", what, act);
    bool sliding =
        c.arch == Architecture::kMistral || get_bool(json, "use_sliding_window", what, false);
    if (sliding) c.sliding_window = get_int(json, "sliding_window", what, 0);
  }
  std::string dtype = json.value("torch_dtype", json.value("dtype", std::string("bfloat16")));
  if (dtype == "float32")
    c.dtype = DType::kF32;
  else if (dtype == "float16")
    c.dtype = DType::kF16;
  else
    c.dtype = DType::kBF16;
  std::vector<int> bos = get_ids(json, "bos_token_id", what);
  if (!bos.empty()) c.bos_token_id = bos[0];
  c.eos_token_ids = get_ids(json, "eos_token_id", what);
  return c;
}

ModelConfig load_model_config(const std::string& dir) {
  if (is_gguf_model(dir)) return gguf_model_config(GgufFile(dir).header(), dir);
  std::string path = dir + "/config.json";
  SPECD_CHECK(file_exists(path), "{}: no config.json (is this a Hugging Face model directory?)",
              dir);
  ModelConfig config = parse_model_config(read_json_file(path), path);
  std::string gen_path = dir + "/generation_config.json";
  if (file_exists(gen_path)) {
    Json gen = read_json_file(gen_path);
    SPECD_CHECK(gen.is_object(), "{}: not a JSON object", gen_path);
    std::vector<int> eos = get_ids(gen, "eos_token_id", gen_path);
    if (!eos.empty()) config.eos_token_ids = eos;
    std::vector<int> bos = get_ids(gen, "bos_token_id", gen_path);
    if (!bos.empty()) config.bos_token_id = bos[0];
    config.do_sample = get_bool(gen, "do_sample", gen_path, false);
    config.temperature = get_double(gen, "temperature", gen_path, 1.0);
    config.top_p = get_double(gen, "top_p", gen_path, 1.0);
    config.top_k = get_int(gen, "top_k", gen_path, 0);
    config.min_p = get_double(gen, "min_p", gen_path, 0.0);
    config.repetition_penalty = get_double(gen, "repetition_penalty", gen_path, 1.0);
  }
  return config;
}

}  // namespace specd
