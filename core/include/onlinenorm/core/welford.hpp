// Welford: the state of LayerNorm statistics, (count n, mean, sum of squared deviations M2).
// push is Welford's update, combine is Chan's parallel formula. Counts are 64-bit so rows
// longer than 2^24 keep full accuracy. Never uses E[x^2] - E[x]^2.
#pragma once

#include "onlinenorm/core/hd.hpp"

namespace onorm {
namespace core {

template <typename T>
struct Welford {
  int64_t n;
  T mean;
  T m2;

  ONORM_HD_INLINE static Welford identity() { return Welford{0, T(0), T(0)}; }

  // The state of a block of n elements with the given mean and M2 (e.g. from a two-pass
  // computation over a cached block).
  ONORM_HD_INLINE static Welford of(int64_t n, T mean, T m2) { return Welford{n, mean, m2}; }

  ONORM_HD_INLINE void push(T x) {
    n += 1;
    const T delta = x - mean;
    mean += delta / static_cast<T>(n);
    m2 += delta * (x - mean);
  }

  ONORM_HD_INLINE static Welford combine(const Welford& a, const Welford& b) {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    const int64_t n = a.n + b.n;
    const T fa = static_cast<T>(a.n), fb = static_cast<T>(b.n), fn = static_cast<T>(n);
    const T delta = b.mean - a.mean;
    const T wb = fb / fn;
    // mean moves toward b by its weight; M2 gains the between-block term.
    const T mean = a.mean + delta * wb;
    const T m2 = a.m2 + b.m2 + delta * delta * fa * wb;
    return Welford{n, mean, m2};
  }

  // Biased variance, as LayerNorm uses.
  ONORM_HD_INLINE T variance() const { return n > 0 ? m2 / static_cast<T>(n) : T(0); }
  ONORM_HD_INLINE T rstd(T eps) const { return T(1) / sqrt_of(variance() + eps); }
};

// y = (x - mean) * rstd * gamma + beta
template <typename T>
ONORM_HD_INLINE T layer_norm_finish(T x, T mean, T rstd, T gamma, T beta) {
  return (x - mean) * rstd * gamma + beta;
}

}  // namespace core
}  // namespace onorm
