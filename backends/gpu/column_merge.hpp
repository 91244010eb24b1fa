// dgamma / dbeta from the one-read backward's float partial rows (one per run of rows: a block's
// or a cluster's), added in double in a fixed order: a block of kMergeThreads threads takes C
// columns with L = kMergeThreads / C lanes each; lane l adds runs l, l + L, l + 2L, ... in run
// order, then the L lane sums meet in a fixed pairwise tree. No atomics: the same call gives the
// same bits run after run.
#pragma once

#include "norm_backward_args.hpp"

namespace onorm {
namespace gpu {

constexpr int kMergeThreads = 256;

// C: 32 columns a block (a warp reads whole 128-byte lines of a partial row) unless that leaves
// the device's multiprocessors idle; then fewer columns and more lanes while each lane still adds
// at least 8 runs. Rows of a few thousand columns have a thousand or more partial rows: 32
// columns a block put them on a few multiprocessors, a long chain of loads each (bench/RESULTS.md).
// Blocks of 1024 threads (32 lanes a column from 8 columns up) measured slower where the runs
// are few and the columns many: most lanes idle, a deeper tree (bench/RESULTS.md).
inline int merge_columns_per_block(int64_t cols, int64_t runs, int sms) {
  int c = 32;
  while (c > 1 && (cols + c - 1) / c < int64_t(2) * sms && int64_t(2 * kMergeThreads / c) * 8 <= runs) c /= 2;
  return c;
}

template <int K>
__global__ void __launch_bounds__(kMergeThreads) column_merge_kernel(NormBackwardArgs a, int runs, int cols_per_block) {
  __shared__ double sums[kMergeThreads];
  const int C = cols_per_block, lanes = kMergeThreads / C;
  const int t = static_cast<int>(threadIdx.x), c = t % C, lane = t / C;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * C + c;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (!a.col_out[k]) continue;  // block-uniform
    double s = 0;
    if (j < a.cols) {
#pragma unroll 4
      for (int b = lane; b < runs; b += lanes) s += a.partial_f32[(static_cast<int64_t>(b) * K + k) * a.cols + j];
    }
    sums[t] = s;  // sums[lane * C + c]
    __syncthreads();
    for (int half = lanes / 2; half > 0; half /= 2) {
      if (lane < half) sums[t] += sums[t + half * C];
      __syncthreads();
    }
    if (lane == 0 && j < a.cols) a.col_out[k][j] = static_cast<float>(sums[c]);
    __syncthreads();  // sums is the next k's
  }
}

}  // namespace gpu
}  // namespace onorm
