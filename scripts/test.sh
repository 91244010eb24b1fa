#!/usr/bin/env bash
# Sets up, builds and runs every test: a Release build (with the GPU backends compiled where
# their toolchains are; their tests skip without a device) and an ASan+UBSan build of the CPU path.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"
# Instrumented Highway code compiles slowly: -O1, line tables only, and two CPU targets
# (AVX3, the widest vectors, and the scalar baseline) instead of all of them.
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DONLINENORM_SANITIZE=ON -DONLINENORM_CPU_DISABLED_TARGETS="HWY_SSSE3|HWY_SSE4|HWY_AVX2|HWY_AVX3_DL" \
  -DONLINENORM_WITH_CUDA=OFF -DONLINENORM_WITH_HIP=OFF -DONLINENORM_BUILD_BENCH=OFF >/dev/null
cmake --build build-sanitize -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-sanitize --output-on-failure -j"$jobs"
