// Portability macros for code shared by g++, nvcc and clang-HIP.
// Device-usable functions call only the C math library's global names (::expf, ...),
// never std::, so that the same text compiles for the host and for every GPU.
#pragma once

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define ONORM_HD __host__ __device__
#else
#define ONORM_HD
#endif

#define ONORM_HD_INLINE ONORM_HD inline

namespace onorm {
namespace core {

// Scalar math dispatched on the accumulation type (float or double).
ONORM_HD_INLINE float exp_of(float x) { return ::expf(x); }
ONORM_HD_INLINE double exp_of(double x) { return ::exp(x); }
ONORM_HD_INLINE float log_of(float x) { return ::logf(x); }
ONORM_HD_INLINE double log_of(double x) { return ::log(x); }
ONORM_HD_INLINE float sqrt_of(float x) { return ::sqrtf(x); }
ONORM_HD_INLINE double sqrt_of(double x) { return ::sqrt(x); }
ONORM_HD_INLINE float abs_of(float x) { return ::fabsf(x); }

template <typename T>
ONORM_HD_INLINE bool is_nan(T x) { return x != x; }

template <typename T>
ONORM_HD_INLINE T neg_infinity() { return -static_cast<T>(HUGE_VAL); }

// max() that keeps a NaN from either side: fmax and a plain comparison both drop it. One
// select, no branch (a NaN a: a; a NaN b: b; else the larger): the GPU's max pass runs it per
// element, where two early returns compiled to nine instructions and a branch each.
template <typename T>
ONORM_HD_INLINE T nan_max(T a, T b) {
  return (a > b || is_nan(a)) ? a : b;
}

}  // namespace core
}  // namespace onorm
