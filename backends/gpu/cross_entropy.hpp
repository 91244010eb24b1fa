// Cross-entropy on GPUs (core/ops/cross_entropy.hpp; API.md, "cross-entropy"), shared by CUDA
// and HIP: cross_entropy_kernel, a block per row (a grid-stride loop over the rows), any row
// length:
//   pass 1   the row's LogitStats (row_logit_stats.hpp); thread 0 reads the target's logit,
//            takes CrossEntropy::row once (double) and writes loss and lse;
//   barrier  every thread has read the row and x_t before any writes: dlogits may be logits
//            (in place, the same stride and element size);
//   pass 2   dlogits (when asked) = CrossEntropy::grad of each element, each written by the
//            thread that read it; rows of ignore_index write zeros without reading the row.
// A slice's partial states (onlinenorm::nccl): STATS ends after pass 1 with the row's record
// (CrossEntropy::StateRecord); FINISH takes the merged record in place of pass 1.
// A row's results depend on that row alone (batch invariance); no atomics.
#pragma once

#include "vendor_shim.hpp"  // first: the vendor runtime defines __host__ / __device__

#include <algorithm>
#include <cstdint>

#include "onlinenorm/core/ops/cross_entropy.hpp"
#include "row_args.hpp"
#include "row_logit_stats.hpp"

namespace onorm {
namespace gpu {

constexpr int kCrossEntropyBlock = 256;

struct CrossEntropyArgs {
  const void* x;
  int64_t x_stride;
  void* dx;  // null: no gradient
  int64_t dx_stride;
  int dx_dtype;
  int x_vec, dx_vec;  // every row aligned for 16-byte loads / VEC-element stores
  const int64_t* targets;
  int64_t ignore_index;
  float* loss;
  float* lse;  // or null
  double param[ONORM_REQUEST_PARAMS];
  int64_t rows, cols;
  // A slice's partial states (rows split by columns across ranks): STATS writes each row's
  // record, FINISH takes the merged one instead of pass 1; cols_offset is the slice's first
  // column (targets are the whole row's columns).
  int stage;
  void* state_out;
  const void* state_in;
  int64_t cols_offset;
};

// Pass 2 over columns [col0, col0 + n) of `row` (x: the row's logits): dlogits of element type
// Out; `first` is x[col0]'s column in the targets' numbering. The steps run from the slice's end
// backward: the first lines they read again are the last that pass 1 brought into L2 (it
// matters where the rows in flight hold more bytes than L2: bench/RESULTS.md).
template <typename In, typename Out, int BLOCK>
ONORM_DEV void write_dlogits(const CrossEntropyArgs& a, const In* x, int64_t row, int64_t col0, int64_t n,
                             int64_t first, const core::ops::CrossEntropy::Coefs& cf) {
  using Steps = LogitSteps<In>;
  constexpr int VEC = Steps::kVec, ITEMS = Steps::kItems, E = Steps::kElems;
  constexpr int64_t kStep = int64_t(BLOCK) * E;
  const GpuMath m;
  const int tid = static_cast<int>(threadIdx.x);
  x += col0;
  Out* y = static_cast<Out*>(a.dx) + row * a.dx_stride + col0;
  auto width = [&](int64_t base) { return static_cast<int>(n - base < kStep ? n - base : kStep); };
  auto load = [&](int64_t base, float* v) {
    load_items<In, ITEMS, BLOCK, VEC>(x + base, width(base), tid, v, a.x_vec != 0, 0.0f);
  };
  // The next step's loads are issued before this step's math and stores (in place: they are
  // other elements, each read by the thread that writes it).
  float v[E];
  const int64_t last = n > 0 ? (n - 1) / kStep * kStep : -1;
  if (!cf.zero && last >= 0) load(last, v);
  for (int64_t base = last; base >= 0; base -= kStep) {
    const bool more = base > 0;
    float next[E];
    if (cf.zero) {
#pragma unroll
      for (int e = 0; e < E; ++e) v[e] = 0.0f;
    } else {
      if (more) load(base - kStep, next);
#pragma unroll
      for (int i = 0; i < ITEMS; ++i)
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const int64_t c = first + base + (tid + i * BLOCK) * VEC + j;
          v[i * VEC + j] = core::ops::CrossEntropy::grad(m, cf, v[i * VEC + j], c == cf.target);
        }
    }
    store_items<Out, VEC, ITEMS, BLOCK>(y + base, width(base), tid, v, a.dx_vec != 0);
    if (!more) break;
    if (!cf.zero) {
#pragma unroll
      for (int e = 0; e < E; ++e) v[e] = next[e];
    }
  }
}

// The same in the request's dlogits dtype.
template <typename In, int BLOCK>
ONORM_DEV void write_dlogits_as(const CrossEntropyArgs& a, const In* x, int64_t row, int64_t col0, int64_t n,
                                int64_t first, const core::ops::CrossEntropy::Coefs& cf) {
  switch (a.dx_dtype) {
    case kF32: write_dlogits<In, float, BLOCK>(a, x, row, col0, n, first, cf); break;
    case kF16: write_dlogits<In, core::f16_bits, BLOCK>(a, x, row, col0, n, first, cf); break;
    default: write_dlogits<In, core::bf16_bits, BLOCK>(a, x, row, col0, n, first, cf); break;
  }
}

template <typename In, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK) cross_entropy_kernel(CrossEntropyArgs a) {
  using CE = core::ops::CrossEntropy;
  __shared__ core::LogitStats<double> scratch[BLOCK / WARP];
  __shared__ CE::Coefs shared_cf;
  const CE::Params prm = CE::params(a.param);
  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const In* x = static_cast<const In*>(a.x) + row * a.x_stride;
    const int64_t t = a.targets[row];
    float loss = 0.0f, lse = 0.0f;
    if (a.stage == ONORM_STAGE_FINISH) {
      if (threadIdx.x == 0) {
        const CE::StateRecord rec = static_cast<const CE::StateRecord*>(a.state_in)[row];
        shared_cf = CE::row(CE::stats_of(rec), rec.cols, t, a.ignore_index, rec.target_logit, prm, &loss,
                            a.lse ? &lse : nullptr);
      }
    } else {
      const core::LogitStats<double> st = block_logit_stats<In, WARP, BLOCK>(
          x, a.cols, a.x_vec != 0, a.param[0] > 0.0 || a.stage == ONORM_STAGE_STATS, scratch);
      if (threadIdx.x == 0) {
        const int64_t tl = t - a.cols_offset;
        const bool holds = t != a.ignore_index && tl >= 0 && tl < a.cols;
        const float x_t = holds ? io<In>::load1(x + tl) : 0.0f;
        if (a.stage == ONORM_STAGE_STATS)
          static_cast<CE::StateRecord*>(a.state_out)[row] = CE::record_of(st, a.cols, holds, x_t);
        else
          shared_cf = CE::row(st, a.cols, t, a.ignore_index, x_t, prm, &loss, a.lse ? &lse : nullptr);
      }
    }
    if (a.stage != ONORM_STAGE_STATS && threadIdx.x == 0) {
      a.loss[row] = loss;
      if (a.lse) a.lse[row] = lse;
    }
    shim::sync_threads();  // the row and x_t are read; the coefficients are shared
    const CE::Coefs cf = shared_cf;
    if (a.dx) write_dlogits_as<In, BLOCK>(a, x, row, 0, a.cols, a.cols_offset, cf);
    shim::sync_threads();  // every thread has its copy before thread 0 takes the next row's
  }
}

}  // namespace gpu
}  // namespace onorm
