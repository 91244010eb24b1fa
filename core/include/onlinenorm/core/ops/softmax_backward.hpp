// Softmax backward: dx_j = y_j * (dy_j - s), s = sum_k y_k dy_k, from the forward output y and
// the gradient dy (API.md, "backward passes"). Special values: a NaN in y or dy makes s, and so
// the row, NaN.
#pragma once

#include "onlinenorm/core/ops/sum_op.hpp"

namespace onorm {
namespace core {
namespace ops {

struct SoftmaxBackward : SumOpDefaults {
  static constexpr Signature kSignature{2, {"y", "dy"}, 1, {"dx"}, 0, {}, 0, {}, 0, {}, {}};
  static constexpr int kInputs = 2;  // y, dy; one sum, sum(y * dy)

  template <typename M>
  ONORM_HD_INLINE static typename M::V accumulate(const M& m, typename M::V* acc, typename M::V,
                                                  const typename M::V* x) {
    acc[0] = m.mul_add(x[0], x[1], acc[0]);
    return x[0];
  }
  template <typename M, typename T>
  ONORM_HD_INLINE static typename M::V finish(const M& m, const Coefs<T>& c, const typename M::V* x,
                                              const typename M::V*) {
    return m.mul(x[0], m.sub(x[1], m.set(c.s)));
  }
};

}  // namespace ops
}  // namespace core
}  // namespace onorm
