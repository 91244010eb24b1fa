// The norms' backward pass (API.md, "backward passes"), for the row x that was normalized (h when
// a residual was fused), its gradient dy, the scale s_j = weight_offset + gamma_j, and the
// forward's mean and rstd taken as given (RMSNorm: mean = 0):
//   g_j = dy_j s_j,  xhat_j = (x_j - mean) rstd
//   dx_j = rstd (g_j - mean_k g_k - xhat_j mean_k(g_k xhat_k)) + dresidual_j   (RMSNorm: no mean_k g_k)
//   dgamma_j = sum_r dy_rj xhat_rj,  dbeta_j = sum_r dy_rj (LayerNorm)
// Row sums S = sum g_k and C = sum g_k (x_k - mean), so mean_k(g_k xhat_k) = rstd C / n: centring
// at the given mean before the product keeps rows like 1e4 + N(0,1) exact. A NaN in x or dy
// reaches C and so every dx of the row.
// A column op (op_list.h): the backends' drivers call these, with T = double for sums.
#pragma once

#include "onlinenorm/core/ops/row_op.hpp"

namespace onorm {
namespace core {
namespace ops {

template <bool kLayer>
struct NormBackward {
  static constexpr Signature kSignature{2,
                                        {"x", "dy", "dresidual"},
                                        1,
                                        {"dx"},
                                        1,
                                        {"gamma"},
                                        0,
                                        {},
                                        0,
                                        {},
                                        {},
                                        false,
                                        {3u, ~0u},  // dx may alias x or dy, not dresidual
                                        false,
                                        true,
                                        kLayer ? 2 : 1,
                                        {kLayer ? "mean" : "rstd", kLayer ? "rstd" : nullptr},
                                        kLayer ? 2 : 1,
                                        {"dgamma", kLayer ? "dbeta" : nullptr}};
  static constexpr int kColOuts = kLayer ? 2 : 1;
  ONORM_HD_INLINE static float col_default(int) { return 1.0f; }  // gamma NULL: the scale is offset + 1

  template <typename T>
  struct Row {
    T mean, rstd;
  };
  template <typename T>
  ONORM_HD_INLINE static Row<T> row(const float* const* row_in, int64_t r) {
    if (kLayer) return Row<T>{static_cast<T>(row_in[0][r]), static_cast<T>(row_in[1][r])};
    return Row<T>{T(0), static_cast<T>(row_in[0][r])};
  }

  template <typename T>
  struct Sums {
    T g, gc;  // sum g_k, sum g_k (x_k - mean)
  };
  template <typename T>
  ONORM_HD_INLINE static void accumulate(Sums<T>& s, const Row<T>& row, T x, T dy, T scale) {
    const T g = dy * scale;
    s.g += g;
    s.gc += g * (x - row.mean);
  }

  // dx_j = rstd (g_j - a - xhat_j b).
  template <typename T>
  struct Coefs {
    T mean, rstd, a, b;
  };
  template <typename T, typename S>
  ONORM_HD_INLINE static Coefs<T> coefs(const Sums<S>& s, const Row<S>& row, int64_t n) {
    // By 1/n, not divided: in a loop over rows the reciprocal is computed once.
    const S inv_n = S(1) / static_cast<S>(n);
    const S a = kLayer ? s.g * inv_n : S(0);
    const S b = row.rstd * s.gc * inv_n;
    return Coefs<T>{static_cast<T>(row.mean), static_cast<T>(row.rstd), static_cast<T>(a), static_cast<T>(b)};
  }
  template <typename T>
  ONORM_HD_INLINE static T dx(const Coefs<T>& c, T x, T dy, T scale, T dresidual) {
    const T xhat = (x - c.mean) * c.rstd;
    return c.rstd * (dy * scale - c.a - xhat * c.b) + dresidual;
  }

  // One row's contributions to the column sums: sums[0] dgamma, sums[1] dbeta (LayerNorm).
  template <typename T>
  ONORM_HD_INLINE static void column(T* sums, const Row<T>& row, T x, T dy) {
    sums[0] += dy * ((x - row.mean) * row.rstd);
    if (kLayer) sums[1] += dy;
  }
};

using LayerNormBackward = NormBackward<true>;
using RmsNormBackward = NormBackward<false>;

}  // namespace ops
}  // namespace core
}  // namespace onorm
