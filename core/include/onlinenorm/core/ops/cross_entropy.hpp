// Cross-entropy of a row of logits x against its target t (API.md, "cross-entropy"), with
// C = cols, lse = log(sum_j exp(x_j)), q_j = (1 - ls) [j == t] + ls / C:
//   loss = lse - sum_j q_j x_j + z lse^2
//   dlogits_j = gs ((1 + 2 z lse) softmax_j - q_j)
// From the row's LogitStats (M, D, sum of x) and x_t, per row in double: lse = M + log D, and the
// gradient's coefficients dlogits_j = exp(x_j - M) S - B (the target: - B_t), S = gs (1 + 2 z lse) / D,
// B = gs ls / C, B_t = B + gs (1 - ls). Terms whose q_j is 0 count as 0 (a -inf logit off the
// target without smoothing adds nothing). Rows of ignore_index: loss 0 and a zero gradient;
// a target outside [0, C), or a row of only -inf logits: NaN loss and gradient; a NaN (or +inf)
// logit: NaN.
// A driver op (core/ops/op_list.h): each backend computes the row's LogitStats its own way.
#pragma once

#include "onlinenorm/core/logit_stats.hpp"
#include "onlinenorm/core/ops/row_op.hpp"

namespace onorm {
namespace core {
namespace ops {

struct CrossEntropy {
  static constexpr Signature kSignature{
      1, {"logits"}, 1, {"dlogits"}, 0, {}, 2, {"loss", "lse"}, 3, {"label_smoothing", "z_loss", "grad_scale"},
      {ParamRule::kUnit, ParamRule::kFiniteNonNegative, ParamRule::kFinite}, false, {1u, 0u}};
  struct Params {
    double label_smoothing, z_loss, grad_scale;
  };
  ONORM_HD_INLINE static Params params(const double* p) { return Params{p[0], p[1], p[2]}; }

  // dlogits_j = exp(x_j - pivot) * scale - shift, at the target - target_shift; zero: a zero row.
  struct Coefs {
    float pivot, scale, shift, target_shift;
    int64_t target;  // -1 when no column is the target
    int zero;
  };

  // Whether the target of a row is a column the backend must read (x_t) before anything is
  // written: in range and not ignored.
  ONORM_HD_INLINE static bool reads_target(int64_t t, int64_t cols, int64_t ignore_index) {
    return t != ignore_index && t >= 0 && t < cols;
  }

  // The row's loss and lse (when asked), in double. x_t is the target's logit when
  // reads_target, else anything.
  ONORM_HD_INLINE static void loss_lse(const LogitStats<double>& s, int64_t cols, int64_t t, int64_t ignore_index,
                                       double x_t, const Params& p, float* loss, float* lse) {
    const double ls = p.label_smoothing, z = p.z_loss;
    const double m = s.ms.m, d = s.ms.d;
    const bool empty = m == neg_infinity<double>() && !is_nan(d);  // every logit -inf
    const double lse_v = empty ? neg_infinity<double>() : m + log_of(d);
    if (lse) *lse = static_cast<float>(lse_v);
    if (t == ignore_index) {
      *loss = 0.0f;
      return;
    }
    // A target outside the row, or a row of only -inf logits (no softmax to take, a NaN loss as
    // torch gives): NaN.
    if (t < 0 || t >= cols || empty) {
      *loss = static_cast<float>(static_cast<double>(NAN));
      return;
    }
    double loss_v = lse_v;
    if (ls < 1.0) loss_v -= (1.0 - ls) * x_t;
    if (ls > 0.0) loss_v -= ls * (s.sum / static_cast<double>(cols));
    if (z > 0.0) loss_v += z * lse_v * lse_v;
    *loss = static_cast<float>(loss_v);
  }

  // The gradient's coefficients of the row, computed in T (float: a few units in the last place
  // of softmax's scale, far inside the gradient's bound).
  template <typename T>
  ONORM_HD_INLINE static Coefs coefs(const LogitStats<double>& s, int64_t cols, int64_t t, int64_t ignore_index,
                                     const Params& p) {
    const T ls = static_cast<T>(p.label_smoothing), z = static_cast<T>(p.z_loss), gs = static_cast<T>(p.grad_scale);
    const T m = static_cast<T>(s.ms.m), d = static_cast<T>(s.ms.d);
    const bool empty = m == neg_infinity<T>() && !is_nan(d);
    Coefs c;
    c.pivot = empty ? 0.0f : static_cast<float>(m);
    c.target = -1;
    c.zero = 0;
    if (t == ignore_index) {
      c.scale = c.shift = c.target_shift = 0.0f;
      c.zero = 1;
      return c;
    }
    if (t < 0 || t >= cols || empty) {
      c.scale = c.shift = c.target_shift = static_cast<float>(static_cast<double>(NAN));
      return c;
    }
    const T a = z > T(0) ? T(1) + T(2) * z * (m + log_of(d)) : T(1);
    const T b = gs * ls / static_cast<T>(cols);
    c.scale = static_cast<float>(gs * a / d);
    c.shift = static_cast<float>(b);
    c.target_shift = static_cast<float>(b + gs * (T(1) - ls));
    c.target = t;
    return c;
  }

  // Both, the coefficients in double.
  ONORM_HD_INLINE static Coefs row(const LogitStats<double>& s, int64_t cols, int64_t t, int64_t ignore_index,
                                   double x_t, const Params& p, float* loss, float* lse) {
    loss_lse(s, cols, t, ignore_index, x_t, p, loss, lse);
    return coefs<double>(s, cols, t, ignore_index, p);
  }

  // A slice's state (rows split by columns across ranks, onlinenorm::nccl): its LogitStats, its
  // columns (merged: the whole row's C, so no rank needs to be told it) and, when the slice
  // holds the row's target, the target's logit. Merged like the other states: softmax's
  // combine, the sums and counts added, the target's logit from the slice that holds it.
  struct StateRecord {
    float max, sum_exp;
    double sum_x;
    int64_t cols;
    float target_logit;
    int32_t holds_target;

    ONORM_HD_INLINE static StateRecord identity() { return StateRecord{neg_infinity<float>(), 0.0f, 0.0, 0, 0.0f, 0}; }
    ONORM_HD_INLINE static StateRecord combine(const StateRecord& a, const StateRecord& b) {
      const MaxSum<float> ms =
          MaxSum<float>::combine(MaxSum<float>::of(a.max, a.sum_exp), MaxSum<float>::of(b.max, b.sum_exp));
      return StateRecord{ms.m, ms.d, a.sum_x + b.sum_x, a.cols + b.cols, a.holds_target ? a.target_logit : b.target_logit,
                         a.holds_target | b.holds_target};
    }
  };
  template <typename T>
  ONORM_HD_INLINE static StateRecord record_of(const LogitStats<T>& s, int64_t cols, bool holds_target, float x_t) {
    return StateRecord{static_cast<float>(s.ms.m), static_cast<float>(s.ms.d), static_cast<double>(s.sum), cols,
                       holds_target ? x_t : 0.0f, holds_target ? 1 : 0};
  }
  ONORM_HD_INLINE static LogitStats<double> stats_of(const StateRecord& r) {
    return LogitStats<double>::of(MaxSum<double>::of(r.max, r.sum_exp), r.sum_x);
  }

  // The statistics of a slice of a row with the target's logit where the slice holds it: what
  // the GPUs' blocks of one row merge (gpu/cross_entropy_rows.hpp: merge_slice_stats). In
  // double: a float fold's rounding, a few units per level, would near lse's bound at 2^24
  // columns.
  struct SliceStats {
    LogitStats<double> st;
    float target_logit;
    int32_t holds_target;

    ONORM_HD_INLINE static SliceStats identity() { return SliceStats{LogitStats<double>::identity(), 0.0f, 0}; }
  };

  // The coefficients of a chunk of the row whose elements' exp(x - chunk_max) were kept from its
  // statistics: pivot chunk_max, the row's scale times exp(chunk_max - pivot) (grad of any x of
  // the chunk gives the row's value). An all -inf chunk keeps zeros (its pivot the row's: x - -inf
  // would be NaN); NaN stays NaN.
  ONORM_HD_INLINE static Coefs chunk_coefs(const Coefs& row, float chunk_max) {
    if (chunk_max == row.pivot) return row;
    Coefs c = row;
    if (chunk_max == neg_infinity<float>()) {
      c.scale = row.scale * 0.0f;
      return c;
    }
    c.pivot = chunk_max;
    c.scale = row.scale * exp_of(chunk_max - row.pivot);
    return c;
  }
  // The gradient of an element off the target from its kept exp(x - chunk_max).
  template <typename M>
  ONORM_HD_INLINE static typename M::V grad_kept(const M& m, const Coefs& c, typename M::V kept) {
    return m.sub(m.mul(kept, m.set(c.scale)), m.set(c.shift));
  }
  // The gradient of element x (at_target: the row's target column).
  template <typename M>
  ONORM_HD_INLINE static typename M::V grad(const M& m, const Coefs& c, typename M::V x, bool at_target) {
    const typename M::V e = m.exp(m.sub(x, m.set(c.pivot)));
    return m.sub(m.mul(e, m.set(c.scale)), m.set(at_target ? c.target_shift : c.shift));
  }
};

}  // namespace ops
}  // namespace core
}  // namespace onorm
