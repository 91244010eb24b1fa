#!/usr/bin/env bash
# An exploration call on the GPU machine (bench/cuda/NOTES.md): build the CUDA module, the
# CUDA bench and the onorm tool only; check correctness; time the default routing beside
# alternatives chosen by environment variables; profile a few kernels with ncu.
#   scripts/gpu_explore.sh "ENV=.. ENV2=..:widths" ...   (alternatives; default: none)
# Carry .deps (scripts/gpu_check.sh --prepare). Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
B=build-gpu
extra=(-Dhwy_DIR="$PWD/.deps/hwy/usr/lib/x86_64-linux-gnu/cmake/hwy")
export LD_LIBRARY_PATH="$PWD/.deps/hwy/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
t0=$(date +%s)
{ cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DONLINENORM_WITH_CUDA=ON -DONLINENORM_WITH_HIP=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DONLINENORM_CUDA_PTXAS_VERBOSE=ON "${extra[@]}" &&
  cmake --build $B -j16 --target onlinenorm_cuda onorm_bench_cuda onorm; } > "$OUT/build.log" 2>&1 || {
  echo "build FAILED"; grep -E "error" "$OUT/build.log" | head -30; exit 1; }
echo "build ok ($(( $(date +%s) - t0 )) s)"
grep -A2 "cluster_rows_kernel" "$OUT/build.log" | grep -E "registers|spill" | sort | uniq -c | head -12
t0=$(date +%s)
[ -n "${SKIP_CHECK:-}" ] || { timeout 200 $B/bin/onorm_bench_cuda --check > "$OUT/check.log" 2>&1; echo "check exit $? ($(( $(date +%s) - t0 )) s)"; }
grep -E "FAIL|check:" "$OUT/check.log" | head -12
for env_set in ${CHECK_ENVS:-}; do  # e.g. "ONLINENORM_CUDA_STREAM=1,ONLINENORM_CUDA_SHORT_WIDE=1"
  echo "---- check with ${env_set//,/ }" >> "$OUT/check.log"
  t0=$(date +%s)
  timeout 200 env ${env_set//,/ } $B/bin/onorm_bench_cuda --check >> "$OUT/check.log" 2>&1
  echo "check with ${env_set//,/ }: exit $? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL" "$OUT/check.log" | head -5
done
t0=$(date +%s)
timeout 150 $B/bin/onorm_bench_cuda --quick --csv "$OUT/onorm.csv" > "$OUT/bench.log" 2>&1
echo "bench exit $? ($(( $(date +%s) - t0 )) s)"
for alt in "$@"; do
  echo "---- ${alt%%:*} widths ${alt#*:}" >> "$OUT/bench.log"
  timeout 100 env ${alt%%:*} $B/bin/onorm_bench_cuda --widths "${alt#*:}" --quick 2>&1 | grep -v "^op " >> "$OUT/bench.log"
done
cat "$OUT/bench.log"
if [ -n "${NCU_CASES:-}" ]; then
  for c in $NCU_CASES; do  # op,dtype,rows,cols
    IFS=, read -r op dt rows cols <<< "$c"
    echo "==== ncu $op $dt ${rows}x$cols" >> "$OUT/ncu.txt"
    timeout 90 ncu --clock-control none -k regex:"rows_kernel|staged_kernel|cluster_rows" -c 1 \
      --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
      --section MemoryWorkloadAnalysis \
      $B/bin/onorm run --backend cuda --op "$op" --dtype "$dt" --rows "$rows" --cols "$cols" --iters 1 \
      >> "$OUT/ncu.txt" 2>&1
  done
  grep -E "^====|Memory Throughput|DRAM Throughput|Duration|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Issue Slot|Compute \(SM\) Throughput|Theoretical Occ|Block Limit|Stall" "$OUT/ncu.txt" | head -80
fi
