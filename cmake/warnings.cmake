# Compiler flags shared by every specd target: warnings, sanitizers, floating-point determinism.
add_library(specd_flags INTERFACE)
target_compile_options(specd_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -ffp-contract=off>)
target_include_directories(specd_flags INTERFACE ${PROJECT_SOURCE_DIR}/src)
if(SPECD_SANITIZE)
  target_compile_options(specd_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined>)
  target_link_options(specd_flags INTERFACE -fsanitize=address,undefined)
endif()
