// The GGUF reader: a file written by gguf-py (every metadata type, every block format) and
// hostile files built byte by byte, each of which must fail with specd::Error.
#include "io/gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"

namespace specd {
namespace {

std::string fixture() { return std::string(SPECD_SOURCE_DIR) + "/tests/data/gguf/formats.gguf"; }

TEST(Gguf, ReadsGgufPyFile) {
  GgufFile file(fixture());
  const GgufHeader& h = file.header();
  EXPECT_EQ(h.version, 3u);
  EXPECT_EQ(h.alignment, 32u);
  EXPECT_EQ(h.find("general.architecture")->as_string("a"), "test");
  EXPECT_EQ(h.find("test.u8")->as_int("k"), 200);
  EXPECT_EQ(h.find("test.i8")->as_int("k"), -100);
  EXPECT_EQ(h.find("test.u16")->as_int("k"), 60000);
  EXPECT_EQ(h.find("test.i16")->as_int("k"), -30000);
  EXPECT_EQ(h.find("test.u32")->as_int("k"), 4000000000);
  EXPECT_EQ(h.find("test.i32")->as_int("k"), -2000000000);
  EXPECT_EQ(h.find("test.f32")->as_double("k"), 0.25);
  EXPECT_TRUE(h.find("test.bool")->as_bool("k"));
  EXPECT_EQ(h.find("test.string")->as_string("k"), "h\xc3\xa9llo");
  EXPECT_EQ(h.find("test.u64")->u, 10000000000000000000ull);
  EXPECT_THROW(h.find("test.u64")->as_int("test.u64"), Error);  // does not fit in int64
  EXPECT_EQ(h.find("test.i64")->as_int("k"), -9000000000000000000ll);
  EXPECT_EQ(h.find("test.f64")->as_double("k"), -1.5e300);
  EXPECT_EQ(h.find("test.strings")->as_strings("k"), (std::vector<std::string>{"a", "", "xyz"}));
  EXPECT_EQ(h.find("test.ints")->as_ints("k"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(h.find("test.floats")->as_floats("k"), (std::vector<float>{0.5f, -1.0f}));
  const GgufValue* nested = h.find("test.nested");
  ASSERT_EQ(nested->size(), 2u);
  EXPECT_EQ(nested->arrays[0].as_ints("k"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(nested->arrays[1].as_ints("k"), (std::vector<int64_t>{3}));
  EXPECT_THROW(h.find("test.string")->as_int("test.string"), Error);
  EXPECT_THROW(h.find("test.ints")->as_strings("test.ints"), Error);
  EXPECT_EQ(h.tensors.size(), 11u);
  const GgufTensorInfo* q4k = h.find_tensor("q4_k");
  ASSERT_NE(q4k, nullptr);
  EXPECT_EQ(q4k->dims, (std::vector<uint64_t>{512, 3}));
  EXPECT_EQ(q4k->bytes, 3u * 2 * 144);
  EXPECT_EQ((q4k->data - file.mapping().data()) % 32, 0);
  EXPECT_TRUE(is_gguf_file(fixture()));
}

// Builds GGUF bytes field by field.
class Builder {
 public:
  Builder& u32(uint32_t v) { return raw(&v, 4); }
  Builder& u64(uint64_t v) { return raw(&v, 8); }
  Builder& str(const std::string& s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  Builder& raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
    return *this;
  }
  Builder& header(uint32_t version, uint64_t tensors, uint64_t kvs) {
    raw("GGUF", 4);
    return u32(version).u64(tensors).u64(kvs);
  }
  Builder& pad(size_t align) {
    while (bytes.size() % align != 0) bytes.push_back(0);
    return *this;
  }
  std::vector<uint8_t> bytes;
};

void expect_error(const std::vector<uint8_t>& bytes, const std::string& needle) {
  try {
    parse_gguf(bytes.data(), bytes.size(), "bad.gguf");
    ADD_FAILURE() << "accepted; expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// One f32 tensor "t" of `dims`, at `offset`, followed by `data_bytes` bytes of data.
std::vector<uint8_t> one_tensor(std::vector<uint64_t> dims, uint32_t type, uint64_t offset,
                                size_t data_bytes) {
  Builder b;
  b.header(3, 1, 0).str("t").u32(static_cast<uint32_t>(dims.size()));
  for (uint64_t d : dims) b.u64(d);
  b.u32(type).u64(offset).pad(32);
  b.bytes.resize(b.bytes.size() + data_bytes);
  return b.bytes;
}

TEST(Gguf, MinimalFilesParse) {
  Builder b;
  b.header(2, 0, 1).str("k").u32(8).str("v");
  GgufHeader h = parse_gguf(b.bytes.data(), b.bytes.size(), "ok");
  EXPECT_EQ(h.version, 2u);
  EXPECT_EQ(h.find("k")->as_string("k"), "v");
  auto t = one_tensor({4, 2}, 0, 0, 32);
  h = parse_gguf(t.data(), t.size(), "ok");
  ASSERT_EQ(h.tensors.size(), 1u);
  EXPECT_EQ(h.tensors[0].bytes, 32u);
}

TEST(Gguf, RejectsHostileHeaders) {
  expect_error({'G', 'G'}, "truncated");
  expect_error({'G', 'G', 'U', 'X', 3, 0, 0, 0}, "bad magic");
  expect_error(Builder().header(1, 0, 0).bytes, "version 1");
  expect_error(Builder().header(4, 0, 0).bytes, "version 4");
  expect_error(Builder().header(3, 0, 1ull << 60).bytes, "metadata count");
  expect_error(Builder().header(3, 1ull << 40, 0).bytes, "tensor count");
  expect_error(Builder().header(3, 0, 1).str("k").u32(13).u64(0).bytes, "unknown value type 13");
  expect_error(Builder().header(3, 0, 1).str("k").u32(8).u64(1ull << 62).bytes, "truncated");
  expect_error(Builder().header(3, 0, 1).u64(~0ull).u64(0).u64(0).bytes, "truncated");
  expect_error(Builder().header(3, 0, 1).str("").u32(4).u32(0).bytes, "empty key");
  expect_error(Builder().header(3, 0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(2).bytes,
               "appears twice");
  std::vector<uint8_t> bad_bool = Builder().header(3, 0, 1).str("k").u32(7).bytes;
  bad_bool.push_back(2);
  expect_error(bad_bool, "bool");
}

TEST(Gguf, RejectsHostileArrays) {
  // Array count larger than the bytes left, for scalars and strings.
  expect_error(Builder().header(3, 0, 1).str("k").u32(9).u32(4).u64(1ull << 61).bytes,
               "more than the");
  expect_error(Builder().header(3, 0, 1).str("k").u32(9).u32(8).u64(1000).u64(0).bytes,
               "more than the");
  expect_error(Builder().header(3, 0, 1).str("k").u32(9).u32(77).u64(0).bytes, "unknown value");
  // Arrays nested deeper than the limit.
  Builder deep;
  deep.header(3, 0, 1).str("k").u32(9);
  for (int i = 0; i < 8; ++i) deep.u32(9).u64(1);
  deep.u32(4).u64(0);
  expect_error(deep.bytes, "nests arrays");
}

TEST(Gguf, RejectsHostileTensors) {
  expect_error(one_tensor({4, 2}, 0, 0, 31), "past the end");
  expect_error(one_tensor({4, 2}, 0, 1ull << 63, 32), "past the end");
  expect_error(one_tensor({4, 2}, 0, 16, 64), "alignment");
  expect_error(one_tensor({4, 0}, 0, 0, 32), "dimension");
  expect_error(one_tensor({1ull << 40, 1ull << 40}, 0, 0, 32), "dimension");
  expect_error(one_tensor({}, 0, 0, 32), "0 dimensions");
  expect_error(one_tensor({1, 1, 1, 1, 1}, 0, 0, 32), "5 dimensions");
  expect_error(one_tensor({4, 2}, 5, 0, 32), "unknown ggml type 5");
  expect_error(one_tensor({48, 2}, 2, 0, 256), "block size");
  // Two tensors sharing bytes; a duplicated name.
  Builder b;
  b.header(3, 2, 0).str("a").u32(1).u64(8).u32(0).u64(0).str("b").u32(1).u64(8).u32(0).u64(0);
  b.pad(32).bytes.resize(b.bytes.size() + 64);
  expect_error(b.bytes, "overlap");
  Builder c;
  c.header(3, 2, 0).str("a").u32(1).u64(8).u32(0).u64(0).str("a").u32(1).u64(8).u32(0).u64(32);
  c.pad(32).bytes.resize(c.bytes.size() + 64);
  expect_error(c.bytes, "appears twice");
  // Alignment must be a u32 power of two.
  Builder d;
  d.header(3, 0, 1).str("general.alignment").u32(4).u32(24);
  expect_error(d.bytes, "power of two");
  Builder e;
  e.header(3, 0, 1).str("general.alignment").u32(10).u64(32);
  expect_error(e.bytes, "must be a u32");
}

TEST(Gguf, EveryTruncationFailsCleanly) {
  MappedFile mapping(fixture());
  const std::vector<uint8_t> whole(mapping.data(), mapping.data() + mapping.size());
  GgufHeader h = parse_gguf(whole.data(), whole.size(), "whole");
  uint64_t end = 0;  // the last byte any tensor needs (gguf-py pads the file beyond it)
  for (const GgufTensorInfo& t : h.tensors) end = std::max(end, h.data_offset + t.offset + t.bytes);
  ASSERT_GT(end, 1000u);
  for (size_t n = 0; n < end; n += 7) {
    std::vector<uint8_t> cut(whole.begin(), whole.begin() + static_cast<long>(n));
    EXPECT_THROW(parse_gguf(cut.data(), cut.size(), "cut.gguf"), Error) << n;
  }
}

}  // namespace
}  // namespace specd
