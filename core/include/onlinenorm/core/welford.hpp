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

  // The state of a block from the corrected two-pass sums around a pivot p close to its mean
  // (Chan, Golub & LeVeque): s1 = sum(x - p), s2 = sum((x - p)^2). The correction s1 removes
  // the bias of a rounded pivot (offset data, outliers), so p may be any rough mean, e.g.
  // the block's float sum / n. The sums may be float and T double: the merge state then keeps
  // the block mean to more digits than a float, which Chan's between-block term needs for
  // offset data (1e6 + N(0,1)).
  // s1 is often exactly zero (16-bit rows whose float mean is exact): that division is s1
  // itself, and dividing 1 instead keeps the zero off the GPU's division slow path (a call per
  // warp). The same bits for every s1, and a clean state for n = 0 (no 0 / 0).
  template <typename F>
  ONORM_HD_INLINE static Welford of_pivot(int64_t n, F pivot, F s1, F s2) {
    const T s = static_cast<T>(s1);
    const T q = (s == T(0) ? T(1) : s) / static_cast<T>(n);
    const T c = s == T(0) ? s : q;
    const T m2 = static_cast<T>(s2) - s * c;
    return Welford{n, static_cast<T>(pivot) + c, m2 < T(0) ? T(0) : m2};  // NaN stays NaN
  }

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
};

}  // namespace core
}  // namespace onorm
