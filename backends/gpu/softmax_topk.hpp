// Softmax top-k on GPUs (core/ops/softmax_topk.hpp; API.md, "softmax top-k"), shared by CUDA
// and HIP: softmax_topk_kernel, a block per row (a grid-stride loop over the rows), k up to
// SoftmaxTopk::kGpuMaxK, the row read once, in tiles of 16-byte vectors:
//   1. each tile's MaxSum step for the softmax coefficients (as row_logit_stats.hpp; not with
//      renormalize), folded pairwise in double, merged over the block at the end;
//   2. the tile's elements that pass the filter enter a buffer of candidates in shared memory
//      (topk_candidates.hpp). The filter holds back only elements that cannot be in the top k:
//      at first none; on a long row, in the first tile, keys under the k-th largest of the
//      threads' maxima (k of its elements are at least that); after a full buffer is compacted
//      to its top k, keys under the k-th. Past a tile every entry held has a lower column than
//      what follows, so the k-th's ties stop entering. One compare per element and one barrier
//      per tile (an OR of "some element passed") in the common case;
//   3. the buffer compacted to the top k and sorted by (key descending, column ascending):
//      SoftmaxTopk::before;
//   4. their columns, and their softmax over the row (exp(x - M) / D), or with renormalize over
//      the k selected (their max, the sum of exp in the block's fixed tree). Values come from
//      the keys (no second read).
// An all -inf row gives values 0 and columns 0..k-1 (all keys tie); a NaN row NaN values
// (NaN keys come first) and k distinct columns. A row's results depend on that row alone.
#pragma once

#include "vendor_shim.hpp"  // first: the vendor runtime defines __host__ / __device__

#include <algorithm>
#include <cstdint>

#include "dtype_io.hpp"
#include "math.hpp"
#include "onlinenorm/core/max_sum.hpp"
#include "onlinenorm/core/ops/softmax.hpp"
#include "onlinenorm/core/ops/softmax_topk.hpp"
#include "onlinenorm/core/pairwise.hpp"
#include "reduce.hpp"
#include "row_args.hpp"
#include "row_logit_stats.hpp"
#include "topk_candidates.hpp"

namespace onorm {
namespace gpu {

constexpr int kTopkBlock = 256;
// Elements a thread takes per tile: 4 (f32) or 2 (16-bit) 16-byte loads in flight, one barrier
// per BLOCK * 16 elements. 32 spilled 300-500 bytes at 64 registers (sm_90a).
constexpr int kTopkElems = 16;

struct TopkArgs {
  const void* x;
  int64_t x_stride;
  int x_vec;  // every row 16-byte aligned
  void* values;
  int64_t values_stride;
  int values_dtype;
  int64_t* indices;
  int64_t rows, cols, k;
  int renormalize;
};

// The shared memory of a block's row.
template <int WARP, int BLOCK>
struct TopkShared : TopkCandidates<WARP, BLOCK> {
  core::MaxSum<double> stats[BLOCK / WARP];
  float sums[BLOCK / WARP];
};

// What a row has gathered so far: the filter and the entries held.
struct TopkState {
  TopkFilter f;
  int count;
};

// The cold part of a tile, where some element of the block passed the filter's floor: the
// threads that hold one load their elements again (from the cache: the tile was just read) and
// append those that pass the filter. Not inlined: the tile loop keeps its elements in
// registers (an array handed to a call would live in local memory).
template <typename In, int WARP, int BLOCK, int E, typename Sh>
__device__ __noinline__ TopkState append_tile(Sh& sh, const In* x, int64_t base, int n, bool aligned, bool mine,
                                              int k, int64_t cols, TopkState s) {
  using Topk = core::ops::SoftmaxTopk;
  constexpr int VEC = io<In>::kVec;
  const int tid = static_cast<int>(threadIdx.x);
  auto col = [&](int e) { return base + (tid + (e / VEC) * BLOCK) * VEC + e % VEC; };
  float v[E];
  uint32_t mask = 0;
  if (mine) {
    load_items<In, E / VEC, BLOCK, VEC>(x + base, n, tid, v, aligned, core::neg_infinity<float>());
#pragma unroll
    for (int e = 0; e < E; ++e)
      if (col(e) < cols && s.f.pass(Topk::key(v[e]), col(e))) mask |= 1u << e;
  }
  append<WARP, BLOCK, E>(sh, mask, v, col, k, cols, s.count, s.f);
  return s;
}

// The first tile's filter on a long row: keys under the k-th largest of the threads' maxima
// (k <= BLOCK) stay out, as k of its elements are at least that. Not inlined (as append_tile).
template <int WARP, int BLOCK, typename Sh>
__device__ __noinline__ TopkFilter first_bound(Sh& sh, uint32_t max_key, int k) {
  sh.keys[threadIdx.x] = max_key;
  shim::sync_threads();
  return select_kth<WARP, BLOCK>(sh, BLOCK, k, 0, true);
}

// The row's end: the buffer compacted to the top k and sorted, their values (from the row's
// MaxSum ms, or renormalized) and columns stored. Not inlined: the tile loop's registers are
// not held for it.
template <int WARP, int BLOCK, typename Sh>
__device__ __noinline__ void finish_row(Sh& sh, const TopkArgs& a, int64_t row, int count, core::MaxSum<double> ms) {
  using Sm = core::ops::Softmax;
  const GpuMath m;
  const int tid = static_cast<int>(threadIdx.x);
  const int k = static_cast<int>(a.k);
  if (count > k) compact<WARP, BLOCK>(sh, count, k, select_kth<WARP, BLOCK>(sh, count, k, a.cols, false));
  sort_entries<BLOCK>(sh, k);
  Sm::Coefs<float> cf;
  bool ok;
  if (a.renormalize) {
    // The softmax of the k selected: their max is the first's value (NaN first, if any).
    const float top = value_of_key(sh.keys[0]);
    const float p = Sm::pivot(top, a.k);
    float d = 0.0f;
    for (int i = tid; i < k; i += BLOCK) d += m.exp(value_of_key(sh.keys[i]) - p);
    d = block_allreduce<WARP, BLOCK>(d, sh.sums, AddOp{});
    cf = Sm::narrow(Sm::coefs(Sm::state<float>(a.k, top, p, &d), Sm::Params{}, ok));
  } else {
    cf = Sm::narrow(Sm::coefs(ms, Sm::Params{}, ok));
  }
  for (int i = tid; i < k; i += BLOCK) {
    const float v = value_of_key(sh.keys[i]);
    store_dtype(a.values, a.values_dtype, row * a.values_stride + i, Sm::finish(m, cf, &v, &v));
    a.indices[row * a.k + i] = sh.cols[i];
  }
}

// On NVIDIA, four blocks a multiprocessor (64 registers: sm_90a spills a few words of the
// filter's state a tile; unbounded it took 128: two blocks, half the loads in flight).
template <typename In, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK, (shim::kCudaRegisterCaps ? 4 : 1)) softmax_topk_kernel(TopkArgs a) {
  using Sm = core::ops::Softmax;
  using Topk = core::ops::SoftmaxTopk;
  constexpr int VEC = io<In>::kVec, E = kTopkElems, ITEMS = E / VEC;
  constexpr int64_t kTile = int64_t(BLOCK) * E;
  static_assert(E <= 32, "a thread's elements of a tile in one 32-bit mask");
  __shared__ TopkShared<WARP, BLOCK> sh;
  const GpuMath m;
  const int tid = static_cast<int>(threadIdx.x);
  const int k = static_cast<int>(a.k);
  // The threads' maxima bound the k-th from below only where k threads hold elements; a row
  // that fits the buffer needs no bound.
  const bool bound_first = a.cols > kTopkSlots && k <= BLOCK;
  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const In* x = static_cast<const In*>(a.x) + row * a.x_stride;
    core::PairwiseFold<core::MaxSum<double>> fold;
    TopkState s{TopkFilter::all(), 0};
    for (int64_t base = 0; base < a.cols; base += kTile) {
      const int n = static_cast<int>(a.cols - base < kTile ? a.cols - base : kTile);
      float v[E];
      load_items<In, ITEMS, BLOCK, VEC>(x + base, n, tid, v, a.x_vec != 0, core::neg_infinity<float>());
      float r1 = core::neg_infinity<float>();
#pragma unroll
      for (int e = 0; e < E; ++e) r1 = shim::nan_max(r1, v[e]);
      if (!a.renormalize) {
        const float p = Sm::pivot(r1, E);
        float d = 0.0f;
#pragma unroll
        for (int e = 0; e < E; ++e) d += m.exp(v[e] - p);  // padding (-inf) adds 0
        fold.push(Sm::state<double>(E, r1, p, &d));
      }
      if (base == 0 && bound_first) s.f = first_bound<WARP, BLOCK>(sh, Topk::key(r1), k);
      const float lo = s.f.floor();
      bool any = false;
#pragma unroll
      for (int e = 0; e < E; ++e) any |= !(v[e] < lo);
      if (shim::sync_threads_or(any))
        s = append_tile<In, WARP, BLOCK, E>(sh, x, base, n, a.x_vec != 0, any, k, a.cols, s);
      s.f.ties = false;  // later tiles' columns are above every entry's
    }
    core::MaxSum<double> ms = core::MaxSum<double>::identity();
    if (!a.renormalize) ms = block_allreduce<WARP, BLOCK>(fold.result(), sh.stats, CombineOp<core::MaxSum<double>>{});
    shim::sync_threads();  // the last entries written
    finish_row<WARP, BLOCK>(sh, a, row, s.count, ms);
    shim::sync_threads();  // the shared arrays are the next row's
  }
}

// Runs a validated softmax top-k request with k <= SoftmaxTopk::kGpuMaxK on warp width WARP
// with launcher l (launcher.hpp).
template <int WARP, typename L>
onorm_status run_softmax_topk(L& l, const onorm_request& q) {
  const onorm_rows &x = q.in[0], &v = q.out[0];
  TopkArgs a{};
  a.x = x.data;
  a.x_stride = x.row_stride;
  a.x_vec = rows_aligned16(x);
  a.values = v.data;
  a.values_stride = v.row_stride;
  a.values_dtype = v.dtype;
  a.indices = q.indices;
  a.rows = x.rows;
  a.cols = x.cols;
  a.k = q.k;
  a.renormalize = q.renormalize;
  const unsigned grid = row_blocks(a.rows, l.caps().sms);
  switch (x.dtype) {
    case ONORM_F32: return l.template softmax_topk<float, WARP>(grid, a);
    case ONORM_F16: return l.template softmax_topk<core::f16_bits, WARP>(grid, a);
    default: return l.template softmax_topk<core::bf16_bits, WARP>(grid, a);
  }
}

}  // namespace gpu
}  // namespace onorm
