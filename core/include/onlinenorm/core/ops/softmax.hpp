// Softmax: y_j = exp(x_j - M) / D, M the row's maximum, D = sum_j exp(x_j - M).
// Special values (API.md): a NaN or +inf in the row makes the row NaN; an all -inf row is 0.
#pragma once

#include "onlinenorm/core/max_sum.hpp"
#include "onlinenorm/core/ops/row_op.hpp"

namespace onorm {
namespace core {
namespace ops {

// The statistics of softmax and log-softmax: (max, sum of exp(x - max)) per chunk.
struct SoftmaxStatistics : RowOpDefaults {
  static constexpr Pass1 kPass1 = Pass1::kMax;
  template <typename T>
  using State = MaxSum<T>;
  using Merged = MaxSum<float>;
  ONORM_HD_INLINE static float pad(int) { return -__builtin_huge_valf(); }

  // An all -inf chunk centres at 0: exp(-inf - 0) = 0, where -inf - -inf would be NaN.
  template <typename T>
  ONORM_HD_INLINE static T pivot(T r1, int64_t) {
    return r1 == neg_infinity<T>() ? T(0) : r1;
  }
  // The element's exp(x - p), added to the sum and kept (softmax finishes from it).
  template <typename M>
  ONORM_HD_INLINE static typename M::V accumulate(const M& m, typename M::V* acc, typename M::V p,
                                                  const typename M::V* x) {
    const typename M::V e = m.exp(m.sub(x[0], p));
    acc[0] = m.add(acc[0], e);
    return e;
  }
  // A NaN in the chunk is r1 (pass 1 keeps NaN), a +inf makes the sum NaN (inf - inf): the
  // state carries both to the row.
  template <typename T, typename F>
  ONORM_HD_INLINE static MaxSum<T> state(int64_t, F r1, F, const F* sums) {
    return r1 == neg_infinity<F>() ? MaxSum<T>::identity() : MaxSum<T>::of(static_cast<T>(r1), static_cast<T>(sums[0]));
  }
  ONORM_HD_INLINE static bool is_nan_state(const Merged& s) { return is_nan(s.m) || is_nan(s.d); }
};

struct Softmax : SoftmaxStatistics {
  static constexpr Signature kSignature{1, {"x"}, 1, {"y"}, 0, {}, 0, {}, 0, {}, {}};
  static constexpr bool kKeepsLift = true;

  // y = exp(x - pivot) * scale.
  template <typename T>
  struct Coefs {
    T pivot, scale;
  };
  template <typename T>
  ONORM_HD_INLINE static Coefs<T> coefs(const MaxSum<T>& s, const Params&, bool& ok) {
    ok = true;
    if (is_nan(s.m) || is_nan(s.d)) return Coefs<T>{T(0), s.m + s.d};  // NaN: the row is NaN
    if (s.is_identity()) return Coefs<T>{T(0), T(0)};                    // all -inf: zeros
    return Coefs<T>{s.m, T(1) / s.d};
  }
  template <typename T>
  ONORM_HD_INLINE static Coefs<float> narrow(const Coefs<T>& c) {
    return Coefs<float>{static_cast<float>(c.pivot), static_cast<float>(c.scale)};
  }
  // A chunk finishes from its own maximum: exp(x - m_c) * (exp(m_c - M) / D), so that the
  // exp(x - m_c) of pass 2 can be kept. An all -inf chunk gives 0 (NaN in a NaN row).
  template <typename T>
  ONORM_HD_INLINE static Coefs<T> chunk_coefs(const Coefs<T>& row, const MaxSum<T>& chunk) {
    if (chunk.m == neg_infinity<T>()) return Coefs<T>{T(0), row.scale * T(0)};
    if (chunk.m == row.pivot) return row;  // exp(0) = 1
    return Coefs<T>{chunk.m, exp_of(chunk.m - row.pivot) * row.scale};
  }

  template <typename M, typename T>
  ONORM_HD_INLINE static typename M::V finish(const M& m, const Coefs<T>& c, const typename M::V* x,
                                              const typename M::V*) {
    return m.mul(m.exp(m.sub(x[0], m.set(c.pivot))), m.set(c.scale));
  }
  template <typename M, typename T>
  ONORM_HD_INLINE static typename M::V finish_kept(const M& m, const Coefs<T>& c, typename M::V kept,
                                                   const typename M::V*) {
    return m.mul(kept, m.set(c.scale));
  }
};

}  // namespace ops
}  // namespace core
}  // namespace onorm
