// Cross-backend: random shapes and dtypes through every GPU backend present and the CPU,
// each against the float64 reference with the contract's bounds, and the GPU against the CPU
// (reported). Skipped where no GPU is present.
#include <cmath>

#include "common/op_case.hpp"

namespace onorm_test {
namespace {

std::vector<onorm_backend> gpus_present() {
  std::vector<onorm_backend> v;
  for (onorm_backend b : {ONORM_BACKEND_CUDA, ONORM_BACKEND_HIP})
    if (onorm_backend_device_count(b) > 0) v.push_back(b);
  return v;
}

TEST(CrossBackend, RandomShapesAgainstCpuAndFloat64) {
  const std::vector<onorm_backend> gpus = gpus_present();
  if (gpus.empty())
    GTEST_SKIP() << "no GPU backend has a device (cuda: " << onorm_backend_unavailable_reason(ONORM_BACKEND_CUDA)
                 << "; hip: " << onorm_backend_unavailable_reason(ONORM_BACKEND_HIP) << ")";
  ONORM_OPEN_OR_SKIP(cpu, ONORM_BACKEND_CPU);
  std::vector<Ctx> gctx;
  for (onorm_backend b : gpus) {
    onorm_context c = nullptr;
    ASSERT_EQ(onorm_create(b, 0, &c), ONORM_OK) << onorm_last_error();
    gctx.emplace_back(c);
    std::printf("[ cross    ] %s\n", onorm_backend_name(c));
  }
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 pick(seed);
  const onorm_dtype dts[] = {ONORM_F32, ONORM_F16, ONORM_BF16};
  const int64_t col_choices[] = {1, 2, 3, 31, 64, 100, 127, 511, 768, 1000, 1024, 2049, 4096, 5000, 8192,
                                 12289, 16384, 32768, 65537, 131072, 262147, 1 << 20};
  for (int trial = 0; trial < 60; ++trial) {
    const Op op = all_ops()[pick() % all_ops().size()];
    const onorm_dtype in = dts[pick() % 3], out = dts[pick() % 3];
    const int64_t cols = col_choices[pick() % (sizeof col_choices / sizeof col_choices[0])];
    const int64_t max_rows = std::max<int64_t>(1, (int64_t{1} << 21) / cols);
    const int64_t rows = 1 + static_cast<int64_t>(pick() % static_cast<uint64_t>(std::min<int64_t>(max_rows, 300)));
    Layout L;
    L.gamma = pick() % 2;
    L.beta = pick() % 2;
    L.mean = L.rstd = pick() % 2;
    L.y_pad = pick() % 3 == 0 ? static_cast<int64_t>(pick() % 9) : 0;
    L.x_offset = pick() % 4 == 0 ? 1 : 0;
    const uint64_t case_seed = pick();
    CaseOutput ref_cpu;
    {
      std::mt19937_64 rng(case_seed);
      EXPECT_TRUE(run_checked(cpu, op, in, out, rows, cols, L, rng, nullptr, &ref_cpu));
    }
    for (size_t g = 0; g < gctx.size(); ++g) {
      std::mt19937_64 rng(case_seed);  // the same inputs as the CPU run
      CaseOutput got;
      EXPECT_TRUE(run_checked(gctx[g], op, in, out, rows, cols, L, rng, nullptr, &got));
      // Report how far the GPU is from the CPU (both are held to the reference above).
      const size_t diff_bytes = [&] {
        size_t d = 0;
        for (size_t i = 0; i < got.y_image.size() && i < ref_cpu.y_image.size(); ++i) d += got.y_image[i] != ref_cpu.y_image[i];
        return d;
      }();
      if (trial < 8 || HasFailure())
        std::printf("[ cross    ] %s %s: max ulp vs f64 %g (cpu %g), %zu bytes differ from cpu\n",
                    backend_name(gpus[g]), describe(gpus[g], op, in, out, rows, cols).c_str(), got.report.max_ulp,
                    ref_cpu.report.max_ulp, diff_bytes);
    }
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace onorm_test
