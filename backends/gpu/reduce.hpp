// Group, warp and block all-reductions, templated on the warp width and on the operator
// (float or double add / NaN-keeping max, or a core state's combine). Every reduction is a fixed tree:
// the same inputs give bitwise the same result run after run, and every lane of a group ends
// with the same bits (state combines are applied in lane order, low lane on the left).
#pragma once

#include "vendor_shim.hpp"  // first: the vendor runtime defines __host__ / __device__
#include "math.hpp"
#include "onlinenorm/core/max_sum.hpp"
#include "onlinenorm/core/sum_sq.hpp"
#include "onlinenorm/core/welford.hpp"
#include "vendor_shim.hpp"

namespace onorm {
namespace gpu {

// Two float sums reduced side by side (the corrected two-pass sums s1 = sum(x - p) and
// s2 = sum((x - p)^2) of LayerNorm): one tree, one barrier pair for both.
struct Sums2 {
  float s1, s2;
};

struct AddOp {
  ONORM_DEV float operator()(float a, float b) const { return a + b; }
  // Double: the statistics of norm rows whose float sums cannot be trusted (row_kernels.hpp).
  ONORM_DEV double operator()(double a, double b) const { return a + b; }
  ONORM_DEV Sums2 operator()(const Sums2& a, const Sums2& b) const { return Sums2{a.s1 + b.s1, a.s2 + b.s2}; }
};
struct MaxOp {
  ONORM_DEV float operator()(float a, float b) const { return core::nan_max(a, b); }
};

// Shuffles of the core states, field by field.
ONORM_DEV float shfl_state(float v, int m, int w) { return shim::shfl_xor(v, m, w); }
ONORM_DEV double shfl_state(double v, int m, int w) { return shim::shfl_xor(v, m, w); }
ONORM_DEV core::MaxSum<float> shfl_state(const core::MaxSum<float>& s, int m, int w) {
  return core::MaxSum<float>{shim::shfl_xor(s.m, m, w), shim::shfl_xor(s.d, m, w)};
}
ONORM_DEV core::Welford<float> shfl_state(const core::Welford<float>& s, int m, int w) {
  return core::Welford<float>{shim::shfl_xor(s.n, m, w), shim::shfl_xor(s.mean, m, w),
                              shim::shfl_xor(s.m2, m, w)};
}
ONORM_DEV Sums2 shfl_state(const Sums2& s, int m, int w) {
  return Sums2{shim::shfl_xor(s.s1, m, w), shim::shfl_xor(s.s2, m, w)};
}
// The LayerNorm merge state: slice states keep their means in double (Chan's between-slice
// term needs more digits than a float mean has on offset data).
ONORM_DEV core::Welford<double> shfl_state(const core::Welford<double>& s, int m, int w) {
  return core::Welford<double>{shim::shfl_xor(s.n, m, w), shim::shfl_xor(s.mean, m, w),
                               shim::shfl_xor(s.m2, m, w)};
}
ONORM_DEV core::SumSq<float> shfl_state(const core::SumSq<float>& s, int m, int w) {
  return core::SumSq<float>{shim::shfl_xor(s.n, m, w), shim::shfl_xor(s.s, m, w)};
}

template <typename State>
struct CombineOp {
  ONORM_DEV State operator()(const State& a, const State& b) const { return State::combine(a, b); }
};

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

// The merge of the LayerNorm states held by an aligned group of WIDTH lanes (lane k holds
// state k; empty lanes the identity), every lane getting the same bits: Chan's formula for
// all states at once, in three fixed trees of double sums: N = sum n_k, mean = sum(n_k mean_k)
// / N, M2 = sum(m2_k + n_k (mean_k - mean)^2). One division per group, and fewer values live
// than pairwise merges (a division per level): the CUDA cluster kernel merges while its
// slice of the row is in registers.
template <int WIDTH>
ONORM_DEV core::Welford<double> group_merge(const core::Welford<double>& s, int lane_in_group) {
  const double nk = static_cast<double>(s.n);  // counts below 2^53: exact
  const double n = group_allreduce<WIDTH>(nk, lane_in_group, AddOp{});
  const double mean = group_allreduce<WIDTH>(s.n > 0 ? nk * s.mean : 0.0, lane_in_group, AddOp{}) / n;
  const double d = s.mean - mean;
  const double m2 = group_allreduce<WIDTH>(s.n > 0 ? s.m2 + nk * d * d : 0.0, lane_in_group, AddOp{});
  return core::Welford<double>{static_cast<int64_t>(n), n > 0.0 ? mean : 0.0, m2};
}

// All-reduce over a block of BLOCK threads (a multiple of WARP): warps reduce, warp leaders
// write shared memory, every thread folds the BLOCK / WARP partials in index order.
// `scratch` holds BLOCK / WARP values; the trailing barrier makes it reusable at once.
template <int WARP, int BLOCK, typename T, typename Op>
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
  shim::sync_threads();
  return r;
}

// group_merge over a whole block (every thread holds one state, or the identity); `scratch`
// holds BLOCK / WARP doubles. The cooperative staged schedule merges its chunk states with it:
// fewer registers than pairwise merges in double (ptxas: staged_kernel spilled more with them).
template <int WARP, int BLOCK>
ONORM_DEV core::Welford<double> block_merge(const core::Welford<double>& s, double* scratch) {
  const double nk = static_cast<double>(s.n);  // counts below 2^53: exact
  const double n = block_allreduce<WARP, BLOCK>(nk, scratch, AddOp{});
  const double mean = block_allreduce<WARP, BLOCK>(s.n > 0 ? nk * s.mean : 0.0, scratch, AddOp{}) / n;
  const double d = s.mean - mean;
  const double m2 = block_allreduce<WARP, BLOCK>(s.n > 0 ? s.m2 + nk * d * d : 0.0, scratch, AddOp{});
  return core::Welford<double>{static_cast<int64_t>(n), n > 0.0 ? mean : 0.0, m2};
}

// A reduction over TPR threads that share a row: a sub-warp/warp group (TPR <= WARP) or the
// whole block (TPR == BLOCK > WARP).
template <int WARP, int TPR, int BLOCK, typename T, typename Op>
ONORM_DEV T row_allreduce(T v, int lane_in_row, T* scratch, Op op) {
  if constexpr (TPR <= WARP) {
    return group_allreduce<TPR>(v, lane_in_row, op);
  } else {
    static_assert(TPR == BLOCK, "a row spans a whole block");
    return block_allreduce<WARP, BLOCK>(v, scratch, op);
  }
}

}  // namespace gpu
}  // namespace onorm
