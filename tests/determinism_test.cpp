// Determinism: the same input on the same backend gives bitwise the same output, run after
// run; on the CPU also with a different OpenMP thread count (the split of a row must not
// depend on it).
#include <omp.h>

#include <cstring>
#include <random>
#include <vector>

#include "common/op_case.hpp"

namespace onorm_test {
namespace {

class Determinism : public ::testing::TestWithParam<onorm_backend> {};

struct Shape {
  Op op;
  onorm_dtype in, out;
  int64_t rows, cols;
};

const Shape kShapes[] = {
    {Op::softmax, ONORM_F32, ONORM_F32, 17, 1000},       {Op::log_softmax, ONORM_BF16, ONORM_BF16, 5, 4097},
    {Op::layer_norm, ONORM_F16, ONORM_F32, 9, 3001},     {Op::rms_norm, ONORM_BF16, ONORM_F16, 33, 257},
    {Op::softmax, ONORM_BF16, ONORM_F32, 2, 1 << 18},    {Op::layer_norm, ONORM_F32, ONORM_BF16, 1, (1 << 20) + 3},
    {Op::rms_norm, ONORM_F32, ONORM_F32, 1, (1 << 19) + 1}, {Op::log_softmax, ONORM_F16, ONORM_F32, 24, 12345},
    {Op::softmax_backward, ONORM_F32, ONORM_F32, 17, 1000}, {Op::softmax_backward, ONORM_BF16, ONORM_F16, 1, (1 << 20) + 3},
    {Op::softmax_backward, ONORM_F16, ONORM_BF16, 5, 70001},
    {Op::log_softmax_backward, ONORM_F32, ONORM_F32, 17, 1000}, {Op::log_softmax_backward, ONORM_BF16, ONORM_F32, 1, (1 << 20) + 3},
};

// Runs the shape with fixed inputs (a seed per shape) and returns the output images.
CaseOutput run_once(onorm_context ctx, const Shape& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Layout L;
  L.gamma = L.beta = L.mean = L.rstd = true;
  L.y_pad = 1;
  CaseOutput out;
  EXPECT_TRUE(run_checked(ctx, s.op, s.in, s.out, s.rows, s.cols, L, rng, nullptr, &out));
  return out;
}

void expect_same(const CaseOutput& a, const CaseOutput& b, const std::string& what) {
  EXPECT_TRUE(a.y_image == b.y_image) << what << ": y differs bitwise";
  EXPECT_TRUE(a.mean_image == b.mean_image) << what << ": mean differs bitwise";
  EXPECT_TRUE(a.rstd_image == b.rstd_image) << what << ": rstd differs bitwise";
}

TEST_P(Determinism, RunAfterRun) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const Shape& s : kShapes) {
    const std::string what = describe(GetParam(), s.op, s.in, s.out, s.rows, s.cols);
    const CaseOutput a = run_once(ctx, s, seed), b = run_once(ctx, s, seed);
    expect_same(a, b, what);
    // And from a second context on the same device.
    ONORM_OPEN_OR_SKIP(ctx2, GetParam());
    expect_same(a, run_once(ctx2, s, seed), what + " (second context)");
  }
}

TEST(DeterminismCpu, ThreadCountDoesNotChangeBits) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int before = omp_get_max_threads();
  // A fresh context per thread count too, in case a backend fixes its team size when opened.
  auto run_with = [&](int threads, const Shape& s) {
    omp_set_num_threads(threads);
    onorm_context c = nullptr;
    EXPECT_EQ(onorm_create(ONORM_BACKEND_CPU, 0, &c), ONORM_OK);
    Ctx ctx(c);
    return run_once(ctx, s, seed);
  };
  for (const Shape& s : kShapes) {
    const std::string what = describe(ONORM_BACKEND_CPU, s.op, s.in, s.out, s.rows, s.cols);
    const CaseOutput one = run_with(1, s), two = run_with(2, s), three = run_with(3, s);
    expect_same(one, two, what + " (1 vs 2 threads)");
    expect_same(one, three, what + " (1 vs 3 threads)");
  }
  omp_set_num_threads(before);
}

// The norms' backward on the CPU: dx, dgamma and dbeta the same bits for 1, 2, 3 and 7 threads
// (API.md: fixed orders whatever the CPU thread count; the column sums are per group of rows
// fixed by the shape), on shapes with many groups, a few, a few of few rows each (rows that
// would make one group of 256 spread over up to 8 of 32 or fewer), and one.
TEST(DeterminismCpu, NormBackwardForAnyThreadCount) {
  const int before = omp_get_max_threads();
  std::mt19937 rng(static_cast<uint32_t>(fresh_seed()));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t shapes[][2] = {{70001, 333}, {1000, 4096}, {101, 20001}, {3, 65537}};
  for (const auto& shape : shapes) {
    const int64_t rows = shape[0], cols = shape[1];
    std::vector<float> x(static_cast<size_t>(rows * cols)), dy(x.size()), gamma(static_cast<size_t>(cols));
    std::vector<float> mean(static_cast<size_t>(rows), 3.0f), rstd(static_cast<size_t>(rows), 0.5f);
    for (float& v : x) v = 3.0f + 2.0f * normal(rng);
    for (float& v : dy) v = normal(rng);
    for (float& v : gamma) v = normal(rng);
    std::vector<float> dx1, dg1, db1;
    for (int threads : {1, 2, 3, 7}) {
      omp_set_num_threads(threads);
      onorm_context c = nullptr;
      ASSERT_EQ(onorm_create(ONORM_BACKEND_CPU, 0, &c), ONORM_OK);
      Ctx ctx(c);
      std::vector<float> dx(x.size()), dg(gamma.size()), db(gamma.size());
      const onorm_rows X{x.data(), ONORM_F32, rows, cols, cols}, DY{dy.data(), ONORM_F32, rows, cols, cols};
      const onorm_rows DX{dx.data(), ONORM_F32, rows, cols, cols};
      ASSERT_EQ(onorm_layer_norm_backward(c, &X, &DY, gamma.data(), mean.data(), rstd.data(), &DX, dg.data(), db.data()),
                ONORM_OK)
          << onorm_last_error();
      if (threads == 1) {
        dx1 = dx;
        dg1 = dg;
        db1 = db;
        continue;
      }
      const std::string what = std::to_string(rows) + "x" + std::to_string(cols) + ", " + std::to_string(threads) + " threads";
      EXPECT_EQ(std::memcmp(dx.data(), dx1.data(), dx.size() * 4), 0) << "dx, " << what;
      EXPECT_EQ(std::memcmp(dg.data(), dg1.data(), dg.size() * 4), 0) << "dgamma, " << what;
      EXPECT_EQ(std::memcmp(db.data(), db1.data(), db.size() * 4), 0) << "dbeta, " << what;
    }
  }
  omp_set_num_threads(before);
}

INSTANTIATE_TEST_SUITE_P(All, Determinism, ::testing::ValuesIn(all_backends()), BackendName());

}  // namespace
}  // namespace onorm_test
