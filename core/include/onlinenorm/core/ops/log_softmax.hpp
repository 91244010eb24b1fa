// Log-softmax: y_j = (x_j - M) - log D, on softmax's statistics (core/ops/softmax.hpp).
// Special values (API.md): a NaN or +inf in the row makes the row NaN; an all -inf row is -inf.
#pragma once

#include "onlinenorm/core/ops/softmax.hpp"

namespace onorm {
namespace core {
namespace ops {

struct LogSoftmax : SoftmaxStatistics {
  static constexpr Signature kSignature{1, {"x"}, 1, {"y"}, 0, {}, 0, {}, 0, {}, {}};

  // y = (x - m) - lnd.
  template <typename T>
  struct Coefs {
    T m, lnd;
  };
  template <typename T>
  ONORM_HD_INLINE static Coefs<T> coefs(const MaxSum<T>& s, const Params&, bool& ok) {
    ok = true;
    if (is_nan(s.m) || is_nan(s.d)) return Coefs<T>{s.m + s.d, T(0)};     // NaN: the row is NaN
    if (s.is_identity()) return Coefs<T>{T(0), -neg_infinity<T>()};        // all -inf: -inf
    return Coefs<T>{s.m, log_of(s.d)};
  }
  template <typename T>
  ONORM_HD_INLINE static Coefs<float> narrow(const Coefs<T>& c) {
    return Coefs<float>{static_cast<float>(c.m), static_cast<float>(c.lnd)};
  }

  template <typename M, typename T>
  ONORM_HD_INLINE static typename M::V finish(const M& m, const Coefs<T>& c, const typename M::V* x,
                                              const typename M::V*) {
    return m.sub(m.sub(x[0], m.set(c.m)), m.set(c.lnd));
  }
};

}  // namespace ops
}  // namespace core
}  // namespace onorm
