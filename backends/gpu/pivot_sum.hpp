// A thread's running (pivot, sum of exp) over the tiles of a row, and a tile's max: the
// statistics pass of the driver ops that stream a row through a block (softmax top-k,
// cross-entropy's long rows: row_logit_stats.hpp), shared by CUDA and HIP.
#pragma once

#include "vendor_shim.hpp"  // first: the vendor runtime defines __host__ / __device__

#include "math.hpp"
#include "onlinenorm/core/max_sum.hpp"
#include "reduce.hpp"

namespace onorm {
namespace gpu {

// A thread's share of a row's sum of exp, in float: terms exp(x - q) about a pivot q that
// moves only when a tile's max passes q + kPivotRebase (the sum then rescaled to the new one), so
// that terms stay under e^16 and a row rescales a few times, not once per new maximum (a slowly
// rising row would pile up the ex2's error once per tile). q starts at -FLT_MAX, a pivot like
// any other: an all -inf tile adds exp(-inf) = 0 (a pivot at -inf would make it NaN). Each
// tile's 16 terms are summed in a tree, the tiles' sums compensated (Kahan): at 2^24 columns a
// thread's 4096 tiles stay within a few 1e-7 where a plain float sum could lose 2e-4. At the
// row's end, a MaxSum in double about q (the block merges those; q is not the row's max, which
// a MaxSum's combine does not need).
constexpr float kPivotRebase = 16.0f;
struct PivotSum {
  float q = -3.402823466e38f;  // the pivot: -FLT_MAX, then a tile's max
  float s = 0.0f, c = 0.0f;    // sum of exp(x - q), Kahan's compensation

  // A tile's terms (its max r1; padding -inf adds 0).
  template <int E>
  ONORM_DEV void push(const float* v, float r1) {
    // Rare: a max past q + 16, +inf or NaN (the row is NaN). Once q is NaN it stays: a later
    // tile's max (-inf for a thread's padding) would move it, and a pivot at -inf drops the
    // NaN sum in the block's combine.
    if (r1 > q + kPivotRebase || r1 != r1) {
      const float f = fast_exp(q - r1);
      s *= f;
      c *= f;
      q = r1;
    }
    float t[E];
#pragma unroll
    for (int e = 0; e < E; ++e) t[e] = fast_exp(v[e] - q);
#pragma unroll
    for (int w = 1; w < E; w *= 2)
#pragma unroll
      for (int e = 0; e + w < E; e += 2 * w) t[e] += t[e + w];
    const float y = t[0] - c;
    const float z = s + y;
    c = (z - s) - y;
    s = z;
  }
  // The MaxSum about q, in double. No term above 0 (s == 0: only -inf, as q is some tile's max
  // once any element is above -inf, and its term is 1): the identity. NaN and +inf carry over
  // (s is NaN).
  ONORM_DEV core::MaxSum<double> state() const {
    if (s == 0.0f) return core::MaxSum<double>::identity();
    return core::MaxSum<double>::of(double(q), double(s) - double(c));
  }
};

// The MaxSum of a warp's PivotSums (every lane calls it; all lanes get the same bits): the
// largest pivot M of the lanes holding terms, each lane's sum moved to it by a float exp (a
// factor at most 1: no overflow, 2 ulp), summed in double in the warp's fixed tree. A warp with
// a NaN or +inf, or with no terms, takes the exact combine of the lanes' states instead (double
// exps in each of its log2(WARP) steps, which the common case does without).
template <int WARP>
ONORM_DEV core::MaxSum<double> warp_pivot_state(const PivotSum& p) {
  const int lane = static_cast<int>(threadIdx.x) % WARP;
  const float q = p.s != 0.0f ? p.q : core::neg_infinity<float>();
  const float top = group_allreduce<WARP>(q, lane, MaxOp{});
  const double s = double(p.s) - double(p.c);
  const double d = group_allreduce<WARP>(p.s != 0.0f ? s * double(fast_exp(q - top)) : 0.0, lane, AddOp{});
  // (warp-uniform) a NaN or +inf top, or no terms; or a NaN or infinite sum somewhere
  if (!(top > core::neg_infinity<float>() && top < -core::neg_infinity<float>()) || !(d < -core::neg_infinity<double>()))
    return group_allreduce<WARP>(p.state(), lane, CombineOp<core::MaxSum<double>>{});
  return core::MaxSum<double>::of(double(top), d);
}

// The max of a tile's elements (a NaN kept), in a tree.
template <int E>
ONORM_DEV float tile_max(const float* v) {
  float t[E];
#pragma unroll
  for (int e = 0; e < E; ++e) t[e] = v[e];
#pragma unroll
  for (int w = 1; w < E; w *= 2)
#pragma unroll
    for (int e = 0; e + w < E; e += 2 * w) t[e] = shim::nan_max(t[e], t[e + w]);
  return t[0];
}

}  // namespace gpu
}  // namespace onorm
