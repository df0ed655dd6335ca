// .npy round trip and rejection of unsupported files.
#include "core/npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "core/error.h"

namespace specd {
namespace {

TEST(Npy, RoundTrip) {
  std::string path = testing::TempDir() + "/a.npy";
  std::vector<float> data = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -8.5f};
  write_npy_f32(path, data.data(), {2, 3});
  NpyArray back = read_npy_f32(path);
  EXPECT_EQ(back.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(back.data, data);
  write_npy_f32(path, data.data(), {6});
  EXPECT_EQ(read_npy_f32(path).shape, (std::vector<int64_t>{6}));
}

TEST(Npy, RejectsOtherFiles) {
  std::string path = testing::TempDir() + "/bad.npy";
  std::ofstream(path) << "not numpy";
  EXPECT_THROW(read_npy_f32(path), Error);
  EXPECT_THROW(read_npy_f32(testing::TempDir() + "/missing.npy"), Error);
}

}  // namespace
}  // namespace specd
