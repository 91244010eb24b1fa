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
cmake --preset release >/dev/null
# Which AMD compiler and targets the HIP backend got (clang-19 adds gfx942; see setup.sh).
sed -n 's/^\(ONLINENORM_HIP_CLANG\|ONLINENORM_HIP_ARCHS\|ONLINENORM_WITH_HIP\):[A-Z]*=/  \1=/p' build/CMakeCache.txt
step "build release"
cmake --build --preset release -j"$jobs"
step "test release"
ctest --preset release -j"$jobs"
step "configure sanitize"
cmake --preset sanitize >/dev/null
step "build sanitize"
cmake --build --preset sanitize -j"$jobs"
step "test sanitize"
ctest --preset sanitize -j"$jobs"
step done
