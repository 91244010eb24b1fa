// The consumer: C++ layer over an installed onlinenorm, checked numerically.
#include <onlinenorm/onlinenorm.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

extern "C" int consumer_c_rms(float* y);

int main() {
  try {
    onorm::Context ctx(ONORM_BACKEND_CPU);
    std::printf("backend: %s, targets:", ctx.name().c_str());
    for (const std::string& t : onorm::cpu_targets()) std::printf(" %s", t.c_str());
    std::printf("\n");
    for (onorm_backend b : {ONORM_BACKEND_CUDA, ONORM_BACKEND_HIP})
      std::printf("backend %d: %d device(s) %s\n", static_cast<int>(b), onorm::device_count(b),
                  onorm::unavailable_reason(b).c_str());
    std::vector<float> x = {0.f, 1.f, 2.f, 3.f, 10.f, 10.f, 10.f, 10.f};
    std::vector<float> y(8);
    onorm::Buffer<float> dx(ctx, 8), dy(ctx, 8);
    dx.upload(x);
    ctx.softmax(dx.rows(2, 4), dy.rows(2, 4));
    ctx.synchronize();
    dy.download(y.data(), 8);
    double s = 0;
    for (int i = 0; i < 4; ++i) s += std::exp(i - 3.0);
    for (int i = 0; i < 4; ++i)
      if (std::fabs(y[i] - std::exp(i - 3.0) / s) > 1e-6) return std::printf("softmax wrong at %d\n", i), 1;
    for (int i = 4; i < 8; ++i)
      if (std::fabs(y[i] - 0.25) > 1e-7) return std::printf("softmax wrong at %d\n", i), 1;
    try {
      ctx.softmax(dx.rows(2, 4), dy.rows(2, 3));
      return std::printf("mismatched shapes did not throw\n"), 1;
    } catch (const onorm::Error& e) {
      if (e.status() != ONORM_ERROR_INVALID_ARGUMENT) return 1;
    }
    float r[4];
    if (consumer_c_rms(r) != 0 || std::fabs(r[0] - 1.0f) > 1e-6 || std::fabs(r[1] + 1.0f) > 1e-6)
      return std::printf("C ABI rms_norm wrong\n"), 1;
    std::printf("consumer ok\n");
    return 0;
  } catch (const onorm::Error& e) {
    std::printf("onorm::Error: %s\n", e.what());
    return 1;
  }
}
