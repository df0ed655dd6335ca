// Tensor-name binding for the Llama-style decoder families (Llama, Qwen2, Qwen3, Mistral, Gemma 3).
#include "model/weights.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/thread_pool.h"

namespace specd {

namespace {

// The tensor `name` of shape [rows, cols] (cols == 0: 1-D of `rows`), checked.
const TensorInfo* lookup(const TensorStore& store, const std::string& name, int64_t rows,
                         int64_t cols) {
  const TensorInfo* info = store.find(name);
  SPECD_CHECK(info != nullptr, "checkpoint has no tensor '{}'", name);
  std::vector<int64_t> expected =
      cols == 0 ? std::vector<int64_t>{rows} : std::vector<int64_t>{rows, cols};
  SPECD_CHECK(info->shape == expected, "tensor '{}' has shape [{}] but the config implies [{}]",
              name, fmt::join(info->shape, ", "), fmt::join(expected, ", "));
  SPECD_CHECK(info->dtype != DType::kI32, "tensor '{}' has dtype i32; expected a float type", name);
  return info;
}

// Names and shapes [rows, cols] of the weights --quantize converts (the LM head last).
struct LinearWeight {
  std::string name;
  int64_t rows, cols;
};
std::vector<LinearWeight> linear_weights(const ModelConfig& c) {
  const int64_t d = c.hidden_size, f = c.intermediate_size, q = c.q_dim(), kv = c.kv_dim();
  std::vector<LinearWeight> out;
  for (int l = 0; l < c.n_layers; ++l) {
    std::string p = fmt::format("model.layers.{}.", l);
    out.push_back({p + "self_attn.q_proj.weight", q, d});
    out.push_back({p + "self_attn.k_proj.weight", kv, d});
    out.push_back({p + "self_attn.v_proj.weight", kv, d});
    out.push_back({p + "self_attn.o_proj.weight", d, q});
    out.push_back({p + "mlp.gate_proj.weight", f, d});
    out.push_back({p + "mlp.up_proj.weight", f, d});
    out.push_back({p + "mlp.down_proj.weight", d, f});
  }
  out.push_back(
      {c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight", c.vocab_size, d});
  return out;
}

void check_quantizable(WeightQuant mode, const std::string& name, DType dtype) {
  SPECD_CHECK(!is_quantized(dtype),
              "--quantize {}: tensor '{}' is already {} (a GGUF block quantisation); --quantize "
              "converts f32, f16 and bf16 checkpoints only",
              weight_quant_name(mode), name, dtype_name(dtype));
}

class Binder {
 public:
  Binder(const TensorStore& store, Backend& backend, ModelWeights& out,
         const WeightQuantOptions& quant, int linear_total)
      : store_(store), backend_(backend), out_(out), quant_(quant), linear_total_(linear_total) {
    show_ = quant_.mode != WeightQuant::kNone && quant_.progress && isatty(fileno(stderr));
  }
  ~Binder() {
    if (show_ && linear_done_ > 0) std::fprintf(stderr, "\n");
  }

  // A linear weight [rows, cols] (or the LM head): quantised when the options ask for it.
  Tensor bind_linear(const std::string& name, int64_t rows, int64_t cols) {
    if (quant_.mode == WeightQuant::kNone) return bind(name, rows, cols);
    const TensorInfo* info = lookup(store_, name, rows, cols);
    check_quantizable(quant_.mode, name, info->dtype);
    if (!can_quantize(info->dtype, cols)) {
      ++out_.unquantized_linear;
      return bind(name, rows, cols);
    }
    const DType dtype = weight_quant_dtype(quant_.mode, info->dtype);
    const size_t src_row = static_cast<size_t>(cols) * dtype_size(info->dtype);
    const size_t dst_row = dtype_row_bytes(dtype, cols);
    const size_t bytes = dst_row * static_cast<size_t>(rows);
    // On the CPU the blocks are written in place; for a GPU through a host staging copy that
    // the backend places (in its own layout).
    const bool on_host = backend_.device().kind == DeviceKind::kCpu;
    DeviceBuffer buffer = on_host ? backend_.alloc(bytes) : DeviceBuffer();
    std::vector<uint8_t> staging(on_host ? 0 : bytes);
    auto* dst = on_host ? static_cast<uint8_t*>(buffer.data()) : staging.data();
    ThreadPool::shared(std::max(1, quant_.threads))
        ->parallel_for(
            rows,
            [&](int64_t begin, int64_t end, int) {
              quantize_rows(dtype, info->data + begin * src_row, info->dtype, end - begin, cols,
                            dst + begin * dst_row);
            },
            16);
    Tensor placed = on_host ? buffer.view(dtype, rows, cols)
                            : backend_.place_weight(Tensor::make(dst, dtype, rows, cols), &buffer);
    store_.release_pages(*info);
    out_.storage.push_back(std::move(buffer));
    out_.bytes += bytes;
    ++out_.quantized_tensors;
    ++linear_done_;
    if (show_) {
      std::fprintf(stderr, "\rquantising weights to %s: %d / %d tensors",
                   std::string(weight_quant_name(quant_.mode)).c_str(), linear_done_,
                   linear_total_);
    }
    return placed;
  }

  // A weight of shape [rows, cols] (cols == 0 means a 1-D tensor of `rows` elements).
  Tensor bind(const std::string& name, int64_t rows, int64_t cols) {
    const TensorInfo* info = lookup(store_, name, rows, cols);
    SPECD_CHECK(backend_.supports_weights(info->dtype),
                "tensor '{}' is {}: the {} backend has no kernel for these weights", name,
                dtype_name(info->dtype), device_name(backend_.device()));
    Tensor host = Tensor::make(const_cast<uint8_t*>(info->data), info->dtype, cols == 0 ? 1 : rows,
                               cols == 0 ? rows : cols);
    out_.bytes += host.bytes();
    DeviceBuffer storage;
    Tensor placed = backend_.place_weight(host, &storage);
    if (storage.data() != nullptr) out_.storage.push_back(std::move(storage));
    if (placed.data != host.data) store_.release_pages(*info);  // copied: the source can go
    return placed;
  }

  Tensor bind_if(bool present, const std::string& name, int64_t n) {
    return present ? bind(name, n, 0) : Tensor{};
  }

  // An RMSNorm weight of n elements; Gemma's as an f32 copy of its effective weight 1 + w.
  Tensor bind_norm(const ModelConfig& c, const std::string& name, int64_t n) {
    Tensor stored = bind(name, n, 0);
    if (!c.gemma_norms) return stored;
    const TensorInfo* info = store_.find(name);
    SPECD_CHECK(!is_quantized(info->dtype), "tensor '{}' is block-quantised; norms must be float",
                name);
    std::vector<float> effective(static_cast<size_t>(n));
    for (size_t i = 0; i < effective.size(); ++i) {
      const float w = load_as_f32(info->data, info->dtype, i);
      // transformers: GGUF loading subtracts the 1 llama.cpp added, the norm adds it back.
      effective[i] = c.norms_store_plus_one ? (w - 1.0f) + 1.0f : 1.0f + w;
    }
    DeviceBuffer buffer = backend_.alloc(effective.size() * sizeof(float));
    backend_.copy_to_device(buffer.data(), effective.data(), effective.size() * sizeof(float));
    Tensor placed = buffer.view(DType::kF32, 1, n);
    out_.storage.push_back(std::move(buffer));
    return placed;
  }

 private:
  const TensorStore& store_;
  Backend& backend_;
  ModelWeights& out_;
  WeightQuantOptions quant_;
  int linear_total_ = 0, linear_done_ = 0;
  bool show_ = false;
};

}  // namespace

ModelWeights bind_weights(const ModelConfig& c, const TensorStore& store, Backend& backend,
                          const WeightQuantOptions& quant) {
  ModelWeights w;
  Binder b(store, backend, w, quant, static_cast<int>(linear_weights(c).size()));
  const int64_t d = c.hidden_size, f = c.intermediate_size, q = c.q_dim(), kv = c.kv_dim();
  // A tied table is the LM head too, quantised with it (lookups dequantise rows).
  w.embed = c.tie_word_embeddings ? b.bind_linear("model.embed_tokens.weight", c.vocab_size, d)
                                  : b.bind("model.embed_tokens.weight", c.vocab_size, d);
  for (int l = 0; l < c.n_layers; ++l) {
    std::string p = fmt::format("model.layers.{}.", l);
    LayerWeights L;
    L.input_norm = b.bind_norm(c, p + "input_layernorm.weight", d);
    L.wq = b.bind_linear(p + "self_attn.q_proj.weight", q, d);
    L.wk = b.bind_linear(p + "self_attn.k_proj.weight", kv, d);
    L.wv = b.bind_linear(p + "self_attn.v_proj.weight", kv, d);
    L.wo = b.bind_linear(p + "self_attn.o_proj.weight", d, q);
    L.bq = b.bind_if(c.attention_bias, p + "self_attn.q_proj.bias", q);
    L.bk = b.bind_if(c.attention_bias, p + "self_attn.k_proj.bias", kv);
    L.bv = b.bind_if(c.attention_bias, p + "self_attn.v_proj.bias", kv);
    L.bo = b.bind_if(c.attention_out_bias, p + "self_attn.o_proj.bias", d);
    if (c.qk_norm) {
      L.q_norm = b.bind_norm(c, p + "self_attn.q_norm.weight", c.head_dim);
      L.k_norm = b.bind_norm(c, p + "self_attn.k_norm.weight", c.head_dim);
    }
    if (c.gemma_norms) {
      L.attn_out_norm = b.bind_norm(c, p + "post_attention_layernorm.weight", d);
      L.post_norm = b.bind_norm(c, p + "pre_feedforward_layernorm.weight", d);
      L.ffn_out_norm = b.bind_norm(c, p + "post_feedforward_layernorm.weight", d);
    } else {
      L.post_norm = b.bind(p + "post_attention_layernorm.weight", d, 0);
    }
    L.w_gate = b.bind_linear(p + "mlp.gate_proj.weight", f, d);
    L.w_up = b.bind_linear(p + "mlp.up_proj.weight", f, d);
    L.w_down = b.bind_linear(p + "mlp.down_proj.weight", d, f);
    L.b_gate = b.bind_if(c.mlp_bias, p + "mlp.gate_proj.bias", f);
    L.b_up = b.bind_if(c.mlp_bias, p + "mlp.up_proj.bias", f);
    L.b_down = b.bind_if(c.mlp_bias, p + "mlp.down_proj.bias", d);
    w.layers.push_back(L);
  }
  w.final_norm = b.bind_norm(c, "model.norm.weight", d);
  if (c.tie_word_embeddings) {
    w.lm_head = w.embed;
  } else {
    SPECD_CHECK(store.find("lm_head.weight") != nullptr,
                "checkpoint has no tensor 'lm_head.weight' and tie_word_embeddings is false");
    w.lm_head = b.bind_linear("lm_head.weight", c.vocab_size, d);
  }
  if (quant.mode != WeightQuant::kNone) {
    SPECD_LOG_INFO("quantised {} weight tensors to {}{}", w.quantized_tensors,
                   weight_quant_name(quant.mode),
                   w.unquantized_linear == 0
                       ? std::string()
                       : fmt::format("; {} linear weights kept as stored (input dimension not a "
                                     "multiple of 128)",
                                     w.unquantized_linear));
  }
  return w;
}

uint64_t quantized_weight_bytes(const ModelConfig& c, const TensorStore& store, WeightQuant mode) {
  uint64_t bytes = store.total_bytes();
  if (mode == WeightQuant::kNone) return bytes;
  for (const LinearWeight& lw : linear_weights(c)) {
    const TensorInfo* info = lookup(store, lw.name, lw.rows, lw.cols);
    check_quantizable(mode, lw.name, info->dtype);
    if (!can_quantize(info->dtype, lw.cols)) continue;
    bytes -= info->end - info->begin;
    bytes += lw.rows * dtype_row_bytes(weight_quant_dtype(mode, info->dtype), lw.cols);
  }
  return bytes;
}

}  // namespace specd
