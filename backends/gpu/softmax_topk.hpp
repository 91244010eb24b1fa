// Softmax top-k on GPUs (core/ops/softmax_topk.hpp; API.md, "softmax top-k"), shared by CUDA
// and HIP: softmax_topk_kernel, a block per row (a grid-stride loop over the rows), k up to
// SoftmaxTopk::kGpuMaxK, the row read once, in tiles of 16-byte vectors:
//   1. each tile's terms of the softmax sum (not with renormalize): a thread's running float
//      sum about a pivot that moves rarely, compensated (PivotSum, pivot_sum.hpp), merged over
//      the block at the end in double and moved to the row's max (the first key);
//   2. the tile's elements that pass the filter enter a buffer of candidates in shared memory
//      (topk_candidates.hpp), each thread reserving its slots with one atomic. The filter holds
//      back only elements that cannot be in the top k: at first none; on a long row, in the first
//      tile, keys under the lowest of the warps' j-th largest thread maxima (k of its elements
//      are at least that); then, after a tile where some element entered, the k-th of the
//      entries, kept exact by merging the new entries into the sorted top (a few barriers) while
//      they are few, or by a radix select where the buffer filled. With the k-th exact, a tile of
//      4096 elements t tiles into an iid row holds about k / t candidates: most tiles hold none.
//      Past a tile every entry held has a lower column than what follows, so the k-th's ties stop
//      entering. One compare per tile (its max with the filter's floor) and one barrier per tile
//      (an OR of "some element entered") in the common case;
//   3. the buffer brought to the top k sorted by (key descending, column ascending):
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
  int slices;  // the warp kernel's warps a row (softmax_topk_plan.hpp)
};

// The shared memory of a block's row.
template <int WARP, int BLOCK>
struct TopkShared : TopkCandidates<WARP, BLOCK> {
  core::MaxSum<double> stats[BLOCK / WARP];
  float sums[BLOCK / WARP];
};

// What the tile loop keeps of a row's candidates: the filter as one key (an element enters iff
// its key is above thr: past a tile, the k-th's ties have lower columns than what follows) and
// how many entries, from the first, are sorted and the row's top so far (held; the rest, the
// tail, in any order). The count of entries is in shared memory (the appends' atomic).
struct TopkState {
  uint32_t thr;
  int held;

  // A float f such that every value that enters has !(v < f) (NaN included): one compare per
  // tile (its max), the keys compared only where some element of the block passed it.
  ONORM_DEV float floor() const { return TopkFilter{thr, false, 0, 0}.floor(); }
};

// This thread's elements of a tile (v[e] at column col(e); columns from cols on are padding) whose
// keys are above thr, appended to the buffer, a slot each (one element at a time: few registers
// beside the tile's); returns whether there were any, and in `failed` those that found no slot.
template <int E, typename Col, typename Sh>
ONORM_DEV bool append_passing(Sh& sh, uint32_t thr, const float* v, Col col, int64_t cols, uint32_t& failed) {
  using Topk = core::ops::SoftmaxTopk;
  bool any = false;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const uint32_t key = Topk::key(v[e]);
    if (key > thr && col(e) < cols) {
      const int slot = atomicAdd(&sh.count, 1);
      if (slot < kTopkSlots) {
        sh.keys[slot] = key;
        sh.cols[slot] = col(e);
      } else {
        failed |= 1u << e;
      }
      any = true;
    }
  }
  return any;
}

// Whether the buffer of count entries needs settle: it overflowed, or its tail is worth merging:
// at least a quarter of k (fewer merges for a slightly looser floor) and short (merge_tail's
// work grows with it).
template <int BLOCK>
ONORM_DEV bool settle_due(int count, int held, int k) {
  const int tail = count - held;
  return count > kTopkSlots || (tail >= (k + 3) / 4 && tail <= BLOCK / 2 && count <= kMergeMax<BLOCK>);
}

// The tile at base after its barrier, count entries appended in all (settle_due; failed: this
// thread's elements that found no slot): while the buffer overflows, it is compacted to its top k
// (the exact filter, ties resolved by column within the tile) and the elements left out appended
// again where they pass it, loaded again (from the cache: the tile was just read); then a tail
// worth it is merged into the sorted top, which makes thr the exact k-th. Not inlined: the tile
// loop keeps its elements in registers (an array handed to a call would live in local memory).
template <typename In, int WARP, int BLOCK, int E, typename Sh>
__device__ __noinline__ TopkState settle(Sh& sh, const In* x, int64_t base, int n, bool aligned, uint32_t failed,
                                         int count, int k, int64_t cols, TopkState s) {
  using Topk = core::ops::SoftmaxTopk;
  constexpr int VEC = io<In>::kVec;
  const int tid = static_cast<int>(threadIdx.x);
  auto col = [&](int e) { return base + (tid + (e / VEC) * BLOCK) * VEC + e % VEC; };
  if (count > kTopkSlots) {
    float v[E];
    load_items<In, E / VEC, BLOCK, VEC>(x + base, n, tid, v, aligned, core::neg_infinity<float>());
    do {
      const TopkFilter f = select_kth<WARP, BLOCK>(sh, kTopkSlots, k, cols, false);
      compact<WARP, BLOCK>(sh, kTopkSlots, k, f);
      if (tid == 0) sh.count = k;
      shim::sync_threads();
      uint32_t again = 0;
#pragma unroll
      for (int e = 0; e < E; ++e)
        if (((failed >> e) & 1u) && f.pass(Topk::key(v[e]), col(e))) again |= 1u << e;
      failed = again ? append<E>(sh, again, v, col) : 0u;
      shim::sync_threads();
      count = sh.count;
      shim::sync_threads();  // read everywhere before it changes
      s.thr = f.thr;
    } while (count > kTopkSlots);
    s.held = 0;
  }
  if (settle_due<BLOCK>(count, s.held, k)) {
    merge_tail<BLOCK>(sh, s.held, count, k);
    s.held = count < k ? count : k;
    if (s.held == k) s.thr = sh.keys[k - 1];
  }
  return s;
}

// x sorted descending over the warp's lanes (a bitonic network of shuffles): lane i gets the
// (i+1)-th largest. Every lane calls it.
template <int WARP>
ONORM_DEV uint32_t warp_sort_descending(uint32_t x) {
  const int lane = static_cast<int>(threadIdx.x) % WARP;
  for (int size = 2; size <= WARP; size <<= 1)
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      const uint32_t y = static_cast<uint32_t>(shim::shfl_xor(static_cast<int64_t>(x), stride, WARP));
      const bool descending = (lane & size) == 0;  // this run's order (the whole warp's: descending)
      const bool earlier = (lane & stride) == 0;   // the pair's first place
      x = earlier == descending ? (x > y ? x : y) : (x < y ? x : y);
    }
  return x;
}

// The first tile's bound on a long row (k <= BLOCK): the lowest of the warps' j-th largest thread
// maxima (a key), j = ceil(k / warps): each warp holds j elements at least that, k in all. The lanes' maxima sorted in each warp (a bitonic network of shuffles): no
// block-wide select. Not inlined (as settle).
template <int WARP, int BLOCK, typename Sh>
__device__ __noinline__ uint32_t first_bound(Sh& sh, uint32_t max_key, int k) {
  constexpr int kWarps = BLOCK / WARP;
  const int lane = static_cast<int>(threadIdx.x) % WARP, warp = static_cast<int>(threadIdx.x) / WARP;
  const uint32_t x = warp_sort_descending<WARP>(max_key);
  const int j = (k + kWarps - 1) / kWarps;
  if (lane == j - 1) sh.hist[warp] = x;  // the buffer's scratch is free in the first tile
  shim::sync_threads();
  uint32_t thr = ~0u;
  for (int w = 0; w < kWarps; ++w) thr = sh.hist[w] < thr ? sh.hist[w] : thr;
  return thr;
}

// The coefficients of a row's top-k values (Softmax::finish of a key's value), top the first
// key's value: the softmax over the row from its MaxSum ms (about the threads' pivots, up to 16
// below the row's max M = top, to which it moves in double; a NaN or empty row as it is), or with
// renormalize over the k selected, d their sum of exp about Softmax::pivot(top, k) (in the
// caller's fixed tree).
ONORM_DEV core::ops::Softmax::Coefs<float> topk_coefs(const TopkArgs& a, float top, float d, core::MaxSum<double> ms) {
  using Sm = core::ops::Softmax;
  bool ok;
  if (a.renormalize) return Sm::narrow(Sm::coefs(Sm::state<float>(a.k, top, Sm::pivot(top, a.k), &d), Sm::Params{}, ok));
  if (!core::is_nan(ms.m) && !core::is_nan(ms.d) && !ms.is_identity())
    ms = core::MaxSum<double>::of(double(top), ms.d * core::exp_of(ms.m - double(top)));
  return Sm::narrow(Sm::coefs(ms, Sm::Params{}, ok));
}

// Entry i of a row's top k (key and column) stored: its value (Softmax::finish with cf) and
// its column.
ONORM_DEV void store_topk_entry(const TopkArgs& a, int64_t row, int i, const core::ops::Softmax::Coefs<float>& cf,
                                uint32_t key, int64_t col) {
  const float v = value_of_key(key);
  store_dtype(a.values, a.values_dtype, row * a.values_stride + i, core::ops::Softmax::finish(GpuMath{}, cf, &v, &v));
  a.indices[row * a.k + i] = col;
}

// The row's end: the buffer brought to the top k, sorted (a short tail merged; else compacted by
// the radix select and sorted), their values (from the row's MaxSum ms, or renormalized) and
// columns stored; the buffer emptied for the next row. Not inlined: the tile loop's registers
// are not held for it.
template <int WARP, int BLOCK, typename Sh>
__device__ __noinline__ void finish_row(Sh& sh, const TopkArgs& a, int64_t row, int count, int held,
                                       core::MaxSum<double> ms) {
  using Sm = core::ops::Softmax;
  const GpuMath m;
  const int tid = static_cast<int>(threadIdx.x);
  const int k = static_cast<int>(a.k);
  if (count > held) {  // count >= k: every element of the top k entered
    if (count - held <= BLOCK / 2 && count <= kMergeMax<BLOCK>) {
      merge_tail<BLOCK>(sh, held, count, k);
    } else {
      if (count > k) compact<WARP, BLOCK>(sh, count, k, select_kth<WARP, BLOCK>(sh, count, k, a.cols, false));
      sort_entries<BLOCK>(sh, k);
    }
  }
  const float top = value_of_key(sh.keys[0]);
  float d = 0.0f;
  if (a.renormalize) {
    const float p = core::ops::Softmax::pivot(top, a.k);
    for (int i = tid; i < k; i += BLOCK) d += m.exp(value_of_key(sh.keys[i]) - p);
    d = block_allreduce<WARP, BLOCK>(d, sh.sums, AddOp{});
  }
  const Sm::Coefs<float> cf = topk_coefs(a, top, d, ms);
  for (int i = tid; i < k; i += BLOCK) store_topk_entry(a, row, i, cf, sh.keys[i], sh.cols[i]);
  if (tid == 0) sh.count = 0;  // (read before the caller's barrier)
}

// On NVIDIA, four blocks a multiprocessor (64 registers).
// The row's first tile, a partial last one and every tile of an unaligned row take the plain
// path (load_items). The whole tiles of an aligned row are software-pipelined: the next tile's
// 16-byte loads are issued (raw words, converted later) before this tile is processed, so that
// a thread has two tiles of loads in flight across the barrier; two register sets alternate (a
// loop unrolled by 2: no moves). Candidates are appended in the loop; a tile after which the
// buffer needs settle leaves it for the call (a call with loads in flight would save them to the
// stack) and the pipeline starts again after it.
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
  // The warps' j-th thread maxima bound the k-th from below only where k threads hold elements;
  // a row that fits the buffer needs no bound.
  const bool bound_first = a.cols > kTopkSlots && k <= BLOCK;
  // Tiles below `whole` are full and aligned: the pipelined loads.
  const int64_t whole = aligned ? a.cols / kTile * kTile : 0;
  if (tid == 0) sh.count = 0;
  shim::sync_threads();
  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const In* x = static_cast<const In*>(a.x) + row * a.x_stride;
    PivotSumOf<false> sum;
    TopkState s{0u, 0};  // every key is above 0
    float lo = s.floor();
    int count = 0;
    int64_t base = 0;
    auto col = [&](int e) { return base + (tid + (e / VEC) * BLOCK) * VEC + e % VEC; };
    // After a tile's barrier where some thread appended: the count, read in every thread before
    // any appends again; whether the buffer needs settle.
    auto due = [&]() {
      count = sh.count;
      shim::sync_threads();
      return settle_due<BLOCK>(count, s.held, k);
    };
    // The tile at base where the buffer needs settle (failed: this thread's elements that found
    // no slot); later tiles' columns are above every entry's.
    auto cold = [&](uint32_t failed) {
      const int n = static_cast<int>(a.cols - base < kTile ? a.cols - base : kTile);
      s = settle<In, WARP, BLOCK, E>(sh, x, base, n, aligned, failed, count, k, a.cols, s);
      lo = s.floor();
    };
    while (base < a.cols) {
      if (base == 0 || base >= whole) {  // the plain path
        const int n = static_cast<int>(a.cols - base < kTile ? a.cols - base : kTile);
        float v[E];
        load_items<In, ITEMS, BLOCK, VEC>(x + base, n, tid, v, aligned, core::neg_infinity<float>());
        const float r1 = tile_max<E>(v);
        uint32_t bound = 0;  // k elements of the first tile have keys at least this
        if (base == 0 && bound_first) {
          bound = first_bound<WARP, BLOCK>(sh, Topk::key(r1), k);
          s.thr = bound - 1;  // a max's key is at least -inf's, above 0
          lo = s.floor();
        }
        bool any = false;
        uint32_t failed = 0;
        if (!(r1 < lo)) any = append_passing<E>(sh, s.thr, v, col, a.cols, failed);
        if (!a.renormalize) sum.push<E>(v, r1);
        if (shim::sync_threads_or(any) && due()) cold(failed);
        if (s.thr < bound) {  // past the first tile, the bound's ties lose to the k entered
          s.thr = bound;
          lo = s.floor();
        }
        base += kTile;
        continue;
      }
      // Pipelined whole tiles from base until one needs settle (or the last).
      Raw ra[ITEMS], rb[ITEMS] = {};  // (rb zeroed: no path reads it unloaded, which GCC cannot see)
      auto load_tile = [&](Raw* r, int64_t b) {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) load_raw_n<In, VEC>(x + b + (tid + i * BLOCK) * VEC, r[i]);
      };
      // This tile's sum, and its elements that pass the filter appended (those that found no
      // slot in failed); whether the buffer needs settle.
      auto hot = [&](const Raw* r, uint32_t& failed) {
        float v[E];
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) unpack_n<In, VEC>(r[i], v + i * VEC);
        const float r1 = tile_max<E>(v);
        bool any = false;
        failed = 0;
        if (!(r1 < lo)) any = append_passing<E>(sh, s.thr, v, col, a.cols, failed);
        if (!a.renormalize) sum.push<E>(v, r1);  // after: v is not held through the exps
        return shim::sync_threads_or(any) && due();
      };
      load_tile(ra, base);
      uint32_t failed = 0;
      bool hit = false;
      for (;;) {
        if (base + kTile < whole) load_tile(rb, base + kTile);
        if ((hit = hot(ra, failed))) break;
        base += kTile;
        if (base >= whole) break;
        if (base + kTile < whole) load_tile(ra, base + kTile);
        if ((hit = hot(rb, failed))) break;
        base += kTile;
        if (base >= whole) break;
      }
      if (hit) {
        cold(failed);
        base += kTile;
      }
    }
    count = sh.count;  // (finish_row empties the buffer past the barriers below)
    core::MaxSum<double> ms = core::MaxSum<double>::identity();
    if (!a.renormalize) ms = block_allreduce<WARP, BLOCK>(sum.state(), sh.stats, CombineOp<core::MaxSum<double>>{});
    shim::sync_threads();  // the last entries written
    finish_row<WARP, BLOCK>(sh, a, row, count, s.held, ms);
    shim::sync_threads();  // the shared arrays are the next row's
  }
}

}  // namespace gpu
}  // namespace onorm
