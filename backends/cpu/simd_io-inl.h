// Element I/O of the SIMD kernels: Lanes(DF) elements of a storage type loaded as f32 lanes,
// f32 lanes stored rounded to the storage type (plain or streaming; kPaired: the type also
// stores two vectors at once, Store2 and Stream2 of consecutive elements and, for bf16 rows,
// Store2EvenOdd and Stream2EvenOdd of LoadEvenOdd's halves, and the write pass uses them),
// partial vectors through a buffer, and the software prefetch. Per target
// (Highway's -inl.h pattern).

// Per-target include guard (see hwy/examples/skeleton-inl.h).
#if defined(ONORM_CPU_SIMD_IO_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ONORM_CPU_SIMD_IO_INL_H_
#undef ONORM_CPU_SIMD_IO_INL_H_
#else
#define ONORM_CPU_SIMD_IO_INL_H_
#endif

#include <cstring>

#include "hwy/highway.h"
#include "kernels.hpp"
#include "onlinenorm/core/element.hpp"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// f16 in SIMD only where the hardware converts (F16C: round to nearest even, NaN and inf
// exact); elsewhere Highway 1.0.3 emulates with truncation, so those targets use the scalar
// kernels for f16.
#undef ONORM_SIMD_F16
#if HWY_ARCH_X86 && (HWY_TARGET <= HWY_AVX2) && !defined(HWY_DISABLE_F16C)
#define ONORM_SIMD_F16 1
#else
#define ONORM_SIMD_F16 0
#endif
// Non-temporal stores where Highway maps Stream to a real streaming store.
#if HWY_ARCH_X86 && (HWY_TARGET <= HWY_SSE4)
constexpr bool kCanStream = true;
#else
constexpr bool kCanStream = false;
#endif

constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);

// Software prefetch one chunk ahead of the element being computed on, into L2: the compute
// passes run over cached data while memory fetches what comes next (the rest of a long row,
// or the next rows). Plain address arithmetic, no dereference: prefetching past the end of
// the data is harmless.
HWY_INLINE void PrefetchBytes(uintptr_t a, size_t bytes) {
  for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(reinterpret_cast<const void*>(a + b), 0, 2);
}
template <typename T>
HWY_INLINE void PrefetchAhead(const T* p, size_t bytes) {
  PrefetchBytes(reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(kChunk) * sizeof(T), bytes);
}

// Highway 1.0.3's x86 Stream stores 16 bytes whatever the vector's size: a vector of 8 bytes
// (SSE4's four 16-bit lanes) would write 8 bytes past itself, at an address aligned to 8 only.
// Such vectors store plainly.
template <class D, class V, typename T>
HWY_INLINE void StreamWhole(D d, V v, T* p) {
  if constexpr (hn::MaxLanes(D()) * sizeof(T) >= 16) hn::Stream(v, d, p);
  else hn::StoreU(v, d, p);
}

template <typename T>
struct Io;

template <>
struct Io<float> {
  static constexpr bool kPaired = false;
  static HWY_INLINE VF Load(DF d, const float* p) { return hn::LoadU(d, p); }
  static HWY_INLINE void Store(DF d, VF v, float* p) { hn::StoreU(v, d, p); }
  static HWY_INLINE void Stream(DF d, VF v, float* p) { StreamWhole(d, v, p); }
};

template <>
struct Io<core::bf16_bits> {
  // Paired for the write pass's even/odd halves (LoadEvenOdd, Store2EvenOdd): no widening on
  // the loads, no narrowing on the stores.
  static constexpr bool kPaired = true;
  using D16 = hn::Rebind<uint16_t, DF>;
  static HWY_INLINE VF Load(DF d, const core::bf16_bits* p) {
    const D16 d16;
    const hn::RebindToUnsigned<DF> du;
    const auto u16 = hn::LoadU(d16, reinterpret_cast<const uint16_t*>(p));
    return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, u16)));
  }
  // 2 * Lanes(d) elements in one load, split by position: even gets elements 0, 2, 4..., odd
  // 1, 3, 5... A bf16 is the high half of its f32, so each is one shift or mask, no widening.
  static HWY_INLINE void LoadEvenOdd(DF d, const core::bf16_bits* p, VF& even, VF& odd) {
    const hn::RebindToUnsigned<DF> du;
    const auto u = hn::LoadU(du, reinterpret_cast<const uint32_t*>(p));
    even = hn::BitCast(d, hn::ShiftLeft<16>(u));
    odd = hn::BitCast(d, hn::And(u, hn::Set(du, 0xffff0000u)));
  }
  // Round to nearest even (Highway 1.0.3's DemoteTo truncates); NaN stays a quiet NaN.
  static HWY_INLINE hn::Vec<D16> Round(DF d, VF v) {
    const hn::RebindToSigned<DF> di;
    // values <= 0xffff: no saturation
    return hn::DemoteTo(D16(), hn::BitCast(di, hn::ShiftRight<16>(RoundHigh(d, v))));
  }
  static HWY_INLINE void Store(DF d, VF v, core::bf16_bits* p) {
    hn::StoreU(Round(d, v), D16(), reinterpret_cast<uint16_t*>(p));
  }
  static HWY_INLINE void Stream(DF d, VF v, core::bf16_bits* p) {
    StreamWhole(D16(), Round(d, v), reinterpret_cast<uint16_t*>(p));
  }
  // Two vectors of consecutive elements: each rounded and stored on its own (as Store does).
  static HWY_INLINE void Store2(DF d, VF a, VF b, core::bf16_bits* p) {
    Store(d, a, p);
    Store(d, b, p + hn::Lanes(d));
  }
  static HWY_INLINE void Stream2(DF d, VF a, VF b, core::bf16_bits* p) {
    Stream(d, a, p);
    Stream(d, b, p + hn::Lanes(d));
  }
  // The halves LoadEvenOdd split, back in element order: RoundHigh on 32-bit lanes, the even
  // elements' result shifted down into the low half of each word and the odd ones'
  // kept in the high half, one OR, one whole-vector store (no demotion, no lane shuffles).
  static HWY_INLINE void Store2EvenOdd(DF d, VF even, VF odd, core::bf16_bits* p) {
    const hn::RebindToUnsigned<DF> du;
    hn::StoreU(Words(d, even, odd), du, reinterpret_cast<uint32_t*>(p));
  }
  // p is aligned to a vector (WriteRange aligns the streamed part to two vectors of bf16).
  static HWY_INLINE void Stream2EvenOdd(DF d, VF even, VF odd, core::bf16_bits* p) {
    const hn::RebindToUnsigned<DF> du;
    StreamWhole(du, Words(d, even, odd), reinterpret_cast<uint32_t*>(p));
  }

 private:
  // The rounded bf16 in the high half of each lane (the low half is not cleared): round to
  // nearest even by adding 0x7fff and the kept part's lowest bit; a NaN made quiet instead.
  static HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> RoundHigh(DF d, VF v) {
    const hn::RebindToUnsigned<DF> du;
    const auto u = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
    const auto rounded = hn::Add(hn::Add(u, hn::Set(du, 0x7fffu)), lsb);
    const auto quiet = hn::Or(u, hn::Set(du, 0x00400000u));
    (void)d;
    return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet, rounded);
  }
  static HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> Words(DF d, VF even, VF odd) {
    const hn::RebindToUnsigned<DF> du;
    return hn::Or(hn::ShiftRight<16>(RoundHigh(d, even)), hn::And(RoundHigh(d, odd), hn::Set(du, 0xffff0000u)));
  }
};

#if ONORM_SIMD_F16
template <>
struct Io<core::f16_bits> {
  static constexpr bool kPaired = false;
  using DH = hn::Rebind<hwy::float16_t, DF>;
  using D16 = hn::Rebind<uint16_t, DF>;
  static HWY_INLINE VF Load(DF d, const core::f16_bits* p) {
    return hn::PromoteTo(d, hn::LoadU(DH(), reinterpret_cast<const hwy::float16_t*>(p)));
  }
  static HWY_INLINE void Store(DF d, VF v, core::f16_bits* p) {
    (void)d;
    hn::StoreU(hn::DemoteTo(DH(), v), DH(), reinterpret_cast<hwy::float16_t*>(p));
  }
  static HWY_INLINE void Stream(DF d, VF v, core::f16_bits* p) {
    (void)d;
    StreamWhole(D16(), hn::BitCast(D16(), hn::DemoteTo(DH(), v)), reinterpret_cast<uint16_t*>(p));
  }
};
#endif

// Fewer than Lanes(d) elements: through a buffer, never touching memory past the end; the
// lanes past n are `pad`.
template <typename In>
HWY_INLINE VF LoadTail(DF d, const In* p, size_t n, float pad) {
  HWY_ALIGN In buf[kMaxLanes];
  std::memset(static_cast<void*>(buf), 0, sizeof buf);
  n = n < kMaxLanes ? n : kMaxLanes;  // n < Lanes(d) always; said so for GCC's -Warray-bounds
  std::memcpy(static_cast<void*>(buf), static_cast<const void*>(p), n * sizeof(In));
  return hn::IfThenElse(hn::FirstN(d, n), Io<In>::Load(d, buf), hn::Set(d, pad));
}
template <typename Out>
HWY_INLINE void StoreTail(DF d, VF v, Out* p, size_t n) {
  HWY_ALIGN Out buf[kMaxLanes];
  Io<Out>::Store(d, v, buf);
  n = n < kMaxLanes ? n : kMaxLanes;  // as in LoadTail
  std::memcpy(static_cast<void*>(p), static_cast<const void*>(buf), n * sizeof(Out));
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
