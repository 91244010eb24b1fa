# Makes a copy of HIP's headers that nvcc from CUDA 13 can compile (HIP on an NVIDIA GPU).
#
# Debian's libamdhip64-dev 5.2.3 ships hip/nvidia_detail/, written for CUDA 11. Under CUDA 13
# its nvidia_hip_runtime_api.h fails to compile: it wraps APIs that CUDA 12/13 removed or changed
# (texture references, multi-device cooperative launch, cuCtxCreate, cudaMemAdvise and
# cudaMemPrefetchAsync, graph-edge calls, cudaStreamGetCaptureInfo_v2) and copies cudaDeviceProp
# fields CUDA 13 dropped (clockRate, memoryClockRate, computeMode, kernelExecTimeoutEnabled,
# cooperativeMultiDeviceLaunch). This script copies <src>/hip to <dst>/hip and removes exactly
# those wrappers and lines from the copy; nothing else changes, nothing is committed.
#
# Use:  include(HipNvidiaHeaders) then
#       onlinenorm_make_hip_nvidia_headers(<src include dir> <dst include dir>)
# or    cmake -DSRC=<dir containing hip/> -DDST=<out dir> -P cmake/HipNvidiaHeaders.cmake

if(CMAKE_SCRIPT_MODE_FILE)
  cmake_minimum_required(VERSION 3.22)
endif()

function(onlinenorm_make_hip_nvidia_headers src dst)
  if(NOT EXISTS "${src}/hip/nvidia_detail/nvidia_hip_runtime_api.h")
    message(FATAL_ERROR "HipNvidiaHeaders: ${src}/hip/nvidia_detail/nvidia_hip_runtime_api.h not found")
  endif()
  set(api "${dst}/hip/nvidia_detail/nvidia_hip_runtime_api.h")
  set(stamp "${dst}/.onlinenorm-patched")
  # Redo the copy when the source or this script changes.
  file(SHA256 "${src}/hip/nvidia_detail/nvidia_hip_runtime_api.h" src_hash)
  file(SHA256 "${CMAKE_CURRENT_FUNCTION_LIST_FILE}" script_hash)
  set(want "${src_hash} ${script_hash}")
  if(EXISTS "${stamp}")
    file(READ "${stamp}" have)
    if(have STREQUAL want AND EXISTS "${api}")
      return()
    endif()
  endif()
  file(REMOVE_RECURSE "${dst}/hip")
  file(COPY "${src}/hip" DESTINATION "${dst}")

  file(READ "${api}" text)
  set(removed "")

  # 1. Whole inline wrappers whose body calls an API that CUDA 12/13 no longer has (or has with
  #    another signature). A wrapper is `[template <...>\n][__HIP_DEPRECATED ]inline static ... {`
  #    up to the first `}` that closes it at column 0; the called name must sit in that body.
  set(gone_calls
    cudaMemAdvise cudaMemPrefetchAsync cuCtxCreate
    cudaBindTexture cudaBindTexture2D cudaBindTextureToArray cudaUnbindTexture
    cudaGetTextureAlignmentOffset cudaLaunchCooperativeKernelMultiDevice
    cudaGraphAddDependencies cudaGraphRemoveDependencies cudaGraphGetEdges
    cudaGraphNodeGetDependencies cudaGraphNodeGetDependentNodes
    cudaStreamGetCaptureInfo_v2 cudaStreamUpdateCaptureDependencies)
  foreach(call IN LISTS gone_calls)
    set(count 0)
    foreach(attempt RANGE 16)
      # [^{]* keeps the header inside one declaration, [^}]* keeps the match inside one body
      # (the wrappers in question have no nested braces).
      string(REGEX MATCH
        "\n(template <[^\n]*>\n)?(__HIP_DEPRECATED )?inline static [^{;]*\\{[^}]*[^A-Za-z0-9_]${call}\\([^}]*\n}\n"
        hit "${text}")
      if(hit STREQUAL "")
        break()
      endif()
      string(REPLACE "${hit}" "\n" text "${text}")
      math(EXPR count "${count} + 1")
    endforeach()
    if(count EQUAL 0)
      message(STATUS "HipNvidiaHeaders: no wrapper of ${call} found (already absent?)")
    else()
      list(APPEND removed "${call} x${count}")
    endif()
  endforeach()

  # 2. Single statements that copy cudaDeviceProp fields CUDA 13 dropped.
  foreach(field clockRate memoryClockRate computeMode kernelExecTimeoutEnabled cooperativeMultiDeviceLaunch)
    string(REGEX REPLACE "\n[^\n;{}]*cdprop\\.${field}(;|[^A-Za-z0-9_;\n][^\n;{}]*;)[^\n]*" "" text "${text}")
  endforeach()

  # 3. The attribute that CUDA 13 dropped: report it as not available instead.
  string(REPLACE "cdattr = cudaDevAttrCooperativeMultiDeviceLaunch;" "return hipErrorInvalidValue;"
         text "${text}")

  file(WRITE "${api}" "${text}")
  file(WRITE "${stamp}" "${want}")
  list(JOIN removed ", " removed)
  message(STATUS "HipNvidiaHeaders: patched copy in ${dst} (removed wrappers: ${removed})")
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND DEFINED SRC AND DEFINED DST)
  onlinenorm_make_hip_nvidia_headers("${SRC}" "${DST}")
endif()
