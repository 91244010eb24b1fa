# Looks for a HIP toolchain without enabling the language (which would fail the configure
# step where none exists), and sets ONLINENORM_HIP_TOOLCHAIN_FOUND.
#
# Two platforms (ONLINENORM_HIP_PLATFORM, a cache variable that may be set before this runs):
#   amd     clang++ (Debian's clang-15) + the HIP runtime (libamdhip64-dev 5.2.3) + the AMD GPU
#           device libraries (rocm-device-libs), or the same from /opt/rocm.
#   nvidia  nvcc (CMAKE_CUDA_COMPILER, from check_language(CUDA)) + HIP's headers, from
#           ONLINENORM_HIP_HEADERS_DIR: a folder holding hip/hip_runtime.h, by default the
#           folder .hip-headers/ that `scripts/gpu.sh prepare` fills (for machines without
#           Debian's packages), else /usr/include. A patched copy is made at configure time
#           (cmake/HipNvidiaHeaders.cmake).
#
# Also defines the macro onlinenorm_hip_enable_language(), which turns on the language the
# platform compiles HIP sources with (HIP for amd, CUDA for nvidia) with the workarounds
# Debian's ROCm 5.2 layout needs under CMake 3.25 (see shared/TOOLCHAIN.md).

set(ONLINENORM_HIP_PLATFORM "amd" CACHE STRING "HIP platform: amd (clang, AMD targets) or nvidia (nvcc)")
set_property(CACHE ONLINENORM_HIP_PLATFORM PROPERTY STRINGS amd nvidia)
set(ONLINENORM_HIP_TOOLCHAIN_FOUND OFF)

if(ONLINENORM_HIP_PLATFORM STREQUAL "amd")
  find_program(ONLINENORM_HIP_CLANG NAMES clang++-15 clang++
               PATHS /opt/rocm/llvm/bin /usr/lib/llvm-15/bin
               DOC "clang++ that compiles HIP for AMD GPUs")
  find_path(ONLINENORM_HIP_INCLUDE_DIR hip/hip_runtime.h PATHS /usr/include /opt/rocm/include
            DOC "folder holding hip/hip_runtime.h")
  find_library(ONLINENORM_HIP_RUNTIME_LIBRARY amdhip64 PATHS /opt/rocm/lib
               DOC "the HIP runtime (libamdhip64)")
  find_path(ONLINENORM_HIP_LANG_CONFIG_DIR hip-lang-config.cmake
            PATHS /usr/lib/x86_64-linux-gnu/cmake/hip-lang /opt/rocm/lib/cmake/hip-lang
            DOC "HIP's CMake language package (hip-lang)")
  find_path(ONLINENORM_HIP_DEVICE_LIB_DIR ockl.bc
            PATHS /usr/lib/x86_64-linux-gnu/amdgcn/bitcode /opt/rocm/amdgcn/bitcode
                  /opt/rocm/lib/llvm/lib/clang/amdgcn/bitcode
            DOC "the AMD GPU device libraries (rocm-device-libs bitcode)")
  mark_as_advanced(ONLINENORM_HIP_CLANG ONLINENORM_HIP_INCLUDE_DIR ONLINENORM_HIP_RUNTIME_LIBRARY
                   ONLINENORM_HIP_LANG_CONFIG_DIR ONLINENORM_HIP_DEVICE_LIB_DIR)
  if(ONLINENORM_HIP_CLANG AND ONLINENORM_HIP_INCLUDE_DIR AND ONLINENORM_HIP_RUNTIME_LIBRARY
     AND ONLINENORM_HIP_LANG_CONFIG_DIR AND ONLINENORM_HIP_DEVICE_LIB_DIR)
    # The clang++ must be one that knows the HIP language (clang 14 and later do).
    execute_process(COMMAND "${ONLINENORM_HIP_CLANG}" --version
                    OUTPUT_VARIABLE _onorm_clang_version ERROR_QUIET RESULT_VARIABLE _onorm_rc)
    if(_onorm_rc EQUAL 0 AND _onorm_clang_version MATCHES "clang version ([0-9]+)")
      if(CMAKE_MATCH_1 GREATER_EQUAL 14)
        set(ONLINENORM_HIP_TOOLCHAIN_FOUND ON)
      endif()
    endif()
  endif()
elseif(ONLINENORM_HIP_PLATFORM STREQUAL "nvidia")
  set(_onorm_default_headers "")
  if(EXISTS "${CMAKE_SOURCE_DIR}/.hip-headers/hip/hip_runtime.h")
    set(_onorm_default_headers "${CMAKE_SOURCE_DIR}/.hip-headers")
  elseif(EXISTS "/usr/include/hip/hip_runtime.h")
    set(_onorm_default_headers "/usr/include")
  endif()
  set(ONLINENORM_HIP_HEADERS_DIR "${_onorm_default_headers}" CACHE PATH
      "folder holding HIP's headers (hip/hip_runtime.h, hip/nvidia_detail/) for the nvidia platform")
  if(CMAKE_CUDA_COMPILER AND EXISTS "${ONLINENORM_HIP_HEADERS_DIR}/hip/nvidia_detail/nvidia_hip_runtime_api.h")
    set(ONLINENORM_HIP_TOOLCHAIN_FOUND ON)
  endif()
else()
  message(FATAL_ERROR "ONLINENORM_HIP_PLATFORM must be amd or nvidia, not '${ONLINENORM_HIP_PLATFORM}'")
endif()

if(ONLINENORM_HIP_TOOLCHAIN_FOUND)
  message(STATUS "HIP toolchain (${ONLINENORM_HIP_PLATFORM}): found")
else()
  message(STATUS "HIP toolchain (${ONLINENORM_HIP_PLATFORM}): not found")
endif()

# Enables the language that compiles the HIP backend's sources. A macro: enable_language()
# must run at file scope. Sets ONLINENORM_HIP_LANGUAGE (HIP or CUDA).
macro(onlinenorm_hip_enable_language)
  if(ONLINENORM_HIP_PLATFORM STREQUAL "amd")
    # Workarounds for Debian's ROCm 5.2 layout under CMake 3.25 (shared/TOOLCHAIN.md):
    # 1. CMAKE_HIP_COMPILER_ROCM_ROOT: a folder whose lib/cmake/hip-lang is HIP's package
    #    (Debian has it under /usr/lib/x86_64-linux-gnu/cmake, where CMake does not look).
    # 2. That cmake folder on CMAKE_PREFIX_PATH, in the environment, so that the compiler
    #    check's own configure finds hip-lang's dependencies (AMDDeviceLibs, amd_comgr).
    # 3. The device-library path (and the runtime's root) in HIPFLAGS: clang's --rocm-path
    #    alone does not find Debian's multiarch bitcode.
    get_filename_component(_onorm_hip_cmake_dir "${ONLINENORM_HIP_LANG_CONFIG_DIR}" DIRECTORY)
    get_filename_component(_onorm_hip_include_parent "${ONLINENORM_HIP_INCLUDE_DIR}" DIRECTORY)
    if(NOT CMAKE_HIP_COMPILER_ROCM_ROOT)
      set(_onorm_rocm_root "${CMAKE_BINARY_DIR}/onlinenorm-hip-rocm-root")
      file(MAKE_DIRECTORY "${_onorm_rocm_root}/lib/cmake")
      file(CREATE_LINK "${ONLINENORM_HIP_LANG_CONFIG_DIR}" "${_onorm_rocm_root}/lib/cmake/hip-lang" SYMBOLIC)
      set(CMAKE_HIP_COMPILER_ROCM_ROOT "${_onorm_rocm_root}" CACHE PATH "ROCm root as CMake's HIP support expects it")
    endif()
    set(ENV{CMAKE_PREFIX_PATH} "${_onorm_hip_cmake_dir}:$ENV{CMAKE_PREFIX_PATH}")
    list(APPEND CMAKE_PREFIX_PATH "${_onorm_hip_cmake_dir}")
    if(NOT "$ENV{HIPFLAGS}" MATCHES "--rocm-device-lib-path")
      set(ENV{HIPFLAGS} "--rocm-path=${_onorm_hip_include_parent} --rocm-device-lib-path=${ONLINENORM_HIP_DEVICE_LIB_DIR} $ENV{HIPFLAGS}")
    endif()
    if(NOT CMAKE_HIP_COMPILER)
      # clang++-15 in /usr/bin is a link; CMake's hip-lang package finds clang's runtime
      # builtins relative to the real compiler (/usr/lib/llvm-15/bin).
      # Keep the C++ driver's name (clang++ links libstdc++; its target, clang, does not).
      get_filename_component(_onorm_real_clang "${ONLINENORM_HIP_CLANG}" REALPATH)
      get_filename_component(_onorm_real_clang_dir "${_onorm_real_clang}" DIRECTORY)
      if(EXISTS "${_onorm_real_clang_dir}/clang++")
        set(_onorm_real_clang "${_onorm_real_clang_dir}/clang++")
      else()
        set(_onorm_real_clang "${ONLINENORM_HIP_CLANG}")
      endif()
      set(CMAKE_HIP_COMPILER "${_onorm_real_clang}" CACHE FILEPATH "HIP compiler")
    endif()
    set(ONLINENORM_HIP_ARCHS "gfx90a;gfx940;gfx1030" CACHE STRING
        "AMD offload targets (gfx90a, gfx940: wave64 CDNA; gfx1030: wave32 RDNA)")
    set(CMAKE_HIP_ARCHITECTURES "${ONLINENORM_HIP_ARCHS}")
    enable_language(HIP)
    set(ONLINENORM_HIP_LANGUAGE HIP)
  else()
    include(HipNvidiaHeaders)
    onlinenorm_make_hip_nvidia_headers("${ONLINENORM_HIP_HEADERS_DIR}" "${CMAKE_BINARY_DIR}/hip-nvidia-include")
    set(ONLINENORM_HIP_NVIDIA_INCLUDE_DIR "${CMAKE_BINARY_DIR}/hip-nvidia-include")
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "80;90")
    endif()
    enable_language(CUDA)
    set(ONLINENORM_HIP_LANGUAGE CUDA)
  endif()
endmacro()
