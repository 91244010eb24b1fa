// A slice of a row held in registers by a block (ITEMS vectors per thread, BLOCK threads):
// its state, and its finish once the row's merged state is known. Shared by the regimes that
// split a row over blocks (CUDA clusters; the split schedules of row_kernels.hpp).
//  - softmax: the slice max m_c, then v = exp(v - m_c) in place and their sum: the finish
//    scales by exp(m_c - M) / D, one exp per element in all;
//  - log-softmax: v stays x; the finish writes (x - M) - log D;
//  - LayerNorm: exact two-pass (mean, then squared deviations) within the slice, Chan merges;
//  - RMSNorm: the sum of squares.
#pragma once

#include "row_kernels.hpp"

namespace onorm {
namespace gpu {

template <int OP, typename In, int WARP, int ITEMS, int BLOCK>
ONORM_DEV typename op_state<OP>::type slice_state(float* v, int n, int lane, float* fs, float& m_c) {
  using S = typename op_state<OP>::type;
  constexpr int E = ITEMS * io<In>::kVec;
  if constexpr (OP == kOpSoftmax || OP == kOpLogSoftmax) {
    float m = kNegInf;
#pragma unroll
    for (int e = 0; e < E; ++e) m = core::nan_max(m, v[e]);
    m_c = block_allreduce<WARP, BLOCK>(m, fs, MaxOp{});
    const float mm = m_c == kNegInf ? 0.0f : m_c;
    float d = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float ex = fast_exp(v[e] - mm);
      d += ex;
      if (OP == kOpSoftmax) v[e] = ex;
    }
    d = block_allreduce<WARP, BLOCK>(d, fs, AddOp{});
    return m_c == kNegInf ? S::identity() : S::of(m_c, d);
  } else {
    float mean = 0.0f;
    if constexpr (OP == kOpLayerNorm) {
      float sum = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e) sum += v[e];
      mean = block_allreduce<WARP, BLOCK>(sum, fs, AddOp{}) / static_cast<float>(n);
    }
    float q = sq_dev_items<In, ITEMS, BLOCK>(v, n, lane, mean);
    q = block_allreduce<WARP, BLOCK>(q, fs, AddOp{});
    if constexpr (OP == kOpLayerNorm) return S::of(n, mean, q);
    else return S::of(n, q);
  }
}

// Finishes the slice [col0, col0 + n) of `row` with the row's state `fin` and stores it;
// `first` (the slice holding column 0) writes the mean / rstd outputs.
template <int OP, typename In, int ITEMS, int BLOCK, typename S>
ONORM_DEV void slice_finish(const RowArgs& a, int64_t row, int64_t col0, int n, int lane, float* v, const S& fin,
                            float m_c, bool first) {
  constexpr int E = ITEMS * io<In>::kVec;
  if constexpr (OP == kOpSoftmax) {
    float scale = m_c == kNegInf ? 0.0f : core::exp_of(m_c - fin.m) / fin.d;
    if (fin.m == kNegInf) scale = 0.0f;
    if (core::is_nan(fin.m) || core::is_nan(fin.d)) scale = fin.m + fin.d;  // NaN
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] *= scale;
  } else if constexpr (OP == kOpLogSoftmax) {
    // All -inf: every output -inf, as (x - 0) - inf, without a per-element select (which
    // cost 26 more registers for 16-bit inputs).
    const bool dead = fin.m == kNegInf;
    const float m = dead ? 0.0f : fin.m;
    const float lnd = dead ? -kNegInf : core::log_of(fin.d);
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] = (v[e] - m) - lnd;
  } else {
    const float rstd = fin.rstd(a.eps);
    float mean = 0.0f;
    if constexpr (OP == kOpLayerNorm) mean = fin.mean;
    if (first && lane == 0) {
      if (a.mean && OP == kOpLayerNorm) a.mean[row] = mean;
      if (a.rstd) a.rstd[row] = rstd;
    }
    norm_finish_items<In, ITEMS, BLOCK>(a, col0, n, lane, v, OP == kOpRmsNorm, mean, rstd);
  }
  store_any<In, ITEMS, BLOCK>(a, row, col0, n, lane, v);
}

}  // namespace gpu
}  // namespace onorm
