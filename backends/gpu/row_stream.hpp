// Rows in registers, streamed: a group of TPR lanes per row (TPR <= WARP, or a whole block),
// a persistent grid whose groups walk the rows in rounds (row = group + round * groups). Each
// group loads its next row into a second register set before it reduces the current one, so
// those bytes are in flight during the shuffles, the finish and the stores; gamma and beta, the
// same columns every round, are loaded once per thread where they fit (E <= 16 floats).
// Every lane of every warp runs the same number of rounds (groups past the last row take part
// with an empty row), so the shuffles and barriers stay convergent.
#pragma once

#include "row_kernels.hpp"

namespace onorm {
namespace gpu {

template <int FAM, typename In, int WARP, int TPR, int ITEMS, int BLOCK>
__global__ void __launch_bounds__(BLOCK) rows_stream_kernel(RowArgs a) {
  constexpr int VEC = io<In>::kVec;
  constexpr int E = ITEMS * VEC;
  constexpr int GPB = BLOCK / TPR;  // groups per block
  constexpr bool kHoist = FAM == kFamNorm && E <= 16;
  static_assert(TPR <= WARP || TPR == BLOCK, "row group");
  __shared__ float scratch[BLOCK / WARP];
  const int lane = static_cast<int>(threadIdx.x) % TPR;
  const int64_t groups = static_cast<int64_t>(gridDim.x) * GPB;
  const int64_t rounds = (a.rows + groups - 1) / groups;
  const int cols = static_cast<int>(a.cols);
  const bool xal = a.x_vec != 0;
  constexpr float kPad = FAM == kFamSoftmax ? kNegInf : 0.0f;
  const In* x = static_cast<const In*>(a.x);
  auto src = [&](int64_t row) { return x + (row < a.rows ? row : 0) * a.xs; };

  float g[kHoist ? E : 1], b[kHoist ? E : 1];
  if constexpr (kHoist) {
    const In* gp = static_cast<const In*>(a.gamma);
    const In* bp = static_cast<const In*>(a.beta);
    const bool gal = a.gb_vec != 0;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int c = (lane + i * TPR) * VEC;
      if (gp) load_one_item<In>(gp, c, cols, gal, 1.0f, g + i * VEC);
      else
#pragma unroll
        for (int j = 0; j < VEC; ++j) g[i * VEC + j] = 1.0f;
      if (bp) load_one_item<In>(bp, c, cols, gal, 0.0f, b + i * VEC);
      else
#pragma unroll
        for (int j = 0; j < VEC; ++j) b[i * VEC + j] = 0.0f;
    }
  }

  int64_t row = static_cast<int64_t>(blockIdx.x) * GPB + static_cast<int>(threadIdx.x) / TPR;
  int n = row < a.rows ? cols : 0;
  float v[E], nx[E];
  load_items<In, ITEMS, TPR>(src(row), n, lane, v, xal, kPad);
  for (int64_t r = 0; r < rounds; ++r) {
    const int64_t nrow = row + groups;
    const int nn = nrow < a.rows ? cols : 0;
    if (r + 1 < rounds) load_items<In, ITEMS, TPR>(src(nrow), nn, lane, nx, xal, kPad);
    if constexpr (FAM == kFamSoftmax) {
      const bool lg = a.op == kOpLogSoftmax;
      float m = kNegInf;
#pragma unroll
      for (int e = 0; e < E; ++e) m = core::nan_max(m, v[e]);
      m = row_allreduce<WARP, TPR, BLOCK>(m, lane, scratch, MaxOp{});
      const float mm = m == kNegInf ? 0.0f : m;  // all -inf (or empty): the masked row
      float s = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const float ex = fast_exp(v[e] - mm);
        s += ex;
        if (!lg) v[e] = ex;
      }
      s = row_allreduce<WARP, TPR, BLOCK>(s, lane, scratch, AddOp{});
      const bool dead = m == kNegInf;
      if (lg) {
        const float lnd = core::log_of(s);
#pragma unroll
        for (int e = 0; e < E; ++e) v[e] = dead ? kNegInf : (v[e] - m) - lnd;
      } else {
        const float inv = 1.0f / s;
#pragma unroll
        for (int e = 0; e < E; ++e) v[e] = dead ? 0.0f : v[e] * inv;
      }
    } else {
      const bool rms = a.op == kOpRmsNorm;
      float mean = 0.0f;
      if (!rms) {
        float t = 0.0f;
#pragma unroll
        for (int e = 0; e < E; ++e) t += v[e];
        mean = row_allreduce<WARP, TPR, BLOCK>(t, lane, scratch, AddOp{}) / static_cast<float>(n);
      }
      float q = sq_dev_items<In, ITEMS, TPR>(v, n, lane, mean);
      q = row_allreduce<WARP, TPR, BLOCK>(q, lane, scratch, AddOp{});
      const float rstd =
          rms ? core::SumSq<float>::of(n, q).rstd(a.eps) : core::Welford<float>::of(n, mean, q).rstd(a.eps);
      if (n > 0 && lane == 0) {
        if (a.mean && !rms) a.mean[row] = mean;
        if (a.rstd) a.rstd[row] = rstd;
      }
      if constexpr (kHoist) {
#pragma unroll
        for (int e = 0; e < E; ++e)
          v[e] = rms ? core::rms_norm_finish(v[e], rstd, g[e]) : core::layer_norm_finish(v[e], mean, rstd, g[e], b[e]);
      } else {
        norm_finish_items<In, ITEMS, TPR>(a, 0, n, lane, v, rms, mean, rstd);
      }
    }
    store_any<In, ITEMS, TPR>(a, row < a.rows ? row : 0, 0, n, lane, v);
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] = nx[e];
    row = nrow;
    n = nn;
  }
}

}  // namespace gpu
}  // namespace onorm
