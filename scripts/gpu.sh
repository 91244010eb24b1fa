#!/usr/bin/env bash
# Everything the GPU machine runs, one subcommand per call (device time is scarce). Builds use
# the CMake presets cuda (build-gpu/) and hip-nvidia (build-gpu-hip/); logs, CSVs, JSON and
# plots go to $OUT (the device tool's folder) or ./gpu-out.
#
#   HERE (dev machine, Debian with libhwy-dev and libamdhip64-dev), once:
#     scripts/gpu.sh prepare      stage what the GPU machine lacks into ignored folders:
#                                 .deps/hwy (Highway 1.0.3 for the CPU backend) and
#                                 .hip-headers/ (HIP's headers for the HIP-on-NVIDIA build);
#                                 with PEERS=1 also .deps/wheels (the Python package's build
#                                 tools and pytest) and .deps/peers_site.tar.xz (quack, Liger
#                                 and their dependencies, from PyPI, unpacked and xz-packed:
#                                 about 50 MB); name .deps and .hip-headers in `carry`.
#   THERE, from the repository root:
#     scripts/gpu.sh check [--no-bench] [--no-torch] [--no-sanitize]
#                                 CUDA build, ctest, onorm_bench_cuda --check (+ --big), the hard
#                                 data through other routings, memcheck and racecheck, then the
#                                 CUDA benchmark beside PyTorch; a summary line and table last.
#     scripts/gpu.sh hip [--no-bench]
#                                 HIP through HIP's NVIDIA platform: build, the HIP contract and
#                                 cross-backend tests, `onorm compare` cpu vs hip, `onorm bench`.
#     scripts/gpu.sh bench        onorm_bench_cuda (20 samples) and PyTorch eager / torch.compile
#                                 on the same shapes (bounded by TORCH_SECONDS), side by side.
#     scripts/gpu.sh all          check (no bench) and hip (no bench) in parallel, then the
#                                 `onorm bench` sweep with its PNG: main as it stands.
#     scripts/gpu.sh compare      CPU, CUDA and HIP-on-NVIDIA side by side (`onorm compare`).
#     scripts/gpu.sh python       the Python package against build-gpu's library: pytest (CUDA
#                                 tensors included) and the call overhead.
#     scripts/gpu.sh peers [ARGS] bench/peers_gpu.py (quack, Liger, torch beside onlinenorm),
#                                 after `python`; ARGS go to the script.
#     scripts/gpu.sh tool         the onorm tool's check: its tests, info, run, compare, bench.
#     scripts/gpu.sh explore [TUNE:widths ...]
#                                 quick check and timing of the default routing beside
#                                 ONLINENORM_TUNE alternatives (docs/tuning.md); CHECK_TUNES
#                                 (space-separated) re-runs the check under each; NCU_CASES
#                                 ("op,dtype,rows,cols" ...) profiles kernels with ncu.
#
# The GPU machine (Ubuntu 24.04 image) has cmake, ninja, nvcc 13, gtest, benchmark and python3
# with torch + triton, but no Highway and no HIP: both travel, found through hwy_DIR and
# LD_LIBRARY_PATH, and through the hip-nvidia preset's ONLINENORM_HIP_HEADERS_DIR.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2; }
cmd=${1:-}
case "$cmd" in
  prepare|check|hip|bench|all|compare|tool|explore|python|peers) shift ;;
  *) usage ;;
esac

prepare() {
  local dst=.deps/hwy/usr l
  rm -rf .deps/hwy
  mkdir -p "$dst/include" "$dst/lib/x86_64-linux-gnu/cmake"
  cp -r /usr/include/hwy "$dst/include/"
  cp -r /usr/lib/x86_64-linux-gnu/cmake/hwy "$dst/lib/x86_64-linux-gnu/cmake/"
  for l in libhwy libhwy_contrib libhwy_test; do
    cp -L /usr/lib/x86_64-linux-gnu/$l.so.1.0.3 "$dst/lib/x86_64-linux-gnu/"
    ln -sf $l.so.1.0.3 "$dst/lib/x86_64-linux-gnu/$l.so.1"
    ln -sf $l.so.1 "$dst/lib/x86_64-linux-gnu/$l.so"
  done
  du -sh .deps
  # HIP's headers (Debian's libamdhip64-dev; HIP_INCLUDE names another include folder),
  # unmodified: CMake patches its own copy for CUDA 13 (cmake/HipNvidiaHeaders.cmake). Only
  # what the NVIDIA platform reads travels; AMD's detail folders are left out.
  local src=${HIP_INCLUDE:-/usr/include}
  if [ ! -f "$src/hip/nvidia_detail/nvidia_hip_runtime_api.h" ]; then
    echo "prepare: $src/hip/nvidia_detail/nvidia_hip_runtime_api.h not found (install libamdhip64-dev);" \
      ".hip-headers/ not staged" >&2
    return 1
  fi
  rm -rf .hip-headers
  mkdir -p .hip-headers
  cp -r "$src/hip" .hip-headers/hip
  rm -rf .hip-headers/hip/amd_detail .hip-headers/hip/hcc_detail .hip-headers/hip/nvcc_detail  # nvcc_detail: a link
  echo "prepare: $(du -sh .hip-headers | cut -f1) of HIP headers in .hip-headers/"
  [ "${PEERS:-0}" = 1 ] || return 0
  # The GPU machine's Python is 3.12 with torch and triton; the rest travels.
  local py=(--python-version 3.12 --only-binary=:all: --platform manylinux_2_28_x86_64)
  rm -rf .deps/wheels .deps/peers && mkdir -p .deps/wheels .deps/peers/site
  python3 -m pip download -q --no-deps -d .deps/wheels "${py[@]}" nanobind scikit-build-core pytest pluggy \
    iniconfig packaging pathspec pygments || return 1
  python3 -m pip download -q --no-deps -d .deps/peers "${py[@]}" quack-kernels==0.2.4 nvidia-cutlass-dsl==4.3.5 \
    liger-kernel==0.8.5 apache-tvm-ffi==0.1.6 torch-c-dlpack-ext cuda-python cuda-bindings || return 1
  local w
  for w in .deps/peers/*.whl; do unzip -q -o "$w" -d .deps/peers/site; done
  tar -C .deps/peers/site -cf - . | xz -T0 -6 > .deps/peers_site.tar.xz
  rm -rf .deps/peers
  echo "prepare: $(du -sh .deps | cut -f1) in .deps/ with the peers"
}

if [ "$cmd" = prepare ]; then
  prepare
  exit $?
fi

OUT=${OUT:-$root/gpu-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
hwy=()
if [ -d .deps/hwy ]; then
  hwy=(-Dhwy_DIR="$root/.deps/hwy/usr/lib/x86_64-linux-gnu/cmake/hwy")
  export LD_LIBRARY_PATH="$root/.deps/hwy/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
B=build-gpu      # preset cuda
H=build-gpu-hip  # preset hip-nvidia
jobs=$(nproc)

# configure PRESET LOG [cmake -D options...]: the preset plus the staged Highway.
configure() {
  local preset=$1 log=$2
  shift 2
  cmake --preset "$preset" "${hwy[@]}" "$@" >> "$log" 2>&1
}

# CUDA build, tests, checks and sanitizers; the benchmark beside PyTorch unless --no-bench.
check() {
  local bench=1 torch=1 sanitize=1 a
  for a in "$@"; do
    case "$a" in
      --no-bench) bench=0 ;;
      --no-torch) torch=0 ;;
      --no-sanitize) sanitize=0 ;;
      *) echo "check: unknown option $a"; return 2 ;;
    esac
  done
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/build.log"

  # torch.compile's kernels compile on the CPUs while CUDA builds; the timing run loads them
  # from Inductor's on-disk cache.
  local torch_pid=""
  if [ $torch = 1 ] && [ $bench = 1 ]; then
    python3 bench/torch_gpu.py --warm > "$OUT/torch.log" 2>&1 &
    torch_pid=$!
  fi

  local t0 status_build=ok
  t0=$(date +%s)
  { configure cuda "$OUT/build.log" -DONLINENORM_CUDA_PTXAS_VERBOSE=ON &&
    cmake --build --preset cuda -j"$jobs" -- -k 0 >> "$OUT/build.log" 2>&1; } || status_build=FAILED
  echo "build: $status_build ($(( $(date +%s) - t0 )) s)"
  [ $status_build = ok ] || grep -E "error|Error" "$OUT/build.log" | head -40

  local status_ctest=skipped
  if [ -x $B/bin/onorm_bench_cuda ] || [ $status_build = ok ]; then
    t0=$(date +%s)
    timeout 420 ctest --preset cuda -j8 > "$OUT/ctest.log" 2>&1 && status_ctest=ok || status_ctest=FAILED
    echo "ctest: $status_ctest ($(( $(date +%s) - t0 )) s)"
    grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Skipped|Not Run|Timeout" "$OUT/ctest.log" | head -30
  fi

  local status_check=skipped
  if [ -x $B/bin/onorm_bench_cuda ]; then
    t0=$(date +%s)
    { $B/bin/onorm_bench_cuda --check && $B/bin/onorm_bench_cuda --check --big; } > "$OUT/check.log" 2>&1 \
      && status_check=ok || status_check=FAILED
    echo "check: $status_check ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|check:" "$OUT/check.log" | head -20
  fi

  # The hard norm data (--check --hard: offsets, outliers at chunk boundaries, tiny rows with
  # eps 0, +-3e38, eps 1e39; out of place and in place) through the schedules the default
  # routing leaves out: no clusters (f32 16K-256K take the staged kernel, cooperative chunks),
  # every long row two-read, and short rows staged (a block per row, K == 1).
  local status_hard=skipped routing
  if [ -x $B/bin/onorm_bench_cuda ]; then
    t0=$(date +%s); status_hard=ok
    for routing in cluster=0 cluster=0,tworead=1 cluster=0,reg_cols=0; do
      echo "---- hard data, ONLINENORM_TUNE=$routing" >> "$OUT/check.log"
      ONLINENORM_TUNE=$routing timeout 300 $B/bin/onorm_bench_cuda --check --hard >> "$OUT/check.log" 2>&1 \
        || status_hard="FAILED($routing)"
    done
    echo "check (hard data, other routings): $status_hard ($(( $(date +%s) - t0 )) s)"
  fi

  local status_mem=skipped status_race=skipped
  if [ $sanitize = 1 ] && [ -x $B/bin/onorm_bench_cuda ]; then
    t0=$(date +%s)
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/onorm_bench_cuda --check --sanitize \
      >> "$OUT/check.log" 2>&1 && status_mem=ok || status_mem="FAILED($?)"
    timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 $B/bin/onorm_bench_cuda --check --sanitize \
      >> "$OUT/check.log" 2>&1 && status_race=ok || status_race="FAILED($?)"
    echo "sanitizer: memcheck $status_mem racecheck $status_race ($(( $(date +%s) - t0 )) s)"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|check:" "$OUT/check.log" | tail -4
  fi

  if [ $bench = 1 ] && [ -x $B/bin/onorm_bench_cuda ]; then
    $B/bin/onorm_bench_cuda --csv "$OUT/onorm.csv" > "$OUT/bench.log" 2>&1 || echo "bench: FAILED"
    # Alternatives to the default routing, measured in the same run (bench/cuda/NOTES.md).
    local alt
    for alt in "stage_bytes=16384:32768,1048576" "reg_cols=2048:4096"; do
      echo "---- ONLINENORM_TUNE=${alt%%:*} widths ${alt#*:}" >> "$OUT/bench.log"
      ONLINENORM_TUNE=${alt%%:*} timeout 120 $B/bin/onorm_bench_cuda --widths "${alt#*:}" --quick 2>&1 \
        | grep -v "^backend\|^op " >> "$OUT/bench.log"
    done
    if [ -n "$torch_pid" ]; then
      wait "$torch_pid"
      python3 bench/torch_gpu.py --csv "$OUT/torch.csv" --onorm-csv "$OUT/onorm.csv" --md "$OUT/table.md" \
        >> "$OUT/torch.log" 2>&1 || echo "torch: FAILED (see torch.log)"
    fi
  fi

  echo "================ summary ================"
  echo "build $status_build | ctest $status_ctest | check $status_check |" \
    "hard routings $status_hard | memcheck $status_mem | racecheck $status_race"
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
  [ $status_build = ok ] && [ $status_ctest = ok ] && [ $status_check = ok ] && [ $status_hard = ok ] &&
    { [ $sanitize = 0 ] || { [ "$status_mem" = ok ] && [ "$status_race" = ok ]; }; }
}

# HIP through HIP's NVIDIA platform: the same HIP sources compiled by nvcc against the staged
# headers. AMD GPUs are not exercised here (none is lent).
hip() {
  local bench=1 a
  for a in "$@"; do
    case "$a" in
      --no-bench) bench=0 ;;
      *) echo "hip: unknown option $a"; return 2 ;;
    esac
  done
  if [ ! -f .hip-headers/hip/hip_runtime.h ]; then
    echo "hip: .hip-headers/ missing (run scripts/gpu.sh prepare on the dev machine and carry it)"
    return 1
  fi
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/hip_build.log"
  local t0 status_build=ok
  t0=$(date +%s)
  { configure hip-nvidia "$OUT/hip_build.log" &&
    cmake --build --preset hip-nvidia -j"$jobs" -- -k 0 >> "$OUT/hip_build.log" 2>&1; } || status_build=FAILED
  echo "hip build: $status_build ($(( $(date +%s) - t0 )) s)"
  if [ $status_build != ok ]; then
    # Keep going past others' failures: what matters here is the HIP module and the tests.
    grep -E "error|Error" "$OUT/hip_build.log" | head -40
    [ -f $H/lib/libonlinenorm_hip.so ] || return 1
  fi

  $H/bin/onorm info 2>&1 | tee "$OUT/hip_info.log"

  # The contract suite's HIP instances (every test whose name says hip), the backend creation
  # and environment tests, the cross-backend test (CPU against HIP and float64), and the
  # host-emulated wave64 tests (their names say hip too). CPU-only tests are others' business.
  local status_ctest=ok
  t0=$(date +%s)
  timeout 360 ctest --preset hip-nvidia -j"$jobs" -R "hip|Hip|HIP|Simt|Create|CrossBackend" \
    > "$OUT/hip_ctest.log" 2>&1 || status_ctest=FAILED
  echo "ctest: $status_ctest ($(( $(date +%s) - t0 )) s)"
  grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout" "$OUT/hip_ctest.log" | head -30
  echo "ctest: $(grep -cE "(hip|Hip|HIP).*Passed" "$OUT/hip_ctest.log") tests naming hip passed," \
    "$(grep -cE "(hip|Hip|HIP).*Skipped" "$OUT/hip_ctest.log") skipped"

  local status_compare=ok spec
  for spec in "softmax 1000 1000 f32" "log_softmax 64 4096 bf16" "layer_norm 512 2048 f16" "rms_norm 256 16384 bf16" \
              "softmax 8 100000 f32" "layer_norm 4 1000000 bf16"; do
    set -- $spec
    $H/bin/onorm compare --op "$1" --rows "$2" --cols "$3" --dtype "$4" --backends cpu,hip >> "$OUT/hip_compare.log" 2>&1 \
      || status_compare=FAILED
  done
  $H/bin/onorm compare --op softmax --rows 64 --cols 1000 --dist special --backends cpu,hip >> "$OUT/hip_compare.log" 2>&1 \
    || status_compare=FAILED
  echo "compare: $status_compare"
  cat "$OUT/hip_compare.log"

  if [ $bench = 1 ]; then
    timeout 120 $H/bin/onorm bench --backend hip --json "$OUT/hip_bench.json" > "$OUT/hip_bench.log" 2>&1 || echo "bench: FAILED"
    tail -n 40 "$OUT/hip_bench.log"
  fi
  echo "================ hip summary ================"
  echo "hip build $status_build | ctest $status_ctest | compare $status_compare"
  [ $status_ctest = ok ] && [ $status_compare = ok ]
}

# Builds only what the timing calls need (the CUDA module, its benchmark, the onorm tool).
build_bench_targets() {
  local t0
  t0=$(date +%s)
  { configure cuda "$OUT/build.log" "$@" &&
    cmake --build --preset cuda -j"$jobs" --target onlinenorm_cuda onorm_bench_cuda onorm >> "$OUT/build.log" 2>&1; } || {
    echo "build FAILED"; grep -E "error" "$OUT/build.log" | head -30; return 1; }
  echo "build ok ($(( $(date +%s) - t0 )) s)"
}

# onorm_bench_cuda (C ABI, CUDA events, median of 20) and PyTorch eager / torch.compile on the
# same shapes in the same call (bench/torch_gpu.py writes rows as they are measured).
bench() {
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader \
    | tee "$OUT/device.txt"
  build_bench_targets || return 1
  local t0
  t0=$(date +%s)
  timeout 200 $B/bin/onorm_bench_cuda --csv "$OUT/onorm.csv" > "$OUT/bench.log" 2>&1
  echo "onorm bench exit $? ($(( $(date +%s) - t0 )) s)"
  timeout "${TORCH_SECONDS:-300}" python3 bench/torch_gpu.py --csv "$OUT/torch.csv" > "$OUT/torch.log" 2>&1
  echo "torch exit $? ($(wc -l < "$OUT/torch.csv") lines)"
  python3 bench/torch_gpu.py --merge "$OUT/torch.csv" --onorm-csv "$OUT/onorm.csv" --md "$OUT/table.md" > /dev/null
  cat "$OUT/table.md"
}

# check and hip in parallel (their builds share the CPUs), then the `onorm bench` sweep with
# its PNG. Full logs in $OUT/cuda and $OUT/hip; the summaries in $OUT.
all() {
  local top=$OUT hip_pid rc_cuda rc_hip
  mkdir -p "$top/cuda" "$top/hip"
  (OUT=$top/hip timeout 450 "$root/scripts/gpu.sh" hip --no-bench > "$top/hip_summary.txt" 2>&1; echo "hip exit $?" >> "$top/hip_summary.txt") &
  hip_pid=$!
  OUT=$top/cuda timeout 500 "$root/scripts/gpu.sh" check --no-bench --no-torch 2>&1 | tee "$top/cuda_summary.txt"
  rc_cuda=${PIPESTATUS[0]}
  wait $hip_pid
  timeout 120 $B/bin/onorm bench --backend cuda --json "$top/onorm_bench_cuda.json" \
    --png "$top/onorm_bench_cuda.png" > "$top/onorm_bench_cuda.log" 2>&1; echo "onorm bench exit $?"
  tail -5 "$top/onorm_bench_cuda.log"
  tail -30 "$top/hip_summary.txt"
  grep -q "^hip exit 0$" "$top/hip_summary.txt" && rc_hip=0 || rc_hip=1
  [ "$rc_cuda" = 0 ] && [ $rc_hip = 0 ]
}

# CPU, CUDA and HIP-on-NVIDIA side by side: the CUDA build gets the HIP module of the
# hip-nvidia build beside it (the registry loads modules from the core library's folder).
compare() {
  { configure hip-nvidia "$OUT/sbs_build_hip.log" &&
    cmake --build --preset hip-nvidia -j"$jobs" --target onlinenorm_hip >> "$OUT/sbs_build_hip.log" 2>&1; } &
  { configure cuda "$OUT/sbs_build.log" &&
    cmake --build --preset cuda -j"$jobs" --target onorm onlinenorm_cuda cross_backend_test >> "$OUT/sbs_build.log" 2>&1; }
  wait
  cp $H/lib/libonlinenorm_hip.so $B/lib/ || { tail -20 "$OUT/sbs_build_hip.log"; return 1; }
  local O=$B/bin/onorm c rc=0
  $O info
  for c in "softmax 4096 4096 bf16 normal" "log_softmax 256 32768 f32 normal" "layer_norm 1024 8192 bf16 large-offset" \
           "rms_norm 16 1048576 f32 normal" "softmax 64 1000 f32 special"; do
    set -- $c
    $O compare --op $1 --rows $2 --cols $3 --dtype $4 --dist $5 --backends cpu,cuda,hip --json "$OUT/compare_$1_$4.json"
    echo "exit $?"
  done
  $B/bin/cross_backend_test 2>&1 | tail -5
  rm -f $B/lib/libonlinenorm_hip.so  # `check` reuses build-gpu: its tests expect no HIP module
}

# The onorm tool's check: its tests, info, run, compare (cpu vs cuda, determinism, special
# values, expected failures) and the bench sweep with JSON + PNG.
tool() {
  nvidia-smi -L
  local t0 cuda=ON
  t0=$(date +%s)
  if ! { configure cuda "$OUT/build.log" -DONLINENORM_BUILD_TOOL_TESTS=ON &&
         cmake --build --preset cuda -j"$jobs" --target onorm onorm_npy_test onlinenorm_cuda >> "$OUT/build.log" 2>&1; }; then
    echo "build with CUDA FAILED; the tool alone:"; grep -E "error" "$OUT/build.log" | head -20
    cuda=OFF
    { configure cuda "$OUT/build.log" -DONLINENORM_WITH_CUDA=OFF &&
      cmake --build --preset cuda -j"$jobs" --target onorm onorm_npy_test >> "$OUT/build.log" 2>&1; } ||
      { echo "build FAILED"; tail -30 "$OUT/build.log"; return 1; }
  fi
  echo "build ($cuda CUDA): $(( $(date +%s) - t0 )) s"
  local O=$B/bin/onorm
  set -x
  $O info
  $O run --op softmax --rows 4096 --cols 4096 --dtype bf16
  $O compare --op softmax --rows 512 --cols 4096 --dtype bf16 --json "$OUT/compare_softmax_bf16.json"
  $O compare --op layer_norm --rows 1024 --cols 8192 --dtype f32 --backends cpu,cuda,cuda
  $O compare --op rms_norm --rows 256 --cols 3000 --dtype f16 --out-dtype f32
  $O compare --op log_softmax --rows 64 --cols 262144 --dtype bf16
  $O compare --op softmax --rows 64 --cols 1000 --dist special --json "$OUT/compare_special.json"
  $O compare --op layer_norm --rows 64 --cols 300 --dist special
  $O compare --op layer_norm --rows 512 --cols 4096 --dist large-offset
  $O compare --op softmax --rows 16 --cols 256 --backends cpu,cuda --perturb-ulps 100000@cuda:0; echo "exit $? (3 expected)"
  $O compare --op softmax --rows 16 --cols 256 --backends cuda:5; echo "exit $? (1 expected)"
  $O compare --op softmax --rows 16 --cols 256 --dtype f64 --json "$OUT/compare_f64.json"; echo "exit $? (1 expected: f64 is CPU only)"
  $O bench --backend cuda --json "$OUT/bench_cuda.json" --png "$OUT/bench_cuda.png" > "$OUT/bench.log" 2>&1; echo "bench exit $?"
  head -n 3 "$OUT/bench.log"; tail -n 25 "$OUT/bench.log"
  set +x
  ( cd $B/tools && ctest --output-on-failure -j4 ) > "$OUT/ctest.log" 2>&1; echo "tool ctest exit $?"
  grep -E "tests passed|Failed|Skipped|FAIL" "$OUT/ctest.log" | head -20
}

# An exploration call (bench/cuda/NOTES.md): each argument is "TUNE:widths", TUNE an
# ONLINENORM_TUNE value timed on those widths beside the default routing.
explore() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  build_bench_targets -DONLINENORM_CUDA_PTXAS_VERBOSE=ON || return 1
  grep -A2 "cluster_rows_kernel" "$OUT/build.log" | grep -E "registers|spill" | sort | uniq -c | head -12
  local t0 tune alt c op dt rows cols
  t0=$(date +%s)
  [ -n "${SKIP_CHECK:-}" ] || { timeout 200 $B/bin/onorm_bench_cuda --check > "$OUT/check.log" 2>&1
    echo "check exit $? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|check:" "$OUT/check.log" | head -12; }
  for tune in ${CHECK_TUNES:-}; do  # e.g. "short_wide=0 cluster=0,tworead=1"
    echo "---- check with ONLINENORM_TUNE=$tune" >> "$OUT/check.log"
    t0=$(date +%s)
    ONLINENORM_TUNE=$tune timeout 200 $B/bin/onorm_bench_cuda --check >> "$OUT/check.log" 2>&1
    echo "check with ONLINENORM_TUNE=$tune: exit $? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL" "$OUT/check.log" | head -5
  done
  t0=$(date +%s)
  timeout 150 $B/bin/onorm_bench_cuda --quick --csv "$OUT/onorm.csv" > "$OUT/bench.log" 2>&1
  echo "bench exit $? ($(( $(date +%s) - t0 )) s)"
  for alt in "$@"; do
    echo "---- ONLINENORM_TUNE=${alt%%:*} widths ${alt#*:}" >> "$OUT/bench.log"
    ONLINENORM_TUNE=${alt%%:*} timeout 100 $B/bin/onorm_bench_cuda --widths "${alt#*:}" --quick 2>&1 \
      | grep -v "^op " >> "$OUT/bench.log"
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
}

# The Python package built against build-gpu's library (scripts/gpu.sh check, or bench, builds
# it) into /tmp/onorm-py; pytest with CUDA tensors; the overhead of one small call.
python() {
  [ -f build-gpu/lib/libonlinenorm.so.0 ] || build_bench_targets || return 1
  rm -rf /tmp/onorm-py && mkdir -p /tmp/onorm-py
  python3 -m pip install -q --no-deps --no-index --target /tmp/onorm-py/tools .deps/wheels/*.whl || return 1
  PYTHONPATH=/tmp/onorm-py/tools python3 -m pip install -q --no-deps --no-index --no-build-isolation \
    --target /tmp/onorm-py/pkg --config-settings=build-dir=$root/build-gpu/python \
    --config-settings=cmake.define.ONLINENORM_PREBUILT_LIBRARY=$root/build-gpu/lib/libonlinenorm.so.0 ./python \
    > "$OUT/pip.log" 2>&1 || { tail -20 "$OUT/pip.log"; return 1; }
  export PYTHONPATH=/tmp/onorm-py/pkg:/tmp/onorm-py/tools
  (cd /tmp && timeout 300 python3 -m pytest -q -p no:cacheprovider "$root/python/tests" > "$OUT/pytest.log" 2>&1)
  local rc=$?
  tail -3 "$OUT/pytest.log"
  timeout 60 python3 python/bench/call_overhead.py cuda
  g++ -O2 -std=c++17 -I include python/bench/abi_softmax_call.cpp -L build-gpu/lib -lonlinenorm \
    -Wl,-rpath,$root/build-gpu/lib -o /tmp/onorm-py/abi && /tmp/onorm-py/abi cuda
  return $rc
}

# bench/peers_gpu.py with the peers of .deps/peers_site.tar.xz (after `python`).
peers() {
  [ -d /tmp/onorm-py/pkg ] || python > /dev/null || return 1
  mkdir -p /tmp/onorm-py/site && tar -C /tmp/onorm-py/site -xJf .deps/peers_site.tar.xz || return 1
  # The wheels' .pth files are not read from PYTHONPATH: cutlass's folder is named here.
  PYTHONPATH=/tmp/onorm-py/pkg:/tmp/onorm-py/site:/tmp/onorm-py/site/nvidia_cutlass_dsl/python_packages \
    python3 bench/peers_gpu.py --csv "$OUT/peers.csv" --md "$OUT/peers.md" "$@"
  cat "$OUT/peers.md"
}

"$cmd" "$@"
