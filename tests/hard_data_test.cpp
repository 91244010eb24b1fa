// Hard data on every backend and every CPU target: the value distributions that break a
// naive accumulation order (issue 9). Outliers at column 0 and at every block boundary a
// backend may have (CPU chunks of 4096 columns, CPU rows split over threads from 16384
// columns when rows < threads, GPU slices of 1024/2048/4096), large offsets, rows near
// FLT_MAX, tiny rows with eps 0, eps beyond FLT_MAX, two-valued rows one ulp apart, constant
// offset rows. Every input dtype, every output dtype the backend takes (F64 on the CPU); y
// against the float64 reference with the contract's bound, mean and rstd with theirs.
#include <algorithm>
#include <cfloat>
#include <set>
#include <tuple>

#include "common/op_case.hpp"
#include "common/where.hpp"

namespace onorm_test {
namespace {

using Param = std::tuple<Where, onorm_dtype>;  // where, input dtype

// Widths at and around every regime boundary: vector tails, one CPU chunk +-1, two chunks,
// the CPU split threshold (16384) + 1, GPU slice counts.
const int64_t kWidths[] = {1, 3, 127, 1025, 4095, 4096, 4097, 8193, 16385, 65537};

// Columns where a block starts in some backend (GPU slices of 1024/2048, CPU chunks of 4096,
// the halves of a split row, powers of two beyond), column 0 and the last column.
std::vector<int64_t> boundary_columns(int64_t cols) {
  std::set<int64_t> s = {0, cols - 1};
  for (int64_t k : {1024, 2048, 3072, 4096, 8192, 12288, 16384, 32768, 65536})
    if (k < cols) s.insert(k);
  return {s.begin(), s.end()};
}

// Output dtypes the backend must take.
std::vector<onorm_dtype> outputs(onorm_backend b) {
  std::vector<onorm_dtype> v;
  for (onorm_dtype d : float_dtypes())
    if (contract_supports(b, d)) v.push_back(d);
  return v;
}

// The contract's statistics bounds, strictly: mean within 1e-6 * (|mean| + 1/rstd) (the
// reference's own check adds an absolute 1e-6, which says nothing about rows of 1e-30), rstd
// within 1e-5 relative. One f32 ulp of slack for the store of a subnormal mean.
::testing::AssertionResult stats_within_contract(Op op, const CaseOutput& co) {
  auto stat = [](const std::vector<unsigned char>& image, int64_t r) {
    float v;
    std::memcpy(&v, image.data() + kGuard + 4 * r, 4);
    return static_cast<double>(v);
  };
  for (int64_t r = 0; r < co.ref.rows; ++r) {
    const double want_rstd = has_rstd(op) ? co.ref.rstd[static_cast<size_t>(r)] : 0.0;
    if (has_mean(op) && !co.mean_image.empty() && std::isfinite(want_rstd) && want_rstd > 0) {
      const double want = co.ref.mean[static_cast<size_t>(r)], got = stat(co.mean_image, r);
      const double b = 1e-6 * (std::fabs(want) + 1.0 / want_rstd) + onorm_ref::ulp(want, ONORM_F32);
      if (!(std::fabs(got - want) <= b))
        return ::testing::AssertionFailure() << "mean[" << r << "] = " << got << ", want " << want << " (bound " << b
                                             << ")";
    }
    if (has_rstd(op) && !co.rstd_image.empty() && std::isfinite(want_rstd)) {
      const double got = stat(co.rstd_image, r);
      if (!(std::fabs(got - want_rstd) <= 1e-5 * want_rstd))
        return ::testing::AssertionFailure() << "rstd[" << r << "] = " << got << ", want " << want_rstd;
    }
  }
  return ::testing::AssertionSuccess();
}

class HardData : public ::testing::TestWithParam<Param> {
 protected:
  onorm_backend backend() const { return std::get<0>(GetParam()).backend; }
  onorm_dtype in() const { return std::get<1>(GetParam()); }
  // The default (best) CPU target and the GPUs take the widest widths; the other CPU targets
  // stop at 16385 (still past the split threshold) to keep the suite's runtime small.
  bool full() const {
    const Where& w = std::get<0>(GetParam());
    const std::vector<std::string> t = cpu_target_names();
    return w.backend != ONORM_BACKEND_CPU || t.empty() || w.cpu_target == t.front();
  }
  std::vector<int64_t> widths(int64_t min_cols = 1) const {
    std::vector<int64_t> v;
    for (int64_t c : kWidths)
      if (c >= min_cols && (full() || c == 3 || c == 4097 || c == 16385)) v.push_back(c);
    return v;
  }

  // Runs op on rows x cols made by gen into every output dtype, with mean and rstd, and checks
  // y, mean and rstd. Returns false after the first failure (one clear message per test).
  bool sweep(onorm_context ctx, Op op, int64_t rows, int64_t cols, const Generator& gen, std::mt19937_64& rng,
             double eps = 1e-5, bool gamma = false, bool f16_out = true, const Generator& gen_dy = nullptr) {
    for (onorm_dtype out : outputs(backend())) {
      if (out == ONORM_F16 && !f16_out) continue;
      // Big cases into f32 only: the output conversions are covered by the small ones.
      if (rows * cols > 32768 && out != ONORM_F32) continue;
      Layout L;
      L.mean = L.rstd = true;
      L.gamma = L.beta = gamma;
      L.eps = eps;
      CaseOutput co;
      const ::testing::AssertionResult r = run_checked(ctx, op, in(), out, rows, cols, L, rng, gen, &co, gen_dy);
      EXPECT_TRUE(r);
      if (!r) return false;
      const ::testing::AssertionResult s = stats_within_contract(op, co);
      EXPECT_TRUE(s) << describe(backend(), op, in(), out, rows, cols) << " eps " << eps;
      if (!s) return false;
    }
    return true;
  }

  // Rows of N(0,1) with one outlier each, at every boundary column; all three outlier sizes at
  // column 0. Rows >= 16384 columns also run alone (the CPU split path: rows < threads).
  void backward_outliers(Op op);
  void outliers(Op op) {
    ONORM_OPEN_WHERE_OR_SKIP(ctx, std::get<0>(GetParam()));
    ONORM_SEEDED_RNG(rng);
    const double sizes[] = {100.0, 300.0, 1e4};
    for (int64_t cols : widths()) {
      std::vector<std::pair<int64_t, double>> at;  // (column, value) per row
      for (int64_t c : boundary_columns(cols))
        for (size_t k = 0; k < 3; ++k)
          // Beyond the split threshold only the far boundaries (runtime: these rows are long).
          if (cols <= 16385 || c == 0 || c >= 32768)
          if (c == 0 || k == at.size() % 3) at.emplace_back(c, sizes[k]);
      auto gen = [&](int64_t r, int64_t c) {
        const auto& o = at[static_cast<size_t>(r)];
        return c == o.first ? o.second : cheap_normal(rng, 0.0, 1.0);
      };
      if (!sweep(ctx, op, static_cast<int64_t>(at.size()), cols, gen, rng)) return;
      if (cols >= 16384) {
        for (const auto& o : {at.front(), at.back()}) {
          auto one = [&](int64_t, int64_t c) { return c == o.first ? o.second : cheap_normal(rng, 0.0, 1.0); };
          if (!sweep(ctx, op, 1, cols, one, rng)) return;
        }
      }
    }
  }
};

TEST_P(HardData, LayerNormOutliersAtBoundaries) { outliers(Op::layer_norm); }
TEST_P(HardData, RmsNormOutliersAtBoundaries) { outliers(Op::rms_norm); }
TEST_P(HardData, SoftmaxOutliersAtBoundaries) { outliers(Op::softmax); }
TEST_P(HardData, LogSoftmaxOutliersAtBoundaries) { outliers(Op::log_softmax); }

std::vector<double> offsets(onorm_dtype dt);

// The backward passes: per row, y holds probabilities (softmax) or their logarithms
// (log-softmax) with a peak of 0.5 at one boundary column, and dy an outlier (100, 300 or 1e4)
// at a boundary column (the same one, or the next); dy at offsets 1e3..1e6 + N(0,1) in further
// rows (dy_j - sum_k y_k dy_k, dy_j - exp(y_j) sum_k dy_k cancel). Rows of 16384 columns and
// more also alone (the CPU split path).
void HardData::backward_outliers(Op op) {
  ONORM_OPEN_WHERE_OR_SKIP(ctx, std::get<0>(GetParam()));
  ONORM_SEEDED_RNG(rng);
  const bool log_sm = op == Op::log_softmax_backward;
  const double sizes[] = {100.0, 300.0, 1e4};
  const std::vector<double> off = offsets(in());
  for (int64_t cols : widths()) {
    const std::vector<int64_t> at = boundary_columns(cols);
    struct RowKind {
      int64_t peak, outlier_col;
      double outlier, offset;
    };
    std::vector<RowKind> kinds;
    for (size_t k = 0; k < at.size(); ++k) {
      kinds.push_back({at[k], at[k], sizes[k % 3], 0.0});
      kinds.push_back({at[k], at[(k + 1) % at.size()], sizes[(k + 1) % 3], 0.0});
    }
    for (double o : off) kinds.push_back({at.back(), -1, 0.0, o});
    const double p = 1.0 / static_cast<double>(cols);
    auto y = [&](int64_t r, int64_t c) {
      const double v = c == kinds[static_cast<size_t>(r)].peak ? 0.5 : p * std::exp(cheap_normal(rng, 0.0, 1.0)) * 0.5;
      return log_sm ? std::log(v) : v;
    };
    auto dy = [&](int64_t r, int64_t c) {
      const RowKind& k = kinds[static_cast<size_t>(r)];
      return c == k.outlier_col ? k.outlier : cheap_normal(rng, k.offset, 1.0);
    };
    if (!sweep(ctx, op, static_cast<int64_t>(kinds.size()), cols, y, rng, 1e-5, false, true, dy)) return;
    if (cols >= 16384)
      for (size_t r : {size_t{0}, kinds.size() - 1}) {
        auto y1 = [&](int64_t, int64_t c) { return y(static_cast<int64_t>(r), c); };
        auto dy1 = [&](int64_t, int64_t c) { return dy(static_cast<int64_t>(r), c); };
        if (!sweep(ctx, op, 1, cols, y1, rng, 1e-5, false, true, dy1)) return;
      }
  }
}
TEST_P(HardData, SoftmaxBackwardOutliersAtBoundaries) { backward_outliers(Op::softmax_backward); }
TEST_P(HardData, LogSoftmaxBackwardOutliersAtBoundaries) { backward_outliers(Op::log_softmax_backward); }

// Log-softmax backward of any y, not only log-probabilities: y uniform in [-100, 80] (exp(y)
// from subnormal to 5.5e34), dy N(0,1). Into every output but f16 (where exp(y) sum dy
// overflows): the CPU's exp for 16-bit outputs (simd_exp16-inl.h) over its whole range.
TEST_P(HardData, LogSoftmaxBackwardOfAnyY) {
  ONORM_OPEN_WHERE_OR_SKIP(ctx, std::get<0>(GetParam()));
  ONORM_SEEDED_RNG(rng);
  std::uniform_real_distribution<double> u(-100.0, 80.0);
  for (int64_t cols : widths()) {
    auto y = [&](int64_t, int64_t) { return u(rng); };
    auto dy = [&](int64_t, int64_t) { return cheap_normal(rng, 0.0, 1.0); };
    if (!sweep(ctx, Op::log_softmax_backward, std::max<int64_t>(1, 4096 / cols), cols, y, rng, 1e-5, false, false, dy))
      return;
  }
}

// Softmax and log-softmax into 16-bit outputs (the CPU computes their exp with a cheaper,
// less exact polynomial there: backends/cpu/simd_exp16-inl.h) at every width, the long ones
// too, on hard rows: wide spreads (most terms far below the max), an outlier, a large offset,
// values near the dtype's maximum, half masked, constant, a NaN, a +inf, and two-valued rows
// (the max once, max - d elsewhere) whose sum is nearly all exp(-d) terms: the exp's error at
// one argument reaches every output. Rows >= 16384 columns also run alone (the CPU split path).
TEST_P(HardData, SoftmaxIntoSixteenBitOutputs) {
  ONORM_OPEN_WHERE_OR_SKIP(ctx, std::get<0>(GetParam()));
  ONORM_SEEDED_RNG(rng);
  const onorm_dtype dt = in();
  const double big = dt == ONORM_F16 ? 65504.0 : dt == ONORM_BF16 ? std::ldexp(255.0, 120) : FLT_MAX;
  const double spacing = dt == ONORM_F16 ? 32.0 : dt == ONORM_BF16 ? std::ldexp(1.0, 120) : std::ldexp(1.0, 104);
  const double offset = dt == ONORM_F16 ? 3e4 : 1e5;
  const double two_valued[] = {1e-3, 0.1, 0.3, 0.7, 1.3, 2.9, 6.1};
  const int kinds = 9 + 7;
  std::uniform_int_distribution<int> steps(0, 50);
  for (int64_t cols : widths()) {
    auto gen = [&](int64_t r, int64_t c) -> double {
      switch (r % kinds) {
        case 0: return cheap_normal(rng, 0.0, 1.0);
        case 1: return cheap_normal(rng, 0.0, 30.0);
        case 2: return c == cols / 2 ? 1e4 : cheap_normal(rng, 0.0, 1.0);
        case 3: return cheap_normal(rng, offset, 1.0);
        case 4: return big - spacing * steps(rng);
        case 5: return c % 2 == 0 ? -std::numeric_limits<double>::infinity() : cheap_normal(rng, 0.0, 3.0);
        case 6: return 7.0;
        case 7: return c == cols - 1 ? std::numeric_limits<double>::quiet_NaN() : cheap_normal(rng, 0.0, 1.0);
        case 8: return c == 0 ? std::numeric_limits<double>::infinity() : cheap_normal(rng, 0.0, 1.0);
        default: return c == 0 ? 0.0 : -two_valued[r % kinds - 9];
      }
    };
    for (onorm_dtype out : {ONORM_BF16, ONORM_F16}) {
      if (!contract_supports(backend(), out)) continue;
      for (Op op : {Op::softmax, Op::log_softmax}) {
        Layout L;
        ASSERT_TRUE(run_checked(ctx, op, dt, out, kinds, cols, L, rng, gen));
        if (cols >= 16384)
          for (int kind : {1, 2}) {
            auto one = [&](int64_t, int64_t c) { return gen(kind, c); };
            ASSERT_TRUE(run_checked(ctx, op, dt, out, 1, cols, L, rng, one));
          }
      }
    }
  }
}

// Large offsets: offset + N(0,1), one offset per row (f16 tops out at 65504; bf16 rounds the
// noise away at 1e6, which leaves a constant row: still a case). No E[x^2] - E[x]^2.
std::vector<double> offsets(onorm_dtype dt) {
  if (dt == ONORM_F16) return {1e3, 3e4};
  return {1e3, 1e5, 1e6};
}

TEST_P(HardData, LargeOffsets) {
  ONORM_OPEN_WHERE_OR_SKIP(ctx, std::get<0>(GetParam()));
  ONORM_SEEDED_RNG(rng);
  const std::vector<double> off = offsets(in());
  auto gen = [&](int64_t r, int64_t) { return cheap_normal(rng, off[static_cast<size_t>(r) % off.size()], 1.0); };
  for (int64_t cols : widths(2)) {
    for (Op op : all_ops())
      if (!sweep(ctx, op, static_cast<int64_t>(off.size()), cols, gen, rng)) return;
    if (cols >= 16384)  // alone: the split path
      for (Op op : {Op::layer_norm, Op::rms_norm})
        if (!sweep(ctx, op, 1, cols, [&](int64_t, int64_t) { return cheap_normal(rng, off.back(), 1.0); }, rng))
          return;
  }
}

// The shape that showed the rstd defect: 19 x 5000 of 1e6 + N(0,1) (f64 output among others).
TEST_P(HardData, OffsetRstd19x5000) {
  ONORM_OPEN_WHERE_OR_SKIP(ctx, std::get<0>(GetParam()));
  ONORM_SEEDED_RNG(rng);
  const double center = offsets(in()).back();
  for (Op op : {Op::layer_norm, Op::rms_norm})
    if (!sweep(ctx, op, 19, 5000, [&](int64_t, int64_t) { return cheap_normal(rng, center, 1.0); }, rng, 1e-5, true))
      return;
}

// Outliers every 256 columns on an offset: 1e4 + N(0,1) with 3e4 at every 256th column, so
// that every outlier falls into one accumulator lane on every target, whose float sum of
// squares then drops the low digits of the small terms added after them; beta cancels the
// outliers' y (about 16 * gamma), so that an rstd a few ulps off shows. Four rows, one alone
// where that takes the split path.
TEST_P(HardData, LayerNormPeriodicOutliersOnAnOffset) {
  ONORM_OPEN_WHERE_OR_SKIP(ctx, std::get<0>(GetParam()));
  ONORM_SEEDED_RNG(rng);
  auto gen = [&](int64_t, int64_t c) { return c % 256 == 0 ? 3e4 : cheap_normal(rng, 1e4, 1.0); };
  // xhat of an outlier: 2e4 (1 - p) / (2e4 sqrt(p (1 - p))), p = 1/256.
  const double p = 1.0 / 256, xhat = (1 - p) / std::sqrt(p * (1 - p));
  Layout L;
  L.mean = L.rstd = L.gamma = L.beta = true;
  std::vector<double> g;  // gamma's values, drawn per width: beta cancels them at the outliers
  L.gamma_at = [&](int64_t, int64_t c) { return g[static_cast<size_t>(c)]; };
  L.beta_at = [&](int64_t, int64_t c) {
    return c % 256 == 0 ? -xhat * g[static_cast<size_t>(c)] + cheap_normal(rng, 0.0, 0.05) : cheap_normal(rng, 0.0, 1.0);
  };
  for (int64_t cols : widths(4097)) {
    g.resize(static_cast<size_t>(cols));
    for (double& v : g) v = cheap_normal(rng, 1.0, 0.5);
    for (int64_t rows : {int64_t(4), int64_t(1)}) {
      if (rows == 1 && cols < 16384) continue;
      CaseOutput co;
      const ::testing::AssertionResult r =
          run_checked(ctx, Op::layer_norm, in(), ONORM_F32, rows, cols, L, rng, gen, &co);
      EXPECT_TRUE(r);
      if (!r) return;
      const ::testing::AssertionResult s = stats_within_contract(Op::layer_norm, co);
      EXPECT_TRUE(s) << describe(backend(), Op::layer_norm, in(), ONORM_F32, rows, cols);
      if (!s) return;
    }
  }
}

// Constant rows at an offset: variance exactly 0, so rstd = 1/sqrt(eps) (a GPU gave 16 for
// 1e6 + 0.125) and LayerNorm's y is beta. f16 cannot hold 1e6: 1000.125 (rounds to 1000).
TEST_P(HardData, ConstantOffsetRows) {
  ONORM_OPEN_WHERE_OR_SKIP(ctx, std::get<0>(GetParam()));
  ONORM_SEEDED_RNG(rng);
  const double v = in() == ONORM_F16 ? 1000.125 : 1e6 + 0.125;
  for (int64_t cols : widths())
    for (Op op : all_ops())
      if (cols == 1 || cols == 3 || cols == 4097 || cols >= 16384)
      // Two rows (1e6 + 0.125 and 1e6 + 1e4 + 0.125); one alone where that takes the split path.
      if (!sweep(ctx, op, cols >= 16384 ? 1 : 2, cols, [&](int64_t r, int64_t) { return v + 1e4 * static_cast<double>(r); },
                 rng))
        return;
}

// Norms of rows whose squares (or even differences) overflow f32: y stays finite and correctly
// scaled, rstd is a subnormal float. The 4-element row gave y[0] = inf (exact 1.732); the 1e20
// row collapsed to 0 with F64 output (and F16 output on a target without F16C).
TEST_P(HardData, NormsNearFltMax) {
  ONORM_OPEN_WHERE_OR_SKIP(ctx, std::get<0>(GetParam()));
  if (in() == ONORM_F16) GTEST_SKIP() << "f16 holds no value whose square overflows f32";
  ONORM_SEEDED_RNG(rng);
  const double big = 3e38;
  for (Op op : {Op::layer_norm, Op::rms_norm}) {
    const double four[] = {big, -big, -big, -big}, e20[] = {1e20, -1e20, 3e20, -3e20};
    if (!sweep(ctx, op, 1, 4, [&](int64_t, int64_t c) { return four[c]; }, rng)) return;
    if (!sweep(ctx, op, 1, 4, [&](int64_t, int64_t c) { return e20[c]; }, rng)) return;
    for (int64_t cols : widths(5)) {
      // Row 0: +-3e38 with three negatives per positive; row 1: +-3e38 at chunk starts and the
      // last column among N(0,1); row 2: the 1e20 pattern repeated; row 3: 3e38 at column 0
      // only (the mean and the variance are both dominated by one huge value).
      auto gen = [&](int64_t r, int64_t c) {
        switch (r) {
          case 0: return c % 4 == 0 ? big : -big;
          case 1: return (c % 4096 == 0 || c == cols - 1) ? (c % 8192 == 0 ? big : -big) : cheap_normal(rng, 0, 1);
          case 2: return e20[c % 4];
          default: return c == 0 ? big : cheap_normal(rng, 0, 1);
        }
      };
      if (!sweep(ctx, op, 4, cols, gen, rng, 1e-5, cols % 2 == 1)) return;
      if (cols >= 16384 && !sweep(ctx, op, 1, cols, [&](int64_t, int64_t c) { return gen(0, c); }, rng)) return;
    }
  }
}

// Softmax and log-softmax of values near FLT_MAX (differences overflow f32), with the maximum
// at a block boundary, and of the bf16/f32 values around it.
TEST_P(HardData, SoftmaxNearFltMax) {
  ONORM_OPEN_WHERE_OR_SKIP(ctx, std::get<0>(GetParam()));
  ONORM_SEEDED_RNG(rng);
  const double big = in() == ONORM_F16 ? 65504.0 : 3e38;
  for (int64_t cols : widths()) {
    const std::vector<int64_t> at = boundary_columns(cols);
    // Row r: -big everywhere, big at one boundary column; then a row of big - N(0,1) * big/1e3.
    const int64_t rows = static_cast<int64_t>(std::min<size_t>(at.size(), 6)) + 1;
    auto gen = [&](int64_t r, int64_t c) {
      if (r + 1 == rows) return big - std::fabs(cheap_normal(rng, 0, big * 1e-3));
      const size_t k = static_cast<size_t>(r) * at.size() / static_cast<size_t>(rows - 1);
      return c == at[k] ? big : -big + std::fabs(cheap_normal(rng, 0, big * 1e-3));
    };
    for (Op op : {Op::softmax, Op::log_softmax}) {
      // log_softmax of -big next to big is -2 big, beyond every format: the small values are
      // brought to about -300 instead. Its outputs near -big still overflow f16 (rightly -inf).
      if (op == Op::log_softmax) {
        auto lg = [&](int64_t r, int64_t c) { const double v = gen(r, c); return v < 0 ? -std::fabs(v) * 1e-36 : v; };
        if (!sweep(ctx, op, rows, cols, lg, rng, 1e-5, false, big <= 65504.0)) return;
      } else if (!sweep(ctx, op, rows, cols, gen, rng)) {
        return;
      }
    }
  }
}

// Tiny rows: 1e-30 * N(0,1) with eps 0. Their squares (1e-60) underflow f32; outputs must stay
// finite and correct, rstd ~1e30. f16 holds nothing near 1e-30.
TEST_P(HardData, TinyRowsEpsZero) {
  ONORM_OPEN_WHERE_OR_SKIP(ctx, std::get<0>(GetParam()));
  if (in() == ONORM_F16) GTEST_SKIP() << "f16 holds no value near 1e-30";
  ONORM_SEEDED_RNG(rng);
  for (int64_t cols : widths(2))
    for (Op op : {Op::layer_norm, Op::rms_norm}) {
      // Row 1 has an offset (1e-30 + 1e-31 N(0,1)): the mean matters there.
      auto gen = [&](int64_t r, int64_t) { return r == 0 ? cheap_normal(rng, 0, 1e-30) : cheap_normal(rng, 1e-30, 1e-31); };
      if (!sweep(ctx, op, 2, cols, gen, rng, 0.0)) return;
    }
}

// eps beyond FLT_MAX must not be cast to float (1e39 gave rstd 0 instead of ~3.16e-20).
TEST_P(HardData, EpsBeyondFltMax) {
  ONORM_OPEN_WHERE_OR_SKIP(ctx, std::get<0>(GetParam()));
  ONORM_SEEDED_RNG(rng);
  for (double eps : {3.5e38, 1e39, 1e70})  // rstd stays a normal float (1e-35 at 1e70)
    for (int64_t cols : {int64_t{1}, int64_t{127}, int64_t{4097}, int64_t{16385}})
      for (Op op : {Op::layer_norm, Op::rms_norm})
        if (!sweep(ctx, op, 2, cols, [&](int64_t, int64_t) { return cheap_normal(rng, 2.0, 3.0); }, rng, eps)) return;
}

// A row of 1 and 1 + one ulp of the input format, eps 0: variance (ulp/2)^2, which a float
// accumulation around the first value loses (rstd 1.186e7 instead of 1.678e7 for f32).
TEST_P(HardData, OneAndOneUlpEpsZero) {
  ONORM_OPEN_WHERE_OR_SKIP(ctx, std::get<0>(GetParam()));
  ONORM_SEEDED_RNG(rng);
  const double u = onorm_ref::ulp(1.0, in());
  for (int64_t cols : {int64_t{2}, int64_t{3}, int64_t{4096}, int64_t{4097}, int64_t{16385}})
    for (Op op : {Op::layer_norm, Op::rms_norm}) {
      // Row 0 alternates; row 1 holds 1 + ulp only at chunk starts.
      auto gen = [&](int64_t r, int64_t c) { return r == 0 ? (c % 2 ? 1.0 + u : 1.0) : (c % 4096 == 0 ? 1.0 + u : 1.0); };
      if (!sweep(ctx, op, 2, cols, gen, rng, 0.0)) return;
      if (cols >= 16384 && !sweep(ctx, op, 1, cols, gen, rng, 0.0)) return;
    }
}

std::string name(const ::testing::TestParamInfo<Param>& info) {
  return where_name(std::get<0>(info.param)) + "_" + dtype_name(std::get<1>(info.param));
}
INSTANTIATE_TEST_SUITE_P(All, HardData,
                         ::testing::Combine(::testing::ValuesIn(all_wheres()),
                                            ::testing::Values(ONORM_F32, ONORM_F16, ONORM_BF16)),
                         name);

}  // namespace
}  // namespace onorm_test
