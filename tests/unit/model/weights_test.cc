// Loading a checkpoint that disagrees with its config fails with a message naming the tensor.
#include "model/weights.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "model/transformer.h"

namespace specd {
namespace {

namespace fs = std::filesystem;
const std::string kFixture = std::string(SPECD_SOURCE_DIR) + "/tests/data/golden/qwen3_f32";

// A copy of the fixture whose config.json has `key` set to `value`.
std::string copy_with_config(const std::string& name, const std::string& key, const Json& value) {
  std::string dir = testing::TempDir() + "/weights_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* file : {"model.safetensors", "generation_config.json"}) {
    fs::copy_file(kFixture + "/" + file, dir + "/" + file);
  }
  Json config = read_json_file(kFixture + "/config.json");
  config[key] = value;
  std::ofstream(dir + "/config.json") << config.dump();
  return dir;
}

std::string load_error(const std::string& dir) {
  auto backend = make_backend(Device{}, 1);
  ModelConfig config = load_model_config(dir);
  TensorStore store = TensorStore::open_dir(dir);
  try {
    bind_weights(config, store, *backend);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Weights, BindsTheFixture) {
  auto backend = make_backend(Device{}, 1);
  ModelConfig config = load_model_config(kFixture);
  TensorStore store = TensorStore::open_dir(kFixture);
  ModelWeights w = bind_weights(config, store, *backend);
  EXPECT_EQ(w.layers.size(), 2u);
  EXPECT_EQ(w.lm_head.data, w.embed.data);  // tied
  EXPECT_EQ(w.bytes, store.total_bytes());
}

TEST(Weights, ConfigMismatchNamesTheTensor) {
  EXPECT_NE(load_error(copy_with_config("ffn", "intermediate_size", 100))
                .find("'model.layers.0.mlp.gate_proj.weight' has shape [96, 64] but the config "
                      "implies [100, 64]"),
            std::string::npos);
  EXPECT_NE(load_error(copy_with_config("layers", "num_hidden_layers", 3))
                .find("no tensor 'model.layers.2."),
            std::string::npos);
  EXPECT_NE(load_error(copy_with_config("untied", "tie_word_embeddings", false))
                .find("lm_head.weight"),
            std::string::npos);
  EXPECT_NE(load_error(copy_with_config("vocab", "vocab_size", 300)).find("embed_tokens"),
            std::string::npos);
}

// --quantize: which tensors are converted, and the loaded size `specd info` predicts.
TEST(Weights, QuantizeConvertsLinearWeightsAndTheTiedHead) {
  const std::string dir = std::string(SPECD_SOURCE_DIR) + "/models/pycoder-target";
  auto backend = make_backend(Device{}, 1);
  ModelConfig config = load_model_config(dir);
  TensorStore store = TensorStore::open_dir(dir);
  for (WeightQuant mode : {WeightQuant::kInt8, WeightQuant::kInt4}) {
    WeightQuantOptions quant;
    quant.mode = mode;
    ModelWeights w = bind_weights(config, store, *backend, quant);
    const DType dtype = weight_quant_dtype(mode, DType::kBF16);
    EXPECT_EQ(w.quantized_tensors, 7 * config.n_layers + 1);
    EXPECT_EQ(w.unquantized_linear, 0);
    EXPECT_EQ(w.layers[3].wq.dtype, dtype);
    EXPECT_EQ(w.layers[3].w_down.dtype, dtype);
    EXPECT_EQ(w.embed.dtype, dtype);  // tied: the LM head's table
    EXPECT_EQ(w.lm_head.data, w.embed.data);
    EXPECT_EQ(w.final_norm.dtype, DType::kBF16);
    EXPECT_EQ(w.layers[0].input_norm.dtype, DType::kBF16);
    EXPECT_EQ(w.bytes, quantized_weight_bytes(config, store, mode));
    EXPECT_LT(w.bytes, store.total_bytes() * (mode == WeightQuant::kInt8 ? 0.53 : 0.28));
  }
}

TEST(Weights, QuantizeKeepsWeightsWhoseInputIsNotWholeBlocks) {
  auto backend = make_backend(Device{}, 1);
  ModelConfig config = load_model_config(kFixture);  // hidden 64, ffn 96, 4 x 32 query dims
  TensorStore store = TensorStore::open_dir(kFixture);
  WeightQuantOptions quant;
  quant.mode = WeightQuant::kInt4;
  ModelWeights w = bind_weights(config, store, *backend, quant);
  // Only o_proj (input 4 x 32 = 128) is whole blocks.
  EXPECT_EQ(w.quantized_tensors, config.n_layers);
  EXPECT_EQ(w.unquantized_linear, 6 * config.n_layers + 1);
  for (const LayerWeights& l : w.layers) {
    EXPECT_EQ(l.wo.dtype, DType::kInt4);
    EXPECT_EQ(l.wq.dtype, DType::kF32);
    EXPECT_EQ(l.w_down.dtype, DType::kF32);
  }
  EXPECT_EQ(w.embed.dtype, DType::kF32);
  const uint64_t o_proj = 64 * 128 * 4, o_proj_int4 = 64 * 68;
  EXPECT_EQ(w.bytes, store.total_bytes() - config.n_layers * (o_proj - o_proj_int4));
  EXPECT_EQ(quantized_weight_bytes(config, store, WeightQuant::kInt4), w.bytes);
}

TEST(Weights, NonUtf8ConfigIsAClearError) {
  std::string dir = copy_with_config("utf8", "x", 1);
  std::ofstream(dir + "/config.json") << "{\"architectures\": [\"\xc3\x28\"]}";
  try {
    load_model_config(dir);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json: invalid JSON"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace specd
