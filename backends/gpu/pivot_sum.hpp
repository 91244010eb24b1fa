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
// Pivots below this magnitude take their terms in one FMA: 2^(fma(x, L, -qs)), L = float(log2
// e), qs = float(q L), is exp(x - q) 2^rq, rq = q L - qs (exact: a product's rounding error is
// a float). The exponent is rounded once, as fast_exp's (x - q) L (whose x - q rounds too).
// Below 2^23 / L, |rq| <= 1/4: terms stay under 2^24. Such a pivot's sum is kept in those
// units, 2^rq times exp's, and converted where the pivot moves and at the end (unit);
// larger pivots, and -FLT_MAX and NaN, take fast_exp(x - q). The state stays three floats (the
// block kernels hold it across their tile loops). kFmaTerms false: every pivot takes fast_exp
// (softmax_topk_kernel: at its 64 registers the FMA form's live values spilled in the tile loop).
constexpr float kPivotScaledMax = 5.8e6f;
template <bool kFmaTerms>
struct PivotSumOf {
  float q = -3.402823466e38f;  // the pivot: -FLT_MAX, then a tile's max
  float s = 0.0f, c = 0.0f;    // the sum (in q's units) and Kahan's compensation

  ONORM_DEV static bool scaled(float q) { return kFmaTerms && fabsf(q) < kPivotScaledMax; }  // NaN: no
  // 2^(sign rq) for a scaled q, else 1: sign -1 takes q's sum to exp's units, +1 back. To first
  // order where |rq| < 2^-12 (the second order is under 2^-25).
  ONORM_DEV static float unit(float q, float sign) {
    if (!scaled(q)) return 1.0f;
    const float rq = sign * fmaf(q, kLog2e, -(q * kLog2e));
    return fabsf(rq) < 0x1p-12f ? 1.0f + rq * 0.693147180559945f : shim::ex2_approx(rq);
  }

  // A tile's terms (its max r1; padding -inf adds 0).
  template <int E>
  ONORM_DEV void push(const float* v, float r1) {
    // Rare: a max past q + 16, +inf or NaN (the row is NaN). Once q is NaN it stays: a later
    // tile's max (-inf for a thread's padding) would move it, and a pivot at -inf drops the
    // NaN sum in the block's combine.
    if (r1 > q + kPivotRebase || r1 != r1) {
      const float f = fast_exp(q - r1) * unit(q, -1.0f) * unit(r1, 1.0f);
      s *= f;
      c *= f;
      q = r1;
    }
    float t[E];
    if (scaled(q)) {
      const float qs = q * kLog2e;
#pragma unroll
      for (int e = 0; e < E; ++e) t[e] = shim::ex2_approx(fmaf(v[e], kLog2e, -qs));
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) t[e] = fast_exp(v[e] - q);
    }
#pragma unroll
    for (int w = 1; w < E; w *= 2)
#pragma unroll
      for (int e = 0; e + w < E; e += 2 * w) t[e] += t[e + w];
    const float y = t[0] - c;
    const float z = s + y;
    c = (z - s) - y;
    s = z;
  }
  // The sum of exp(x - q), in double.
  ONORM_DEV double sum() const { return (double(s) - double(c)) * double(unit(q, -1.0f)); }
  // The MaxSum about q, in double. No term above 0 (s == 0: only -inf, as q is some tile's max
  // once any element is above -inf, and its term is 1): the identity. NaN and +inf carry over
  // (s is NaN).
  ONORM_DEV core::MaxSum<double> state() const {
    if (s == 0.0f) return core::MaxSum<double>::identity();
    return core::MaxSum<double>::of(double(q), sum());
  }
};
using PivotSum = PivotSumOf<true>;

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
  const double s = p.sum();
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
