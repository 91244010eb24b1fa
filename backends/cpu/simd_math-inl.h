// The element math of the SIMD kernels: the fast exp of non-positive arguments and the math
// policy the ops compute with (core/ops/row_op.hpp: the members of ScalarMath, on f32 lanes).
// Per target (Highway's -inl.h pattern).

// Per-target include guard (see hwy/examples/skeleton-inl.h).
#if defined(ONORM_CPU_SIMD_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ONORM_CPU_SIMD_MATH_INL_H_
#undef ONORM_CPU_SIMD_MATH_INL_H_
#else
#define ONORM_CPU_SIMD_MATH_INL_H_
#endif

#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"  // hn::Exp: exp_any
#include "simd_exp16-inl.h"
#include "simd_io-inl.h"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// exp(x) = p 2^n for x <= 0 (x = -inf included), the range the ops ask for (x - max), and on
// AVX3 up to 88.8 (exp_any). hwy::Exp's reduction (two-part ln 2, |r| <= ln2/2) with a degree-5
// minimax polynomial for 2^-r e^r - 1 (Arm's optimized-routines expf: under 2 ulp, far inside
// API.md's bounds; a higher degree only costs multiply-adds on the ops' hottest line), and 2^n
// built from the rounding constant with no range handling beyond the low end: below `low` the
// result is 0. ExpNonPos cuts at -87.3, where 2^n would leave the normal range on the targets
// without VSCALEFPS (the true value is under 1.2e-38 there); VSCALEFPS rounds subnormal
// results, so on AVX3 any cut down to -104 holds. NaN stays NaN.
HWY_INLINE VF ExpReduced(DF d, VF x, float low) {
  const VF kMagic = hn::Set(d, 12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const VF t = hn::MulAdd(x, hn::Set(d, 1.442695040888963407359924681f), kMagic);
  const VF n = hn::Sub(t, kMagic);
  VF r = hn::MulAdd(n, hn::Set(d, -0.693145751953125f), x);
  r = hn::MulAdd(n, hn::Set(d, -1.428606765330187045e-6f), r);
  VF q = hn::Set(d, 0x1.0e4020p-7f);
  q = hn::MulAdd(q, r, hn::Set(d, 0x1.573e2ep-5f));
  q = hn::MulAdd(q, r, hn::Set(d, 0x1.555e66p-3f));
  q = hn::MulAdd(q, r, hn::Set(d, 0x1.fffdb6p-2f));
  q = hn::MulAdd(q, r, hn::Set(d, 0x1.ffffecp-1f));
  const VF p = hn::MulAdd(q, r, hn::Set(d, 1.0f));
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  // VSCALEFPS is p * 2^n in one instruction, and its zero-masking is the low end's 0; the
  // unordered compare keeps NaN lanes (which then stay NaN).
  const __mmask16 keep = _mm512_cmp_ps_mask(x.raw, _mm512_set1_ps(low), _CMP_NLT_UQ);
  return VF{_mm512_maskz_scalef_ps(keep, p.raw, n.raw)};
#else
  const hn::RebindToSigned<DF> di;
  // t's low mantissa bits hold n (+ 2^22); (bits + 127) << 23 is the float 2^n.
  const VF scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::BitCast(di, t), hn::Set(di, 127))));
  return hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, low)), hn::Mul(p, scale));
#endif
}
HWY_INLINE VF ExpNonPos(DF d, VF x) { return ExpReduced(d, x, -87.3f); }

// The ops' element math on f32 lanes (core::ops::ScalarMath's members). Plain inline, not
// HWY_INLINE: the ops' functions, which call these, carry no target attributes and may not
// force-inline target code (row_drivers-inl.h flattens both into the target's drivers).
// k16BitOutput: results are stored as 16-bit floats, and exp is ExpNonPosFor16BitOutput (and
// exp_any, on AVX3, ExpAnyFor16BitOutput).
template <bool k16BitOutput>
struct SimdMathT {
  using V = VF;
  DF d;
  inline V set(float s) const { return hn::Set(d, s); }
  inline V add(V a, V b) const { return hn::Add(a, b); }
  inline V sub(V a, V b) const { return hn::Sub(a, b); }
  inline V mul(V a, V b) const { return hn::Mul(a, b); }
  inline V mul_add(V a, V b, V c) const { return hn::MulAdd(a, b, c); }
  inline V exp(V a) const {
    if constexpr (k16BitOutput) return ExpNonPosFor16BitOutput(d, a);
    else return ExpNonPos(d, a);
  }
  inline V exp_any(V a) const {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    if constexpr (k16BitOutput) return ExpAnyFor16BitOutput(d, a);
    // The reduction is exact up to n = 128 (x <= 88.8), and VSCALEFPS forms p 2^n exactly, +inf
    // past FLT_MAX and subnormals down to 2^-149: clamped at 88.8 and cut at -104, it serves any
    // x at under half hn::Exp's operations (log-softmax backward's exp of y; bench/RESULTS.md).
    // Min(top, a) keeps a NaN (x86 returns the second operand when either is NaN).
    return ExpReduced(d, hn::Min(hn::Set(d, 88.8f), a), -104.0f);
#else
    // hn::Exp takes arguments up to 104 (beyond, its integer exponent would overflow): clamped
    // at log(FLT_MAX), past which exp is +inf. A NaN stays NaN.
    const V top = hn::Set(d, 88.7228394f);
    const V e = hn::IfThenElse(hn::Gt(a, top), hn::Inf(d), hn::Exp(d, hn::Min(a, top)));
    return hn::IfThenElse(hn::IsNaN(a), a, e);
#endif
  }
  inline V nan_or_zero(V a) const { return hn::IfThenElseZero(hn::IsNaN(a), a); }
};
using SimdMath = SimdMathT<false>;

// The math of kernels whose results are stored as Out (every pass of the row, the statistics
// included: the split path's and the whole row's must give the same bits).
template <typename Out>
using SimdMathFor = SimdMathT<sizeof(Out) == 2>;

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
