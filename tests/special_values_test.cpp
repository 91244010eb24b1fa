// The contract's special values on every backend: masked (all -inf) rows, NaN anywhere,
// +inf in softmax rows, values near FLT_MAX, LayerNorm at a large offset. Each runs in a
// batch next to ordinary rows (which must stay unaffected) and at widths that reach the
// short-row, block-per-row and split-row paths.
#include <cmath>
#include <functional>
#include <limits>

#include "common/op_case.hpp"

namespace onorm_test {
namespace {

using Param = std::tuple<onorm_backend, onorm_dtype>;
class SpecialValues : public ::testing::TestWithParam<Param> {};

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const int64_t kWidths[] = {1, 5, 127, 4099, 70001};

// Runs op over rows made by gen, checks against the reference (which encodes the contract's
// special-value rules: NaN rows must be NaN, -inf must be exactly -inf, ...).
void run(onorm_context ctx, Op op, onorm_dtype dt, int64_t rows, int64_t cols, const Generator& gen,
         std::mt19937_64& rng, int out_dtype = -1, const Generator& gen_dy = nullptr) {
  // Default output: f32 (f64 for f64 input).
  const onorm_dtype out = out_dtype >= 0 ? static_cast<onorm_dtype>(out_dtype) : dt == ONORM_F64 ? ONORM_F64 : ONORM_F32;
  for (bool stats : {false, true}) {
    if (cols > 10000 && !stats) continue;  // long rows once
    Layout L;
    L.gamma = L.beta = L.mean = L.rstd = stats;
    L.y_pad = stats ? 3 : 0;
    EXPECT_TRUE(run_checked(ctx, op, dt, out, rows, cols, L, rng, gen, nullptr, gen_dy));
  }
}

// A backend that may refuse the dtype (F64 on a GPU) must refuse it, writing nothing.
void expect_unsupported(onorm_context ctx, onorm_dtype dt) {
  Tensor x(ctx, dt, 2, 5), y(ctx, dt, 2, 5);
  x.fill([](int64_t r, int64_t c) { return r == 0 ? -kInf : c == 2 ? kNaN : 1.0; });
  const std::vector<unsigned char> xb = x.image(), yb = y.image();
  const onorm_rows dy = x.dev_rows();  // softmax backward: x is both y and dy
  OpArgs a;
  a.dy = &dy;
  for (Op op : all_ops()) EXPECT_EQ(run_op(ctx, op, x.dev_rows(), y.dev_rows(), a), ONORM_ERROR_UNSUPPORTED);
  onorm_synchronize(ctx);
  x.download();
  y.download();
  EXPECT_TRUE(x.same_image(xb, "x"));
  EXPECT_TRUE(y.same_image(yb, "y"));
}

TEST_P(SpecialValues, AllNegativeInfinityRows) {
  const auto [backend, dt] = GetParam();
  ONORM_OPEN_OR_SKIP(ctx, backend);
  if (!contract_supports(backend, dt)) return expect_unsupported(ctx, dt);
  ONORM_SEEDED_RNG(rng);
  std::normal_distribution<double> nd(0, 2);
  for (int64_t cols : kWidths) {
    // Rows 0 and 2 are masked; rows 1 and 3 ordinary.
    auto gen = [&](int64_t r, int64_t) { return r % 2 == 0 ? -kInf : nd(rng); };
    for (Op op : {Op::softmax, Op::log_softmax}) {
      run(ctx, op, dt, 4, cols, gen, rng);
      run(ctx, op, dt, 4, cols, gen, rng, dt);  // output in the input dtype too
    }
    // Partially masked: -inf entries give exactly 0 / -inf, the rest normalizes over the others.
    auto partial = [&](int64_t, int64_t c) { return c % 3 == 1 ? -kInf : nd(rng); };
    run(ctx, Op::softmax, dt, 3, cols, partial, rng);
    run(ctx, Op::log_softmax, dt, 3, cols, partial, rng);
    if (HasFailure()) return;
  }
}

TEST_P(SpecialValues, NanAnywhereMakesTheRowNaN) {
  const auto [backend, dt] = GetParam();
  ONORM_OPEN_OR_SKIP(ctx, backend);
  if (!contract_supports(backend, dt)) return expect_unsupported(ctx, dt);
  ONORM_SEEDED_RNG(rng);
  std::normal_distribution<double> nd(0, 2);
  for (int64_t cols : kWidths) {
    // Row 0: NaN first; row 1: clean; row 2: NaN last; row 3: NaN in the middle; row 4: NaN and -inf.
    auto gen = [&](int64_t r, int64_t c) {
      if (r == 0 && c == 0) return kNaN;
      if (r == 2 && c == cols - 1) return kNaN;
      if (r == 3 && c == cols / 2) return kNaN;
      if (r == 4) return c == cols / 3 ? kNaN : -kInf;
      return nd(rng);
    };
    for (Op op : all_ops()) run(ctx, op, dt, 5, cols, gen, rng);
    if (HasFailure()) return;
  }
}

TEST_P(SpecialValues, PositiveInfinityMakesSoftmaxRowNaN) {
  const auto [backend, dt] = GetParam();
  ONORM_OPEN_OR_SKIP(ctx, backend);
  if (!contract_supports(backend, dt)) return expect_unsupported(ctx, dt);
  ONORM_SEEDED_RNG(rng);
  std::normal_distribution<double> nd(0, 2);
  for (int64_t cols : kWidths) {
    auto gen = [&](int64_t r, int64_t c) {
      if (r == 0 && c == cols - 1) return kInf;
      if (r == 2) return c == 0 ? kInf : -kInf;
      return nd(rng);
    };
    run(ctx, Op::softmax, dt, 3, cols, gen, rng);
    run(ctx, Op::log_softmax, dt, 3, cols, gen, rng);
    if (HasFailure()) return;
  }
}

// Finite inputs never overflow inside: softmax of values near the format's largest finite value.
TEST_P(SpecialValues, NearLargestFiniteSoftmaxIsExact) {
  const auto [backend, dt] = GetParam();
  ONORM_OPEN_OR_SKIP(ctx, backend);
  if (!contract_supports(backend, dt)) return expect_unsupported(ctx, dt);
  ONORM_SEEDED_RNG(rng);
  // The largest finite value of the input format and its ulp there.
  double big = static_cast<double>(std::numeric_limits<float>::max()), ulp = std::ldexp(1.0, 104);
  if (dt == ONORM_F16) big = 65504.0, ulp = 32.0;
  if (dt == ONORM_BF16) big = std::ldexp(255.0, 120), ulp = std::ldexp(1.0, 120);
  if (dt == ONORM_F64) big = std::numeric_limits<double>::max(), ulp = std::ldexp(1.0, 971);
  std::uniform_int_distribution<int> units(0, 2);
  for (int64_t cols : kWidths) {
    // Row 0: all within two ulps of +big (ties at the max share the mass); row 1: near -big;
    // row 2: +big and `low` alternating. For log_softmax low is 0: with -big the exact output
    // (-2 big) is beyond every format's range.
    for (Op op : {Op::softmax, Op::log_softmax}) {
      const double low = op == Op::softmax ? -big : 0.0;
      auto gen = [&](int64_t r, int64_t c) {
        const double spread = ulp * units(rng);
        if (r == 0) return big - spread;
        if (r == 1) return -big + spread;
        return c % 2 ? big - spread : low;
      };
      run(ctx, op, dt, 3, cols, gen, rng);
    }
    if (HasFailure()) return;
  }
}

// LayerNorm of 1e4 + N(0,1) keeps its variance; RMSNorm of large values keeps its scale.
TEST_P(SpecialValues, LayerNormAtLargeOffset) {
  const auto [backend, dt] = GetParam();
  ONORM_OPEN_OR_SKIP(ctx, backend);
  if (!contract_supports(backend, dt)) return expect_unsupported(ctx, dt);
  ONORM_SEEDED_RNG(rng);
  // f16 cannot hold 1e4 + N(0,1) with any resolution (ulp 8): use 1e3 + N(0, 8) there.
  const double center = dt == ONORM_F16 ? 1e3 : 1e4, scale = dt == ONORM_F16 ? 8.0 : dt == ONORM_BF16 ? 64.0 : 1.0;
  std::normal_distribution<double> nd(center, scale);
  for (int64_t cols : kWidths) {
    if (cols < 3) continue;
    run(ctx, Op::layer_norm, dt, 3, cols, [&](int64_t, int64_t) { return nd(rng); }, rng);
    run(ctx, Op::rms_norm, dt, 3, cols, [&](int64_t, int64_t) { return nd(rng); }, rng);
    if (HasFailure()) return;
  }
}

// Finite inputs never overflow inside: norms of rows whose squares overflow f32 (|x| ~ 1e19
// to 1e30) keep their scale. f16 cannot hold such values (its largest is 65504).
TEST_P(SpecialValues, NormsOfHugeFiniteValues) {
  const auto [backend, dt] = GetParam();
  ONORM_OPEN_OR_SKIP(ctx, backend);
  if (!contract_supports(backend, dt)) return expect_unsupported(ctx, dt);
  if (dt == ONORM_F16) GTEST_SKIP() << "f16 holds no value whose square overflows f32";
  ONORM_SEEDED_RNG(rng);
  std::normal_distribution<double> nd(0, 1);
  for (int64_t cols : kWidths) {
    // Row 0: N(0,1) * 1e19; row 1: 1e30 + N(0,1) * 1e29; row 2 ordinary.
    auto gen = [&](int64_t r, int64_t) { return r == 0 ? 1e19 * nd(rng) : r == 1 ? 1e30 + 1e29 * nd(rng) : nd(rng); };
    run(ctx, Op::rms_norm, dt, 3, cols, gen, rng);
    run(ctx, Op::layer_norm, dt, 3, cols, gen, rng);
    if (HasFailure()) return;
  }
}

// Constant rows: variance exactly 0, LayerNorm gives beta (rstd = 1/sqrt(eps)).
TEST_P(SpecialValues, ConstantRows) {
  const auto [backend, dt] = GetParam();
  ONORM_OPEN_OR_SKIP(ctx, backend);
  if (!contract_supports(backend, dt)) return expect_unsupported(ctx, dt);
  ONORM_SEEDED_RNG(rng);
  for (int64_t cols : kWidths) {
    auto gen = [&](int64_t r, int64_t) { return r == 0 ? 0.0 : r == 1 ? 3.0 : -1.5; };
    for (Op op : all_ops()) run(ctx, op, dt, 3, cols, gen, rng);
    if (HasFailure()) return;
  }
}

// The backward passes' rows: y(r, c, cols) per op; dy N(0, 2) with a NaN last in row 2 and one
// in row 4. Rows 0 and 3 hold a NaN in y (first, middle column), row 1 is clean: the NaN rows
// of dx are NaN, the clean rows beside them unaffected. dx in f32 and in the input dtype.
using BackwardY = std::function<double(int64_t r, int64_t c, int64_t cols, std::mt19937_64& rng)>;
void backward_rows(onorm_backend backend, onorm_dtype dt, Op op, const BackwardY& y_of) {
  ONORM_OPEN_OR_SKIP(ctx, backend);
  if (!contract_supports(backend, dt)) return expect_unsupported(ctx, dt);
  ONORM_SEEDED_RNG(rng);
  std::normal_distribution<double> nd(0, 2);
  for (int64_t cols : kWidths) {
    auto y = [&](int64_t r, int64_t c) {
      if ((r == 0 && c == 0) || (r == 3 && c == cols / 2)) return kNaN;
      return y_of(r, c, cols, rng);
    };
    auto dy = [&](int64_t r, int64_t c) {
      if ((r == 2 && c == cols - 1) || (r == 4 && c == cols / 3)) return kNaN;
      return nd(rng);
    };
    run(ctx, op, dt, 8, cols, y, rng, -1, dy);
    run(ctx, op, dt, 8, cols, y, rng, dt, dy);
    if (::testing::Test::HasFailure()) return;
  }
}

// Softmax backward. Rows: 4 -inf in y (and a NaN in dy); 5 all-zero y (dx exactly 0); 6 one-hot
// y (dx 0 wherever y is 0); 7 probabilities with exact zeros.
TEST_P(SpecialValues, SoftmaxBackwardNaNInYOrDy) {
  std::uniform_real_distribution<double> prob(0, 2);
  backward_rows(std::get<0>(GetParam()), std::get<1>(GetParam()), Op::softmax_backward,
                [&](int64_t r, int64_t c, int64_t cols, std::mt19937_64& rng) {
                  if (r == 4) return -kInf;
                  if (r == 5) return 0.0;
                  if (r == 6) return c == cols / 3 ? 1.0 : 0.0;
                  if (r == 7 && c % 3 == 1) return 0.0;
                  return prob(rng) / static_cast<double>(cols);
                });
}

// Log-softmax backward. Rows: 4 -inf in y (and a NaN in dy); 5 all -inf (a masked row: dx = dy);
// 6 one-hot (0 and -inf); 7 -inf, y above 0 (exp_any beyond the softmax range) and far below
// (exp underflows to 0).
TEST_P(SpecialValues, LogSoftmaxBackwardNaNInYOrDy) {
  std::normal_distribution<double> nd(0, 2);
  backward_rows(std::get<0>(GetParam()), std::get<1>(GetParam()), Op::log_softmax_backward,
                [&](int64_t r, int64_t c, int64_t cols, std::mt19937_64& rng) {
                  if (r == 4 || r == 5) return -kInf;
                  if (r == 6) return c == cols / 3 ? 0.0 : -kInf;
                  if (r == 7 && c % 3 == 1) return -kInf;
                  if (r == 7 && c % 3 == 2) return c % 2 ? 3.5 : -120.0;
                  return nd(rng) - std::log(static_cast<double>(cols));
                });
}

std::string name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(backend_name(std::get<0>(info.param))) + "_" + dtype_name(std::get<1>(info.param));
}
INSTANTIATE_TEST_SUITE_P(All, SpecialValues,
                         ::testing::Combine(::testing::ValuesIn(all_backends()), ::testing::ValuesIn(float_dtypes())),
                         name);

}  // namespace
}  // namespace onorm_test
