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
#include <type_traits>

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

// Four vectors of int32 lanes holding byte values (signed: [-128, 127]; else [0, 255]) stored as
// 4 N consecutive bytes. On AVX-512, two packs of pairs and one permutation for all four: 4
// shuffle-port operations where four truncating conversions take 8.
template <bool kSigned, class D8, class VI>
HWY_INLINE void StoreBytes4(D8 d8, VI q0, VI q1, VI q2, VI q3, hn::TFromD<D8>* out) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  (void)d8;
  // Per 128-bit block i the packs leave q0..q3's elements 4i..4i+3 as dwords i*4 + 0..3.
  const __m512i w01 = _mm512_packs_epi32(q0.raw, q1.raw), w23 = _mm512_packs_epi32(q2.raw, q3.raw);
  const __m512i b = kSigned ? _mm512_packs_epi16(w01, w23) : _mm512_packus_epi16(w01, w23);
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  _mm512_storeu_si512(out, _mm512_permutexvar_epi32(order, b));
#else
  const size_t N = hn::Lanes(d8);
  hn::StoreU(BytesOf(d8, q0), d8, out);
  hn::StoreU(BytesOf(d8, q1), d8, out + N);
  hn::StoreU(BytesOf(d8, q2), d8, out + 2 * N);
  hn::StoreU(BytesOf(d8, q3), d8, out + 3 * N);
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

// core::quantize_i8(s) as an int32: s clamped to [-127, 127] (a NaN to 0), plus 1.5 * 2^23,
// rounds to an integer, to even, on either sign (the sum stays in [2^23, 2^24), where the
// spacing is 1), and holds it in its low mantissa bits. The same integers as core's
// round-the-magnitude-then-copy-the-sign.
template <class D>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> I8Of(D d, hn::Vec<D> s) {
  const hn::RebindToSigned<D> di;
  const auto c = hn::Min(hn::Max(hn::IfThenZeroElse(hn::IsNaN(s), s), hn::Set(d, -core::kI8Max)), hn::Set(d, core::kI8Max));
  return hn::Sub(hn::BitCast(di, hn::Add(c, hn::Set(d, 12582912.0f))), hn::Set(di, 0x4b400000));
}

// core::quantize_e4m3(s) as an int32 (a byte: sign and code), its bit arithmetic lane by lane.
template <class D>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> E4M3Of(D d, hn::Vec<D> s) {
  const hn::RebindToSigned<D> di;
  const auto u = hn::BitCast(di, s);
  const auto sign = hn::And(hn::ShiftRight<24>(u), hn::Set(di, 0x80));
  const auto b = hn::And(u, hn::Set(di, 0x7fffffff));  // |v|, non-negative as int32
  const auto a = hn::BitCast(d, b);
  const auto subnormal = hn::Lt(a, hn::Set(d, 0.015625f));
  // Lanes not subnormal get any value here: the blend below takes r for them.
  const auto sub = RoundHalfEvenSmallToInt(d, hn::Mul(a, hn::Set(d, 512.0f)));
  // The mantissa rounded to 3 bits, to even, and rebiased (127 -> 7: the bias leaves the sum
  // before the shift, which is arithmetic); in [8, 0x440] where not subnormal, negative below.
  const auto r = hn::ShiftRight<20>(hn::Add(hn::Add(b, hn::Set(di, 0x7ffff - ((127 - 7) << 23))),
                                            hn::And(hn::ShiftRight<20>(b), hn::Set(di, 1))));
  // Saturated at 448 by the minimum: every finite |v| from 448 up, and inf, give r >= 0x7e.
  auto code = hn::IfThenElse(hn::RebindMask(di, subnormal), sub, hn::Min(r, hn::Set(di, 0x7e)));
  code = hn::IfThenElse(hn::Gt(b, hn::Set(di, 0x7f800000)), hn::Set(di, 0x7f), code);  // NaN
  return hn::Or(sign, code);
}

// out_j = code(v_j * mul): code_of(df, lanes) in vectors, four at a time (StoreBytes4), and
// scalar(value) for the elements after the last whole vector.
template <typename Out, class CodeOf, class Scalar>
HWY_INLINE void CodesWith(const float* v, size_t n, float mul, Out* out, CodeOf code_of, Scalar scalar) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<Out, decltype(df)> d8;
  const size_t N = hn::Lanes(df);
  const auto vmul = hn::Set(df, mul);
  const auto code = [&](size_t i) { return code_of(df, hn::Mul(hn::LoadU(df, v + i), vmul)); };
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N)
    StoreBytes4<std::is_signed<Out>::value>(d8, code(i), code(i + N), code(i + 2 * N), code(i + 3 * N), out + i);
  for (; i + N <= n; i += N) hn::StoreU(BytesOf(d8, code(i)), d8, out + i);
  for (; i < n; ++i) out[i] = scalar(v[i] * mul);
}

// out_j = core::quantize_i8(v_j * mul).
HWY_INLINE void CodesI8(const float* v, size_t n, float mul, int8_t* out) {
  CodesWith(v, n, mul, out, [](auto df, auto s) { return I8Of(df, s); }, [](float a) { return core::quantize_i8(a); });
}

// out_j = core::quantize_e4m3(v_j * mul).
HWY_INLINE void CodesE4M3(const float* v, size_t n, float mul, uint8_t* out) {
  CodesWith(v, n, mul, out, [](auto df, auto s) { return E4M3Of(df, s); }, [](float a) { return core::quantize_e4m3(a); });
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
