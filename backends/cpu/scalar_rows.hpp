// The portable row kernels of the CPU backend: plain C++ over the core algebra. They serve
// the dtype combinations the SIMD kernels do not specialize and are the CPU's last resort.
// Rows are cut into fixed chunks whose states merge pairwise, so accuracy holds at 2^24+
// columns and the result does not depend on the thread count.
#pragma once

#include <vector>

#include "backend_interface.h"
#include "onlinenorm/core/algebra.hpp"
#include "onlinenorm/core/element.hpp"

namespace onorm {
namespace cpu {

// Short chunks: plain f32 sums over 256 elements stay well inside the accuracy bounds.
constexpr int64_t kScalarChunk = 256;

template <typename In, typename Acc>
struct ScalarRow {
  const In* x;
  int64_t cols;
  Acc at(int64_t c) const { return core::element<In>::load(x[c]); }
};

// Chunk states of one row, merged in a fixed tree.
template <typename State, typename In, typename Acc, typename ChunkFn>
State scalar_row_state(const ScalarRow<In, Acc>& row, ChunkFn chunk_state) {
  const int64_t chunks = (row.cols + kScalarChunk - 1) / kScalarChunk;
  std::vector<State> states(static_cast<size_t>(chunks));
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * kScalarChunk;
    const int64_t end = begin + kScalarChunk < row.cols ? begin + kScalarChunk : row.cols;
    states[static_cast<size_t>(k)] = chunk_state(begin, end);
  }
  return core::merge_pairwise(states.data(), chunks);
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

template <typename In, typename Acc>
core::Welford<Acc> scalar_welford_state(const ScalarRow<In, Acc>& row) {
  using W = core::Welford<Acc>;
  return scalar_row_state<W>(row, [&](int64_t b, int64_t e) {
    // Sum relative to the chunk's first element: rows like 1e4 + N(0,1) keep their digits.
    const Acc shift = row.at(b);
    Acc sum = 0;
    for (int64_t c = b; c < e; ++c) sum += row.at(c) - shift;
    const Acc mean = shift + sum / static_cast<Acc>(e - b);
    Acc m2 = 0;
    for (int64_t c = b; c < e; ++c) m2 += (row.at(c) - mean) * (row.at(c) - mean);
    return W::of(e - b, mean, m2);
  });
}

template <typename In, typename Acc>
core::SumSq<Acc> scalar_sum_sq_state(const ScalarRow<In, Acc>& row) {
  using S = core::SumSq<Acc>;
  return scalar_row_state<S>(row, [&](int64_t b, int64_t e) {
    Acc sum = 0;
    for (int64_t c = b; c < e; ++c) sum += row.at(c) * row.at(c);
    return S::of(e - b, sum);
  });
}

template <typename In, typename Out, typename Acc>
void scalar_layer_norm_row(const In* x, Out* y, int64_t cols, const In* gamma, const In* beta,
                           Acc eps, float* mean_out, float* rstd_out) {
  const ScalarRow<In, Acc> row{x, cols};
  const core::Welford<Acc> s = scalar_welford_state(row);
  const Acc rstd = s.rstd(eps);
  for (int64_t c = 0; c < cols; ++c) {
    const Acc g = gamma ? core::element<In>::load(gamma[c]) : Acc(1);
    const Acc bt = beta ? core::element<In>::load(beta[c]) : Acc(0);
    y[c] = core::store_from_double<Out>(core::layer_norm_finish(row.at(c), s.mean, rstd, g, bt));
  }
  if (mean_out) *mean_out = static_cast<float>(s.mean);
  if (rstd_out) *rstd_out = static_cast<float>(rstd);
}

template <typename In, typename Out, typename Acc>
void scalar_rms_norm_row(const In* x, Out* y, int64_t cols, const In* gamma, Acc eps, float* rstd_out) {
  const ScalarRow<In, Acc> row{x, cols};
  const Acc rstd = scalar_sum_sq_state(row).rstd(eps);
  for (int64_t c = 0; c < cols; ++c) {
    const Acc g = gamma ? core::element<In>::load(gamma[c]) : Acc(1);
    y[c] = core::store_from_double<Out>(core::rms_norm_finish(row.at(c), rstd, g));
  }
  if (rstd_out) *rstd_out = static_cast<float>(rstd);
}

// LayerNorm / RMSNorm statistics of row r accumulated in double: the fallback for rows whose
// f32 sums overflow (|x| beyond about 1e19), so that finite inputs never overflow inside.
void scalar_norm_stats_f64(const onorm_request& q, int64_t r, float& mean, float& rstd);

// Runs one validated request on rows [row_begin, row_end) with the scalar kernels.
void scalar_run_rows(const onorm_request& q, int64_t row_begin, int64_t row_end);

}  // namespace cpu
}  // namespace onorm
