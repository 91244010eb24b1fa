// SumSq: the state of RMSNorm statistics, (count n, sum of squares s). combine adds.
#pragma once

#include "onlinenorm/core/hd.hpp"

namespace onorm {
namespace core {

template <typename T>
struct SumSq {
  int64_t n;
  T s;

  ONORM_HD_INLINE static SumSq identity() { return SumSq{0, T(0)}; }
  ONORM_HD_INLINE static SumSq of(int64_t n, T s) { return SumSq{n, s}; }
  ONORM_HD_INLINE void push(T x) {
    n += 1;
    s += x * x;
  }
  ONORM_HD_INLINE static SumSq combine(const SumSq& a, const SumSq& b) {
    return SumSq{a.n + b.n, a.s + b.s};
  }
  ONORM_HD_INLINE T mean_square() const { return n > 0 ? s / static_cast<T>(n) : T(0); }
};

}  // namespace core
}  // namespace onorm
