// Softmax top-k on GPUs (core/ops/softmax_topk.hpp; API.md, "softmax top-k"), shared by CUDA
// and HIP: softmax_topk_kernel, a block per row (a grid-stride loop over the rows), k up to
// SoftmaxTopk::kGpuMaxK, the row read once, in tiles of 16-byte vectors:
//   1. each tile's terms of the softmax sum (not with renormalize): a thread's running float
//      sum about a pivot that moves rarely, compensated (PivotSum, pivot_sum.hpp), merged over
//      the block at the end in double and moved to the row's max (the first key);
//   2. the tile's elements that pass the filter enter a buffer of candidates in shared memory
//      (topk_candidates.hpp). The filter holds back only elements that cannot be in the top k:
//      at first none; on a long row, in the first tile, keys under the k-th largest of the
//      threads' maxima (k of its elements are at least that); after a full buffer is compacted
//      to its top k, keys under the k-th. Past a tile every entry held has a lower column than
//      what follows, so the k-th's ties stop entering. One compare per tile (its max with the
//      filter's floor) and one barrier per tile (an OR of "some element passed") in the common
//      case;
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
#include "pivot_sum.hpp"
#include "onlinenorm/core/max_sum.hpp"
#include "onlinenorm/core/ops/softmax.hpp"
#include "onlinenorm/core/ops/softmax_topk.hpp"
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
    // The threads' pivots are tile maxima, the row's max M up to 16 above ms.m: the sum moves
    // to M (the first key after the sort; a finite row's), in double.
    if (!core::is_nan(ms.m) && !core::is_nan(ms.d) && !ms.is_identity()) {
      const double top = value_of_key(sh.keys[0]);
      ms = core::MaxSum<double>::of(top, ms.d * core::exp_of(ms.m - top));
    }
    cf = Sm::narrow(Sm::coefs(ms, Sm::Params{}, ok));
  }
  for (int i = tid; i < k; i += BLOCK) {
    const float v = value_of_key(sh.keys[i]);
    store_dtype(a.values, a.values_dtype, row * a.values_stride + i, Sm::finish(m, cf, &v, &v));
    a.indices[row * a.k + i] = sh.cols[i];
  }
}

// On NVIDIA, four blocks a multiprocessor (64 registers).
// The row's first tile, a partial last one and every tile of an unaligned row take the plain
// path (load_items). The whole tiles of an aligned row are software-pipelined: the next tile's
// 16-byte loads are issued (raw words, converted later) before this tile is processed, so that
// a thread has two tiles of loads in flight across the barrier; two register sets alternate (a
// loop unrolled by 2: no moves). A tile where some element of the block passed the filter
// leaves that loop for the call (append_tile: a call with loads in flight would save them to
// the stack) and the pipeline starts again after it.
// The tile's filter is one compare of its max with the floor: the max is below the floor iff
// every element is (a NaN max passes, as a NaN element does).
template <typename In, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK, (shim::kCudaRegisterCaps ? 4 : 1)) softmax_topk_kernel(TopkArgs a) {
  constexpr int VEC = io<In>::kVec, E = kTopkElems, ITEMS = E / VEC;
  constexpr int64_t kTile = int64_t(BLOCK) * E;
  static_assert(E <= 32, "a thread's elements of a tile in one 32-bit mask");
  using Raw = RawN<In, VEC>;
  using Topk = core::ops::SoftmaxTopk;
  __shared__ TopkShared<WARP, BLOCK> sh;
  const int tid = static_cast<int>(threadIdx.x);
  const int k = static_cast<int>(a.k);
  const bool aligned = a.x_vec != 0;
  // The threads' maxima bound the k-th from below only where k threads hold elements; a row
  // that fits the buffer needs no bound.
  const bool bound_first = a.cols > kTopkSlots && k <= BLOCK;
  // Tiles below `whole` are full and aligned: the pipelined loads.
  const int64_t whole = aligned ? a.cols / kTile * kTile : 0;
  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const In* x = static_cast<const In*>(a.x) + row * a.x_stride;
    PivotSum sum;
    TopkState s{TopkFilter::all(), 0};
    float lo = s.f.floor();
    // The tile at base after its barrier, where some element of the block passed (any: this
    // thread's): the entries appended; later tiles' columns are above every entry's.
    auto cold = [&](int64_t base, bool any) {
      const int n = static_cast<int>(a.cols - base < kTile ? a.cols - base : kTile);
      s = append_tile<In, WARP, BLOCK, E>(sh, x, base, n, aligned, any, k, a.cols, s);
      s.f.ties = false;
      lo = s.f.floor();
    };
    int64_t base = 0;
    while (base < a.cols) {
      if (base == 0 || base >= whole) {  // the plain path
        const int n = static_cast<int>(a.cols - base < kTile ? a.cols - base : kTile);
        float v[E];
        load_items<In, ITEMS, BLOCK, VEC>(x + base, n, tid, v, aligned, core::neg_infinity<float>());
        const float r1 = tile_max<E>(v);
        if (!a.renormalize) sum.push<E>(v, r1);
        if (base == 0 && bound_first) {
          s.f = first_bound<WARP, BLOCK>(sh, Topk::key(r1), k);
          lo = s.f.floor();
        }
        const bool any = !(r1 < lo);
        if (shim::sync_threads_or(any)) cold(base, any);
        if (base == 0) {
          s.f.ties = false;
          lo = s.f.floor();
        }
        base += kTile;
        continue;
      }
      // Pipelined whole tiles from base until one passes the filter somewhere (or the last).
      Raw ra[ITEMS], rb[ITEMS] = {};  // (rb zeroed: no path reads it unloaded, which GCC cannot see)
      auto load_tile = [&](Raw* r, int64_t b) {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) load_raw_n<In, VEC>(x + b + (tid + i * BLOCK) * VEC, r[i]);
      };
      // This tile's sum and filter; whether some element of the block passed (any: this thread's).
      auto hot = [&](const Raw* r, bool& any) {
        float v[E];
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) unpack_n<In, VEC>(r[i], v + i * VEC);
        const float r1 = tile_max<E>(v);
        if (!a.renormalize) sum.push<E>(v, r1);
        any = !(r1 < lo);
        return shim::sync_threads_or(any) != 0;
      };
      load_tile(ra, base);
      bool any = false, hit = false;
      for (;;) {
        if (base + kTile < whole) load_tile(rb, base + kTile);
        if ((hit = hot(ra, any))) break;
        base += kTile;
        if (base >= whole) break;
        if (base + kTile < whole) load_tile(ra, base + kTile);
        if ((hit = hot(rb, any))) break;
        base += kTile;
        if (base >= whole) break;
      }
      if (hit) {
        cold(base, any);
        base += kTile;
      }
    }
    core::MaxSum<double> ms = core::MaxSum<double>::identity();
    if (!a.renormalize) ms = block_allreduce<WARP, BLOCK>(sum.state(), sh.stats, CombineOp<core::MaxSum<double>>{});
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
