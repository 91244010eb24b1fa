// The portable row kernels of the CPU backend: plain C++ over the core algebra. They serve
// the dtype combinations the SIMD kernels do not specialize and are the CPU's last resort.
// Rows are cut into fixed chunks whose states merge pairwise, so accuracy holds at 2^24+
// columns and the result does not depend on the thread count.
#pragma once

#include <cmath>

#include "backend_interface.h"
#include "onlinenorm/core/algebra.hpp"
#include "onlinenorm/core/element.hpp"

namespace onorm {
namespace cpu {

// Short chunks: plain sums over 256 elements stay well inside the accuracy bounds.
constexpr int64_t kScalarChunk = 256;

template <typename In, typename Acc>
struct ScalarRow {
  const In* x;
  int64_t cols;
  Acc at(int64_t c) const { return static_cast<Acc>(core::element<In>::load(x[c])); }
};

// Chunk states of one row, merged in the fixed pairwise tree as they arrive (no allocation).
template <typename State, typename In, typename Acc, typename ChunkFn>
State scalar_row_state(const ScalarRow<In, Acc>& row, ChunkFn chunk_state) {
  core::PairwiseFold<State> fold;
  for (int64_t begin = 0; begin < row.cols; begin += kScalarChunk) {
    const int64_t end = begin + kScalarChunk < row.cols ? begin + kScalarChunk : row.cols;
    fold.push(chunk_state(begin, end));
  }
  return fold.result();
}

template <typename In, typename Out, typename Acc>
void scalar_softmax_row(const In* x, Out* y, int64_t cols, bool log) {
  using MS = core::MaxSum<Acc>;
  const ScalarRow<In, Acc> row{x, cols};
  const MS s = scalar_row_state<MS>(row, [&](int64_t b, int64_t e) {
    Acc m = core::neg_infinity<Acc>();
    for (int64_t c = b; c < e; ++c) m = core::nan_max(m, row.at(c));
    if (m == core::neg_infinity<Acc>()) return MS::identity();
    Acc d = 0;
    for (int64_t c = b; c < e; ++c) d += core::exp_of(row.at(c) - m);
    return MS::of(m, d);
  });
  if (log) {
    for (int64_t c = 0; c < cols; ++c) y[c] = core::store_from_double<Out>(s.log_softmax(row.at(c)));
  } else {
    for (int64_t c = 0; c < cols; ++c) y[c] = core::store_from_double<Out>(s.softmax(row.at(c)));
  }
}

// The norms' statistics are double on this path, for every input type: no float sum can
// overflow or underflow for values in float's range, and eps keeps its double value.
// Corrected two-pass per chunk (core::Welford::of_pivot): pivot = the chunk's plain mean.
template <typename In>
core::Welford<double> scalar_welford_state(const ScalarRow<In, double>& row) {
  using W = core::Welford<double>;
  return scalar_row_state<W>(row, [&](int64_t b, int64_t e) {
    double sum = 0;
    for (int64_t c = b; c < e; ++c) sum += row.at(c);
    const double pivot = sum / static_cast<double>(e - b);
    double s1 = 0, s2 = 0;
    for (int64_t c = b; c < e; ++c) {
      const double t = row.at(c) - pivot;
      s1 += t;
      s2 += t * t;
    }
    return W::of_pivot(e - b, pivot, s1, s2);
  });
}

template <typename In>
core::SumSq<double> scalar_sum_sq_state(const ScalarRow<In, double>& row) {
  using S = core::SumSq<double>;
  return scalar_row_state<S>(row, [&](int64_t b, int64_t e) {
    double sum = 0;
    for (int64_t c = b; c < e; ++c) sum += row.at(c) * row.at(c);
    return S::of(e - b, sum);
  });
}

// LayerNorm (beta != nullptr or not) and RMSNorm (rms) of one row, finished in double.
template <typename In, typename Out>
void scalar_norm_row(const In* x, Out* y, int64_t cols, const In* gamma, const In* beta, double eps, bool rms,
                     float* mean_out, float* rstd_out) {
  const ScalarRow<In, double> row{x, cols};
  double mean = 0, var = 0;
  if (rms) {
    var = scalar_sum_sq_state(row).mean_square();
  } else {
    const core::Welford<double> w = scalar_welford_state(row);
    mean = w.mean;
    var = w.variance();
  }
  const double rstd = 1.0 / std::sqrt(var + eps);
  for (int64_t c = 0; c < cols; ++c) {
    const double g = gamma ? static_cast<double>(core::element<In>::load(gamma[c])) : 1.0;
    const double bt = beta ? static_cast<double>(core::element<In>::load(beta[c])) : 0.0;
    y[c] = core::store_from_double<Out>((row.at(c) - mean) * rstd * g + bt);
  }
  if (mean_out) *mean_out = static_cast<float>(mean);
  if (rstd_out) *rstd_out = static_cast<float>(rstd);
}

// LayerNorm / RMSNorm statistics of row r accumulated in double: the fallback for rows whose
// float sums overflow or underflow (core/norm_stats.hpp), so finite inputs never do inside.
void scalar_norm_stats_f64(const onorm_request& q, int64_t r, double& mean, double& rstd);

// Runs one validated request on rows [row_begin, row_end) with the scalar kernels.
void scalar_run_rows(const onorm_request& q, int64_t row_begin, int64_t row_end);

}  // namespace cpu
}  // namespace onorm
