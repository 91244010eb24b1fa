// bf16 / f16 <-> f32 conversions by bit manipulation, round-to-nearest-even, usable on the
// host and on every GPU. NaN stays NaN (quieted), infinities and f16 subnormals are exact,
// f32 values beyond the f16 range round to infinity.
#pragma once

#include <string.h>

#include "onlinenorm/core/hd.hpp"

namespace onorm {
namespace core {

ONORM_HD_INLINE uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
ONORM_HD_INLINE float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

ONORM_HD_INLINE float bf16_to_f32(uint16_t h) { return float_of(static_cast<uint32_t>(h) << 16); }

ONORM_HD_INLINE uint16_t f32_to_bf16(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16);  // ties to even; overflow reaches inf
}

ONORM_HD_INLINE float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1fu) return float_of(sign | 0x7f800000u | (man << 13));  // inf / NaN
  if (exp != 0) return float_of(sign | ((exp + 112u) << 23) | (man << 13));
  // zero or subnormal: man * 2^-24, exact in f32
  const float mag = static_cast<float>(man) * 5.9604644775390625e-8f;
  return sign ? -mag : mag;
}

ONORM_HD_INLINE uint16_t f32_to_f16(float f) {
  const uint32_t u = bits_of(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a >= 0x38800000u) {                                              // normal f16
    const uint32_t lsb = (a >> 13) & 1u;
    const uint32_t r = (a + 0xfffu + lsb) >> 13;                       // ties to even
    return static_cast<uint16_t>(sign | (r - (112u << 10)));
  }
  if (a < 0x33000000u) return sign;  // below half the smallest subnormal (2^-25): zero
  // subnormal f16: shift the 24-bit significand so that one unit is 2^-24, rounding to even
  const uint32_t e = a >> 23;            // biased f32 exponent, 102..112
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;       // 14..24
  const uint32_t half = 1u << (shift - 1);
  const uint32_t rem = m & ((1u << shift) - 1u);
  uint32_t r = m >> shift;
  if (rem > half || (rem == half && (r & 1u))) r += 1;
  return static_cast<uint16_t>(sign | r);
}

}  // namespace core
}  // namespace onorm
