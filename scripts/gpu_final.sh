#!/usr/bin/env bash
# One call on the GPU machine that checks main as it stands: the CUDA build's whole ctest suite,
# the CUDA check under compute-sanitizer (memcheck, racecheck), the HIP-on-NVIDIA build's
# contract and cross-backend tests, and the `onorm bench` sweep with its PNG plot.
# Carry .deps (scripts/gpu_check.sh --prepare) and .hip-headers (backends/hip/pack_headers.sh).
# Only the summary files land in $OUT (the device tool returns at most 8).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
logs=$(mktemp -d)
mkdir -p "$OUT"
(OUT=$logs/hip timeout 450 bash scripts/gpu_check_hip.sh --no-bench > "$logs/hip.out" 2>&1; echo "hip exit $?" >> "$logs/hip.out") &
hip_pid=$!
OUT=$logs/cuda timeout 500 bash scripts/gpu_check.sh --no-bench --no-torch --no-pipeline 2>&1 | tee "$OUT/cuda_summary.txt"
wait $hip_pid
cp "$logs/hip.out" "$OUT/hip_summary.txt"
cp "$logs/cuda/ctest.log" "$OUT/cuda_ctest.log" 2>/dev/null
cp "$logs/cuda/check.log" "$OUT/cuda_check_sanitizer.log" 2>/dev/null
cp "$logs/hip/hip_ctest.log" "$OUT/hip_ctest.log" 2>/dev/null
export LD_LIBRARY_PATH="$PWD/.deps/hwy/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
timeout 120 build-gpu/bin/onorm bench --backend cuda --json "$OUT/onorm_bench_cuda.json" \
  --png "$OUT/onorm_bench_cuda.png" > "$logs/bench.out" 2>&1; echo "onorm bench exit $?"
tail -5 "$logs/bench.out"
tail -30 "$OUT/hip_summary.txt"
