// libFuzzer target: the GGUF parser must reject any input with specd::Error only, and every
// tensor it accepts must lie inside the input.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    specd::GgufHeader header = specd::parse_gguf(data, size, "fuzz.gguf");
    for (const specd::GgufTensorInfo& t : header.tensors) {
      if (t.data < data || t.data + t.bytes > data + size) __builtin_trap();
    }
    // Exercise the accessors on every value.
    for (const auto& [key, value] : header.metadata) {
      for (size_t j = 0; j < value.size() && j < 64; ++j) {
        if (!value.raw.empty()) (void)value.element(j);
      }
    }
  } catch (const specd::Error&) {
  }
  return 0;
}
