// The quantized outputs of the norms (API.md, "norms with options"): the per-row scale and the
// rounding of v / scale to ONORM_I8 (half to even, clamped to +-127; NaN gives 0) and to
// ONORM_F8_E4M3 (the OCP "fn" format: bias 7, no infinities, NaN 0x7f; to nearest even,
// saturated to +-448). Host and device alike; bit arithmetic, so no rounding mode matters.
#pragma once

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

// Nearest integer, ties to even, for 0 <= a < 2^23: adding 2^23 leaves no fraction bits (the
// library is built without fast-math, so the sum is rounded, not folded away).
ONORM_HD_INLINE float round_half_even_small(float a) { return (a + 8388608.0f) - 8388608.0f; }

ONORM_HD_INLINE int8_t quantize_i8(float v) {
  if (is_nan(v)) return 0;
  const float a = v < 0.0f ? -v : v;
  const float r = round_half_even_small(a < kI8Max ? a : kI8Max);
  return static_cast<int8_t>(v < 0.0f ? -r : r);
}

ONORM_HD_INLINE uint8_t quantize_e4m3(float v) {
  const uint32_t u = bits_of(v);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t b = u & 0x7fffffffu;  // |v|
  if (b > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);  // NaN
  const float a = float_of(b);
  if (!(a < kE4M3Max)) return static_cast<uint8_t>(sign | 0x7eu);  // saturated: 448
  if (a < 0.015625f) {  // below 2^-6: subnormal steps of 2^-9; 8 steps is the first normal code
    return static_cast<uint8_t>(sign | static_cast<uint32_t>(round_half_even_small(a * 512.0f)));
  }
  // Round the f32 mantissa to 3 bits, to even; the carry moves into the exponent.
  const uint32_t r = (b + 0x7ffffu + ((b >> 20) & 1u)) >> 20;
  const uint32_t code = r - ((127u - 7u) << 3);  // rebias 127 -> 7
  return static_cast<uint8_t>(sign | (code > 0x7eu ? 0x7eu : code));
}

}  // namespace core
}  // namespace onorm
