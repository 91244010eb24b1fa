// Time of one small call through the C ABI directly (the floor under the Python call):
// onorm_softmax, best of 5 runs. Default 8 x 128 float32 rows on the CPU backend; `cuda` or
// `hip` as the first argument: 1 x 4096 bf16 rows in device memory, the time per call of many
// calls in a row (host time, the queue drained at the end of each run).
//   g++ -O2 -std=c++17 -I include python/bench/abi_softmax_call.cpp -L build/lib -lonlinenorm \
//       -Wl,-rpath,$PWD/build/lib -o /tmp/abi_softmax_call && /tmp/abi_softmax_call [cuda|hip]
#include <onlinenorm/onlinenorm.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  onorm_backend backend = ONORM_BACKEND_CPU;
  if (argc > 1 && std::strcmp(argv[1], "cuda") == 0) backend = ONORM_BACKEND_CUDA;
  if (argc > 1 && std::strcmp(argv[1], "hip") == 0) backend = ONORM_BACKEND_HIP;
  const bool gpu = backend != ONORM_BACKEND_CPU;
  const int64_t rows = gpu ? 1 : 8, cols = gpu ? 4096 : 128;
  const onorm_dtype dtype = gpu ? ONORM_BF16 : ONORM_F32;
  const size_t bytes = static_cast<size_t>(rows * cols) * (gpu ? 2 : 4);
  const int calls = gpu ? 20000 : 200000;
  onorm_context ctx;
  if (onorm_create(backend, 0, &ctx) != ONORM_OK) {
    std::printf("no %s backend here\n", argc > 1 ? argv[1] : "cpu");
    return 1;
  }
  std::vector<unsigned char> host(bytes, 0);  // zeros: a valid row in every dtype
  void *x = nullptr, *y = nullptr;
  if (onorm_malloc(ctx, bytes, &x) != ONORM_OK || onorm_malloc(ctx, bytes, &y) != ONORM_OK) return 1;
  onorm_memcpy(ctx, x, host.data(), bytes, ONORM_COPY_HOST_TO_DEVICE);
  const onorm_rows in{x, dtype, rows, cols, cols}, out{y, dtype, rows, cols, cols};
  double best = 1e30;
  for (int run = 0; run < 5; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) onorm_softmax(ctx, &in, &out);
    onorm_synchronize(ctx);
    const std::chrono::duration<double, std::nano> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count() / calls);
  }
  std::printf("C ABI onorm_softmax %lldx%lld %s (%s): %.0f ns/call\n", static_cast<long long>(rows),
              static_cast<long long>(cols), gpu ? "bf16" : "f32", onorm_backend_name(ctx), best);
  onorm_free(ctx, x);
  onorm_free(ctx, y);
  onorm_destroy(ctx);
  return 0;
}
