// What the ops whose one statistic is a plain sum share (the backward passes of softmax and
// log-softmax): the state core::Sum, float merges, the coefficient s (no special value of its
// own: a NaN in the sum makes every element NaN by itself).
#pragma once

#include "onlinenorm/core/ops/row_op.hpp"
#include "onlinenorm/core/sum.hpp"

namespace onorm {
namespace core {
namespace ops {

struct SumOpDefaults : RowOpDefaults {
  template <typename T>
  using State = Sum<T>;
  using Merged = Sum<float>;
  template <typename T, typename F>
  ONORM_HD_INLINE static Sum<T> state(int64_t, F, F, const F* sums) {
    return Sum<T>::of(static_cast<T>(sums[0]));
  }

  template <typename T>
  struct Coefs {
    T s;
  };
  template <typename T>
  ONORM_HD_INLINE static Coefs<T> coefs(const Sum<T>& st, const Params&, bool& ok) {
    ok = true;
    return Coefs<T>{st.s};
  }
  template <typename T>
  ONORM_HD_INLINE static Coefs<float> narrow(const Coefs<T>& c) {
    return Coefs<float>{static_cast<float>(c.s)};
  }
};

}  // namespace ops
}  // namespace core
}  // namespace onorm
