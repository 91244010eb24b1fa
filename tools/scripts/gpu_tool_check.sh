#!/usr/bin/env bash
# The onorm tool's check on the GPU machine, in one call: build the library, the CUDA module and
# onorm; run the tool's tests; info, run, compare (cpu vs cuda, determinism, special values) and the
# bench sweep with JSON + PNG. Needs .deps/hwy (scripts/gpu_check.sh --prepare) in the run's carry.
# Logs, JSON and PNG go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-tool-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
B=build-gputool
extra=()
if [ -d .deps/hwy ]; then
  extra+=(-Dhwy_DIR="$PWD/.deps/hwy/usr/lib/x86_64-linux-gnu/cmake/hwy")
  export LD_LIBRARY_PATH="$PWD/.deps/hwy/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
nvidia-smi -L
t0=$(date +%s)
cuda=ON
if ! { cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DONLINENORM_WITH_CUDA=ON -DONLINENORM_WITH_HIP=OFF \
        -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DONLINENORM_BUILD_TESTS=OFF \
        -DONLINENORM_BUILD_TOOL_TESTS=ON -DONLINENORM_BUILD_BENCH=OFF "${extra[@]}" &&
       cmake --build $B -j16 --target onorm onorm_npy_test onlinenorm_cuda; } > "$OUT/build.log" 2>&1; then
  echo "build with CUDA FAILED; the tool alone:"; grep -E "error" "$OUT/build.log" | head -20
  cuda=OFF
  cmake -S . -B $B -DONLINENORM_WITH_CUDA=OFF >> "$OUT/build.log" 2>&1 &&
    cmake --build $B -j16 --target onorm onorm_npy_test >> "$OUT/build.log" 2>&1 || { echo "build FAILED"; tail -30 "$OUT/build.log"; exit 1; }
fi
echo "build ($cuda CUDA): $(( $(date +%s) - t0 )) s"
O=$B/bin/onorm
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
