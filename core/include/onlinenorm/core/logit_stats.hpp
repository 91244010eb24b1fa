// LogitStats: the statistics of a row of logits that cross-entropy needs, softmax's (max, sum of
// exp(x - max)) and the plain sum of x (label smoothing's mean). A monoid, merged pairwise over
// fixed chunks like every state of the algebra.
#pragma once

#include "onlinenorm/core/max_sum.hpp"

namespace onorm {
namespace core {

// The scale float sums of x are taken at: partial sums of logits near FLT_MAX stay finite, and a
// power of two keeps x's own roundings (|x| >= 2^-62; smaller terms are far below any bound).
// The state's sum is x's.
constexpr float kLogitSumScale = 0x1p-64f;
constexpr double kLogitSumUnscale = 0x1p64;

template <typename T>
struct LogitStats {
  MaxSum<T> ms;
  T sum;  // sum of x: -inf with a -inf logit, NaN with a NaN or with +inf and -inf

  ONORM_HD_INLINE static LogitStats identity() { return LogitStats{MaxSum<T>::identity(), T(0)}; }
  ONORM_HD_INLINE static LogitStats of(const MaxSum<T>& ms, T sum) { return LogitStats{ms, sum}; }
  ONORM_HD_INLINE static LogitStats combine(const LogitStats& a, const LogitStats& b) {
    return LogitStats{MaxSum<T>::combine(a.ms, b.ms), a.sum + b.sum};
  }
  template <typename U>
  ONORM_HD_INLINE LogitStats<U> as() const {
    return LogitStats<U>{MaxSum<U>{static_cast<U>(ms.m), static_cast<U>(ms.d)}, static_cast<U>(sum)};
  }
};

}  // namespace core
}  // namespace onorm
