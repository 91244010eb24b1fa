// LayerNorm: y_j = (x_j - mean) * rstd * gamma_j + beta_j, rstd = 1 / sqrt(var + eps), var
// biased. Statistics by the corrected two-pass (core::Welford::of_pivot) around each chunk's
// float mean, merged by Chan's formula in double; the float / double rule and the scaled finish
// of core/norm_stats.hpp. Special values (API.md): NaN or inf in the row make the row NaN.
#pragma once

#include "onlinenorm/core/ops/norm_op.hpp"
#include "onlinenorm/core/welford.hpp"

namespace onorm {
namespace core {
namespace ops {

struct LayerNorm : NormOpDefaults {
  static constexpr Signature kSignature{
      1, {"x", "residual"}, 1, {"y", "residual_out"}, 2, {"gamma", "beta"}, 2, {"mean", "rstd"},
      1, {"eps"}, {ParamRule::kNonNegative}, true, {1u, 3u}, true};
  static constexpr int kSums = 2;  // sum(x - p), sum((x - p)^2)
  static constexpr int kCols = 2;  // gamma (default 1), beta (default 0)
  static constexpr Pass1 kPass1 = Pass1::kSum;
  static constexpr bool kPadWithPivot = true;
  template <typename T>
  using State = Welford<T>;
  using Merged = Welford<double>;  // Chan's between-chunk term needs more digits than a float mean
  ONORM_HD_INLINE static float col_default(int col) { return col == 0 ? 1.0f : 0.0f; }

  template <typename T>
  ONORM_HD_INLINE static T pivot(T r1, int64_t n) {
    return r1 / static_cast<T>(n);
  }
  template <typename M>
  ONORM_HD_INLINE static typename M::V accumulate(const M& m, typename M::V* acc, typename M::V p,
                                                  const typename M::V* x) {
    const typename M::V d = m.sub(x[0], p);
    acc[0] = m.add(acc[0], d);
    acc[1] = m.mul_add(d, d, acc[1]);
    return x[0];
  }
  template <typename T, typename F>
  ONORM_HD_INLINE static Welford<T> state(int64_t n, F, F p, const F* sums) {
    return Welford<T>::of_pivot(n, p, sums[0], sums[1]);
  }

  // Float statistics are trusted by core::norm_float_stats_ok, double ones by
  // core::norm_double_stats_ok; ok == false: take them again in double (kF64Fallback).
  ONORM_HD_INLINE static Coefs<float> coefs(const Welford<float>& w, const Params& p, bool& ok) {
    const float var_eps = w.variance() + static_cast<float>(p.eps);
    const float rstd = 1.0f / sqrt_of(var_eps);
    // A row far from zero keeps its mean's low digits only in double (core/norm_stats.hpp).
    ok = norm_float_stats_ok(w.m2 + w.mean, var_eps) && abs_of(w.mean) * rstd <= kNormFloatCentre;
    return norm_coefs_f32(w.mean, rstd);
  }
  ONORM_HD_INLINE static Coefs<double> coefs(const Welford<double>& w, const Params& p, bool& ok) {
    const double var_eps = w.variance() + p.eps;
    ok = norm_double_stats_ok(w.m2 + w.mean, var_eps);
    const double rstd = 1.0 / sqrt_of(var_eps);
    return Coefs<double>{1.0, w.mean, rstd, w.mean, rstd, 0.0};
  }
  template <typename T>
  ONORM_HD_INLINE static void write_row_outputs(const Coefs<T>& c, float* const* row_out, int64_t r) {
    if (row_out[0]) row_out[0][r] = static_cast<float>(c.mean);
    if (row_out[1]) row_out[1][r] = static_cast<float>(c.rstd);
  }

  // (((x * k - mk) - mk_lo) * rk) * gamma + beta: x * k is exact, so k = 1 is (x - mean) * rstd.
  template <typename M, typename T>
  ONORM_HD_INLINE static typename M::V finish(const M& m, const Coefs<T>& c, const typename M::V* x,
                                              const typename M::V* cols) {
    const typename M::V centred = m.sub(m.sub(m.mul(x[0], m.set(c.k)), m.set(c.mk)), m.set(c.mk_lo));
    return m.mul_add(m.mul(centred, m.set(c.rk)), cols[0], cols[1]);
  }
};

}  // namespace ops
}  // namespace core
}  // namespace onorm
