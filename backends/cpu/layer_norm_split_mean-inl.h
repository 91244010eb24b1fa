// LayerNorm's v in float for its quantized output: the row's statistics as the SIMD kernels
// take them (chunk states merged in double), and the finish of norm_stats.hpp,
// ((x k - mean k) (rstd / k)) s + b, with mean k split into two floats (hi + lo). The usual
// finish rounds mean k to one float, an error of |mean| rstd 2^-24 in v: on rows far from zero
// that moves v near 0 across several codes of E4M3's fine grid there, beyond the contract's
// neighbour rule; with the split, v's error is relative to v itself. Per target (Highway's
// -inl.h pattern).

// Per-target include guard (see hwy/examples/skeleton-inl.h).
#if defined(ONORM_CPU_LAYER_NORM_SPLIT_MEAN_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ONORM_CPU_LAYER_NORM_SPLIT_MEAN_INL_H_
#undef ONORM_CPU_LAYER_NORM_SPLIT_MEAN_INL_H_
#else
#define ONORM_CPU_LAYER_NORM_SPLIT_MEAN_INL_H_
#endif

#include <algorithm>

#include "chunk_passes-inl.h"
#include "dispatch-inl.h"
#include "hwy/highway.h"
#include "onlinenorm/core/norm_stats.hpp"
#include "onlinenorm/core/pairwise.hpp"
#include "row_drivers-inl.h"
#include "scalar_rows.hpp"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rows [r0, r1) of a version-1 LayerNorm request (x, gamma, beta of storage type In) as float v,
// row i at v + (i - r0) cols; mean and rstd written where asked.
template <typename In>
HWY_FLATTEN void LayerNormSplitMeanT(const onorm_request& q, int64_t r0, int64_t r1, float* v) {
  using Op = core::ops::LayerNorm;
  const DF d;
  const size_t N = hn::Lanes(d);
  const int64_t cols = q.in[0].cols;
  const int64_t chunks = (cols + kChunk - 1) / kChunk;
  const In* gamma = static_cast<const In*>(q.col[0]);
  const In* beta = static_cast<const In*>(q.col[1]);
  const In* x[1];
  for (int64_t r = r0; r < r1; ++r) {
    core::PairwiseFold<Op::Merged> fold;
    for (int64_t k = 0; k < chunks; ++k) {
      const int64_t b = k * kChunk, n = std::min(kChunk, cols - b);
      RowInputs<Op>(q, r, b, x);
      fold.push(ChunkStateOf<Op>(d, x, static_cast<size_t>(n), nullptr, true));
    }
    bool ok = true;
    Op::Coefs<double> c = Op::coefs(fold.result(), Op::params(q.param), ok);
    if (!ok) c = scalar_coefs_double<Op>(q, r);  // statistics the float sums do not hold
    Op::write_row_outputs(c, q.row_out, r);
    const core::NormCoefs f = core::norm_coefs_scaled(c.mean, c.rstd);
    const double mk = c.mean * static_cast<double>(f.k);  // exact: k is a power of two
    const VF k = hn::Set(d, f.k), hi = hn::Set(d, f.mk), rk = hn::Set(d, f.rk);
    const VF lo = hn::Set(d, static_cast<float>(mk - static_cast<double>(f.mk)));
    const VF one = hn::Set(d, 1.0f), zero = hn::Zero(d);
    RowInputs<Op>(q, r, 0, x);
    const In* xr = x[0];
    float* out = v + (r - r0) * cols;
    auto finish = [&](VF xv, VF g, VF b) {
      // x k - hi is exact where x is near the mean; lo then rounds once, relative to the result.
      const VF centred = hn::Sub(hn::Sub(hn::Mul(xv, k), hi), lo);
      return hn::MulAdd(hn::Mul(centred, rk), g, b);
    };
    size_t j = 0;
    const size_t n = static_cast<size_t>(cols);
    for (; j + N <= n; j += N) {
      const VF g = gamma ? Io<In>::Load(d, gamma + j) : one, b = beta ? Io<In>::Load(d, beta + j) : zero;
      hn::StoreU(finish(Io<In>::Load(d, xr + j), g, b), d, out + j);
    }
    if (j < n) {
      const size_t m = n - j;
      const VF g = gamma ? LoadTail(d, gamma + j, m, 1.0f) : one, b = beta ? LoadTail(d, beta + j, m, 0.0f) : zero;
      StoreTail(d, finish(LoadTail(d, xr + j, m, 0.0f), g, b), out + j, m);
    }
  }
}

void LayerNormSplitMeanRows(const onorm_request& q, int64_t r0, int64_t r1, float* v) {
  WithSimdType(q.in[0].dtype, [&](auto in) { LayerNormSplitMeanT<typename decltype(in)::type>(q, r0, r1, v); });
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
