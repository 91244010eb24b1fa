// Group, warp and block all-reductions, templated on the warp width and on the operator
// (float or double add / NaN-keeping max, fixed arrays of sums, or a core state's combine).
// Every reduction is a fixed tree: the same inputs give bitwise the same result run after
// run, and every lane of a group ends with the same bits (state combines are applied in lane
// order, low lane on the left).
#pragma once

#include <string.h>

#include "vendor_shim.hpp"  // first: the vendor runtime defines __host__ / __device__
#include "math.hpp"
#include "onlinenorm/core/hd.hpp"
#include "onlinenorm/core/welford.hpp"

namespace onorm {
namespace gpu {

// N values reduced side by side (an op's kSums pass-2 sums): one tree, one barrier pair for all.
template <typename T, int N>
struct Vals {
  T v[N];
};

struct AddOp {
  ONORM_DEV int operator()(int a, int b) const { return a + b; }
  ONORM_DEV float operator()(float a, float b) const { return a + b; }
  ONORM_DEV double operator()(double a, double b) const { return a + b; }
  template <typename T, int N>
  ONORM_DEV Vals<T, N> operator()(const Vals<T, N>& a, const Vals<T, N>& b) const {
    Vals<T, N> r;
#pragma unroll
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] + b.v[i];
    return r;
  }
};
struct MaxOp {
  ONORM_DEV float operator()(float a, float b) const { return shim::nan_max(a, b); }
  ONORM_DEV double operator()(double a, double b) const { return core::nan_max(a, b); }
};
template <typename State>
struct CombineOp {
  ONORM_DEV State operator()(const State& a, const State& b) const { return State::combine(a, b); }
};

// A butterfly shuffle of any value: floats and doubles as they are, anything else (the core
// states, Vals) word by word.
ONORM_DEV float shfl_state(float v, int m, int w) { return shim::shfl_xor(v, m, w); }
ONORM_DEV double shfl_state(double v, int m, int w) { return shim::shfl_xor(v, m, w); }
template <typename T, int N>
ONORM_DEV Vals<T, N> shfl_state(const Vals<T, N>& s, int m, int w) {
  Vals<T, N> r;
#pragma unroll
  for (int i = 0; i < N; ++i) r.v[i] = shim::shfl_xor(s.v[i], m, w);
  return r;
}
template <typename S>
ONORM_DEV S shfl_state(const S& s, int m, int w) {
  constexpr int kWords = (sizeof(S) + 3) / 4;
  float words[kWords];
  memcpy(words, &s, sizeof(S));
#pragma unroll
  for (int i = 0; i < kWords; ++i) words[i] = shim::shfl_xor(words[i], m, w);
  S r;
  memcpy(&r, words, sizeof(S));
  return r;
}

// All-reduce over aligned groups of WIDTH lanes (WIDTH a power of two <= the warp width).
// Every lane of the warp must call it. The butterfly applies op(low lane's value, high
// lane's value) on both sides, so non-commutative rounding (Welford) still gives equal bits.
template <int WIDTH, typename T, typename Op>
ONORM_DEV T group_allreduce(T v, int lane_in_group, Op op) {
#pragma unroll
  for (int o = WIDTH / 2; o > 0; o >>= 1) {
    const T other = shfl_state(v, o, WIDTH);
    v = (lane_in_group & o) ? op(other, v) : op(v, other);
  }
  return v;
}

// All-reduce over a block of BLOCK threads (a multiple of WARP): warps reduce, warp leaders
// write shared memory, every thread folds the BLOCK / WARP partials in index order.
// `scratch` holds BLOCK / WARP values; the trailing barrier makes it reusable at once. Callers
// that alternate two scratch buffers go without it (kTrailingBarrier false): the next call's
// barrier then separates this call's reads from the writes two calls on.
template <int WARP, int BLOCK, bool kTrailingBarrier = true, typename T, typename Op>
ONORM_DEV T block_allreduce(T v, T* scratch, Op op) {
  constexpr int kWarps = BLOCK / WARP;
  static_assert(BLOCK % WARP == 0, "block of whole warps");
  const int lane = static_cast<int>(threadIdx.x) % WARP;
  v = group_allreduce<WARP>(v, lane, op);
  if (kWarps == 1) return v;
  if (lane == 0) scratch[threadIdx.x / WARP] = v;
  shim::sync_threads();
  T r = scratch[0];
#pragma unroll
  for (int i = 1; i < kWarps; ++i) r = op(r, scratch[i]);
  if (kTrailingBarrier) shim::sync_threads();
  return r;
}

// A reduction over TPR threads that share a row: a sub-warp/warp group (TPR <= WARP) or the
// whole block (TPR == BLOCK > WARP; kTrailingBarrier as in block_allreduce).
template <int WARP, int TPR, int BLOCK, bool kTrailingBarrier = true, typename T, typename Op>
ONORM_DEV T row_allreduce(T v, int lane_in_row, T* scratch, Op op) {
  if constexpr (TPR <= WARP) {
    return group_allreduce<TPR>(v, lane_in_row, op);
  } else {
    static_assert(TPR == BLOCK, "a row spans a whole block");
    return block_allreduce<WARP, BLOCK, kTrailingBarrier>(v, scratch, op);
  }
}

// Chan's formula for many Welford states at once (the merge state of LayerNorm, Welford<double>):
// N = sum n_k, mean = sum(n_k mean_k) / N, M2 = sum(m2_k + n_k (mean_k - mean)^2), in three
// fixed trees of double sums (`sum` all-reduces one double over the merging threads). Why not
// core::Welford::combine in a tree: a division per level, and more values live: in the CUDA
// cluster kernel (slice in registers) and the cooperative staged kernel it cost registers and
// spills (ptxas, sm_90a). Why here and not in core/: it is a collective (two reductions, the
// second needing the first's mean), which core's states have no notion of.
template <typename Sum>
ONORM_DEV core::Welford<double> batched_chan(const core::Welford<double>& s, Sum sum) {
  const double nk = static_cast<double>(s.n);  // counts below 2^53: exact
  const double n = sum(nk);
  const double mean = sum(s.n > 0 ? nk * s.mean : 0.0) / n;
  const double d = s.mean - mean;
  const double m2 = sum(s.n > 0 ? s.m2 + nk * d * d : 0.0);
  return core::Welford<double>{static_cast<int64_t>(n), n > 0.0 ? mean : 0.0, m2};
}

// The merge of one state per lane of aligned groups of WIDTH lanes (empty lanes: the identity),
// every lane getting the same bits: the state's combine in the butterfly tree, or batched_chan.
template <int WIDTH, typename S>
ONORM_DEV S group_merge(const S& s, int lane_in_group) {
  return group_allreduce<WIDTH>(s, lane_in_group, CombineOp<S>{});
}
template <int WIDTH>
ONORM_DEV core::Welford<double> group_merge(const core::Welford<double>& s, int lane_in_group) {
  return batched_chan(s, [&](double v) { return group_allreduce<WIDTH>(v, lane_in_group, AddOp{}); });
}

// The same over a whole block (every thread holds one state, or the identity). `scratch`
// holds BLOCK / WARP states (and doubles: StateScratch).
template <int WARP, int BLOCK, typename S>
ONORM_DEV S block_merge(const S& s, S* scratch, double*) {
  return block_allreduce<WARP, BLOCK>(s, scratch, CombineOp<S>{});
}
template <int WARP, int BLOCK>
ONORM_DEV core::Welford<double> block_merge(const core::Welford<double>& s, core::Welford<double>*, double* scratch) {
  return batched_chan(s, [&](double v) { return block_allreduce<WARP, BLOCK>(v, scratch, AddOp{}); });
}

}  // namespace gpu
}  // namespace onorm
