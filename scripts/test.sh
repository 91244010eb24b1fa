#!/usr/bin/env bash
# Sets up, builds and runs every test: a Release build (with the GPU backends compiled where
# their toolchains are; their tests skip without a device) and an ASan+UBSan build of the CPU
# path (CMakePresets.json: presets release and sanitize).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's start, in seconds since this script began, and the CPU seconds its commands have
# used by then (where CI's time goes; the CPU seconds do not depend on the machine's other load).
# (/proc/$$/stat fields 16 and 17: the finished children's user and system clock ticks.)
tick=$(getconf CLK_TCK)
step() { echo "== $1 (at ${SECONDS} s, CPU $(awk -v t="$tick" '{ printf "%d", ($16 + $17) / t }' /proc/$$/stat) s)"; }
step setup
scripts/setup.sh
jobs=$(nproc)
# The presets use Ninja; a build folder that another generator configured (the README's plain
# cmake uses make) cannot switch: its cache goes, its objects are rebuilt.
fresh_if_other_generator() {
  if [ -f "$1/CMakeCache.txt" ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$1/CMakeCache.txt"; then
    echo "  $1 was configured with another generator: its cache is removed"
    rm -rf "$1/CMakeCache.txt" "$1/CMakeFiles"
  fi
}
step "configure release"
# Without a GPU the GPU tests skip, so the GPU code is only compiled: one architecture each is
# that check (CUDA sm_90a, HIP gfx90a). CUDA stops at PTX there (90a-virtual): ptxas, a third of
# its time, has nothing to check that the GPU runs' own builds do not. HIP's wave32 objects
# compile no device code for gfx90a (hip_rows.hip.in), half of the HIP build: the width-32
# templates are compiled for CUDA and run on both widths in the emulator (hip_wave_rows_test).
# The device code is compiled at -O0 there (ONLINENORM_GPU_DEVICE_O0): every kernel is still
# instantiated and code-generated for its target, but the device optimizer, most of the GPU
# backends' compile time, has nothing to check in code that never runs here; the GPU machines'
# builds optimize it (host code keeps -O3 in both).
# With a GPU the backends' default architectures and optimization (-U: the cache's entries go).
gpu_opts=(-UCMAKE_CUDA_ARCHITECTURES -UONLINENORM_HIP_ARCHS -UONLINENORM_GPU_DEVICE_O0)
if ! nvidia-smi -L >/dev/null 2>&1 && ! (rocminfo 2>/dev/null | grep -q 'Name: *gfx'); then
  gpu_opts=(-DCMAKE_CUDA_ARCHITECTURES=90a-virtual -DONLINENORM_HIP_ARCHS=gfx90a -DONLINENORM_GPU_DEVICE_O0=ON)
fi
echo "  GPU options: ${gpu_opts[*]}"
fresh_if_other_generator build
cmake --preset release "${gpu_opts[@]}" >/dev/null
# Which AMD compiler and targets the HIP backend got (clang-19 adds gfx942; see setup.sh).
sed -n 's/^\(ONLINENORM_HIP_CLANG\|ONLINENORM_HIP_ARCHS\|ONLINENORM_WITH_HIP\|ONLINENORM_GPU_DEVICE_O0\):[A-Z]*=/  \1=/p' build/CMakeCache.txt
step "build release"
cmake --build --preset release -j"$jobs"
step "test release"
ctest --preset release -j"$jobs"
step "python package"
# Packages the release build's library into a venv under build/ and runs pytest.
CMAKE_BUILD_PARALLEL_LEVEL="$jobs" scripts/python_test.sh
step "configure sanitize"
fresh_if_other_generator build-sanitize
cmake --preset sanitize >/dev/null
step "build sanitize"
cmake --build --preset sanitize -j"$jobs"
step "test sanitize"
ctest --preset sanitize -j"$jobs"
step done
