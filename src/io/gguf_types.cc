// Tables of GGUF metadata types and ggml tensor types (block sizes as in ggml's type traits).
#include "io/gguf_types.h"

namespace specd {

bool is_gguf_type(uint32_t code) { return code <= static_cast<uint32_t>(GgufType::kF64); }

std::string_view gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::kU8: return "u8";
    case GgufType::kI8: return "i8";
    case GgufType::kU16: return "u16";
    case GgufType::kI16: return "i16";
    case GgufType::kU32: return "u32";
    case GgufType::kI32: return "i32";
    case GgufType::kF32: return "f32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kU64: return "u64";
    case GgufType::kI64: return "i64";
    case GgufType::kF64: return "f64";
  }
  return "?";
}

size_t gguf_scalar_size(GgufType type) {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool: return 1;
    case GgufType::kU16:
    case GgufType::kI16: return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32: return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64: return 8;
    case GgufType::kString:
    case GgufType::kArray: return 0;
  }
  return 0;
}

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t code) {
  switch (code) {
    case 0: return GgmlTypeInfo{"F32", 1, 4};
    case 1: return GgmlTypeInfo{"F16", 1, 2};
    case 2: return GgmlTypeInfo{"Q4_0", 32, 18};
    case 3: return GgmlTypeInfo{"Q4_1", 32, 20};
    case 6: return GgmlTypeInfo{"Q5_0", 32, 22};
    case 7: return GgmlTypeInfo{"Q5_1", 32, 24};
    case 8: return GgmlTypeInfo{"Q8_0", 32, 34};
    case 9: return GgmlTypeInfo{"Q8_1", 32, 40};
    case 10: return GgmlTypeInfo{"Q2_K", 256, 84};
    case 11: return GgmlTypeInfo{"Q3_K", 256, 110};
    case 12: return GgmlTypeInfo{"Q4_K", 256, 144};
    case 13: return GgmlTypeInfo{"Q5_K", 256, 176};
    case 14: return GgmlTypeInfo{"Q6_K", 256, 210};
    case 15: return GgmlTypeInfo{"Q8_K", 256, 292};
    case 16: return GgmlTypeInfo{"IQ2_XXS", 256, 66};
    case 17: return GgmlTypeInfo{"IQ2_XS", 256, 74};
    case 18: return GgmlTypeInfo{"IQ3_XXS", 256, 98};
    case 19: return GgmlTypeInfo{"IQ1_S", 256, 50};
    case 20: return GgmlTypeInfo{"IQ4_NL", 32, 18};
    case 21: return GgmlTypeInfo{"IQ3_S", 256, 110};
    case 22: return GgmlTypeInfo{"IQ2_S", 256, 82};
    case 23: return GgmlTypeInfo{"IQ4_XS", 256, 136};
    case 24: return GgmlTypeInfo{"I8", 1, 1};
    case 25: return GgmlTypeInfo{"I16", 1, 2};
    case 26: return GgmlTypeInfo{"I32", 1, 4};
    case 27: return GgmlTypeInfo{"I64", 1, 8};
    case 28: return GgmlTypeInfo{"F64", 1, 8};
    case 29: return GgmlTypeInfo{"IQ1_M", 256, 56};
    case 30: return GgmlTypeInfo{"BF16", 1, 2};
    case 34: return GgmlTypeInfo{"TQ1_0", 256, 54};
    case 35: return GgmlTypeInfo{"TQ2_0", 256, 66};
    case 39: return GgmlTypeInfo{"MXFP4", 32, 17};
    default: return std::nullopt;
  }
}

std::optional<DType> ggml_type_to_dtype(uint32_t code) {
  switch (code) {
    case 0: return DType::kF32;
    case 1: return DType::kF16;
    case 2: return DType::kQ4_0;
    case 3: return DType::kQ4_1;
    case 6: return DType::kQ5_0;
    case 7: return DType::kQ5_1;
    case 8: return DType::kQ8_0;
    case 12: return DType::kQ4_K;
    case 13: return DType::kQ5_K;
    case 14: return DType::kQ6_K;
    case 30: return DType::kBF16;
    default: return std::nullopt;
  }
}

}  // namespace specd
