// GGUF files (llama.cpp's format, versions 2 and 3): validated metadata, tensor infos, and
// tensors as views into the memory mapping.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/gguf_types.h"
#include "io/mapped_file.h"

namespace specd {

// One metadata value. Scalars use the field of their kind (integers in `u`/`i`, floats in
// `f`). Arrays keep their elements compactly: fixed-size scalars as the raw little-endian bytes
// of the file (`raw`), strings in `strings`, nested arrays in `arrays`.
struct GgufValue {
  GgufType type = GgufType::kU8;
  GgufType array_type = GgufType::kU8;  // element type when type == kArray
  uint64_t u = 0;                      // unsigned integers and bool
  int64_t i = 0;                       // signed integers
  double f = 0;                        // f32 / f64
  std::string str;
  std::vector<uint8_t> raw;            // array of scalars: size() * scalar size bytes
  std::vector<std::string> strings;    // array of strings
  std::vector<GgufValue> arrays;       // array of arrays

  bool is_integer() const;
  size_t size() const;  // elements of an array (0 for scalars)
  // Element j of an array of scalars, as a scalar value.
  GgufValue element(size_t j) const;
  // Converting accessors; throw specd::Error naming `key` if the value has another type or
  // does not fit.
  int64_t as_int(const std::string& key) const;
  double as_double(const std::string& key) const;
  bool as_bool(const std::string& key) const;
  const std::string& as_string(const std::string& key) const;
  const std::vector<std::string>& as_strings(const std::string& key) const;
  std::vector<int64_t> as_ints(const std::string& key) const;     // any integer element type
  std::vector<float> as_floats(const std::string& key) const;     // f32 / f64 elements
};

struct GgufTensorInfo {
  std::string name;
  uint32_t ggml_type = 0;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the innermost (contiguous) dimension
  uint64_t offset = 0;         // relative to the start of the data section
  uint64_t bytes = 0;
  const uint8_t* data = nullptr;  // into the parsed buffer

  uint64_t numel() const;
};

struct GgufHeader {
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;  // start of the tensor data section in the file
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensorInfo> tensors;  // in file order

  const GgufValue* find(const std::string& key) const;
  const GgufTensorInfo* find_tensor(const std::string& name) const;
};

// Limits that keep hostile files from exhausting memory or time.
inline constexpr uint32_t kGgufMaxDims = 4;
inline constexpr int kGgufMaxArrayDepth = 4;

// Parses and validates a whole GGUF file held in `bytes` (`size` bytes): magic, version 2 or 3,
// counts against the bytes present, every value type, string and array lengths, unique keys
// and tensor names, general.alignment, tensor dims (1..4, no overflow, rows whole blocks),
// known tensor types, offsets aligned and inside the file, no overlapping tensors.
// Throws specd::Error naming `what` and the offending key or tensor.
GgufHeader parse_gguf(const uint8_t* bytes, size_t size, const std::string& what);

// A mapped, validated GGUF file.
class GgufFile {
 public:
  explicit GgufFile(const std::string& path);
  const GgufHeader& header() const { return header_; }
  const MappedFile& mapping() const { return file_; }
  const std::string& path() const { return file_.path(); }

 private:
  MappedFile file_;
  GgufHeader header_;
};

// True if the file at `path` starts with the GGUF magic.
bool is_gguf_file(const std::string& path);

}  // namespace specd
