// From a row's merged state to the finish coefficients of the SIMD write pass, for every op:
// Op::coefs (special values included), the float64 fallback where the op asks for it, the
// narrowing to float, and the per-row outputs. Target-independent; inline because it runs once
// per row and short rows feel every nanosecond.
#pragma once

#include <cmath>
#include <type_traits>

#include "backend_interface.h"
#include "onlinenorm/core/ops/layer_norm.hpp"
#include "scalar_rows.hpp"

namespace onorm {
namespace cpu {

template <class Op>
using FloatCoefs = typename Op::template Coefs<float>;

// The scalar type of a state (MaxSum<float>: float; Welford<double>: double).
template <typename S>
struct StateScalar;
template <template <typename> class S, typename T>
struct StateScalar<S<T>> {
  using type = T;
};

// Divisions by a count n on a short row's scalar chain (LayerNorm's pivot, Welford's s1 / n and
// M2 / n): for n a power of two, x * (1 / n) is the same correctly rounded x 2^-k as x / n
// (1 / n exact; subnormal results, infinities and NaN alike), at a multiply's latency instead of
// a division's. The product goes through an empty asm so that GCC (contraction on in C++) never
// fuses it into a following add: the bits stay those of the rounded quotient.
// Only where that asm exists (GCC and Clang on x86 and AArch64); elsewhere the divisions stay.
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__) || defined(__aarch64__))
#define ONORM_CPU_POW2_DIVIDES 1
#else
#define ONORM_CPU_POW2_DIVIDES 0
#endif
template <class Op>
constexpr bool kPow2Divides = ONORM_CPU_POW2_DIVIDES && std::is_same_v<Op, core::ops::LayerNorm>;
inline bool is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }
template <typename T>
inline T rounded(T v) {
#if ONORM_CPU_POW2_DIVIDES && defined(__aarch64__)
  asm("" : "+w"(v));
#elif ONORM_CPU_POW2_DIVIDES
  asm("" : "+x"(v));
#endif
  return v;
}

// LayerNorm's coefficients from its double state (core::ops::LayerNorm::coefs, the same
// operations) with M2 / n as a product for n a power of two.
inline core::ops::LayerNorm::Coefs<double> layer_norm_coefs_pow2(const core::Welford<double>& w,
                                                                 const core::ops::LayerNorm::Params& p, bool& ok) {
  const double inv = 1.0 / static_cast<double>(w.n);
  const double var_eps = rounded(w.m2 * inv) + p.eps;
  ok = core::norm_double_stats_ok(w.m2 + w.mean, var_eps);
  const double rstd = 1.0 / core::sqrt_of(var_eps);
  return core::ops::LayerNorm::Coefs<double>{1.0, w.mean, rstd, w.mean, rstd, 0.0};
}

template <class Op>
inline FloatCoefs<Op> row_coefs(const onorm_request& q, const typename Op::Merged& s, int64_t r) {
  bool ok = true;
  FloatCoefs<Op> c;
  if constexpr (kPow2Divides<Op>) {
    c = is_pow2(s.n) ? Op::narrow(layer_norm_coefs_pow2(s, Op::params(q.param), ok))
                     : Op::narrow(Op::coefs(s, Op::params(q.param), ok));
  } else {
    c = Op::narrow(Op::coefs(s, Op::params(q.param), ok));
  }
  if constexpr (Op::kF64Fallback) {
    // Statistics the op does not trust (float sums that overflowed or underflowed): the row's
    // statistics again in double, by the op's own passes.
    if (!ok) c = scalar_coefs_f64<Op>(q, r);
  }
  Op::write_row_outputs(c, q.row_out, r);
  return c;
}

}  // namespace cpu
}  // namespace onorm
