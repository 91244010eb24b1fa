// exp of non-positive arguments for results that are stored as 16-bit floats (bf16: 8
// significant bits, f16: 11). Per target (Highway's -inl.h pattern).
//
// Why it may be cheaper than simd_math-inl.h's ExpNonPos: API.md lets a 16-bit output be one
// unit in its last place (2^-8 or 2^-11 relative) beyond the f32 bound, so the exp behind it
// needs about 1e-5, not 2e-7. It feeds both the element and the statistics every element of
// the row is divided by, so the bound must hold for sums too:
// - 2^y with y = x log2(e) in float (the product's and log2(e)'s rounding: 7.4e-8 |x|
//   relative, 6.5e-6 at the low end, 0 at x = 0), split exactly into floor(y) and
//   f = y - floor(y) in [0, 1];
// - 2^f = 1 + f q(f), q of degree 3 (Remez, relative): 2.9e-6, 3.3e-6 evaluated in float;
//   exp(0) is exactly 1;
// - p 2^floor(y) is exact for y >= -126; below (x < -87.34, exp(x) < 1.2e-38) the result is 0
//   (a subnormal result would cost a microcode assist a vector).
// So delta, the worst relative error, is under 1e-5 (tests/simd_exp_test.cpp). Every term of
// a softmax sum is positive and the max's is exactly 1: D's relative error is at most
// delta (1 - 1/D). Softmax y = e / D is within 2 delta of its value; log-softmax
// y = (x - max) - log D within delta (1 - 1/D) <= delta log D <= delta |y|. Both are under
// 2e-5 |y|, against the 2^-12 |y| (f16; bf16: 2^-9) that API.md's extra unit in the last
// place leaves beyond the output's own rounding.
// A cheaper range reduction than ExpNonPos's too: no Cody-Waite split of ln 2 and, on AVX3,
// VREDUCEPS for f with VSCALEFPS taking floor(y) itself.

// Per-target include guard (see hwy/examples/skeleton-inl.h).
#if defined(ONORM_CPU_SIMD_EXP16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ONORM_CPU_SIMD_EXP16_INL_H_
#undef ONORM_CPU_SIMD_EXP16_INL_H_
#else
#define ONORM_CPU_SIMD_EXP16_INL_H_
#endif

#include "hwy/highway.h"
#include "simd_io-inl.h"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// exp(x) from y = x log2(e) >= y_low (below: 0), relative error 3.3e-6 + 7.4e-8 |x| (see above);
// NaN stays NaN. AVX3 forms p 2^floor(y) by VSCALEFPS, exactly, subnormal results (y_low < -126)
// and +inf past FLT_MAX included; the other targets build 2^n from its exponent bits, for
// y_low = -126 and y < 128 only.
HWY_INLINE VF ExpFor16BitOutputAbove(DF d, VF x, float y_low) {
  const VF y = hn::Mul(x, hn::Set(d, 1.442695040888963407359924681f));
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  // y - floor(y), exact (-inf and -huge give 0, NaN stays NaN).
  const VF f{_mm512_reduce_ps(y.raw, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)};
#else
  const VF n = hn::Floor(y);
  const VF f = hn::Sub(y, n);
#endif
  VF q = hn::Set(d, 0x1.b7f730p-7f);
  q = hn::MulAdd(q, f, hn::Set(d, 0x1.abf868p-5f));
  q = hn::MulAdd(q, f, hn::Set(d, 0x1.ee2450p-3f));
  q = hn::MulAdd(q, f, hn::Set(d, 0x1.62d6c6p-1f));
  const VF p = hn::MulAdd(q, f, hn::Set(d, 1.0f));
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  // p 2^floor(y) in one instruction; the unordered compare keeps NaN lanes.
  const __mmask16 keep = _mm512_cmp_ps_mask(y.raw, _mm512_set1_ps(y_low), _CMP_NLT_UQ);
  return VF{_mm512_maskz_scalef_ps(keep, p.raw, y.raw)};
#else
  const hn::RebindToSigned<DF> di;
  const VF low = hn::Set(d, y_low);
  // 2^n from its exponent bits (n >= -126 where it is used).
  const VF scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, hn::Max(n, low)), hn::Set(di, 127))));
  return hn::IfThenZeroElse(hn::Lt(y, low), hn::Mul(p, scale));
#endif
}

// exp(x) for x <= 0 (-inf: 0; NaN stays NaN), relative error under 1e-5 (see above); 0 below
// -87.34, where a subnormal result would cost a microcode assist a vector.
HWY_INLINE VF ExpNonPosFor16BitOutput(DF d, VF x) { return ExpFor16BitOutputAbove(d, x, -126.0f); }

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// exp(x) of any x (log-softmax backward's exp of y into a 16-bit dx), 8 operations a vector
// against the f32 exp_any's 13: clamped at 88.8 (+inf beyond, as exp(88.8) is past FLT_MAX; a
// NaN is kept: x86's minimum returns the second operand) and cut at y = -150 (exp(x) < 2^-150
// rounds to 0). Relative error 3.3e-6 + 7.4e-8 |x|: under 1e-5 up to the overflow, where
// API.md's log-softmax backward bound is 1e-5 of exp(y_j) sum |dy_k| plus a unit of the 16-bit
// dx; below -87.34 the results are subnormal, their error under 2^-149 absolute.
HWY_INLINE VF ExpAnyFor16BitOutput(DF d, VF x) {
  return ExpFor16BitOutputAbove(d, hn::Min(hn::Set(d, 88.8f), x), -150.0f);
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
