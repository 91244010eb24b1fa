// What LayerNorm and RMSNorm do with a row's statistics, for every backend: when float
// statistics can be trusted, and the finish coefficients.
//
// Float sums are exact enough while they stay finite and var + eps stays well inside float's
// normal range. Outside it (|x| beyond ~1e19, where sums overflow; rows of tiny values with
// eps ~ 0, where squares underflow; eps beyond FLT_MAX) a backend takes the row's mean and
// rstd again in double, and finishes it scaled by a power of two k:
//   y = ((x * k - mean * k) * (rstd / k)) * s + b
// x * k is exact, so for k = 1 this is (x - mean) * rstd rounded once; with k near rstd,
// x * k - mean * k cannot overflow (x near FLT_MAX) and rstd / k cannot (tiny rows, eps 0).
// A row far from zero (|mean| rstd large: 100 + 0.05 N(0,1)) loses the digits of mean that a
// float does not hold, |mean| rstd / 2^24 in y: float statistics are not trusted there either,
// and double ones finish with mean * k as two floats, mk + mk_lo (x * k - mk is then exact).
#pragma once

#include "onlinenorm/core/convert.hpp"
#include "onlinenorm/core/hd.hpp"

namespace onorm {
namespace core {

// Below this, var + eps has lost digits to underflowed squares (deviations under ~2^-63).
constexpr float kNormFloatFloor = 0x1p-90f;
// Beyond this |mean| rstd a float mean costs y more than 2^-19 (quantized outputs need ~2^-17).
constexpr float kNormFloatCentre = 0x1p5f;

ONORM_HD_INLINE bool finite_bits(float x) { return (bits_of(x) & 0x7f800000u) != 0x7f800000u; }

// sums: a finite-check of the float sums (LayerNorm: m2 + mean; RMSNorm: the sum of squares);
// var_eps: var + eps in float (eps rounded to float: inf for eps beyond FLT_MAX). NaN and inf
// in the row fail it too: the double path gives them their non-finite statistics.
// Bit tests and one comparison: safe under fast-math.
ONORM_HD_INLINE bool norm_float_stats_ok(float sums, float var_eps) {
  return finite_bits(sums) && finite_bits(var_eps) && var_eps >= kNormFloatFloor;
}

// The same rule for statistics merged in double from float block sums: the sums stayed finite
// and var + eps is above the floor (rstd is then taken in double: no upper limit on eps).
ONORM_HD_INLINE bool norm_double_stats_ok(double sums, double var_eps) {
  uint64_t u;
  memcpy(&u, &sums, sizeof u);
  return (u & 0x7ff0000000000000ull) != 0x7ff0000000000000ull && var_eps >= static_cast<double>(kNormFloatFloor);
}

// The finish of one row: y = (((x * k - mk) - mk_lo) * rk) * s + b, and the mean / rstd outputs.
// Float on the placements that finish in float; double on the CPU's double path (k = 1).
template <typename T>
struct BasicNormCoefs {
  T k, mk, rk;
  T mean, rstd;
  T mk_lo;  // mean * k - mk (double statistics; 0 for float ones)
};
using NormCoefs = BasicNormCoefs<float>;

// From float statistics that passed norm_float_stats_ok: k = 1, bitwise (x - mean) * rstd.
// (mk_lo = 0 adds nothing: x - 0 is x for every x, -0 included.)
ONORM_HD_INLINE NormCoefs norm_coefs_f32(float mean, float rstd) { return NormCoefs{1.0f, mean, rstd, mean, rstd, 0.0f}; }

// From double statistics (a row that failed norm_float_stats_ok, or a backend that keeps its
// statistics in double): k = 2^e with 2^e <= rstd < 2^(e+1), at most 2^125 / |mean|, e clamped
// to float's normal exponents (rstd = 0, inf or NaN: the outputs are 0 * inf or NaN whatever k is); mk and
// rk rounded once from double.
ONORM_HD_INLINE NormCoefs norm_coefs_scaled(double mean, double rstd) {
  // The exponent from the bits (per row on every backend: cheaper than frexp/ldexp). A zero,
  // subnormal, inf or NaN rstd takes the clamp; the outputs are 0 * inf or NaN there anyway.
  uint64_t u, um;
  memcpy(&u, &rstd, sizeof u);
  memcpy(&um, &mean, sizeof um);
  int e = static_cast<int>((u >> 52) & 0x7ff) - 1023;
  // mean * k stays below 2^126 (a row of values near FLT_MAX with a tiny variance: rstd large).
  const int e_mean = static_cast<int>((um >> 52) & 0x7ff) - 1023;
  e = e > 125 - e_mean ? 125 - e_mean : e;
  e = e < -126 ? -126 : e > 126 ? 126 : e;
  const uint64_t kb = static_cast<uint64_t>(e + 1023) << 52, inv_kb = static_cast<uint64_t>(1023 - e) << 52;
  double k, inv_k;  // powers of two: mean * k and rstd * inv_k are exact
  memcpy(&k, &kb, sizeof k);
  memcpy(&inv_k, &inv_kb, sizeof inv_k);
  const float mk = static_cast<float>(mean * k);
  return NormCoefs{static_cast<float>(k),      mk, static_cast<float>(rstd * inv_k), static_cast<float>(mean),
                   static_cast<float>(rstd), static_cast<float>(mean * k - static_cast<double>(mk))};
}

// Coefficients for a float finish: double statistics scaled (above), float ones as they are.
ONORM_HD_INLINE NormCoefs norm_coefs_narrow(const BasicNormCoefs<double>& c) { return norm_coefs_scaled(c.mean, c.rstd); }
ONORM_HD_INLINE NormCoefs norm_coefs_narrow(const NormCoefs& c) { return c; }

// The elementwise finish (s: gamma_j, or weight_offset + gamma_j; b: beta_j or 0).
ONORM_HD_INLINE float norm_finish(float x, const NormCoefs& c, float s, float b) {
  return (((x * c.k - c.mk) - c.mk_lo) * c.rk) * s + b;
}

}  // namespace core
}  // namespace onorm
