# specd_module(NAME DEPS...): a static library from the .cc files of src/NAME (one per module).
function(specd_module name)
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  add_library(specd_${name} STATIC ${sources})
  target_link_libraries(specd_${name} PUBLIC specd_flags ${ARGN})
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
  gtest_discover_tests(${name} PROPERTIES LABELS ${ARG_LABEL} DISCOVERY_TIMEOUT 60)
endfunction()
