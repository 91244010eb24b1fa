#!/usr/bin/env bash
# CPU, CUDA and HIP-on-NVIDIA side by side on one GPU machine: the CUDA build gets the HIP
# module of a HIP-platform=nvidia build beside it (the registry loads modules from the core
# library's folder), then `onorm compare` over all three and the cross-backend test.
# Carry .deps and .hip-headers (see scripts/gpu_final.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
hwy=(-Dhwy_DIR="$PWD/.deps/hwy/usr/lib/x86_64-linux-gnu/cmake/hwy")
export LD_LIBRARY_PATH="$PWD/.deps/hwy/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DONLINENORM_BUILD_BENCH=OFF -DCMAKE_POLICY_VERSION_MINIMUM=3.5 "${hwy[@]}")
{ cmake -S . -B build-sbs-hip "${common[@]}" -DONLINENORM_WITH_CUDA=OFF -DONLINENORM_WITH_HIP=ON \
    -DONLINENORM_HIP_PLATFORM=nvidia -DONLINENORM_HIP_HEADERS_DIR="$PWD/.hip-headers" -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build build-sbs-hip -j16 --target onlinenorm_hip; } > "$OUT/sbs_build_hip.log" 2>&1 &
{ cmake -S . -B build-sbs "${common[@]}" -DONLINENORM_WITH_CUDA=ON -DONLINENORM_WITH_HIP=OFF -DCMAKE_CUDA_ARCHITECTURES=90a &&
  cmake --build build-sbs -j16 --target onorm onlinenorm_cuda cross_backend_test; } > "$OUT/sbs_build.log" 2>&1
wait
cp build-sbs-hip/lib/libonlinenorm_hip.so build-sbs/lib/ || { tail -20 "$OUT/sbs_build_hip.log"; exit 1; }
O=build-sbs/bin/onorm
$O info
for c in "softmax 4096 4096 bf16 normal" "log_softmax 256 32768 f32 normal" "layer_norm 1024 8192 bf16 large-offset" \
         "rms_norm 16 1048576 f32 normal" "softmax 64 1000 f32 special"; do
  set -- $c
  $O compare --op $1 --rows $2 --cols $3 --dtype $4 --dist $5 --backends cpu,cuda,hip --json "$OUT/compare_$1_$4.json"
  echo "exit $?"
done
build-sbs/bin/cross_backend_test 2>&1 | tail -5
