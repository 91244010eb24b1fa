#!/usr/bin/env bash
# Sets up, builds and runs every test: a Release build (with the GPU backends compiled where
# their toolchains are; their tests skip without a device) and an ASan+UBSan build of the CPU
# path (CMakePresets.json: presets release and sanitize).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's start, in seconds since this script began (where CI's time goes).
step() { echo "== $1 (at ${SECONDS} s)"; }
step setup
scripts/setup.sh
jobs=$(nproc)
step "configure release"
# Without a GPU the GPU tests skip, so the GPU code is only compiled: one architecture per
# warp width is that check (CUDA sm_90a; HIP gfx90a wave64 and gfx1030 wave32) and halves the
# build. CUDA stops at PTX there (90a-virtual): ptxas, a third of its time, has nothing to check
# that the GPU runs' own builds do not. With a GPU the backends' default architectures (-U: the
# cache's entries go).
gpu_archs=(-UCMAKE_CUDA_ARCHITECTURES -UONLINENORM_HIP_ARCHS)
if ! nvidia-smi -L >/dev/null 2>&1 && ! (rocminfo 2>/dev/null | grep -q 'Name: *gfx'); then
  gpu_archs=(-DCMAKE_CUDA_ARCHITECTURES=90a-virtual "-DONLINENORM_HIP_ARCHS=gfx90a;gfx1030")
fi
echo "  GPU architectures: ${gpu_archs[*]}"
cmake --preset release "${gpu_archs[@]}" >/dev/null
# Which AMD compiler and targets the HIP backend got (clang-19 adds gfx942; see setup.sh).
sed -n 's/^\(ONLINENORM_HIP_CLANG\|ONLINENORM_HIP_ARCHS\|ONLINENORM_WITH_HIP\):[A-Z]*=/  \1=/p' build/CMakeCache.txt
step "build release"
cmake --build --preset release -j"$jobs"
step "test release"
ctest --preset release -j"$jobs"
step "python package"
# Packages the release build's library into a venv under build/ and runs pytest.
CMAKE_BUILD_PARALLEL_LEVEL="$jobs" scripts/python_test.sh
step "configure sanitize"
cmake --preset sanitize >/dev/null
step "build sanitize"
cmake --build --preset sanitize -j"$jobs"
step "test sanitize"
ctest --preset sanitize -j"$jobs"
step done
