# Looks for a HIP toolchain without enabling the language (which would fail the configure
# step where none exists), and sets ONLINENORM_HIP_TOOLCHAIN_FOUND.
#
# Two platforms (ONLINENORM_HIP_PLATFORM, a cache variable that may be set before this runs):
#   amd     clang++ + the HIP runtime (libamdhip64-dev 5.2.3) + the AMD GPU device libraries
#           (rocm-device-libs 5.2.3), or the same from /opt/rocm. The compiler is Debian 12's
#           clang-19 where it is installed, else clang-15 (ONLINENORM_HIP_CLANG picks one:
#           -DONLINENORM_HIP_CLANG=/usr/bin/clang++-15). The default targets
#           (ONLINENORM_HIP_ARCHS) follow the compiler:
#             clang 17 and later: gfx90a;gfx940;gfx942;gfx1030  (gfx942 = MI300, wave64)
#             clang 14 to 16:     gfx90a;gfx940;gfx1030          (gfx942 is unknown to them)
#           Debian's rocm-device-libs 5.2.3 predate gfx942: they lack its one per-target file,
#           oclc_isa_version_942.bc, which only defines the constant __oclc_ISA_version = 9402
#           (the device libraries' code compares it against thresholds such as 9006; 9402 takes
#           the same branches as gfx940's 9400). Without it clang stops with "cannot find ROCm
#           device library for gfx942". So where the device libraries lack it and the compiler
#           knows gfx942, configure builds that one file with the same clang into a folder of the
#           build tree that links every other bitcode file from the real folder
#           (onlinenorm-hip-device-libs/), and the build uses that folder. A ROCm >= 5.7 under
#           /opt/rocm ships the real file and needs none of this.
#           The code objects are code object v4 (ONLINENORM_HIP_CODE_OBJECT_VERSION): clang 19
#           defaults to v5, which HIP 5.2.3, the runtime the module links, predates.
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
  # The first of clang++-19, clang++-15, clang++ whose installation is complete for HIP: the
  # offload bundler (clang-tools-N), lld (lld-N) and the compiler-rt builtins that CMake's
  # hip-lang package requires (libclang-rt-N-dev for clang 19; in libclang-common-15-dev for 15).
  # A clang-19 without them is skipped, not a configure error.
  if(NOT ONLINENORM_HIP_CLANG)
    foreach(_onorm_name clang++-19 clang++-15 clang++)
      find_program(_onorm_clang NAMES ${_onorm_name}
                   PATHS /opt/rocm/llvm/bin /usr/lib/llvm-19/bin /usr/lib/llvm-15/bin NO_CACHE)
      if(_onorm_clang)
        get_filename_component(_onorm_dir "${_onorm_clang}" REALPATH)
        get_filename_component(_onorm_dir "${_onorm_dir}" DIRECTORY)
        file(GLOB _onorm_builtins "${_onorm_dir}/../lib/clang/*/lib/*/*clang_rt.builtins*")
        if(_onorm_builtins AND EXISTS "${_onorm_dir}/clang-offload-bundler" AND EXISTS "${_onorm_dir}/lld")
          set(ONLINENORM_HIP_CLANG "${_onorm_clang}" CACHE FILEPATH
              "clang++ that compiles HIP for AMD GPUs (clang-19 adds gfx942)")
          break()
        endif()
        message(STATUS "HIP: skipping ${_onorm_clang}: no offload bundler, lld or compiler-rt builtins beside it")
      endif()
      unset(_onorm_clang)
    endforeach()
  endif()
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
      set(ONLINENORM_HIP_CLANG_VERSION_MAJOR ${CMAKE_MATCH_1})
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

if(ONLINENORM_HIP_TOOLCHAIN_FOUND AND ONLINENORM_HIP_PLATFORM STREQUAL "amd")
  message(STATUS "HIP toolchain (amd): found, ${ONLINENORM_HIP_CLANG} (clang ${ONLINENORM_HIP_CLANG_VERSION_MAJOR})")
elseif(ONLINENORM_HIP_TOOLCHAIN_FOUND)
  message(STATUS "HIP toolchain (${ONLINENORM_HIP_PLATFORM}): found")
else()
  message(STATUS "HIP toolchain (${ONLINENORM_HIP_PLATFORM}): not found")
endif()

# Enables the language that compiles the HIP backend's sources. A macro: enable_language()
# must run at file scope. Sets ONLINENORM_HIP_LANGUAGE (HIP or CUDA).
macro(onlinenorm_hip_enable_language)
  if(ONLINENORM_HIP_PLATFORM STREQUAL "amd")
    # Workarounds for Debian's ROCm 5.2 layout under CMake 3.25 (shared/TOOLCHAIN.md):
    # 1. CMAKE_HIP_COMPILER_ROCM_ROOT: a folder whose lib/cmake/hip-lang leads to HIP's package
    #    (Debian has it under /usr/lib/x86_64-linux-gnu/cmake, where CMake does not look).
    # 2. That cmake folder on CMAKE_PREFIX_PATH, in the environment, so that the compiler
    #    check's own configure finds hip-lang's dependencies (AMDDeviceLibs, amd_comgr).
    # 3. The device-library path (and the runtime's root) in HIPFLAGS: clang's --rocm-path
    #    alone does not find Debian's multiarch bitcode.
    # 4. The default targets follow the compiler; gfx942 gets its device-library file where
    #    the installed device libraries lack it (see the top of this file).
    if(ONLINENORM_HIP_CLANG_VERSION_MAJOR GREATER_EQUAL 17)
      set(_onorm_default_archs "gfx90a;gfx940;gfx942;gfx1030")
    else()
      set(_onorm_default_archs "gfx90a;gfx940;gfx1030")
    endif()
    set(ONLINENORM_HIP_ARCHS "${_onorm_default_archs}" CACHE STRING
        "AMD offload targets (gfx90a, gfx940, gfx942: wave64 CDNA; gfx1030: wave32 RDNA); default by compiler: clang >= 17 adds gfx942")
    set(ONLINENORM_HIP_CODE_OBJECT_VERSION "4" CACHE STRING
        "AMD code object version (-mcode-object-version); 4: the one HIP 5.2.3 loads; empty: the compiler's default")
    if("gfx942" IN_LIST ONLINENORM_HIP_ARCHS AND ONLINENORM_HIP_CLANG_VERSION_MAJOR LESS 17)
      message(FATAL_ERROR "HIP: gfx942 needs clang 17 or later (Debian 12: clang-19, scripts/setup.sh "
              "installs it); ${ONLINENORM_HIP_CLANG} is clang ${ONLINENORM_HIP_CLANG_VERSION_MAJOR}. "
              "Pick one with -DONLINENORM_HIP_CLANG=/usr/bin/clang++-19, or leave gfx942 out of ONLINENORM_HIP_ARCHS.")
    endif()
    set(_onorm_device_lib_dir "${ONLINENORM_HIP_DEVICE_LIB_DIR}")
    if("gfx942" IN_LIST ONLINENORM_HIP_ARCHS
       AND NOT EXISTS "${ONLINENORM_HIP_DEVICE_LIB_DIR}/oclc_isa_version_942.bc")
      set(_onorm_device_lib_dir "${CMAKE_BINARY_DIR}/onlinenorm-hip-device-libs")
      file(MAKE_DIRECTORY "${_onorm_device_lib_dir}")
      file(GLOB _onorm_bitcode RELATIVE "${ONLINENORM_HIP_DEVICE_LIB_DIR}" "${ONLINENORM_HIP_DEVICE_LIB_DIR}/*.bc")
      foreach(_onorm_bc IN LISTS _onorm_bitcode)
        if(NOT EXISTS "${_onorm_device_lib_dir}/${_onorm_bc}")
          file(CREATE_LINK "${ONLINENORM_HIP_DEVICE_LIB_DIR}/${_onorm_bc}" "${_onorm_device_lib_dir}/${_onorm_bc}" SYMBOLIC)
        endif()
      endforeach()
      # The same definition as ROCm-Device-Libs' oclc/src/isa_version_942.cl, as IR.
      file(WRITE "${_onorm_device_lib_dir}/oclc_isa_version_942.ll"
           "target triple = \"amdgcn-amd-amdhsa\"\n"
           "@__oclc_ISA_version = linkonce_odr protected local_unnamed_addr addrspace(4) constant i32 9402, align 4\n")
      set(_onorm_rc 0)
      if(NOT EXISTS "${_onorm_device_lib_dir}/oclc_isa_version_942.bc")
        execute_process(COMMAND "${ONLINENORM_HIP_CLANG}" -x ir -c -emit-llvm -nogpulib --target=amdgcn-amd-amdhsa
                                "${_onorm_device_lib_dir}/oclc_isa_version_942.ll"
                                -o "${_onorm_device_lib_dir}/oclc_isa_version_942.bc"
                        RESULT_VARIABLE _onorm_rc ERROR_VARIABLE _onorm_err)
      endif()
      if(NOT _onorm_rc EQUAL 0)
        message(FATAL_ERROR "HIP: could not build oclc_isa_version_942.bc for gfx942 with "
                "${ONLINENORM_HIP_CLANG}: ${_onorm_err}\nLeave gfx942 out of ONLINENORM_HIP_ARCHS.")
      endif()
      message(STATUS "HIP: device libraries from ${ONLINENORM_HIP_DEVICE_LIB_DIR} with a built oclc_isa_version_942.bc (${_onorm_device_lib_dir})")
    endif()
    get_filename_component(_onorm_hip_cmake_dir "${ONLINENORM_HIP_LANG_CONFIG_DIR}" DIRECTORY)
    get_filename_component(_onorm_hip_include_parent "${ONLINENORM_HIP_INCLUDE_DIR}" DIRECTORY)
    if(NOT CMAKE_HIP_COMPILER_ROCM_ROOT)
      # Its hip-lang-config.cmake loads Debian's and then drops /usr/include from the include
      # directories HIP's targets add: as `-isystem /usr/include` it comes before libstdc++'s
      # folders, and clang 19's HIP wrapper headers (which include <cmath>) then fail with
      # "'math.h' file not found" in CMake's own compiler check, before CMake knows /usr/include
      # is implicit. clang finds HIP's headers from --rocm-path itself (-idirafter /usr/include).
      set(_onorm_rocm_root "${CMAKE_BINARY_DIR}/onlinenorm-hip-lang-root")
      set(_onorm_hip_lang "${_onorm_rocm_root}/lib/cmake/hip-lang")
      file(MAKE_DIRECTORY "${_onorm_hip_lang}")
      file(WRITE "${_onorm_hip_lang}/hip-lang-config.cmake"
        "# Written by onlinenorm's cmake/FindHipToolchain.cmake.\n"
        "include(\"${ONLINENORM_HIP_LANG_CONFIG_DIR}/hip-lang-config.cmake\")\n"
        "foreach(_t hip-lang::amdhip64 hip-lang::device)\n"
        "  foreach(_p INTERFACE_INCLUDE_DIRECTORIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES)\n"
        "    get_target_property(_v \${_t} \${_p})\n"
        "    if(_v)\n"
        "      set(_old \"\")\n"
        "      while(NOT _old STREQUAL _v)\n"
        "        set(_old \"\${_v}\")\n"
        "        string(REGEX REPLACE \"([:;])/usr/include/?(;|>)\" \"\\\\1\\\\2\" _v \"\${_v}\")\n"
        "        string(REGEX REPLACE \";+(;|>)\" \"\\\\1\" _v \"\${_v}\")\n"
        "        string(REGEX REPLACE \":;+\" \":\" _v \"\${_v}\")\n"
        "      endwhile()\n"
        "      set_target_properties(\${_t} PROPERTIES \${_p} \"\${_v}\")\n"
        "    endif()\n"
        "  endforeach()\n"
        "endforeach()\n")
      set(CMAKE_HIP_COMPILER_ROCM_ROOT "${_onorm_rocm_root}" CACHE PATH "ROCm root as CMake's HIP support expects it")
    endif()
    set(ENV{CMAKE_PREFIX_PATH} "${_onorm_hip_cmake_dir}:$ENV{CMAKE_PREFIX_PATH}")
    list(APPEND CMAKE_PREFIX_PATH "${_onorm_hip_cmake_dir}")
    if(NOT "$ENV{HIPFLAGS}" MATCHES "--rocm-device-lib-path")
      set(ENV{HIPFLAGS} "--rocm-path=${_onorm_hip_include_parent} --rocm-device-lib-path=${_onorm_device_lib_dir} $ENV{HIPFLAGS}")
    endif()
    if(NOT CMAKE_HIP_COMPILER)
      # clang++-15 (-19) in /usr/bin is a link; CMake's hip-lang package finds clang's runtime
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
