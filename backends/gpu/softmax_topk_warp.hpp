// Softmax top-k with a warp per row (softmax_topk_warp_kernel), shared by CUDA and HIP: rows of up
// to kTopkWarpMaxCols columns and k up to kTopkWarpMaxK (the planner, softmax_topk_plan.hpp). The
// block kernel (softmax_topk.hpp) spends a row's time on its barriers and its per-row steps (the
// buffer's settles and sort in the whole block) once rows are short; a warp needs no barrier.
// A warp reads its row once, in tiles of WARP x kTopkElems elements:
//   1. each tile's terms of the softmax sum (not with renormalize): PivotSum, as the block
//      kernel, merged over the warp at the row's end;
//   2. the row's top k so far, sorted, in the warp's shared memory (TopkWarpList): a tile's
//      elements that come before its k-th entry (the filter: one compare of the tile's max with
//      the k-th's value in the common case, then the exact test) are merged into it a batch at
//      a time, a batch holding each lane's next candidate: every entry moves to its rank (the
//      entries before it in the list and those of the batch, counted over the lanes: merge_batch). Where a tile holds more than kTopkWarpBoundAt candidates (the
//      row's first tile, rising rows), they are first cut to those at least the tile's bound:
//      the ceil(k / m)-th largest of the lanes' m-th largest keys, m = ceil(k / WARP) (k of
//      the tile's elements are at least that);
//   3. the values of the list (their softmax over the row, or over the k) and their columns.
// The list is the exact top k of what the warp has seen (ties by the lower column), whatever the
// batches, so a row's results depend on that row alone.
#pragma once

#include "vendor_shim.hpp"  // first: the vendor runtime defines __host__ / __device__

#include <cstdint>

#include "dtype_io.hpp"
#include "math.hpp"
#include "pivot_sum.hpp"
#include "onlinenorm/core/max_sum.hpp"
#include "onlinenorm/core/ops/softmax.hpp"
#include "onlinenorm/core/ops/softmax_topk.hpp"
#include "reduce.hpp"
#include "softmax_topk.hpp"

namespace onorm {
namespace gpu {

constexpr int kTopkWarpBlock = 256;
constexpr int kTopkWarpMaxK = 64;
// Candidates in one tile past which the tile's own bound cuts them first (the bound costs a sort
// of the lanes' keys; a batch of candidates, a count over its lanes).
constexpr int kTopkWarpBoundAt = 64;

// A warp's row: its top k so far, sorted by SoftmaxTopk::before.
struct TopkWarpList {
  uint32_t keys[kTopkWarpMaxK];
  int32_t cols[kTopkWarpMaxK];
};

// The k-th entry of the list, which an element must come before to enter (SoftmaxTopk::before);
// while the list holds fewer than k, key 0 (no value's key) and column -1: every element enters.
struct TopkWarpFilter {
  uint32_t key = 0u;
  int32_t col = -1;

  ONORM_DEV bool pass(uint32_t k, int32_t c) const { return core::ops::SoftmaxTopk::before(k, c, key, col); }
  // A float f with !(v < f) for every value that passes (NaN included): TopkFilter's, whose
  // ties pass too (here the lower columns'); key 0's is a NaN, which every value passes.
  ONORM_DEV float floor() const { return TopkFilter{key, true, 0, 0}.floor(); }
};

// A key that k of the warp's candidates (the values v[e] where bit e of mask) are at least: the
// ceil(k / m)-th largest of the lanes' m-th largest candidate keys (0 where a lane has fewer
// than m), m = ceil(k / WARP) <= 2. Every lane calls it.
template <int WARP, int E>
ONORM_DEV uint32_t tile_bound(const float* v, uint32_t mask, int k) {
  static_assert(kTopkWarpMaxK <= 2 * WARP, "at most two keys a lane");
  uint32_t first = 0u, second = 0u;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const uint32_t x = ((mask >> e) & 1u) ? core::ops::SoftmaxTopk::key(v[e]) : 0u;
    if (x > first) {
      second = first;
      first = x;
    } else if (x > second) {
      second = x;
    }
  }
  const int m = k > WARP ? 2 : 1;
  const int j = (k + m - 1) / m;
  const uint32_t sorted = warp_sort_descending<WARP>(m == 1 ? first : second);
  const int lane = static_cast<int>(threadIdx.x) % WARP;
  // The lowest of the first j lanes' keys: lane j - 1's.
  return group_allreduce<WARP>(lane < j ? sorted : ~0u, lane, [](uint32_t x, uint32_t y) { return x < y ? x : y; });
}

// Merges a batch (this lane's candidate (key, col) where `has`; the batch's lanes in `batch`)
// into the warp's list of n entries; returns the entries it holds after (at most k). Each entry
// of the merged set goes to its rank; those ranked k or later drop out. Every lane calls it.
// Ranks are counts, one batch member at a time (broadcast from its lane): the list entries
// before it (a ballot over the lanes' entries: its rank in the list, kept by its own lane), and
// for each lane's candidate and entries whether the member comes before them. Members and
// entries have distinct columns: exactly one of each pair comes first.
template <int WARP>
ONORM_DEV int merge_batch(TopkWarpList& L, int n, int k, uint32_t key, int32_t col, bool has, uint64_t batch) {
  using Topk = core::ops::SoftmaxTopk;
  constexpr int R = kTopkWarpMaxK / WARP > 0 ? kTopkWarpMaxK / WARP : 1;
  const int lane = static_cast<int>(threadIdx.x) % WARP;
  // The list's entries this lane moves: lane + r * WARP.
  uint32_t lk[R];
  int32_t lc[R];
  int lrank[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int i = lane + r * WARP;
    lk[r] = i < n ? L.keys[i] : 0u;
    lc[r] = i < n ? L.cols[i] : 0;
    lrank[r] = i;
  }
  int rank = 0;
  for (uint64_t b = batch; b != 0u; b &= b - 1u) {
    const int src = shim::lowest_bit64(b);
    const uint32_t bk = shim::shfl_idx(key, src, WARP);
    const int32_t bc = static_cast<int32_t>(shim::shfl_idx(static_cast<uint32_t>(col), src, WARP));
    rank += Topk::before(bk, bc, key, col);
    int in_list = 0;  // entries before the member
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const bool exists = lane + r * WARP < n;
      const bool member_first = Topk::before(bk, bc, lk[r], lc[r]);
      lrank[r] += member_first;
      in_list += shim::popc64(shim::warp_ballot(exists && !member_first));
    }
    if (lane == src) rank += in_list;
  }
  shim::sync_warp();  // every read of the list before the moves
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (lane + r * WARP < n && lrank[r] < k) {
      L.keys[lrank[r]] = lk[r];
      L.cols[lrank[r]] = lc[r];
    }
  if (has && rank < k) {
    L.keys[rank] = key;
    L.cols[rank] = col;
  }
  shim::sync_warp();
  const int total = n + shim::popc64(batch);
  return total < k ? total : k;
}

// What the tile loop keeps of a row's list: its entries and the filter (the k-th once full).
struct TopkWarpState {
  int n = 0;
  TopkWarpFilter f;
  float lo = f.floor();
};

// The tile's elements v[e] (columns col(e); from cols on, padding) that pass the filter, merged
// into the list: a batch a lane's next candidate at a time; a tile of many candidates first cut
// to its bound. Every lane calls it (where some lane's tile max passed the floor). The exact
// test (key and column) runs on the elements at or above the floor only, as each lane takes its
// next; a float compare an element picks those.
template <int WARP, int E, typename Col>
ONORM_DEV void merge_tile(TopkWarpList& L, TopkWarpState& s, int k, const float* v, Col col, int64_t cols) {
  using Topk = core::ops::SoftmaxTopk;
  uint32_t mask = 0u;
#pragma unroll
  for (int e = 0; e < E; ++e) mask |= static_cast<uint32_t>(!(v[e] < s.lo)) << e;
  // More than kTopkWarpBoundAt in the warp only if some lane holds more than its share.
  if (shim::warp_ballot(shim::popc64(mask) > kTopkWarpBoundAt / WARP) != 0u) {
#pragma unroll
    for (int e = 0; e < E; ++e)
      if (col(e) >= cols) mask &= ~(1u << e);  // padding is no element
    const int many = group_allreduce<WARP>(shim::popc64(mask), static_cast<int>(threadIdx.x) % WARP, AddOp{});
    if (many > kTopkWarpBoundAt) {
      // k elements of the tile (candidates or not) are at least the bound: below it, none is
      // in the row's top k.
      const uint32_t bound = tile_bound<WARP, E>(v, mask, k);
#pragma unroll
      for (int e = 0; e < E; ++e)
        if (Topk::key(v[e]) < bound) mask &= ~(1u << e);
    }
  }
  for (;;) {
    // This lane's next candidate, checked against the filter as the last batch left it.
    bool has = false;
    uint32_t key = 0u;
    int32_t c = 0;
    while (mask != 0u && !has) {
      const int first = shim::lowest_bit64(mask);
      mask &= mask - 1u;
      float x = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e)
        if (e == first) x = v[e];
      key = Topk::key(x);
      const int64_t cc = col(first);
      c = static_cast<int32_t>(cc);
      has = cc < cols && s.f.pass(key, c);
    }
    const uint64_t batch = shim::warp_ballot(has);
    if (batch == 0u) break;
    s.n = merge_batch<WARP>(L, s.n, k, key, c, has, batch);
    if (s.n == k) {
      s.f = TopkWarpFilter{L.keys[k - 1], L.cols[k - 1]};
      s.lo = s.f.floor();
    }
  }
}

// The shared memory of a block: a list per warp.
template <int WARP, int BLOCK>
struct TopkWarpShared {
  TopkWarpList lists[BLOCK / WARP];
};

// A warp per row (a grid-stride loop over the rows). On NVIDIA, three blocks a multiprocessor for
// 16-bit rows (80 registers: at 64 the merge spilled into the tile loop), two for f32 (95: at 80
// the tile loop spilled). The whole tiles of an aligned row are software-pipelined: a tile's
// 16-byte loads are issued (raw words) kAhead tiles before it is processed, kAhead + 1 register
// sets rotating (a loop unrolled kAhead + 1 times). A partial last tile and every tile of an
// unaligned row take load_items.
template <typename In, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK, (shim::kCudaRegisterCaps ? (sizeof(In) == 4 ? 2 : 3) : 1))
    softmax_topk_warp_kernel(TopkArgs a) {
  constexpr int VEC = io<In>::kVec, E = kTopkElems, ITEMS = E / VEC;
  constexpr int64_t kTile = int64_t(WARP) * E;
  // Whole tiles whose loads are in flight ahead of the one processed. Two ahead for 16-bit tiles
  // spilled the third register set (each prefetch stored to local memory as it landed: a stall
  // of a memory latency; bench/RESULTS.md).
  constexpr int kAhead = 1;
  static_assert(E <= 32, "a lane's elements of a tile in one 32-bit mask");
  using Raw = RawN<In, VEC>;
  using Sm = core::ops::Softmax;
  __shared__ TopkWarpShared<WARP, BLOCK> sh;
  const int lane = static_cast<int>(threadIdx.x) % WARP, warp = static_cast<int>(threadIdx.x) / WARP;
  TopkWarpList& L = sh.lists[warp];
  const int k = static_cast<int>(a.k);
  const bool aligned = a.x_vec != 0;
  const int64_t whole = aligned ? a.cols / kTile * kTile : 0;
  const GpuMath m;
  for (int64_t row = int64_t(blockIdx.x) * (BLOCK / WARP) + warp; row < a.rows; row += int64_t(gridDim.x) * (BLOCK / WARP)) {
    const In* x = static_cast<const In*>(a.x) + row * a.x_stride;
    PivotSum sum;
    TopkWarpState s;
    int64_t base = 0;
    auto col = [&](int e) { return base + (lane + (e / VEC) * WARP) * VEC + e % VEC; };
    // A tile's elements: the sum, and the filter (a merge where some lane's max passes it).
    auto tile = [&](const float* v) {
      const float r1 = tile_max<E>(v);
      if (shim::warp_ballot(!(r1 < s.lo)) != 0u) merge_tile<WARP, E>(L, s, k, v, col, a.cols);
      if (!a.renormalize) sum.push<E>(v, r1);
    };
    if (whole > 0) {
      Raw r[kAhead + 1][ITEMS];
      auto load_tile = [&](Raw* t, int64_t b) {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) load_raw_n<In, VEC>(x + b + (lane + i * WARP) * VEC, t[i]);
      };
#pragma unroll
      for (int d = 0; d < kAhead; ++d)
        if (d * kTile < whole) load_tile(r[d], d * kTile);
      // Tile base is in r[u]; the one kAhead tiles on goes to the set it leaves.
      for (;;) {
#pragma unroll
        for (int u = 0; u <= kAhead; ++u) {
          if (base + kAhead * kTile < whole) load_tile(r[(u + kAhead) % (kAhead + 1)], base + kAhead * kTile);
          float v[E];
#pragma unroll
          for (int i = 0; i < ITEMS; ++i) unpack_n<In, VEC>(r[u][i], v + i * VEC);
          tile(v);
          base += kTile;
          if (base >= whole) goto tail;
        }
      }
    }
  tail:
    for (; base < a.cols; base += kTile) {
      const int n = static_cast<int>(a.cols - base < kTile ? a.cols - base : kTile);
      float v[E];
      load_items<In, ITEMS, WARP, VEC>(x + base, n, lane, v, aligned, core::neg_infinity<float>());
      tile(v);
    }
    // The row's end: the list is its top k (k <= cols).
    const core::MaxSum<double> ms = a.renormalize ? core::MaxSum<double>::identity() : warp_pivot_state<WARP>(sum);
    const float top = value_of_key(L.keys[0]);
    float d = 0.0f;
    if (a.renormalize) {
      const float p = Sm::pivot(top, a.k);
      for (int i = lane; i < k; i += WARP) d += m.exp(value_of_key(L.keys[i]) - p);
      d = group_allreduce<WARP>(d, lane, AddOp{});
    }
    const Sm::Coefs<float> cf = topk_coefs(a, top, d, ms);
    for (int i = lane; i < k; i += WARP) store_topk_entry(a, row, i, cf, L.keys[i], L.cols[i]);
    shim::sync_warp();  // the list's reads before the next row's merges
  }
}

}  // namespace gpu
}  // namespace onorm
