// A row's LogitStats (core/logit_stats.hpp: softmax's (max, sum of exp(x - max)) and the sum of
// x) taken by one block, for the driver ops that stream a row (or a slice of it) through a
// block (cross-entropy). Each thread takes fixed steps of LogitSteps::kElems elements (16-byte
// vectors where the row allows: the same values either way), the next step's loads issued
// before this one's math; its sum of exp runs in float about a rarely moving pivot,
// compensated (PivotSum: a few 1e-7 at 2^24 columns), its sum of x (scaled by kLogitSumScale)
// in double a step at a time; the threads' merged in double in the block's fixed tree. No
// atomics: the same row gives the same bits in any batch, run after run.
#pragma once

#include "vendor_shim.hpp"  // first: the vendor runtime defines __host__ / __device__

#include <algorithm>
#include <cstdint>

#include "dtype_io.hpp"
#include "math.hpp"
#include "pivot_sum.hpp"
#include "onlinenorm/core/logit_stats.hpp"
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

// The LogitStats of x[0, cols) over the block (every thread calls it and gets the same bits);
// sum_x: the sum of x is taken (else 0). aligned: x is 16-byte aligned (a step's offset keeps
// it: BLOCK * 16 elements). Ends with a barrier (block_allreduce): every thread of the block has
// finished reading the row.
template <typename In, int WARP, int BLOCK>
ONORM_DEV core::LogitStats<double> block_logit_stats(const In* x, int64_t cols, bool aligned, bool sum_x,
                                                     core::LogitStats<double>* scratch) {
  using Steps = LogitSteps<In>;
  constexpr int VEC = Steps::kVec, ITEMS = Steps::kItems, E = Steps::kElems;
  constexpr int64_t kStep = int64_t(BLOCK) * E;
  static_assert(BLOCK / WARP > 1, "block_allreduce ends with a barrier when the block has several warps");
  const int tid = static_cast<int>(threadIdx.x);
  auto load = [&](int64_t base, float* v) {
    const int n = static_cast<int>(cols - base < kStep ? cols - base : kStep);
    load_items<In, ITEMS, BLOCK, VEC>(x + base, n, tid, v, aligned, core::neg_infinity<float>());
  };
  PivotSum sum;
  double sx = 0.0;
  float v[E];
  if (cols > 0) load(0, v);
  for (int64_t base = 0; base < cols; base += kStep) {
    const bool more = base + kStep < cols;
    float next[E];
    if (more) load(base + kStep, next);
    sum.push<E>(v, tile_max<E>(v));
    if (sum_x) {
      float t = 0.0f;
#pragma unroll
      for (int i = 0; i < ITEMS; ++i)
#pragma unroll
        for (int j = 0; j < VEC; ++j)
          if (base + (tid + i * BLOCK) * VEC + j < cols) t += v[i * VEC + j] * core::kLogitSumScale;
      sx += t;
    }
    if (!more) break;
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] = next[e];
  }
  const core::LogitStats<double> st = core::LogitStats<double>::of(sum.state(), sx * core::kLogitSumUnscale);
  return block_allreduce<WARP, BLOCK>(st, scratch, CombineOp<core::LogitStats<double>>{});
}

}  // namespace gpu
}  // namespace onorm
