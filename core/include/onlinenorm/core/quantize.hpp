// The quantized outputs of the norms (API.md, "norms with options"): the per-row scale and the
// rounding of v / scale to ONORM_I8 (half to even, clamped to +-127; NaN gives 0) and to
// ONORM_F8_E4M3 (the OCP "fn" format: bias 7, no infinities, NaN 0x7f; to nearest even,
// saturated to +-448). Host and device alike; bit arithmetic, so no rounding mode matters.
#pragma once

#include <math.h>

#include "onlinenorm/core/convert.hpp"
#include "onlinenorm/core/hd.hpp"

namespace onorm {
namespace core {

// The largest magnitude of a quantized dtype: I8 127, E4M3 448.
constexpr float kI8Max = 127.0f;
constexpr float kE4M3Max = 448.0f;

// A row's dynamic scale from max_j |v_j|: max / q_max; a row of zeros gets 1, a NaN stays NaN.
template <typename T>
ONORM_HD_INLINE T quant_scale(T max_abs, T q_max) {
  if (is_nan(max_abs)) return max_abs;
  return max_abs == T(0) ? T(1) : max_abs / q_max;
}

// max(|a|, |b|) that keeps a NaN (the dynamic scale's reduction).
template <typename T>
ONORM_HD_INLINE T nan_max_abs(T running, T v) {
  return nan_max(running, v < T(0) ? -v : v);
}

// How a row's values v become codes, q = quant(v / scale). A dynamic scale multiplies by its
// float inverse (the contract allows a neighbour on the grid, which the inverse's rounding may
// give; a division per element made the quantized rows compute-bound), or divides where the
// inverse is not finite (a scale below 2^-128); a static scale divides in double (it may be
// below FLT_MIN).
struct QuantRow {
  float scale, inverse;
  bool multiply, dynamic;
  double static_scale;
};
ONORM_HD_INLINE QuantRow quant_row(bool dynamic, float scale, double static_scale) {
  QuantRow q;
  q.scale = scale;
  q.inverse = 1.0f / scale;
  q.dynamic = dynamic;
  q.multiply = dynamic && q.inverse <= 3.402823466e38f;
  q.static_scale = static_scale;
  return q;
}
// v / scale, the code's input.
ONORM_HD_INLINE float quant_input(const QuantRow& q, float v) {
  if (q.multiply) return v * q.inverse;
  return q.dynamic ? v / q.scale : static_cast<float>(v / q.static_scale);
}

// Nearest integer, ties to even, for 0 <= a < 2^23: adding 2^23 leaves no fraction bits (the
// library is built without fast-math, so the sum is rounded, not folded away).
ONORM_HD_INLINE float round_half_even_small(float a) { return (a + 8388608.0f) - 8388608.0f; }

ONORM_HD_INLINE int8_t quantize_i8(float v) {
  const float r = round_half_even_small(fminf(fabsf(v), kI8Max));  // a NaN takes 127, then 0 below
  return static_cast<int8_t>(is_nan(v) ? 0.0f : copysignf(r, v));
}

// The two conversions are branch-free (selects), so that a loop of them vectorizes: every
// candidate is computed and the special cases choose last.
ONORM_HD_INLINE uint8_t quantize_e4m3(float v) {
  const uint32_t u = bits_of(v);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t b = u & 0x7fffffffu;  // |v|
  const float a = float_of(b);
  // Below 2^-6: subnormal steps of 2^-9; 8 steps is the first normal code.
  const bool subnormal = a < 0.015625f;
  const uint32_t sub = static_cast<uint32_t>(round_half_even_small((subnormal ? a : 0.0f) * 512.0f));
  // Round the f32 mantissa to 3 bits, to even; the carry moves into the exponent; rebias
  // 127 -> 7 (wraps for the subnormal range, which takes `sub`).
  const uint32_t r = ((b + 0x7ffffu + ((b >> 20) & 1u)) >> 20) - ((127u - 7u) << 3);
  uint32_t code = subnormal ? sub : (r > 0x7eu ? 0x7eu : r);
  code = a < kE4M3Max ? code : 0x7eu;      // saturated: 448 (inf included)
  code = b > 0x7f800000u ? 0x7fu : code;  // NaN
  return static_cast<uint8_t>(sign | code);
}

}  // namespace core
}  // namespace onorm
