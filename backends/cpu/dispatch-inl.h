// Dtype dispatch of the SIMD kernels: the dtypes they take, and the storage type of each, for
// the per-target entry points of the kernel translation units (kernels*.cpp), which pick the op
// (core::ops::visit or the op list) and the storage types. Per target (Highway's -inl.h
// pattern).

// Per-target include guard (see hwy/examples/skeleton-inl.h).
#if defined(ONORM_CPU_DISPATCH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ONORM_CPU_DISPATCH_INL_H_
#undef ONORM_CPU_DISPATCH_INL_H_
#else
#define ONORM_CPU_DISPATCH_INL_H_
#endif

#include "bf16_cvt-inl.h"
#include "hwy/highway.h"
#include "scalar_rows.hpp"
#include "simd_io-inl.h"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {

HWY_INLINE bool SimdType(onorm_dtype t) {
  return t == ONORM_F32 || t == ONORM_BF16 || (ONORM_SIMD_F16 && t == ONORM_F16);
}

// f(TypeTag<T>{}) for a dtype SimdType takes.
template <typename F>
HWY_INLINE void WithSimdType(onorm_dtype t, F&& f) {
  switch (t) {
    case ONORM_F32: return f(TypeTag<float>{});
    case ONORM_BF16: return f(TypeTag<core::bf16_bits>{});
#if ONORM_SIMD_F16
    case ONORM_F16: return f(TypeTag<core::f16_bits>{});
#endif
    default: return;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
