#!/usr/bin/env bash
# The HIP backend on the GPU machine, through HIP's NVIDIA platform: the same HIP sources
# compiled by nvcc against a patched copy of Debian's HIP headers, then the contract suite
# (which opens ONORM_BACKEND_HIP contexts), the cross-backend test, `onorm compare` on a few
# shapes and `onorm bench --backend hip`. AMD GPUs are not exercised here (none is lent).
#
#   HERE (dev machine, Debian with libamdhip64-dev and libhwy-dev), once:
#     backends/hip/pack_headers.sh      -> .hip-headers/  (HIP's headers; ignored by git)
#     scripts/gpu_check.sh --prepare    -> .deps/hwy      (Highway for the CPU backend)
#   THERE (run tool, carry [".hip-headers", ".deps"]), from the repo root:
#     scripts/gpu_check_hip.sh [--no-bench]
# Logs go to $OUT (the run tool's folder) or ./gpu-out.
set -uo pipefail
cd "$(dirname "$0")/.."
bench=1
for a in "$@"; do
  case "$a" in
    --no-bench) bench=0 ;;
  esac
done
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
B=build-gpu-hip
if [ ! -f .hip-headers/hip/hip_runtime.h ]; then
  echo "gpu_check_hip: .hip-headers/ missing (run backends/hip/pack_headers.sh on the dev machine and carry it)"
  exit 1
fi
extra=()
if [ -d .deps/hwy ]; then
  extra+=(-Dhwy_DIR="$PWD/.deps/hwy/usr/lib/x86_64-linux-gnu/cmake/hwy")
  export LD_LIBRARY_PATH="$PWD/.deps/hwy/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/hip_build.log"

t0=$(date +%s)
status_build=ok
{ cmake -S . -B $B "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DONLINENORM_WITH_CUDA=OFF -DONLINENORM_WITH_HIP=ON \
    -DONLINENORM_HIP_PLATFORM=nvidia -DONLINENORM_HIP_HEADERS_DIR="$PWD/.hip-headers" \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DONLINENORM_BUILD_BENCH=OFF -DCMAKE_POLICY_VERSION_MINIMUM=3.5 "${extra[@]}" &&
  cmake --build $B -j"$(nproc)" -- -k 0; } >> "$OUT/hip_build.log" 2>&1 || status_build=FAILED
echo "hip build: $status_build ($(( $(date +%s) - t0 )) s)"
if [ $status_build != ok ]; then
  # Keep going past others' failures: what matters here is the HIP module and the tests.
  grep -E "error|Error" "$OUT/hip_build.log" | head -40
  [ -f $B/lib/libonlinenorm_hip.so ] || exit 1
fi

$B/bin/onorm info 2>&1 | tee "$OUT/hip_info.log"

# The contract suite's HIP instances (every test whose name says hip), the backend creation and
# environment tests, the cross-backend test (CPU against HIP and float64), and the
# host-emulated wave64 tests (their names say hip too). CPU-only tests are others' business.
t0=$(date +%s)
status_ctest=ok
timeout 360 ctest --test-dir $B --output-on-failure -j"$(nproc)" -R "hip|Hip|HIP|Simt|Create|CrossBackend" \
  > "$OUT/hip_ctest.log" 2>&1 || status_ctest=FAILED
echo "ctest: $status_ctest ($(( $(date +%s) - t0 )) s)"
grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout" "$OUT/hip_ctest.log" | head -30
hip_ran=$(grep -cE "(hip|Hip|HIP).*Passed" "$OUT/hip_ctest.log")
hip_skipped=$(grep -cE "(hip|Hip|HIP).*Skipped" "$OUT/hip_ctest.log")
echo "ctest: $hip_ran tests naming hip passed, $hip_skipped skipped"

status_compare=ok
for spec in "softmax 1000 1000 f32" "log_softmax 64 4096 bf16" "layer_norm 512 2048 f16" "rms_norm 256 16384 bf16" \
            "softmax 8 100000 f32" "layer_norm 4 1000000 bf16"; do
  set -- $spec
  $B/bin/onorm compare --op "$1" --rows "$2" --cols "$3" --dtype "$4" --backends cpu,hip >> "$OUT/hip_compare.log" 2>&1 \
    || status_compare=FAILED
done
$B/bin/onorm compare --op softmax --rows 64 --cols 1000 --dist special --backends cpu,hip >> "$OUT/hip_compare.log" 2>&1 \
  || status_compare=FAILED
echo "compare: $status_compare"
cat "$OUT/hip_compare.log"

if [ $bench = 1 ]; then
  timeout 120 $B/bin/onorm bench --backend hip --json "$OUT/hip_bench.json" > "$OUT/hip_bench.log" 2>&1 || echo "bench: FAILED"
  tail -n 40 "$OUT/hip_bench.log"
fi
echo "================ hip summary ================"
echo "hip build $status_build | ctest $status_ctest | compare $status_compare"
[ $status_ctest = ok ] && [ $status_compare = ok ]
