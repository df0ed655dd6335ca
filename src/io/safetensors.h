// safetensors files: header parsing with full validation, and tensors as views into the mapping.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/mapped_file.h"

namespace specd {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets relative to the start of the data section
  uint64_t end = 0;
  const uint8_t* data = nullptr;  // set once the file is mapped
  std::string file;               // the file the tensor lives in

  int64_t numel() const;
};

struct SafetensorsHeader {
  uint64_t data_offset = 0;  // 8 + header length
  std::map<std::string, TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
};

// Parses and validates the header of a safetensors file held in `bytes` (at least the header
// must be present; `file_size` is the size of the whole file). Checks: header length, JSON and
// UTF-8, known dtypes, shapes, offsets within the file, sizes matching shapes, no overlaps.
// Throws specd::Error naming `what` and the offending tensor.
SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, size_t available,
                                           uint64_t file_size, const std::string& what);

// A mapped safetensors file.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  const std::map<std::string, TensorInfo>& tensors() const { return header_.tensors; }
  const MappedFile& mapping() const { return file_; }

 private:
  MappedFile file_;
  SafetensorsHeader header_;
};

// Writes tensors to a safetensors file (for tools and tests). Data is taken from `data` pointers.
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;
};
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace specd
