// MaxSum: the state of online softmax, (running max m, sum of exp(x - m) d).
// A monoid: identity (-inf, 0), push, associative combine. Edge cases of the merge handled here
// once: combining identities (-inf - -inf is NaN), NaN that max() would swallow, and +inf (which
// makes the sum NaN). What a row's state means for its outputs is the ops' (core/ops/softmax.hpp).
#pragma once

#include "onlinenorm/core/hd.hpp"

namespace onorm {
namespace core {

template <typename T>
struct MaxSum {
  T m;  // running maximum (NaN once any NaN was seen)
  T d;  // sum of exp(x - m)

  ONORM_HD_INLINE static MaxSum identity() { return MaxSum{neg_infinity<T>(), T(0)}; }

  // The state of a block whose max `m` is known and whose sum of exp(x - m) is `d`.
  ONORM_HD_INLINE static MaxSum of(T m, T d) { return MaxSum{m, d}; }

  ONORM_HD_INLINE bool is_identity() const { return m == neg_infinity<T>(); }

  ONORM_HD_INLINE void push(T x) { *this = combine(*this, MaxSum{x, T(1)}); }

  ONORM_HD_INLINE static MaxSum combine(const MaxSum& a, const MaxSum& b) {
    const T m = nan_max(a.m, b.m);
    // Both sides empty or all -inf: nothing to rescale, and -inf - -inf would be NaN.
    if (m == neg_infinity<T>()) return identity();
    // A side at -inf contributes exactly 0; exp(-inf) is 0, but guard a.d*exp(NaN) anyway.
    const T da = a.m == neg_infinity<T>() ? T(0) : a.d * exp_of(a.m - m);
    const T db = b.m == neg_infinity<T>() ? T(0) : b.d * exp_of(b.m - m);
    // m == +inf gives inf - inf = NaN for the +inf side(s): the row becomes NaN, as specified.
    return MaxSum{m, da + db};
  }
};

}  // namespace core
}  // namespace onorm
