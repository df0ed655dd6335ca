// config.json parsing: defaults, every rope scaling, and clear errors for bad configs.
#include "model/model_config.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "model/rope.h"

namespace specd {
namespace {

Json base_config() {
  return Json::parse(R"({"architectures":["LlamaForCausalLM"],"vocab_size":100,"hidden_size":64,
    "intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4,
    "num_key_value_heads":2,"rms_norm_eps":1e-5,"max_position_embeddings":256})");
}

void expect_error(const Json& json, const std::string& fragment) {
  try {
    parse_model_config(json, "config.json");
    FAIL() << "expected an error containing '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, DefaultsFollowTransformers) {
  ModelConfig c = parse_model_config(base_config(), "config.json");
  EXPECT_EQ(c.arch, Architecture::kLlama);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  Json qwen2 = base_config();
  qwen2["architectures"] = {"Qwen2ForCausalLM"};
  EXPECT_TRUE(parse_model_config(qwen2, "c").attention_bias);
  EXPECT_FALSE(parse_model_config(qwen2, "c").attention_out_bias);
  Json qwen3 = base_config();
  qwen3["architectures"] = {"Qwen3ForCausalLM"};
  qwen3["head_dim"] = 32;
  ModelConfig q3 = parse_model_config(qwen3, "c");
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_EQ(q3.q_dim(), 128);
}

TEST(ModelConfig, RejectsBadConfigs) {
  Json j = base_config();
  j["architectures"] = {"GPT2LMHeadModel"};
  expect_error(j, "unsupported architecture 'GPT2LMHeadModel'");
  j = base_config();
  j.erase("hidden_size");
  expect_error(j, "missing required key 'hidden_size'");
  j = base_config();
  j["num_key_value_heads"] = 3;
  expect_error(j, "not a multiple");
  j = base_config();
  j["vocab_size"] = "many";
  expect_error(j, "'vocab_size' must be a non-negative integer");
  j = base_config();
  j["head_dim"] = 15;
  expect_error(j, "head_dim must be even");
  j = base_config();
  j["hidden_act"] = "gelu";
  expect_error(j, "unsupported hidden_act");
  j = base_config();
  j["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 4.0}};
  expect_error(j, "unsupported rope scaling type 'longrope'");
  j = base_config();
  j["rope_scaling"] = {{"rope_type", "linear"}};
  expect_error(j, "'factor' must be a positive number");
  expect_error(Json::array(), "not a JSON object");
}

TEST(Rope, DefaultFrequenciesFollowTheFormula) {
  ModelConfig c = parse_model_config(base_config(), "c");
  RopeFrequencies f = compute_rope_frequencies(c);
  ASSERT_EQ(f.inv_freq.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(f.inv_freq[i], std::pow(10000.0, -2.0 * i / 16), 1e-7);
  EXPECT_EQ(f.attention_factor, 1.0f);
}

TEST(Rope, LinearDividesAndYarnScalesAttention) {
  Json j = base_config();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  RopeFrequencies linear = compute_rope_frequencies(parse_model_config(j, "c"));
  RopeFrequencies plain = compute_rope_frequencies(parse_model_config(base_config(), "c"));
  for (size_t i = 0; i < plain.inv_freq.size(); ++i) {
    EXPECT_FLOAT_EQ(linear.inv_freq[i], plain.inv_freq[i] / 4);
  }
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 64}};
  RopeFrequencies yarn = compute_rope_frequencies(parse_model_config(j, "c"));
  EXPECT_NEAR(yarn.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-6);
  EXPECT_FLOAT_EQ(yarn.inv_freq[0], plain.inv_freq[0]);      // high frequencies extrapolate
  EXPECT_FLOAT_EQ(yarn.inv_freq[7], plain.inv_freq[7] / 4);  // low frequencies interpolate
}

}  // namespace
}  // namespace specd
