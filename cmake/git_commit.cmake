# Writes OUTPUT (a header defining SPECD_GIT_COMMIT) with the source tree's current commit, and
# "-dirty" when it has uncommitted changes; rewrites it only when that changed. Run at build time:
#   cmake -DSOURCE_DIR=DIR -DOUTPUT=FILE -P git_commit.cmake
execute_process(COMMAND git describe --always --dirty --abbrev=7 WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT commit)
  set(commit "unknown")
endif()
set(text "#define SPECD_GIT_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUTPUT} "${text}")
endif()
