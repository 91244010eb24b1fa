// RMSNorm: y_j = x_j * rstd * gamma_j, rstd = 1 / sqrt(mean(x^2) + eps). Statistics: the sum of
// squares; the float / double rule and the scaled finish of core/norm_stats.hpp. Special
// values (API.md): a NaN in the row makes the row NaN; an inf makes rstd 0 (its element NaN,
// inf * 0, the others 0).
#pragma once

#include "onlinenorm/core/ops/norm_op.hpp"
#include "onlinenorm/core/sum_sq.hpp"

namespace onorm {
namespace core {
namespace ops {

struct RmsNorm : NormOpDefaults {
  static constexpr Signature kSignature{
      1, {"x", "residual"}, 1, {"y", "residual_out"}, 1, {"gamma"}, 1, {"rstd"},
      1, {"eps"}, {ParamRule::kNonNegative}, true, {1u, 3u}, true};
  static constexpr int kCols = 1;  // gamma (default 1); sums: one, sum(x^2)
  template <typename T>
  using State = SumSq<T>;
  using Merged = SumSq<float>;  // positive terms: a float tree keeps the bound at any length
  ONORM_HD_INLINE static float col_default(int) { return 1.0f; }

  template <typename M>
  ONORM_HD_INLINE static typename M::V accumulate(const M& m, typename M::V* acc, typename M::V,
                                                  const typename M::V* x) {
    acc[0] = m.mul_add(x[0], x[0], acc[0]);
    return x[0];
  }
  template <typename T, typename F>
  ONORM_HD_INLINE static SumSq<T> state(int64_t n, F, F, const F* sums) {
    return SumSq<T>::of(n, static_cast<T>(sums[0]));
  }

  ONORM_HD_INLINE static Coefs<float> coefs(const SumSq<float>& s, const Params& p, bool& ok) {
    const float var_eps = s.mean_square() + static_cast<float>(p.eps);
    ok = norm_float_stats_ok(s.s, var_eps);
    return norm_coefs_f32(0.0f, 1.0f / sqrt_of(var_eps));
  }
  ONORM_HD_INLINE static Coefs<double> coefs(const SumSq<double>& s, const Params& p, bool& ok) {
    const double var_eps = s.mean_square() + p.eps;
    ok = norm_double_stats_ok(s.s, var_eps);
    const double rstd = 1.0 / sqrt_of(var_eps);
    return Coefs<double>{1.0, 0.0, rstd, 0.0, rstd, 0.0};
  }
  template <typename T>
  ONORM_HD_INLINE static void write_row_outputs(const Coefs<T>& c, float* const* row_out, int64_t r) {
    if (row_out[0]) row_out[0][r] = static_cast<float>(c.rstd);
  }

  // ((x * k) * rk) * gamma: x * k is exact, so k = 1 is x * rstd.
  template <typename M, typename T>
  ONORM_HD_INLINE static typename M::V finish(const M& m, const Coefs<T>& c, const typename M::V* x,
                                              const typename M::V* cols) {
    return m.mul(m.mul(m.mul(x[0], m.set(c.k)), m.set(c.rk)), cols[0]);
  }
};

}  // namespace ops
}  // namespace core
}  // namespace onorm
