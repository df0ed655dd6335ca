// libFuzzer target: a tokenizer built from any GGUF metadata must load and encode, or be
// rejected with specd::Error only.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "io/gguf.h"
#include "tokenizer/gguf_spm.h"
#include "tokenizer/tokenizer_impl.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    specd::GgufHeader header = specd::parse_gguf(data, size, "fuzz.gguf");
    specd::Json config;
    specd::tok::TokenizerJson parsed = specd::tok::gguf_spm_tokenizer(header, "fuzz.gguf", config);
    auto impl = specd::tok::build_tokenizer(std::move(parsed), std::move(config), "");
    std::vector<int32_t> ids;
    impl->encode_segment("Hello world  \xE4\xB8\xAD\n<s>", true, ids);
  } catch (const specd::Error&) {
  }
  return 0;
}
