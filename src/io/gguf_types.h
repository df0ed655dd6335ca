// GGUF value types and ggml tensor types: names, block sizes, and the specd dtype of each.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/dtype.h"

namespace specd {

// Metadata value types of the GGUF format (the numbers are the on-disk codes).
enum class GgufType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// True if `code` is a known metadata value type.
bool is_gguf_type(uint32_t code);
std::string_view gguf_type_name(GgufType type);
// Bytes of a fixed-size scalar type; 0 for string and array.
size_t gguf_scalar_size(GgufType type);

// Layout of a ggml tensor type: elements per block and bytes per block.
struct GgmlTypeInfo {
  std::string_view name;
  int64_t block_elems = 0;
  int64_t block_bytes = 0;
};

// The layout of ggml type `code` (the tensor-info type field), or nullopt if unknown.
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t code);
// The specd dtype that keeps ggml type `code` as stored, or nullopt if specd cannot compute
// with it (it can still be listed, e.g. by `specd info`).
std::optional<DType> ggml_type_to_dtype(uint32_t code);

}  // namespace specd
