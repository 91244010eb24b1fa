// Typed element access for the storage dtypes: load to the accumulation type, store from it
// with round-to-nearest-even. Storage types are plain bit containers so that this compiles
// the same everywhere; backends may substitute vendor intrinsics with identical rounding.
#pragma once

#include "onlinenorm/core/convert.hpp"

namespace onorm {
namespace core {

struct bf16_bits { uint16_t bits; };
struct f16_bits { uint16_t bits; };

template <typename Storage> struct element;

template <> struct element<float> {
  ONORM_HD_INLINE static float load(float v) { return v; }
  ONORM_HD_INLINE static float store(float v) { return v; }
};
template <> struct element<double> {
  ONORM_HD_INLINE static double load(double v) { return v; }
  ONORM_HD_INLINE static double store(double v) { return v; }
  ONORM_HD_INLINE static double store(float v) { return v; }
};
template <> struct element<bf16_bits> {
  ONORM_HD_INLINE static float load(bf16_bits v) { return bf16_to_f32(v.bits); }
  ONORM_HD_INLINE static bf16_bits store(float v) { return bf16_bits{f32_to_bf16(v)}; }
};
template <> struct element<f16_bits> {
  ONORM_HD_INLINE static float load(f16_bits v) { return f16_to_f32(v.bits); }
  ONORM_HD_INLINE static f16_bits store(float v) { return f16_bits{f32_to_f16(v)}; }
};

// Narrowing a double result to a storage type: to f32 first would round twice for bf16/f16,
// so f64 -> f16/bf16 goes through this exact path (round to f32 by truncation toward odd).
ONORM_HD_INLINE float round_to_odd_f32(double v) {
  float f = static_cast<float>(v);  // nearest
  if (static_cast<double>(f) != v && !(v != v)) {
    // Step toward zero if rounding went away from zero, then set the sticky (odd) bit.
    uint32_t u = bits_of(f);
    const double back = static_cast<double>(f);
    if ((back > v && v > 0) || (back < v && v < 0)) u -= 1;
    u |= 1u;
    f = float_of(u);
  }
  return f;
}
template <typename Storage>
ONORM_HD_INLINE Storage store_from_double(double v) { return element<Storage>::store(round_to_odd_f32(v)); }
template <> ONORM_HD_INLINE float store_from_double<float>(double v) { return static_cast<float>(v); }
template <> ONORM_HD_INLINE double store_from_double<double>(double v) { return v; }

}  // namespace core
}  // namespace onorm
