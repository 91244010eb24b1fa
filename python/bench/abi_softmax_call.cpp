// Time of one small call through the C ABI directly (the floor under the Python call):
// onorm_softmax on 8 x 128 float32 rows, CPU backend, best of 5 runs of 200000 calls.
//   g++ -O2 -std=c++17 -I include python/bench/abi_softmax_call.cpp -L build/lib -lonlinenorm \
//       -Wl,-rpath,$PWD/build/lib -o /tmp/abi_softmax_call && /tmp/abi_softmax_call
#include <onlinenorm/onlinenorm.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

int main() {
  constexpr int64_t rows = 8, cols = 128;
  constexpr int calls = 200000;
  std::vector<float> x(rows * cols), y(rows * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) * 0.25f;
  onorm_context ctx;
  if (onorm_create(ONORM_BACKEND_CPU, 0, &ctx) != ONORM_OK) return 1;
  const onorm_rows in{x.data(), ONORM_F32, rows, cols, cols}, out{y.data(), ONORM_F32, rows, cols, cols};
  double best = 1e30;
  for (int run = 0; run < 5; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) onorm_softmax(ctx, &in, &out);
    const std::chrono::duration<double, std::nano> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count() / calls);
  }
  std::printf("C ABI onorm_softmax 8x128 f32 (%s): %.0f ns/call\n", onorm_backend_name(ctx), best);
  onorm_destroy(ctx);
  return 0;
}
