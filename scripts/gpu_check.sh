#!/usr/bin/env bash
# The GPU machine's whole check, in one call (device time is scarce):
#   configure + build with CUDA (Release), ctest, the CUDA smoke check (+ long rows),
#   compute-sanitizer memcheck and racecheck over the CUDA check, the CUDA benchmark,
#   PyTorch eager / torch.compile on the same shapes, and a summary table printed last.
#
#   scripts/gpu_check.sh --prepare      HERE (dev machine): stage what the GPU machine lacks
#                                       (Highway 1.0.3 from Debian's libhwy-dev) into .deps/,
#                                       an ignored folder to name in the run tool's `carry`.
#   scripts/gpu_check.sh [--no-bench] [--no-torch] [--no-sanitize] [--no-pipeline]
#                                       THERE, from the repo root; logs and CSVs go to $OUT.
#
# The GPU machine (Ubuntu 24.04 image) has cmake, ninja, nvcc 13, gtest, benchmark and
# python3 with torch + triton, but no Highway: the CPU backend needs it, so it travels in
# .deps/hwy (headers, the three shared libraries, the CMake package) with the same layout as
# Debian's, found through hwy_DIR, loaded through LD_LIBRARY_PATH.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--prepare" ]; then
  dst=.deps/hwy/usr
  rm -rf .deps/hwy
  mkdir -p "$dst/include" "$dst/lib/x86_64-linux-gnu/cmake"
  cp -r /usr/include/hwy "$dst/include/"
  cp -r /usr/lib/x86_64-linux-gnu/cmake/hwy "$dst/lib/x86_64-linux-gnu/cmake/"
  for l in libhwy libhwy_contrib libhwy_test; do
    cp -L /usr/lib/x86_64-linux-gnu/$l.so.1.0.3 "$dst/lib/x86_64-linux-gnu/"
    ln -sf $l.so.1.0.3 "$dst/lib/x86_64-linux-gnu/$l.so.1"
    ln -sf $l.so.1 "$dst/lib/x86_64-linux-gnu/$l.so"
  done
  grep -qx '/.deps/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.deps/' >> .git/info/exclude; }
  du -sh .deps
  exit 0
fi

bench=1; torch=1; sanitize=1; pipeline=1
for a in "$@"; do
  case "$a" in
    --no-pipeline) pipeline=0 ;;
    --no-bench) bench=0 ;;
    --no-torch) torch=0 ;;
    --no-sanitize) sanitize=0 ;;
  esac
done
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
export PYTHONUNBUFFERED=1
B=build-gpu
extra=()
if [ -d .deps/hwy ]; then
  extra+=(-Dhwy_DIR="$PWD/.deps/hwy/usr/lib/x86_64-linux-gnu/cmake/hwy")
  export LD_LIBRARY_PATH="$PWD/.deps/hwy/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/build.log"

# torch.compile's kernels compile on the CPUs while CUDA builds; the timing run loads them
# from Inductor's on-disk cache.
torch_pid=""
if [ $torch = 1 ] && [ $bench = 1 ]; then
  python3 bench/torch_gpu.py --warm > "$OUT/torch.log" 2>&1 &
  torch_pid=$!
fi

t0=$(date +%s)
status_build=ok
{ cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DONLINENORM_WITH_CUDA=ON -DONLINENORM_WITH_HIP=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DONLINENORM_CUDA_PTXAS_VERBOSE=ON "${extra[@]}" &&
  cmake --build $B -j16 -- -k 0; } >> "$OUT/build.log" 2>&1 || status_build=FAILED
echo "build: $status_build ($(( $(date +%s) - t0 )) s)"
if [ $status_build != ok ]; then
  grep -E "error|Error" "$OUT/build.log" | head -40
fi

status_ctest=skipped
if [ -x $B/bin/onorm_bench_cuda ] || [ $status_build = ok ]; then
  t0=$(date +%s)
  timeout 420 ctest --test-dir $B --output-on-failure -j8 > "$OUT/ctest.log" 2>&1 && status_ctest=ok || status_ctest=FAILED
  echo "ctest: $status_ctest ($(( $(date +%s) - t0 )) s)"
  grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Skipped|Not Run|Timeout" "$OUT/ctest.log" | head -30
fi

status_check=skipped; status_pipe=skipped
if [ -x $B/bin/onorm_bench_cuda ]; then
  t0=$(date +%s)
  { $B/bin/onorm_bench_cuda --check && $B/bin/onorm_bench_cuda --check --big; } > "$OUT/check.log" 2>&1 \
    && status_check=ok || status_check=FAILED
  echo "check: $status_check ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|check:" "$OUT/check.log" | head -20
  # The pipelined split schedule (opt-in): the same check, bounded in time.
  [ $pipeline = 1 ] || { echo "check (pipelined): not run (--no-pipeline)"; }
  t0=$(date +%s)
  [ $pipeline = 1 ] && {
  echo "---- ONLINENORM_CUDA_PIPELINE=1" >> "$OUT/check.log"
  ONLINENORM_CUDA_PIPELINE=1 timeout 300 $B/bin/onorm_bench_cuda --check >> "$OUT/check.log" 2>&1 \
    && status_pipe=ok || status_pipe="FAILED($?)"
  echo "check (pipelined): $status_pipe ($(( $(date +%s) - t0 )) s)"; tail -1 "$OUT/check.log"
  }
fi

# The hard norm data (--check --hard: offsets, outliers at chunk boundaries, tiny rows with eps 0,
# +-3e38, eps 1e39; out of place and in place) through the schedules the default routing leaves
# out: no clusters (f32 16K-256K take the staged kernel, cooperative chunks), every long row
# two-read, and short rows staged (a block per row, K == 1).
status_hard=skipped
if [ -x $B/bin/onorm_bench_cuda ]; then
  t0=$(date +%s); status_hard=ok
  for routing in "ONLINENORM_CUDA_CLUSTER=0" "ONLINENORM_CUDA_CLUSTER=0 ONLINENORM_CUDA_SPLIT=tworead" \
                 "ONLINENORM_CUDA_CLUSTER=0 ONLINENORM_CUDA_REG_MAX_COLS=0"; do
    echo "---- hard data, $routing" >> "$OUT/check.log"
    env $routing timeout 300 $B/bin/onorm_bench_cuda --check --hard >> "$OUT/check.log" 2>&1 \
      || status_hard="FAILED($routing)"
  done
  echo "check (hard data, other routings): $status_hard ($(( $(date +%s) - t0 )) s)"
fi

status_mem=skipped; status_race=skipped
if [ $sanitize = 1 ] && [ -x $B/bin/onorm_bench_cuda ]; then
  t0=$(date +%s)
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/onorm_bench_cuda --check --sanitize \
    >> "$OUT/check.log" 2>&1 && status_mem=ok || status_mem="FAILED($?)"
  timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 $B/bin/onorm_bench_cuda --check --sanitize \
    >> "$OUT/check.log" 2>&1 && status_race=ok || status_race="FAILED($?)"
  if [ "$status_pipe" = ok ]; then
    ONLINENORM_CUDA_PIPELINE=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 \
      $B/bin/onorm_bench_cuda --check --sanitize >> "$OUT/check.log" 2>&1 || status_mem="$status_mem pipelined:FAILED($?)"
  fi
  echo "sanitizer: memcheck $status_mem racecheck $status_race ($(( $(date +%s) - t0 )) s)"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|check:" "$OUT/check.log" | tail -4
fi

if [ $bench = 1 ] && [ -x $B/bin/onorm_bench_cuda ]; then
  $B/bin/onorm_bench_cuda --csv "$OUT/onorm.csv" > "$OUT/bench.log" 2>&1 || echo "bench: FAILED"
  # Alternatives to the default routing, measured in the same run (bench/cuda/NOTES.md).
  for alt in "ONLINENORM_CUDA_PIPELINE=1:16384,32768,131072,262144,1048576" \
             "ONLINENORM_CUDA_PIPELINE=1 ONLINENORM_CUDA_STAGED_CHUNK_BYTES=65536:32768,1048576" \
             "ONLINENORM_CUDA_STAGED_CHUNK_BYTES=16384:32768,1048576" \
             "ONLINENORM_CUDA_REG_MAX_COLS=2048:4096"; do
    echo "---- ${alt%%:*} widths ${alt#*:}" >> "$OUT/bench.log"
    timeout 120 env ${alt%%:*} $B/bin/onorm_bench_cuda --widths "${alt#*:}" --quick 2>&1 | grep -v "^backend\|^op " >> "$OUT/bench.log"
  done
  if [ -n "$torch_pid" ]; then
    wait "$torch_pid"
    python3 bench/torch_gpu.py --csv "$OUT/torch.csv" --onorm-csv "$OUT/onorm.csv" --md "$OUT/table.md" \
      >> "$OUT/torch.log" 2>&1 || echo "torch: FAILED (see torch.log)"
  fi
fi

echo "================ summary ================"
echo "build $status_build | ctest $status_ctest | check $status_check | check pipelined $status_pipe | hard routings $status_hard | memcheck $status_mem | racecheck $status_race"
if [ ! -f "$OUT/table.md" ] && [ -f "$OUT/onorm.csv" ] && [ -f bench/cuda/results/h200_torch.csv ]; then
  # torch not re-run: the side-by-side table from the recorded torch run on this device kind.
  python3 bench/torch_gpu.py --merge bench/cuda/results/h200_torch.csv --onorm-csv "$OUT/onorm.csv" \
    --md "$OUT/table.md" > /dev/null
fi
if [ -f "$OUT/table.md" ]; then
  cat "$OUT/table.md"
  sed -n '/^---- /,$p' "$OUT/bench.log"
elif [ -f "$OUT/bench.log" ]; then
  cat "$OUT/bench.log"
fi
