// Cross-entropy with the row in registers (core/ops/cross_entropy.hpp; API.md, "cross-entropy"),
// shared by CUDA and HIP: the logits are read once and the gradient written from registers.
//   ce_rows_kernel   a block per row, rows of up to BLOCK * ITEMS * VEC columns;
//   (CUDA) cluster_cross_entropy.cuh: the K blocks of a cluster hold a row, a slice each.
// A block's slice: its maximum (the block's), then per thread exp(x - max) and x (scaled by
// core::kLogitSumScale) summed in float in a pairwise tree (at most 64 terms), the threads'
// sums and the target's logit (from the thread holding it; the others add 0) summed in double
// in the block's fixed tree: the slice's
// CrossEntropy::SliceStats. The row's from the slices in a fixed tree; every thread takes the
// coefficients (CrossEntropy::coefs, in float) from the same bits, one thread the loss (in
// double). In place: every thread holds its values before the first barrier of the reductions
// (and, in a cluster, before its block's statistics leave), and nothing is written before every
// block's statistics are merged.
// Rows longer than the shapes, and a slice's partial states, take cross_entropy_kernel.
#pragma once

#include "cross_entropy.hpp"
#include "dtype_io.hpp"
#include "reduce.hpp"
#include "row_chunk.hpp"

namespace onorm {
namespace gpu {

// The shared memory of a block's reductions: the maximum, then the sums.
template <int WARP, int BLOCK>
union CeScratch {
  float f[BLOCK / WARP];
  Vals<double, 2> v2[BLOCK / WARP];
  Vals<double, 3> v3[BLOCK / WARP];
};

// Blocks per multiprocessor the register cap leaves room for (H200, bench/RESULTS.md): 3 blocks
// of 256 threads up to 32 elements a thread (80 registers: ptxas spills a few words across the
// block's reductions), but 2 (128 registers, no spill) for f32 rows of 32 elements a thread in
// one block, whose spills cost more than the third block gives; 64 elements 2.
template <typename In, int ITEMS, int BLOCK, bool kClusterSlice>
constexpr int ce_min_blocks() {
  constexpr int E = ITEMS * io<In>::kVec;
  constexpr bool kTwo = E > 32 || (E == 32 && sizeof(In) == 4 && !kClusterSlice);
  return (kTwo ? 2 : 3) * 256 / BLOCK;
}

// The sum of N floats in a fixed pairwise tree (a[] is overwritten).
template <int N>
ONORM_DEV float tree_sum(float* a) {
#pragma unroll
  for (int s = 1; s < N; s *= 2)
#pragma unroll
    for (int i = 0; i + s < N; i += 2 * s) a[i] += a[i + s];
  return a[0];
}

// The statistics of the slice [0, n) of a row that this block holds in v (the layout of
// load_items with STRIDE = BLOCK; padding -inf); v keeps exp(x - the slice's maximum) for the
// finish. xt: the target's logit in the thread holding it (0 elsewhere), holds: the slice holds
// the target. kSumX: the sum of x (label smoothing's), else 0. Every thread gets the same bits;
// ends with a barrier.
template <typename In, int WARP, int ITEMS, int BLOCK, bool kSumX>
ONORM_DEV core::ops::CrossEntropy::SliceStats ce_slice_stats(float* v, int n, int lane, float xt, bool holds,
                                                             CeScratch<WARP, BLOCK>& sc) {
  using Stats = core::ops::SoftmaxStatistics;
  constexpr int VEC = io<In>::kVec;
  const GpuMath m;
  float r = core::neg_infinity<float>();
#pragma unroll
  for (int e = 0; e < ITEMS * VEC; ++e) r = shim::nan_max(r, v[e]);
  const float mx = block_allreduce<WARP, BLOCK>(r, sc.f, MaxOp{});
  const float p = Stats::pivot(mx, n);
  float d_items[ITEMS], x_items[ITEMS] = {};
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    float d[VEC], x[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      float& e = v[i * VEC + j];
      if (kSumX) x[j] = (lane + i * BLOCK) * VEC + j < n ? e * core::kLogitSumScale : 0.0f;
      e = m.exp(e - p);  // padding (-inf) adds 0
      d[j] = e;
    }
    d_items[i] = tree_sum<VEC>(d);
    if (kSumX) x_items[i] = tree_sum<VEC>(x);
  }
  // The exp sum, the target's logit (exact: one term), the sum of x where asked.
  constexpr int kSums = kSumX ? 3 : 2;
  Vals<double, kSums> s;
  s.v[0] = tree_sum<ITEMS>(d_items);
  s.v[1] = xt;
  if (kSumX) s.v[kSums - 1] = tree_sum<ITEMS>(x_items);
  if constexpr (kSumX) s = block_allreduce<WARP, BLOCK>(s, sc.v3, AddOp{});
  else s = block_allreduce<WARP, BLOCK>(s, sc.v2, AddOp{});
  const core::MaxSum<double> ms =
      mx == core::neg_infinity<float>() ? core::MaxSum<double>::identity() : core::MaxSum<double>::of(p, s.v[0]);
  const double sum_x = kSumX ? s.v[kSums - 1] * core::kLogitSumUnscale : 0.0;
  return core::ops::CrossEntropy::SliceStats{core::LogitStats<double>::of(ms, sum_x), static_cast<float>(s.v[1]),
                                             holds ? 1 : 0};
}

// The row's statistics from one slice's per lane of a warp (lanes past the slices: the
// identity), every lane getting the same bits: the batched form of the slices' combine, the
// maximum M first, then sum_k d_k exp(m_k - M), the sums of x and the target's logit in fixed
// trees of double adds. The rescale in float: a few units in the last place of each term, far
// inside lse's bound (a combine per tree level in double waits on an exp in double per level).
template <int WARP>
ONORM_DEV core::ops::CrossEntropy::SliceStats merge_slice_stats(const core::ops::CrossEntropy::SliceStats& s, int lane) {
  const GpuMath m;
  const float mk = static_cast<float>(s.st.ms.m);
  const float mx = group_allreduce<WARP>(mk, lane, MaxOp{});
  // A slice at -inf adds 0 (-inf - -inf would be NaN); mx = +inf makes the row NaN (inf - inf),
  // as MaxSum's combine does.
  const double dk = mk == core::neg_infinity<float>() ? 0.0 : s.st.ms.d * static_cast<double>(m.exp(mk - mx));
  Vals<double, 3> v{{dk, s.st.sum, s.holds_target ? static_cast<double>(s.target_logit) : 0.0}};
  v = group_allreduce<WARP>(v, lane, AddOp{});
  const float holds = group_allreduce<WARP>(static_cast<float>(s.holds_target), lane, MaxOp{});
  const core::MaxSum<double> ms =
      mx == core::neg_infinity<float>() ? core::MaxSum<double>::identity() : core::MaxSum<double>::of(mx, v.v[0]);
  return core::ops::CrossEntropy::SliceStats{core::LogitStats<double>::of(ms, v.v[1]), static_cast<float>(v.v[2]),
                                             holds > 0.0f ? 1 : 0};
}

// Where the row's target lies in a block's slice [col0, col0 + n): its column in the slice (-1:
// ignored, out of range or in another slice) and, in the one thread whose items hold it, its
// logit, read from memory (the thread's own element: in place, it writes it only later).
struct CeTarget {
  int col;
  bool mine;
  float logit;
};
// Whether the row's target t is read (not ignored, in range) and lies in the slice [col0, col0 + n).
ONORM_DEV bool slice_holds_target(const CrossEntropyArgs& a, int64_t t, int64_t col0, int64_t n) {
  return core::ops::CrossEntropy::reads_target(t, a.cols, a.ignore_index) && t >= col0 && t < col0 + n;
}
template <typename In, int BLOCK>
ONORM_DEV CeTarget ce_target_in(const CrossEntropyArgs& a, int64_t row, int64_t t, int64_t col0, int n, int lane) {
  constexpr int VEC = io<In>::kVec;
  CeTarget r{-1, false, 0.0f};
  if (slice_holds_target(a, t, col0, n)) {
    r.col = static_cast<int>(t - col0);
    r.mine = (r.col / VEC) % BLOCK == lane;
    if (r.mine) r.logit = io<In>::load1(static_cast<const In*>(a.x) + row * a.x_stride + t);
  }
  return r;
}

// The slice's statistics (ce_slice_stats, with or without the sum of x as label smoothing asks).
template <typename In, int WARP, int ITEMS, int BLOCK>
ONORM_DEV core::ops::CrossEntropy::SliceStats ce_stats_of(const CrossEntropyArgs& a, float* v, int n, int lane,
                                                          const CeTarget& tg, CeScratch<WARP, BLOCK>& sc) {
  return a.param[0] > 0.0 ? ce_slice_stats<In, WARP, ITEMS, BLOCK, true>(v, n, lane, tg.logit, tg.col >= 0, sc)
                          : ce_slice_stats<In, WARP, ITEMS, BLOCK, false>(v, n, lane, tg.logit, tg.col >= 0, sc);
}

// The row's loss and lse (in double), from the row's merged statistics: one thread, after its
// stores (the slice's values are no longer live).
ONORM_DEV void ce_row_loss(const CrossEntropyArgs& a, int64_t row, int64_t t, const core::ops::CrossEntropy::SliceStats& s) {
  using CE = core::ops::CrossEntropy;
  float loss = 0.0f, lse = 0.0f;
  CE::loss_lse(s.st, a.cols, t, a.ignore_index, s.target_logit, CE::params(a.param), &loss, a.lse ? &lse : nullptr);
  a.loss[row] = loss;
  if (a.lse) a.lse[row] = lse;
}

// The row's gradient coefficients (in float: every thread takes them).
ONORM_DEV core::ops::CrossEntropy::Coefs ce_row_coefs(const CrossEntropyArgs& a, int64_t t,
                                                      const core::ops::CrossEntropy::SliceStats& s) {
  using CE = core::ops::CrossEntropy;
  return CE::coefs<float>(s.st, a.cols, t, a.ignore_index, CE::params(a.param));
}

// The gradient of the slice [col0, col0 + n) of `row` from the exps kept in v (overwritten):
// every element as off the target, then the target's, in the thread holding it, from its logit
// (the same thread's later store).
template <typename In, int ITEMS, int BLOCK>
ONORM_DEV void ce_slice_finish(const CrossEntropyArgs& a, int64_t row, int64_t col0, int n, int lane, float* v,
                               const core::ops::CrossEntropy::Coefs& row_cf, float slice_max, const CeTarget& tg) {
  using CE = core::ops::CrossEntropy;
  constexpr int VEC = io<In>::kVec;
  const GpuMath m;
  const CE::Coefs cf = CE::chunk_coefs(row_cf, slice_max);
#pragma unroll
  for (int e = 0; e < ITEMS * VEC; ++e) v[e] = cf.zero ? 0.0f : CE::grad_kept(m, cf, v[e]);
  const int64_t off = row * a.dx_stride + col0;
  store_items_as<VEC, ITEMS, BLOCK>(a.dx, a.dx_dtype, off, n, lane, v, a.dx_vec != 0);
  if (tg.mine) store_dtype(a.dx, a.dx_dtype, off + tg.col, CE::grad(m, cf, tg.logit, true));
}

// Loads this block's slice [col0, col0 + n) of `row` (padding -inf).
template <typename In, int ITEMS, int BLOCK>
ONORM_DEV void ce_load_slice(const CrossEntropyArgs& a, int64_t row, int64_t col0, int n, int lane, float* v) {
  load_items<In, ITEMS, BLOCK>(static_cast<const In*>(a.x) + row * a.x_stride + col0, n, lane, v, a.x_vec != 0,
                               core::neg_infinity<float>());
}

// grid: blocks looping over the rows; a.cols <= BLOCK * ITEMS * VEC; stage WHOLE.
template <typename In, int WARP, int ITEMS, int BLOCK>
__global__ void __launch_bounds__(BLOCK, (ce_min_blocks<In, ITEMS, BLOCK, false>())) ce_rows_kernel(CrossEntropyArgs a) {
  __shared__ CeScratch<WARP, BLOCK> sc;
  const int lane = static_cast<int>(threadIdx.x);
  const int n = static_cast<int>(a.cols);
  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const int64_t t = a.targets[row];
    float v[ITEMS * io<In>::kVec];
    ce_load_slice<In, ITEMS, BLOCK>(a, row, 0, n, lane, v);
    const CeTarget tg = ce_target_in<In, BLOCK>(a, row, t, 0, n, lane);
    const core::ops::CrossEntropy::SliceStats s = ce_stats_of<In, WARP, ITEMS, BLOCK>(a, v, n, lane, tg, sc);
    if (a.dx) ce_slice_finish<In, ITEMS, BLOCK>(a, row, 0, n, lane, v, ce_row_coefs(a, t, s), static_cast<float>(s.st.ms.m), tg);
    if (lane == 0) ce_row_loss(a, row, t, s);
  }
}

}  // namespace gpu
}  // namespace onorm
