// Softmax top-k with a warp per row (softmax_topk_warp_kernel), shared by CUDA and HIP: rows of up
// to kTopkWarpMaxCols columns and k up to kTopkWarpMaxK (the planner, softmax_topk_plan.hpp). The
// block kernel (softmax_topk.hpp) spends a row's time on its barriers and its per-row steps (the
// buffer's settles and sort in the whole block) once rows are short; a warp needs no barrier.
// Rows past kTopkWarpMaxCols are cut into slices of whole tiles, a warp each (softmax_topk_plan.hpp:
// the fewest, a power of two, of at most kTopkWarpMaxCols columns): the slices' warps share a
// filter, the largest of their lists' k-th entries, and at the row's end the first merges the
// others' lists and sums.
// A warp reads its row (slice) once, in tiles of WARP x kTopkElems elements:
//   1. each tile's terms of the softmax sum (not with renormalize): PivotSum (pivot_sum.hpp),
//      merged over the warp at the row's end;
//   2. the row's top k so far, sorted, in the warp's shared memory (TopkWarpList): a tile's
//      elements that come before its k-th entry (the filter: one compare of the tile's max with
//      the k-th's value in the common case, then the exact test) are merged into it a batch at
//      a time, a batch holding each lane's next candidate: every entry moves to its rank (the
//      entries before it in the list and those of the batch, counted over the lanes:
//      merge_batch). Where a tile holds more than kTopkWarpBoundAt candidates (the
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
// The widest row (slice) a warp takes (the planner's choice; a row's columns fit an int here).
constexpr int64_t kTopkWarpMaxCols = 65536;
// Candidates in one tile past which the tile's own bound cuts them first (the bound costs a sort
// of the lanes' keys; a batch of candidates, a count over its lanes).
constexpr int kTopkWarpBoundAt = 64;

// A warp's lanes as bits (lane i: bit i): 32-bit on 32-lane warps, where a uint64_t's bit
// operations take two instructions each.
template <int WARP>
struct LaneBits {
  using T = uint64_t;
  ONORM_DEV static T ballot(bool p) { return shim::warp_ballot(p); }
  ONORM_DEV static int count(T m) { return shim::popc64(m); }
  ONORM_DEV static int lowest(T m) { return shim::lowest_bit64(m); }
};
template <>
struct LaneBits<32> {
  using T = uint32_t;
  ONORM_DEV static T ballot(bool p) { return static_cast<uint32_t>(shim::warp_ballot(p)); }
  ONORM_DEV static int count(T m) { return shim::popc32(m); }
  ONORM_DEV static int lowest(T m) { return shim::lowest_bit32(m); }
};

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
  // As one integer whose order is SoftmaxTopk::before's (columns below 2^31): a sliced row's
  // shared filter, an atomic max.
  ONORM_DEV uint64_t packed() const { return (uint64_t(key) << 32) | uint32_t(0x7fffffffu - uint32_t(col)); }
  ONORM_DEV static TopkWarpFilter of_packed(uint64_t p) {
    return TopkWarpFilter{uint32_t(p >> 32), int32_t(0x7fffffffu - uint32_t(p))};
  }
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
// entries have distinct columns: exactly one of each pair comes first. R: entries a lane holds
// (n <= R * WARP; the caller's choice, so that lists of up to a warp pay for one).
template <int WARP, int R>
ONORM_DEV int merge_batch(TopkWarpList& L, int n, int k, uint32_t key, int32_t col, bool has,
                          typename LaneBits<WARP>::T batch) {
  using Topk = core::ops::SoftmaxTopk;
  using Lanes = LaneBits<WARP>;
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
  for (typename Lanes::T b = batch; b != 0u; b &= b - 1u) {
    const int src = Lanes::lowest(b);
    const uint32_t bk = shim::shfl_idx(key, src, WARP);
    const int32_t bc = static_cast<int32_t>(shim::shfl_idx(static_cast<uint32_t>(col), src, WARP));
    rank += Topk::before(bk, bc, key, col);
    int in_list = 0;  // entries before the member
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const bool exists = lane + r * WARP < n;
      const bool member_first = Topk::before(bk, bc, lk[r], lc[r]);
      lrank[r] += member_first;
      in_list += Lanes::count(Lanes::ballot(exists && !member_first));
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
  const int total = n + Lanes::count(batch);
  return total < k ? total : k;
}

// What the tile loop keeps of a row's list: its entries and the filter (the k-th once full, or
// a sliced row's shared one where that comes later).
struct TopkWarpState {
  int n = 0;
  TopkWarpFilter f;
  float lo = f.floor();

  ONORM_DEV void raise(const TopkWarpFilter& g) {
    if (g.packed() > f.packed()) {
      f = g;
      lo = f.floor();
    }
  }
};

// Merges a batch (merge_batch) and raises the filter to the list's k-th once it is full; where
// the row is sliced (row_floor), publishes it there.
template <int WARP>
ONORM_DEV void merge_into(TopkWarpList& L, TopkWarpState& s, int k, uint32_t key, int32_t col, bool has,
                          typename LaneBits<WARP>::T batch, uint64_t* row_floor) {
  constexpr int R = kTopkWarpMaxK > WARP ? (kTopkWarpMaxK + WARP - 1) / WARP : 1;
  static_assert(R <= 2, "merge_into takes lists of up to two entries a lane");
  s.n = s.n <= WARP || R == 1 ? merge_batch<WARP, 1>(L, s.n, k, key, col, has, batch)
                              : merge_batch<WARP, R>(L, s.n, k, key, col, has, batch);
  if (s.n == k) {
    const TopkWarpFilter kth{L.keys[k - 1], L.cols[k - 1]};
    if (row_floor == nullptr) {  // the k-th only rises
      s.f = kth;
      s.lo = s.f.floor();
    } else {
      s.raise(kth);
      if (static_cast<int>(threadIdx.x) % WARP == 0) shim::atomic_max_u64(row_floor, s.f.packed());
    }
  }
}

// The tile's elements v[e] (columns col(e); from cols on, padding) that pass the filter, merged
// into the list: a batch a lane's next candidate at a time; a tile of many candidates first cut
// to its bound. Every lane calls it (where some lane's tile max passed the floor). The exact
// test (key and column) runs on the elements at or above the floor only, as each lane takes its
// next; a float compare an element picks those, and value(e) reads it back from shared memory
// (v[e] at a run-time e would cost a select per element). row_floor: a sliced row's shared
// filter (merge_into), else null.
template <int WARP, int E, typename Col, typename Value>
ONORM_DEV void merge_tile(TopkWarpList& L, TopkWarpState& s, int k, const float* v, Col col, int64_t cols,
                          Value value, uint64_t* row_floor) {
  using Topk = core::ops::SoftmaxTopk;
  using Lanes = LaneBits<WARP>;
  const int lane = static_cast<int>(threadIdx.x) % WARP;
  uint32_t mask = 0u;
#pragma unroll
  for (int e = 0; e < E; ++e) mask |= static_cast<uint32_t>(!(v[e] < s.lo)) << e;
  // More than kTopkWarpBoundAt in the warp only if some lane holds more than its share.
  if (Lanes::ballot(shim::popc32(mask) > kTopkWarpBoundAt / WARP) != 0u) {
#pragma unroll
    for (int e = 0; e < E; ++e)
      if (col(e) >= cols) mask &= ~(1u << e);  // padding is no element
    const int many = group_allreduce<WARP>(shim::popc32(mask), lane, AddOp{});
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
      const int first = shim::lowest_bit32(mask);
      mask &= mask - 1u;
      key = Topk::key(value(first));
      const int64_t cc = col(first);
      c = static_cast<int32_t>(cc);
      has = cc < cols && s.f.pass(key, c);
    }
    const typename Lanes::T batch = Lanes::ballot(has);
    if (batch == 0u) break;
    merge_into<WARP>(L, s, k, key, c, has, batch, row_floor);
  }
}

// Shared memory a lane's tiles stream through (softmax_topk_warp_kernel): 8 / sizeof(In) tiles
// of 16 elements, those after the one processed in flight.
constexpr int kTopkWarpRingBytes = 128;

// The shared memory of a block: a list per warp, and its ring of tiles; for sliced rows, each
// warp's sum and list length at the row's end, and each row's shared filter (packed).
// The ring first, on 128 bytes: a warp's 16-byte vectors of a tile span whole 128-byte lines.
template <int WARP, int BLOCK>
struct TopkWarpShared {
  alignas(128) unsigned char ring[BLOCK / WARP][WARP * kTopkWarpRingBytes];
  TopkWarpList lists[BLOCK / WARP];
  core::MaxSum<double> sums[BLOCK / WARP];
  int counts[BLOCK / WARP];
  uint64_t floors[BLOCK / WARP];
};

// A warp per row, or per slice of a row where kSliced (a.slices warps a row, a power of two that
// divides the block's warps); a grid-stride loop over the block's rows. The whole tiles of an
// aligned row stream through the warp's ring in shared memory: each lane copies its 16-byte
// vectors of a tile there (cp.async) D - 1 tiles before it is processed and reads them back
// itself (no warp barrier), so the bytes in flight take no registers: on NVIDIA four blocks a
// multiprocessor (64 registers). A partial last tile and every tile of an unaligned row take
// load_items; their values are staged in the ring for the merges.
template <typename In, int WARP, int BLOCK, bool kSliced>
__global__ void __launch_bounds__(BLOCK, (shim::kCudaRegisterCaps ? 4 : 1)) softmax_topk_warp_kernel(TopkArgs a) {
  constexpr int VEC = io<In>::kVec, E = kTopkElems, ITEMS = E / VEC;
  constexpr int kTile = WARP * E, kWarps = BLOCK / WARP;
  constexpr int D = kTopkWarpRingBytes / (E * int(sizeof(In)));  // tiles in the ring
  static_assert(E <= 32, "a lane's elements of a tile in one 32-bit mask");
  static_assert(D >= 1 && kTopkWarpRingBytes >= E * int(sizeof(float)), "the ring holds a tile, and its floats");
  using Sm = core::ops::Softmax;
  using Lanes = LaneBits<WARP>;
  __shared__ TopkWarpShared<WARP, BLOCK> sh;
  const int lane = static_cast<int>(threadIdx.x) % WARP, warp = static_cast<int>(threadIdx.x) / WARP;
  TopkWarpList& L = sh.lists[warp];
  In* const ring = reinterpret_cast<In*>(sh.ring[warp]);
  float* const staged = reinterpret_cast<float*>(sh.ring[warp]) + lane * E;  // a tail tile's values
  const int k = static_cast<int>(a.k);
  const bool aligned = a.x_vec != 0;
  const int cols = static_cast<int>(a.cols);  // at most kTopkWarpMaxCols a slice
  // This warp's slice of its rows: [begin, end), whole tiles but the last.
  const int lg = kSliced ? shim::lowest_bit32(static_cast<uint32_t>(a.slices)) : 0;  // slices = 2^lg
  const int S = 1 << lg;
  const int part = warp & (S - 1), group = warp >> lg, groups = kWarps >> lg;
  const int slice = (((cols + S - 1) >> lg) + kTile - 1) / kTile * kTile;
  const int begin = !kSliced ? 0 : part * slice < cols ? part * slice : cols;
  const int end = !kSliced || cols - begin < slice ? cols : begin + slice;
  const int whole = aligned ? begin + (end - begin) / kTile * kTile : begin;
  if (kSliced) {
    if (threadIdx.x < kWarps) sh.floors[threadIdx.x] = 0u;
    shim::sync_threads();
  }
  const GpuMath m;
  // A sliced row's warps all take every trip (its barriers); the others stop at their last row.
  for (int64_t row = int64_t(blockIdx.x) * groups + group; kSliced ? row - group < a.rows : row < a.rows;
       row += int64_t(gridDim.x) * groups) {
    const bool live = !kSliced || row < a.rows;
    const In* x = static_cast<const In*>(a.x) + (live ? row : 0) * a.x_stride;
    PivotSum sum;
    TopkWarpState s;
    int base = begin;
    auto col = [&](int e) { return int64_t(base + (lane + (e / VEC) * WARP) * VEC + e % VEC); };
    // Whether some lane's tile max r1 passes the filter; in a sliced row, once it passes this
    // warp's own, the row's shared one (read only then: most tiles pass neither).
    auto passes = [&](float r1) {
      if (shim::warp_ballot(!(r1 < s.lo)) == 0u) return false;
      if (!kSliced) return true;
      s.raise(TopkWarpFilter::of_packed(*static_cast<volatile uint64_t*>(&sh.floors[group])));
      return shim::warp_ballot(!(r1 < s.lo)) != 0u;
    };
    // A tile's elements: the sum, and the filter (a merge where some lane's max passes it).
    auto tile = [&](const float* v, auto value) {
      const float r1 = tile_max<E>(v);
      if (passes(r1)) merge_tile<WARP, E>(L, s, k, v, col, end, value, kSliced ? &sh.floors[group] : nullptr);
      if (!a.renormalize) sum.push<E>(v, r1);
    };
    if (live && whole > base) {
      const In* xl = x + lane * VEC;  // the lane's first element of a tile
      auto issue = [&](int b, int slot) {
        if (b < whole) {
#pragma unroll
          for (int i = 0; i < ITEMS; ++i)
            shim::cp_async_16(ring + slot * kTile + (lane + i * WARP) * VEC, xl + b + i * WARP * VEC);
        }
        shim::cp_async_commit();  // a group per tile, empty past the slice's end: the waits count tiles
      };
#pragma unroll
      for (int d = 0; d + 1 < D; ++d) issue(begin + d * kTile, d);
      for (int t = 0; base < whole; ++t, base += kTile) {
        issue(base + (D - 1) * kTile, (t + D - 1) % D);
        shim::cp_async_wait<D - 1>();  // this tile's group has landed
        const In* slot = ring + (t % D) * kTile;
        float v[E];
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) load_n<In, VEC>(slot + (lane + i * WARP) * VEC, v + i * VEC);
        tile(v, [&](int e) { return io<In>::load1(slot + (lane + (e / VEC) * WARP) * VEC + e % VEC); });
      }
      shim::cp_async_wait<0>();  // the empty groups
      shim::sync_warp();           // every lane's reads of the ring before the tail's values
    }
    for (; live && base < end; base += kTile) {
      const int n = end - base < kTile ? end - base : kTile;
      float v[E];
      load_items<In, ITEMS, WARP, VEC>(x + base, n, lane, v, aligned, core::neg_infinity<float>());
#pragma unroll
      for (int e = 0; e < E; ++e) staged[e] = v[e];
      tile(v, [&](int e) { return staged[e]; });
    }
    // The row's end: the list is its top k (k <= cols); a sliced row's first warp merges the
    // others' lists (each the top of its slice that passed the shared filter) and sums.
    core::MaxSum<double> ms = a.renormalize ? core::MaxSum<double>::identity() : warp_pivot_state<WARP>(sum);
    if (kSliced) {
      if (lane == 0) {
        sh.sums[warp] = ms;
        sh.counts[warp] = s.n;
      }
      shim::sync_threads();
      if (part == 0 && live) {
        // The filter back to this list's own k-th: another slice's k-th is in its list.
        s.f = s.n == k ? TopkWarpFilter{L.keys[k - 1], L.cols[k - 1]} : TopkWarpFilter{};
        for (int j = 1; j < S; ++j) {
          const TopkWarpList& other = sh.lists[warp + j];
          const int n = sh.counts[warp + j];
          for (int i0 = 0; i0 < n; i0 += WARP) {
            const int i = i0 + lane;
            const uint32_t key = i < n ? other.keys[i] : 0u;
            const int32_t c = i < n ? other.cols[i] : 0;
            const bool has = i < n && s.f.pass(key, c);
            const typename Lanes::T batch = Lanes::ballot(has);
            if (batch != 0u) merge_into<WARP>(L, s, k, key, c, has, batch, nullptr);
          }
          if (!a.renormalize) ms = core::MaxSum<double>::combine(ms, sh.sums[warp + j]);
        }
      }
    }
    if (part == 0 && live) {
      const float top = value_of_key(L.keys[0]);
      float d = 0.0f;
      if (a.renormalize) {
        const float p = Sm::pivot(top, a.k);
        for (int i = lane; i < k; i += WARP) d += m.exp(value_of_key(L.keys[i]) - p);
        d = group_allreduce<WARP>(d, lane, AddOp{});
      }
      const Sm::Coefs<float> cf = topk_coefs(a, top, d, ms);
      for (int i = lane; i < k; i += WARP) store_topk_entry(a, row, i, cf, L.keys[i], L.cols[i]);
    }
    if (kSliced) {
      if (part == 0 && lane == 0) sh.floors[group] = 0u;
      shim::sync_threads();  // the lists, sums and filter read before the next rows write them
    } else {
      shim::sync_warp();  // the list's reads before the next row's merges
    }
  }
}

}  // namespace gpu
}  // namespace onorm
