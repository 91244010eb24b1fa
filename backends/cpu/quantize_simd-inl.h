// The norms' quantized codes in SIMD (core/quantize.hpp's rules mirrored in f32 and i32 lanes,
// bit for bit): a row's largest magnitude with a NaN kept, the inputs v / scale, and the I8 and
// E4M3 codes. The elements after the last whole vector take core's scalar functions.
// Per target (Highway's -inl.h pattern); tests/quantize_simd_test.cpp checks every target
// against core's functions.

// Per-target include guard (see hwy/examples/skeleton-inl.h).
#if defined(ONORM_CPU_QUANTIZE_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ONORM_CPU_QUANTIZE_SIMD_INL_H_
#undef ONORM_CPU_QUANTIZE_SIMD_INL_H_
#else
#define ONORM_CPU_QUANTIZE_SIMD_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "onlinenorm/core/quantize.hpp"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// max_j |v_j| with a NaN kept (core::nan_max_abs): the largest of the magnitudes' bit patterns
// (for non-negative floats their order is the values', and every NaN's lies above inf's).
HWY_INLINE float MaxAbsOf(const float* v, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const size_t N = hn::Lanes(df);
  const auto magnitude = hn::Set(di, 0x7fffffff);
  auto m0 = hn::Zero(di), m1 = m0;
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    m0 = hn::Max(m0, hn::And(hn::BitCast(di, hn::LoadU(df, v + i)), magnitude));
    m1 = hn::Max(m1, hn::And(hn::BitCast(di, hn::LoadU(df, v + i + N)), magnitude));
  }
  for (; i + N <= n; i += N) m0 = hn::Max(m0, hn::And(hn::BitCast(di, hn::LoadU(df, v + i)), magnitude));
  uint32_t m = static_cast<uint32_t>(hn::GetLane(hn::MaxOfLanes(di, hn::Max(m0, m1))));
  for (; i < n; ++i) {
    const uint32_t u = core::bits_of(v[i]) & 0x7fffffffu;
    m = u > m ? u : m;
  }
  return core::float_of(m);
}

// v_j / scale in place where core::quant_input divides (rq.multiply false): in float for a
// dynamic scale, in double for a static one (it may be below FLT_MIN).
HWY_INLINE void DivideInPlace(const core::QuantRow& rq, float* v, size_t n) {
  size_t i = 0;
  if (rq.dynamic) {
    const hn::ScalableTag<float> df;
    const size_t N = hn::Lanes(df);
    const auto s = hn::Set(df, rq.scale);
    for (; i + N <= n; i += N) hn::StoreU(hn::Div(hn::LoadU(df, v + i), s), df, v + i);
  } else {
    const hn::Repartition<double, hn::ScalableTag<float>> dd;
    const hn::Rebind<float, decltype(dd)> dh;  // as many floats as dd has doubles
    const size_t N = hn::Lanes(dd);
    const auto s = hn::Set(dd, rq.static_scale);
    for (; i + N <= n; i += N) hn::StoreU(hn::DemoteTo(dh, hn::Div(hn::PromoteTo(dd, hn::LoadU(dh, v + i)), s)), dh, v + i);
  }
  for (; i < n; ++i) v[i] = core::quant_input(rq, v[i]);
}

// int32 lanes holding byte values to bytes: AVX-512's truncating conversion, one instruction
// (Highway 1.0.3's DemoteTo packs twice and permutes).
template <class D8, class VI>
HWY_INLINE hn::Vec<D8> BytesOf(D8 d8, VI v) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  (void)d8;
  return hn::Vec<D8>{_mm512_cvtepi32_epi8(v.raw)};
#else
  return hn::DemoteTo(d8, v);
#endif
}

// core::round_half_even_small in lanes as an int32: 0 <= a < 2^23. a + 2^23 rounds a to an
// integer, to even, and holds it in its low mantissa bits: those bits are the integer, with no
// float-to-int conversion (Highway's fixes up overflow in several more operations).
template <class D>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> RoundHalfEvenSmallToInt(D d, hn::Vec<D> a) {
  const hn::RebindToSigned<D> di;
  return hn::Sub(hn::BitCast(di, hn::Add(a, hn::Set(d, 8388608.0f))), hn::Set(di, 0x4b000000));
}

// out_j = core::quantize_i8(v_j * mul).
HWY_INLINE void CodesI8(const float* v, size_t n, float mul, int8_t* out) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t N = hn::Lanes(df);
  const auto vmul = hn::Set(df, mul), qmax = hn::Set(df, core::kI8Max);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto s = hn::Mul(hn::LoadU(df, v + i), vmul);
    const auto m = RoundHalfEvenSmallToInt(df, hn::Min(hn::Abs(s), qmax));  // a NaN lane is 0 below
    const auto negative = hn::ShiftRight<31>(hn::BitCast(di, s));          // -1 or 0
    const auto q = hn::Sub(hn::Xor(m, negative), negative);                  // -m where s < 0 (-0: 0)
    hn::StoreU(BytesOf(d8, hn::IfThenZeroElse(hn::RebindMask(di, hn::IsNaN(s)), q)), d8, out + i);
  }
  for (; i < n; ++i) out[i] = core::quantize_i8(v[i] * mul);
}

// out_j = core::quantize_e4m3(v_j * mul), its bit arithmetic lane by lane.
HWY_INLINE void CodesE4M3(const float* v, size_t n, float mul, uint8_t* out) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> d8;
  const size_t N = hn::Lanes(df);
  const auto vmul = hn::Set(df, mul);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto s = hn::Mul(hn::LoadU(df, v + i), vmul);
    const auto u = hn::BitCast(di, s);
    const auto sign = hn::And(hn::ShiftRight<24>(u), hn::Set(di, 0x80));
    const auto b = hn::And(u, hn::Set(di, 0x7fffffff));  // |v|, non-negative as int32
    const auto a = hn::BitCast(df, b);
    const auto subnormal = hn::Lt(a, hn::Set(df, 0.015625f));
    // Lanes not subnormal get any value here: the blend below takes r for them.
    const auto sub = RoundHalfEvenSmallToInt(df, hn::Mul(a, hn::Set(df, 512.0f)));
    // The mantissa rounded to 3 bits, to even, rebiased; in [8, 0x440] where not subnormal.
    const auto r = hn::Sub(hn::ShiftRight<20>(hn::Add(hn::Add(b, hn::Set(di, 0x7ffff)),
                                                      hn::And(hn::ShiftRight<20>(b), hn::Set(di, 1)))),
                           hn::Set(di, (127 - 7) << 3));
    // Saturated at 448 by the minimum: every finite |v| from 448 up, and inf, give r >= 0x7e.
    auto code = hn::IfThenElse(hn::RebindMask(di, subnormal), sub, hn::Min(r, hn::Set(di, 0x7e)));
    code = hn::IfThenElse(hn::Gt(b, hn::Set(di, 0x7f800000)), hn::Set(di, 0x7f), code);  // NaN
    hn::StoreU(BytesOf(d8, hn::Or(sign, code)), d8, out + i);
  }
  for (; i < n; ++i) out[i] = core::quantize_e4m3(v[i] * mul);
}

// One row of codes from its float values v (scratch: divided in place where the rule divides):
// the dynamic scale max |v| / Q written to *y_scale, or the static one; q = quant(v / scale).
HWY_INLINE void QuantizeRow(bool e4m3, float* y_scale, double static_scale, float* v, size_t n, void* y) {
  float scale = 0.0f;
  if (y_scale) {
    scale = core::quant_scale(MaxAbsOf(v, n), e4m3 ? core::kE4M3Max : core::kI8Max);
    *y_scale = scale;
  }
  const core::QuantRow rq = core::quant_row(y_scale != nullptr, scale, static_scale);
  float mul = rq.inverse;
  if (!rq.multiply) {
    DivideInPlace(rq, v, n);
    mul = 1.0f;  // exact: the codes of v / scale
  }
  if (e4m3) CodesE4M3(v, n, mul, static_cast<uint8_t*>(y));
  else CodesI8(v, n, mul, static_cast<int8_t*>(y));
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
