// Log-softmax backward: dx_j = dy_j - exp(y_j) * s, s = sum_k dy_k, from the forward output y
// and the gradient dy (API.md, "backward passes"). Special values: a NaN in dy makes s, and so
// the row, NaN; so does a NaN in y, which the sum takes in as well (nan_or_zero adds 0 for every
// other y, -inf of a masked row included).
#pragma once

#include "onlinenorm/core/ops/sum_op.hpp"

namespace onorm {
namespace core {
namespace ops {

struct LogSoftmaxBackward : SumOpDefaults {
  static constexpr Signature kSignature{2, {"y", "dy"}, 1, {"dx"}, 0, {}, 0, {}, 0, {}, {}};
  static constexpr int kInputs = 2;  // y, dy; one sum, sum(dy) (+ NaN of y)

  template <typename M>
  ONORM_HD_INLINE static typename M::V accumulate(const M& m, typename M::V* acc, typename M::V,
                                                  const typename M::V* x) {
    acc[0] = m.add(acc[0], m.add(x[1], m.nan_or_zero(x[0])));
    return x[0];
  }
  // y is a log-probability, but nothing bounds it: exp_any.
  template <typename M, typename T>
  ONORM_HD_INLINE static typename M::V finish(const M& m, const Coefs<T>& c, const typename M::V* x,
                                              const typename M::V*) {
    return m.sub(x[1], m.mul(m.exp_any(x[0]), m.set(c.s)));
  }
};

}  // namespace ops
}  // namespace core
}  // namespace onorm
