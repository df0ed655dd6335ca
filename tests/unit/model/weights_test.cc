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
