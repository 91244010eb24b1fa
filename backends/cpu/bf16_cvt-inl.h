// bf16 stores in one instruction where the CPU has AVX512_BF16 (VCVTNEPS2BF16, round to nearest
// even), bit for bit the software Io<core::bf16_bits>::Round, so that results never depend on
// the CPU. Highway 1.0.3's AVX3 targets do not imply AVX512_BF16: it is detected at run time,
// and the kernel that uses it is chosen at the kernel's entry (WithStoreType), never per vector.
// The conversions are inline asm, not intrinsics: an intrinsic needs the avx512bf16 target on
// every function it is inlined into, and GCC left Round2 out of line in most kernels (a call
// per pair of vectors, the caller's zmm registers saved around it; bench/RESULTS.md).
// Per target (Highway's -inl.h pattern).

// Per-target include guard (see hwy/examples/skeleton-inl.h).
#if defined(ONORM_CPU_BF16_CVT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ONORM_CPU_BF16_CVT_INL_H_
#undef ONORM_CPU_BF16_CVT_INL_H_
#else
#define ONORM_CPU_BF16_CVT_INL_H_
#endif

#include <type_traits>

#include "hwy/highway.h"
#include "scalar_rows.hpp"
#include "simd_io-inl.h"

// GCC only (the compiler this is built and tested with, with binutils that know the
// instructions).
#undef ONORM_SIMD_BF16_CVT
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL) && HWY_COMPILER_GCC_ACTUAL >= 1000 && \
    !HWY_COMPILER_CLANG
#define ONORM_SIMD_BF16_CVT 1
#else
#define ONORM_SIMD_BF16_CVT 0
#endif

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if ONORM_SIMD_BF16_CVT

inline bool HasBf16Cvt() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}

// bf16 storage (core::bf16_bits' layout) whose stores round with VCVTNEPS2BF16.
struct Bf16Cvt {
  uint16_t bits;
};

template <>
struct Io<Bf16Cvt> {
  static constexpr bool kPaired = true;
  using Soft = Io<core::bf16_bits>;
  using D16 = Soft::D16;
  static HWY_INLINE VF Load(DF d, const Bf16Cvt* p) { return Soft::Load(d, reinterpret_cast<const core::bf16_bits*>(p)); }
  // Intel SDM: VCVTNEPS2BF16 ignores MXCSR, rounds to nearest even, keeps infinities, makes a
  // NaN quiet keeping its high payload bits (as Soft::Round does) and flushes denormal inputs
  // to zero (Soft::Round rounds them): a vector holding one takes Soft::Round. The common
  // case costs one test (exponent 0: zeros or denormals), the mantissa test only follows it.
  static HWY_INLINE hn::Vec<D16> Round(DF d, VF v) {
    const __m512i u = _mm512_castps_si512(v.raw);
    const __mmask16 exp0 = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000));
    if (HWY_UNLIKELY(exp0 != 0) && _mm512_mask_test_epi32_mask(exp0, u, _mm512_set1_epi32(0x007fffff)) != 0)
      return Soft::Round(d, v);
    __m256i r;
    asm("vcvtneps2bf16 %1, %0" : "=v"(r) : "v"(v.raw));
    return hn::Vec<D16>{r};
  }
  static HWY_INLINE void Store(DF d, VF v, Bf16Cvt* p) { hn::StoreU(Round(d, v), D16(), reinterpret_cast<uint16_t*>(p)); }
  static HWY_INLINE void Stream(DF d, VF v, Bf16Cvt* p) {
    StreamWhole(D16(), Round(d, v), reinterpret_cast<uint16_t*>(p));
  }
  // Two vectors in one VCVTNE2PS2BF16 (a's elements first). A zero word in its result is a
  // zero or a denormal it flushed: only then are the inputs tested for denormals, which
  // Soft::Round rounds instead.
  static HWY_INLINE __m512i Round2(DF d, VF a, VF b) {
    __m512i r;  // AT&T order: the low half's source first
    asm("vcvtne2ps2bf16 %2, %1, %0" : "=v"(r) : "v"(b.raw), "v"(a.raw));
    if (HWY_UNLIKELY(_mm512_testn_epi16_mask(r, _mm512_set1_epi16(0x7fff)) != 0) &&
        (HasDenormal(a.raw) || HasDenormal(b.raw))) {
      const __m256i ra = Soft::Round(d, a).raw, rb = Soft::Round(d, b).raw;
      return _mm512_inserti64x4(_mm512_castsi256_si512(ra), rb, 1);
    }
    return r;
  }
  static HWY_INLINE void Store2(DF d, VF a, VF b, Bf16Cvt* p) { _mm512_storeu_si512(static_cast<void*>(p), Round2(d, a, b)); }
  // p is 64-byte aligned (WriteRange aligns the streamed part to two vectors).
  static HWY_INLINE void Stream2(DF d, VF a, VF b, Bf16Cvt* p) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(p), Round2(d, a, b));
  }
  // Store2 and Stream2 of the halves that Io<core::bf16_bits>::LoadEvenOdd splits a pair of
  // vectors into, back in element order: one word permute after the conversion.
  static HWY_INLINE void Store2EvenOdd(DF d, VF even, VF odd, Bf16Cvt* p) {
    _mm512_storeu_si512(static_cast<void*>(p), Interleave(Round2(d, even, odd)));
  }
  static HWY_INLINE void Stream2EvenOdd(DF d, VF even, VF odd, Bf16Cvt* p) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(p), Interleave(Round2(d, even, odd)));
  }

 private:
  // Words 0..15 (the even elements) and 16..31 (the odd ones) interleaved: 0, 16, 1, 17, ...
  static HWY_INLINE __m512i Interleave(__m512i r) {
    const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                           21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(order, r);
  }
  static HWY_INLINE bool HasDenormal(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __mmask16 exp0 = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000));
    return _mm512_mask_test_epi32_mask(exp0, u, _mm512_set1_epi32(0x007fffff)) != 0;
  }
};

// f() with all of its kernel inlined here (flatten): without it, LayerNorm bf16 at 1024 columns
// lost 5% (bench/RESULTS.md).
template <class F>
HWY_FLATTEN void WithBf16Cvt(const F& f) {
  f();
}

#endif  // ONORM_SIMD_BF16_CVT

// f(TypeTag<Out>{}); for bf16 on a CPU with AVX512_BF16, f(TypeTag<Bf16Cvt>{}) instead.
template <typename Out, class F>
HWY_INLINE void WithStoreType(const F& f) {
#if ONORM_SIMD_BF16_CVT
  if constexpr (std::is_same<Out, core::bf16_bits>::value) {
    if (HasBf16Cvt()) return WithBf16Cvt([&] { f(TypeTag<Bf16Cvt>{}); });
  }
#endif
  f(TypeTag<Out>{});
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
