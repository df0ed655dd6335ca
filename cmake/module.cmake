# specd_unity(TARGET): with SPECD_UNITY_BUILD, TARGET compiles as unity batches of 8 sources (the
# heavy header-only dependencies, CLI11, nlohmann::json and cpp-httplib, are then compiled once
# per batch instead of once per file). Only for targets whose files share no file-local names.
function(specd_unity target)
  if(SPECD_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()

# specd_module(NAME [UNITY] DEPS...): a static library from the .cc files of src/NAME (one per
# module); UNITY: see specd_unity.
function(specd_module name)
  cmake_parse_arguments(ARG "UNITY" "" "" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  add_library(specd_${name} STATIC ${sources})
  target_link_libraries(specd_${name} PUBLIC specd_flags ${ARG_UNPARSED_ARGUMENTS})
  if(ARG_UNITY)
    specd_unity(specd_${name})
  endif()
endfunction()

# specd_test(NAME SOURCES... LIBS libs...): a GoogleTest executable registered with ctest.
function(specd_test name)
  cmake_parse_arguments(ARG "" "LABEL" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE SPECD_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  if(NOT ARG_LABEL)
    set(ARG_LABEL unit)
  endif()
  if(SPECD_SANITIZE AND ARG_LABEL STREQUAL "slow")
    # Sanitizer runs skip the slow tests (scripts/test.sh: ctest -LE slow): there they are
    # neither built by default nor registered with ctest (`--target NAME` still builds one).
    set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL ON)
    return()
  endif()
  gtest_discover_tests(${name} PROPERTIES LABELS ${ARG_LABEL} DISCOVERY_TIMEOUT 60)
endfunction()
