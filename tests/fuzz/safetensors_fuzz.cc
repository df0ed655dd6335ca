// libFuzzer target: the safetensors header parser must reject any input with specd::Error only.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    specd::SafetensorsHeader header =
        specd::parse_safetensors_header(data, size, size, "fuzz.safetensors");
    // Every accepted tensor must lie inside the input.
    for (const auto& [name, info] : header.tensors) {
      if (header.data_offset + info.end > size) __builtin_trap();
    }
  } catch (const specd::Error&) {
  }
  return 0;
}
