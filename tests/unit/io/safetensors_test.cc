// safetensors header validation: every malformed case gives a specd::Error naming the problem.
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"

namespace specd {
namespace {

// A file image: 8-byte length, header text, then `data_bytes` bytes of data.
std::vector<uint8_t> image(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> bytes(8 + header.size() + data_bytes, 0x5a);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(n >> (8 * i));
  std::copy(header.begin(), header.end(), bytes.begin() + 8);
  return bytes;
}

SafetensorsHeader parse(const std::vector<uint8_t>& bytes) {
  return parse_safetensors_header(bytes.data(), bytes.size(), bytes.size(), "test.safetensors");
}

void expect_error(const std::vector<uint8_t>& bytes, const std::string& fragment) {
  try {
    parse(bytes);
    FAIL() << "no error; expected one containing '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Safetensors, ParsesValidHeader) {
  auto bytes = image(
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},)"
      R"("b":{"dtype":"F32","shape":[],"data_offsets":[12,16]}})",
      16);
  SafetensorsHeader h = parse(bytes);
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors.at("a").dtype, DType::kBF16);
  EXPECT_EQ(h.tensors.at("a").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(h.tensors.at("b").numel(), 1);
  EXPECT_EQ(h.metadata.at("format"), "pt");
}

TEST(Safetensors, RejectsTruncatedFiles) {
  expect_error(std::vector<uint8_t>{1, 2, 3}, "too small");
  auto bytes = image(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 16);
  bytes.resize(bytes.size() - 4);
  expect_error(bytes, "run past the end");
  auto header_cut = image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
  header_cut.resize(20);
  expect_error(header_cut, "header length");
}

TEST(Safetensors, RejectsHugeHeaderLength) {
  std::vector<uint8_t> bytes(16, 0);
  bytes[7] = 0x7f;
  expect_error(bytes, "100 MiB");
}

TEST(Safetensors, RejectsOffsetsPastEnd) {
  expect_error(image(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
               "run past the end");
}

TEST(Safetensors, RejectsOverlaps) {
  expect_error(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                     12),
               "overlap");
}

TEST(Safetensors, RejectsUnknownDtypeAndBadShapes) {
  expect_error(image(R"({"a":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", 2),
               "unsupported dtype 'F8_E4M3'");
  expect_error(image(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
               "8 bytes of data");
  expect_error(image(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
               "non-negative");
  expect_error(image(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],)"
                     R"("data_offsets":[0,4]}})",
                     4),
               "overflows");
  expect_error(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8), "reversed");
  expect_error(image(R"({"a":{"dtype":"F32","shape":[1]}})", 4), "data_offsets");
  expect_error(image(R"({"a":[1,2]})", 4), "not an object");
}

TEST(Safetensors, RejectsInvalidJsonAndUtf8) {
  expect_error(image(R"({"a":)", 0), "invalid JSON");
  expect_error(image("{\"\xff\xfe\":{}}", 0), "invalid JSON");
  expect_error(image("[1,2,3]", 0), "not a JSON object");
}

TEST(Safetensors, WriteThenReadRoundTrip) {
  std::string path = testing::TempDir() + "/round.safetensors";
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<uint16_t> b = {0x3f80, 0x4000};
  write_safetensors(path, {{"a", DType::kF32, {2, 3}, a.data()}, {"b", DType::kBF16, {2}, b.data()}});
  SafetensorsFile file(path);
  const TensorInfo& ta = file.tensors().at("a");
  EXPECT_EQ(ta.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(reinterpret_cast<const float*>(ta.data)[5], 6.0f);
  EXPECT_EQ(reinterpret_cast<const uint16_t*>(file.tensors().at("b").data)[1], 0x4000);
}

}  // namespace
}  // namespace specd
