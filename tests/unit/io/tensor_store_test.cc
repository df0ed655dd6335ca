// Opening model directories: single file, sharded index, the ways they can disagree, and dropping
// mapped pages.
#include "io/tensor_store.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace specd {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  std::string dir = testing::TempDir() + "/store_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write_shard(const std::string& path, const std::vector<std::string>& names) {
  static const float data[4] = {1, 2, 3, 4};
  std::vector<TensorToWrite> tensors;
  for (const auto& n : names) tensors.push_back({n, DType::kF32, {4}, data});
  write_safetensors(path, tensors);
}

TEST(TensorStore, OpensShardedCheckpoint) {
  std::string dir = fresh_dir("sharded");
  write_shard(dir + "/model-00001-of-00002.safetensors", {"a", "b"});
  write_shard(dir + "/model-00002-of-00002.safetensors", {"c"});
  std::ofstream(dir + "/model.safetensors.index.json")
      << R"({"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors",)"
         R"("b":"model-00001-of-00002.safetensors","c":"model-00002-of-00002.safetensors"}})";
  TensorStore store = TensorStore::open_dir(dir);
  EXPECT_EQ(store.files().size(), 2u);
  ASSERT_NE(store.find("c"), nullptr);
  EXPECT_EQ(reinterpret_cast<const float*>(store.find("c")->data)[3], 4.0f);
  EXPECT_EQ(store.find("zzz"), nullptr);
  EXPECT_EQ(store.total_bytes(), 48u);
}

// Dropping the mapped pages of copied tensors leaves every byte readable (from the file again).
TEST(TensorStore, ReleasedPagesReadBackTheFile) {
  std::string dir = fresh_dir("released");
  std::vector<float> big(5000), small = {5, 6, 7};
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.5f - 7.0f;
  write_safetensors(dir + "/model.safetensors", {{"big", DType::kF32, {5000}, big.data()},
                                                 {"small", DType::kF32, {3}, small.data()}});
  TensorStore store = TensorStore::open_dir(dir);
  const TensorInfo* info = store.find("big");
  ASSERT_NE(info, nullptr);
  store.release_pages(*info);
  EXPECT_EQ(std::memcmp(info->data, big.data(), big.size() * sizeof(float)), 0);
  store.release_pages();
  EXPECT_EQ(std::memcmp(info->data, big.data(), big.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(store.find("small")->data, small.data(), small.size() * sizeof(float)), 0);
}

TEST(TensorStore, ErrorsNameTheProblem) {
  std::string empty = fresh_dir("empty");
  EXPECT_THROW(TensorStore::open_dir(empty), Error);

  std::string dir = fresh_dir("missing_shard");
  write_shard(dir + "/one.safetensors", {"a"});
  std::ofstream(dir + "/model.safetensors.index.json")
      << R"({"weight_map":{"a":"one.safetensors","b":"two.safetensors"}})";
  EXPECT_THROW(TensorStore::open_dir(dir), Error);

  std::string lying = fresh_dir("lying_index");
  write_shard(lying + "/one.safetensors", {"a"});
  std::ofstream(lying + "/model.safetensors.index.json")
      << R"({"weight_map":{"a":"one.safetensors","b":"one.safetensors"}})";
  try {
    TensorStore::open_dir(lying);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lacks it"), std::string::npos) << e.what();
  }

  std::string escape = fresh_dir("escape");
  std::ofstream(escape + "/model.safetensors.index.json")
      << R"({"weight_map":{"a":"../outside.safetensors"}})";
  EXPECT_THROW(TensorStore::open_dir(escape), Error);

  std::string bad_json = fresh_dir("bad_json");
  std::ofstream(bad_json + "/model.safetensors.index.json") << "{\"weight_map\": ";
  EXPECT_THROW(TensorStore::open_dir(bad_json), Error);

  std::string empty_file = fresh_dir("empty_file");
  std::ofstream(empty_file + "/model.safetensors");
  EXPECT_THROW(TensorStore::open_dir(empty_file), Error);
}

}  // namespace
}  // namespace specd
