// Device names, make_backend() and the CPU backend's memory functions.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"

namespace specd {
namespace {

TEST(Device, ParsesAndPrintsNames) {
  EXPECT_EQ(parse_device("cpu"), (Device{DeviceKind::kCpu, 0}));
  EXPECT_EQ(parse_device("cuda"), (Device{DeviceKind::kCuda, 0}));
  EXPECT_EQ(parse_device("cuda:3"), (Device{DeviceKind::kCuda, 3}));
  EXPECT_EQ(device_name(Device{DeviceKind::kCpu, 0}), "cpu");
  EXPECT_EQ(device_name(Device{DeviceKind::kCuda, 1}), "cuda:1");
  EXPECT_EQ(parse_device(device_name(Device{DeviceKind::kCuda, 12})),
            (Device{DeviceKind::kCuda, 12}));
}

TEST(Device, RejectsBadNames) {
  for (const char* bad : {"gpu", "", "CPU", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "cuda:+1",
                          "cuda:99999999999", "cuda 0", "cpu:0"}) {
    EXPECT_THROW(parse_device(bad), Error) << "'" << bad << "'";
  }
  try {
    parse_device("gpu");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpu"), std::string::npos) << e.what();
  }
}

TEST(Backend, MakesTheCpuBackend) {
  auto backend = make_backend(Device{DeviceKind::kCpu, 0}, 2);
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->device(), (Device{DeviceKind::kCpu, 0}));
  std::string description = backend->describe();
  EXPECT_EQ(description.rfind("cpu (", 0), 0u) << description;
  EXPECT_NE(description.find("2 threads"), std::string::npos) << description;
}

TEST(Backend, CudaNeedsABuildAndADevice) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_THROW(make_backend(Device{DeviceKind::kCuda, 0}, 1), Error);
}

TEST(Backend, AllocatesAlignedHostMemory) {
  auto backend = make_backend(Device{DeviceKind::kCpu, 0}, 1);
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{8} << 20}) {
    DeviceBuffer buffer = backend->alloc(bytes);
    ASSERT_NE(buffer.data(), nullptr);
    EXPECT_EQ(buffer.bytes(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.data()) % 64, 0u);
    std::vector<uint8_t> src(bytes, 0x5a), back(bytes, 0);
    backend->copy_to_device(buffer.data(), src.data(), bytes);
    backend->copy_to_host(back.data(), buffer.data(), bytes);
    EXPECT_EQ(src, back);
  }
}

// Placed weights are aligned copies (the source may be freed); with map_weights the kernels read
// the source itself.
TEST(Backend, CpuPlacesWeightsAsAlignedCopies) {
  auto backend = make_backend(Device{DeviceKind::kCpu, 0}, 1);
  std::vector<uint8_t> file(64 + 3 * 5 * 2 + 64 * 1000);
  for (size_t i = 0; i < file.size(); ++i) file[i] = static_cast<uint8_t>(i * 37);
  std::vector<Tensor> placed;
  for (size_t offset : {size_t{6}, size_t{56}, size_t{64}}) {  // as in a safetensors file
    Tensor t = Tensor::make(file.data() + offset, DType::kBF16, 3, 5);
    placed.push_back(backend->place_weight(t, nullptr));
    const Tensor& p = placed.back();
    EXPECT_NE(p.data, t.data);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.data) % 64, 0u);
    EXPECT_EQ(p.rows, 3);
    EXPECT_EQ(p.cols, 5);
    EXPECT_EQ(p.dtype, DType::kBF16);
    EXPECT_EQ(std::memcmp(p.data, t.data, t.bytes()), 0);
  }
  // Larger than a block: a block of its own, the earlier copies intact.
  Tensor big = Tensor::make(file.data(), DType::kF32, 1, (16 << 20) + 16);
  std::vector<uint8_t> big_source(big.bytes(), 0x3c);
  big.data = big_source.data();
  Tensor big_placed = backend->place_weight(big, nullptr);
  EXPECT_EQ(std::memcmp(big_placed.data, big_source.data(), big.bytes()), 0);
  EXPECT_EQ(std::memcmp(placed[0].data, file.data() + 6, placed[0].bytes()), 0);

  auto mapped = make_backend(Device{DeviceKind::kCpu, 0}, 1, /*map_weights=*/true);
  Tensor t = Tensor::make(file.data() + 6, DType::kBF16, 3, 5);
  EXPECT_EQ(mapped->place_weight(t, nullptr).data, t.data);
}

}  // namespace
}  // namespace specd
