#!/usr/bin/env bash
# The benchmark call on the GPU machine: build the CUDA module, its benchmark and the onorm
# tool; time every op and width (onorm_bench_cuda, 20 samples); then PyTorch eager and
# torch.compile on the same shapes in the same call (bench/torch_gpu.py, rows written as they
# are measured, bounded by TORCH_SECONDS), and the side-by-side table. Carry .deps. -> $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH="$PWD/.deps/hwy/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
B=build-gpu
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$OUT/device.txt"
t0=$(date +%s)
{ cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DONLINENORM_WITH_CUDA=ON -DONLINENORM_WITH_HIP=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
    -Dhwy_DIR="$PWD/.deps/hwy/usr/lib/x86_64-linux-gnu/cmake/hwy" &&
  cmake --build $B -j16 --target onlinenorm_cuda onorm_bench_cuda onorm; } > "$OUT/build.log" 2>&1 || {
  echo "build FAILED"; grep -E "error" "$OUT/build.log" | head -30; exit 1; }
echo "build ok ($(( $(date +%s) - t0 )) s)"
t0=$(date +%s)
timeout 200 $B/bin/onorm_bench_cuda --csv "$OUT/onorm.csv" > "$OUT/bench.log" 2>&1; echo "onorm bench exit $? ($(( $(date +%s) - t0 )) s)"
timeout "${TORCH_SECONDS:-300}" python3 bench/torch_gpu.py --csv "$OUT/torch.csv" > "$OUT/torch.log" 2>&1
echo "torch exit $? ($(wc -l < "$OUT/torch.csv") lines)"
python3 bench/torch_gpu.py --merge "$OUT/torch.csv" --onorm-csv "$OUT/onorm.csv" --md "$OUT/table.md" > /dev/null
cat "$OUT/table.md"
