# Compiler flags shared by every specd target: warnings, sanitizers, floating-point determinism.
add_library(specd_flags INTERFACE)
target_compile_options(specd_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -ffp-contract=off>)
target_include_directories(specd_flags INTERFACE ${PROJECT_SOURCE_DIR}/src)
if(SPECD_SANITIZE)
  target_compile_options(specd_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined>)
  target_link_options(specd_flags INTERFACE -fsanitize=address,undefined)
  # GCC is slow to compile code under -fsanitize=undefined (the `asan` preset also lowers
  # RelWithDebInfo to -O1 -g1 for that reason): of Highway's dispatched targets, build only AVX2
  # and the scalar fallback, instead of SSSE3, SSE4, AVX2, AVX-512 and scalar (quant_matmul.cc:
  # about 55 s instead of 237 s). The Release suite runs every target the machine has.
  target_compile_definitions(specd_flags INTERFACE
    "HWY_DISABLED_TARGETS=(HWY_SSSE3|HWY_SSE4|HWY_AVX3|HWY_AVX3_DL)")
endif()
