# Looks for a HIP toolchain without enabling the language (which would fail the configure
# step where none exists). Debian's ROCm 5.2 layout: clang++-15 plus libamdhip64-dev.
set(ONLINENORM_HIP_TOOLCHAIN_FOUND OFF)
find_program(ONLINENORM_HIP_CLANG NAMES clang++-15 clang++)
find_file(ONLINENORM_HIP_RUNTIME_HEADER hip/hip_runtime.h PATHS /usr/include /opt/rocm/include)
if(ONLINENORM_HIP_CLANG AND ONLINENORM_HIP_RUNTIME_HEADER)
  set(ONLINENORM_HIP_TOOLCHAIN_FOUND ON)
endif()
