// Gemma3ForCausalLM config.json parsing: layer types, the two RoPE forms, defaults that follow
// transformers' Gemma3TextConfig, and clear errors for what specd does not implement.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "model/model_config.h"

namespace specd {
namespace {

Json gemma_config() {
  return Json::parse(R"({"architectures":["Gemma3ForCausalLM"],"vocab_size":100,
    "hidden_size":64,"intermediate_size":128,"num_hidden_layers":8,"num_attention_heads":4,
    "num_key_value_heads":1,"head_dim":16,"hidden_activation":"gelu_pytorch_tanh",
    "query_pre_attn_scalar":32,"sliding_window":512,"rope_theta":1000000.0,
    "rope_local_base_freq":10000.0,"rope_scaling":null,"final_logit_softcapping":null,
    "attn_logit_softcapping":null})");
}

void expect_error(const Json& json, const std::string& fragment) {
  try {
    parse_model_config(json, "config.json");
    FAIL() << "expected an error containing '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Gemma3Config, ClassicForm) {
  ModelConfig c = parse_model_config(gemma_config(), "config.json");
  EXPECT_EQ(c.arch, Architecture::kGemma3);
  EXPECT_EQ(c.hidden_act, Activation::kGeluTanh);
  EXPECT_TRUE(c.gemma_norms && c.qk_norm && c.tie_word_embeddings);
  EXPECT_FALSE(c.norms_store_plus_one);
  // No layer_types: sliding_window_pattern 6 (layer 5 global).
  for (int l = 0; l < 8; ++l) EXPECT_EQ(c.is_sliding(l), l != 5) << l;
  EXPECT_EQ(c.sliding_window, 512);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_local_theta, 1e4);
  EXPECT_EQ(c.rope.type, RopeType::kDefault);
  EXPECT_EQ(c.attention_scale, std::pow(32.0, -0.5));
  EXPECT_EQ(c.embed_scale, 8.0f);
  EXPECT_EQ(c.max_position_embeddings, 131072);
}

TEST(Gemma3Config, LayerTypesAndRopeParameters) {
  Json j = gemma_config();
  j.erase("rope_theta");
  j.erase("rope_local_base_freq");
  j.erase("rope_scaling");
  j["num_hidden_layers"] = 3;
  j["layer_types"] = {"full_attention", "sliding_attention", "full_attention"};
  j["rope_parameters"] = Json::parse(
      R"({"full_attention":{"rope_type":"linear","factor":8.0,"rope_theta":500000.0},
          "sliding_attention":{"rope_type":"default","rope_theta":20000.0}})");
  ModelConfig c = parse_model_config(j, "config.json");
  EXPECT_FALSE(c.is_sliding(0));
  EXPECT_TRUE(c.is_sliding(1));
  EXPECT_FALSE(c.is_sliding(2));
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_local_theta, 20000.0);
  EXPECT_EQ(c.rope.type, RopeType::kLinear);
  EXPECT_EQ(c.rope.factor, 8.0);
  // Classic rope_scaling applies to global layers.
  j = gemma_config();
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  EXPECT_EQ(parse_model_config(j, "c").rope.factor, 2.0);
  // Defaults of Gemma3TextConfig.
  j = gemma_config();
  for (const char* key : {"head_dim", "query_pre_attn_scalar", "sliding_window", "rope_theta",
                          "rope_local_base_freq"}) {
    j.erase(key);
  }
  c = parse_model_config(j, "c");
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.attention_scale, 1.0 / 16);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_local_theta, 1e4);
}

TEST(Gemma3Config, RejectsWhatIsNotImplemented) {
  Json j = gemma_config();
  j["final_logit_softcapping"] = 30.0;
  expect_error(j, "'final_logit_softcapping' is set");
  j = gemma_config();
  j["attn_logit_softcapping"] = 50.0;
  expect_error(j, "'attn_logit_softcapping' is set");
  j = gemma_config();
  j["hidden_activation"] = "silu";
  expect_error(j, "unsupported hidden_activation 'silu'");
  j = gemma_config();
  j["use_bidirectional_attention"] = true;
  expect_error(j, "use_bidirectional_attention");
  j = gemma_config();
  j["layer_types"] = {"sliding_attention"};
  expect_error(j, "one type per layer");
  j = gemma_config();
  j["num_hidden_layers"] = 1;
  j["layer_types"] = {"chunked_attention"};
  expect_error(j, "layer_types[0]");
  j = gemma_config();
  j["sliding_window"] = 0;
  expect_error(j, "sliding_window must be positive");
  j = gemma_config();
  j["query_pre_attn_scalar"] = 0;
  expect_error(j, "query_pre_attn_scalar must be positive");
  j = gemma_config();
  j["rope_parameters"] = {{"sliding_attention", {{"rope_type", "linear"}, {"factor", 2.0}}}};
  expect_error(j, "rope scaling on sliding-window layers");
}

}  // namespace
}  // namespace specd
