# cuBLASLt for the CUDA backend's prefill GEMM (optional). SPECD_CUBLASLT: AUTO (use it when
# found), ON (fail without it) or OFF (specd's own GEMM). SPECD_CUBLASLT_ROOT names a folder with
# include/cublasLt.h and lib/libcublasLt.so*, e.g. the cuBLAS of a PyTorch installation
# (site-packages/nvidia/cu13); otherwise the CUDA toolkit's (CUDA::cublasLt) is used.
# Sets SPECD_HAVE_CUBLASLT and, when it is ON, the target specd_cublaslt.
set(SPECD_CUBLASLT "AUTO" CACHE STRING "cuBLASLt for the CUDA prefill GEMM: AUTO, ON or OFF")
set(SPECD_CUBLASLT_ROOT "" CACHE PATH "Folder with include/cublasLt.h and lib/libcublasLt.so*")
set(SPECD_HAVE_CUBLASLT OFF)
set(cublaslt_from "")
if(SPECD_CUBLASLT STREQUAL "AUTO" OR SPECD_CUBLASLT)
  if(SPECD_CUBLASLT_ROOT)
    # Python wheels ship only the versioned file (libcublasLt.so.13), no libcublasLt.so link.
    file(GLOB cublaslt_libs "${SPECD_CUBLASLT_ROOT}/lib/libcublasLt.so*"
      "${SPECD_CUBLASLT_ROOT}/lib64/libcublasLt.so*")
    if(EXISTS "${SPECD_CUBLASLT_ROOT}/include/cublasLt.h" AND cublaslt_libs)
      list(SORT cublaslt_libs)
      list(GET cublaslt_libs 0 cublaslt_lib)
      # GLOBAL: the static specd_backend hands the link on to targets in other folders.
      add_library(specd_cublaslt SHARED IMPORTED GLOBAL)
      set_target_properties(specd_cublaslt PROPERTIES IMPORTED_LOCATION "${cublaslt_lib}"
        INTERFACE_INCLUDE_DIRECTORIES "${SPECD_CUBLASLT_ROOT}/include")
      set(SPECD_HAVE_CUBLASLT ON)
      set(cublaslt_from "${cublaslt_lib}")
    endif()
  endif()
  if(NOT SPECD_HAVE_CUBLASLT AND TARGET CUDA::cublasLt)
    set(cublaslt_header OFF)
    foreach(dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
      if(EXISTS "${dir}/cublasLt.h")
        set(cublaslt_header ON)
      endif()
    endforeach()
    if(cublaslt_header)
      add_library(specd_cublaslt INTERFACE IMPORTED GLOBAL)
      target_link_libraries(specd_cublaslt INTERFACE CUDA::cublasLt)
      set(SPECD_HAVE_CUBLASLT ON)
      set(cublaslt_from "the CUDA toolkit")
    endif()
  endif()
  if(NOT SPECD_HAVE_CUBLASLT AND NOT SPECD_CUBLASLT STREQUAL "AUTO")
    message(FATAL_ERROR "SPECD_CUBLASLT=ON but cuBLASLt was not found (neither in the CUDA "
      "toolkit nor in SPECD_CUBLASLT_ROOT='${SPECD_CUBLASLT_ROOT}', which needs "
      "include/cublasLt.h and lib/libcublasLt.so*)")
  endif()
endif()
if(SPECD_HAVE_CUBLASLT)
  message(STATUS "specd: CUDA prefill GEMM: cuBLASLt (${cublaslt_from})")
else()
  message(STATUS "specd: CUDA prefill GEMM: specd's own kernel (cuBLASLt not used)")
endif()
