// A row's LogitStats (core/logit_stats.hpp: softmax's (max, sum of exp(x - max)) and the sum of
// x) taken by one block, for the driver ops that hold a row per block (cross-entropy, softmax
// top-k). Each thread takes fixed steps of LogitSteps::kElems elements (16-byte vectors where
// the row allows: the same values either way), a step's state in float (SoftmaxStatistics'
// pivot and state), the steps folded pairwise in double (core::PairwiseFold: a float fold's
// rounding, a few units per level, would near the bound at 2^24 columns where lse is small),
// then the threads merged in double in the block's fixed tree. No atomics: the same row gives
// the same bits in any batch, run after run.
#pragma once

#include "vendor_shim.hpp"  // first: the vendor runtime defines __host__ / __device__

#include <algorithm>
#include <cstdint>

#include "dtype_io.hpp"
#include "math.hpp"
#include "onlinenorm/core/logit_stats.hpp"
#include "onlinenorm/core/ops/softmax.hpp"
#include "onlinenorm/core/pairwise.hpp"
#include "reduce.hpp"
#include "row_chunk.hpp"

namespace onorm {
namespace gpu {

// Blocks of a kernel that holds a row per block: one per row, up to a few per
// multiprocessor (the blocks loop over the rows past that).
inline unsigned row_blocks(int64_t rows, int sms) {
  return static_cast<unsigned>(std::min<int64_t>(rows, int64_t(16) * std::max(sms, 1)));
}

// Elements a thread takes per step: ITEMS vectors of VEC elements of In.
template <typename In>
struct LogitSteps {
  static constexpr int kVec = io<In>::kVec;
  static constexpr int kElems = 16;
  static constexpr int kItems = kElems / kVec;
};

// The LogitStats of x[0, cols) over the block (every thread calls it and gets the same bits).
// aligned: x is 16-byte aligned (a step's offset keeps it: BLOCK * 16 elements). Ends with a
// barrier (block_allreduce): every thread of the block has finished reading the row.
template <typename In, int WARP, int BLOCK>
ONORM_DEV core::LogitStats<double> block_logit_stats(const In* x, int64_t cols, bool aligned,
                                                     core::LogitStats<double>* scratch) {
  using Stats = core::ops::SoftmaxStatistics;
  using Steps = LogitSteps<In>;
  constexpr int VEC = Steps::kVec, ITEMS = Steps::kItems, E = Steps::kElems;
  constexpr int64_t kStep = int64_t(BLOCK) * E;
  static_assert(BLOCK / WARP > 1, "block_allreduce ends with a barrier when the block has several warps");
  const GpuMath m;
  const int tid = static_cast<int>(threadIdx.x);
  core::PairwiseFold<core::LogitStats<double>> fold;
  for (int64_t base = 0; base < cols; base += kStep) {
    const int n = static_cast<int>(cols - base < kStep ? cols - base : kStep);
    float v[E];
    load_items<In, ITEMS, BLOCK, VEC>(x + base, n, tid, v, aligned, Stats::pad(0));
    float r1 = core::neg_infinity<float>();
#pragma unroll
    for (int e = 0; e < E; ++e) r1 = shim::nan_max(r1, v[e]);
    const float p = Stats::pivot(r1, E);
    float d = 0.0f, sx = 0.0f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const int e = i * VEC + j;
        d += m.exp(v[e] - p);  // padding (-inf) adds 0
        if ((tid + i * BLOCK) * VEC + j < n) sx += v[e] * core::kLogitSumScale;
      }
    core::LogitStats<double> step = core::LogitStats<float>::of(Stats::state<float>(E, r1, p, &d), sx).as<double>();
    step.sum *= core::kLogitSumUnscale;
    fold.push(step);
  }
  return block_allreduce<WARP, BLOCK>(fold.result(), scratch, CombineOp<core::LogitStats<double>>{});
}

}  // namespace gpu
}  // namespace onorm
