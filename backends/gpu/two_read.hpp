// The two-read schedule of rows longer than the single-read placements take: per batch of
// rows, split_chunk_kernel<kModeStats> writes every chunk's merge state, merge_states_kernel
// merges each row's states in a fixed tree (repeated until one is left), row_coefs_kernel
// (ops with a float64 fallback) takes each row's coefficients before any chunk is written (so
// in place is safe), and split_chunk_kernel<kModeFinish> reads the row again and finishes it.
#pragma once

#include "slices.hpp"

namespace onorm {
namespace gpu {

enum : int { kModeStats = 1, kModeFinish = 2 };

// One chunk per block: grid (K, batch).
template <typename R, int WARP, int ITEMS, int BLOCK, int MODE>
__global__ void __launch_bounds__(BLOCK) split_chunk_kernel(RowArgs a, SplitArgs s) {
  using Op = typename R::Op;
  using S = typename Op::Merged;
  __shared__ Scratch<Op, WARP, BLOCK> scratch;
  const int64_t row = s.row0 + blockIdx.y;
  const int64_t chunk = blockIdx.x;
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t col0 = chunk * s.chunk;
  const int n = static_cast<int>(a.cols - col0 < s.chunk ? a.cols - col0 : s.chunk);
  float v[Op::kInputs][ITEMS * R::kVec];
  load_inputs<R, ITEMS, BLOCK, WARP>(a, row, col0, n, lane, v);
  const ChunkStats<Op> cs = slice_passes<R, WARP, ITEMS, BLOCK>(v, n, lane, scratch);
  if constexpr (MODE == kModeStats) {
    if (lane == 0) static_cast<S*>(s.entries)[blockIdx.y * s.chunks + chunk] = cs.merged();
  } else {
    coefs_t<Op> cf;
    if constexpr (Op::kF64Fallback) {
      cf = static_cast<const coefs_t<Op>*>(s.row_coefs)[blockIdx.y];
    } else {
      bool reread;
      cf = merged_coefs<R, WARP, BLOCK>(a, row, static_cast<const S*>(s.final_states)[blockIdx.y], reread);
    }
    slice_finish<R, ITEMS, BLOCK, WARP>(a, row, col0, n, lane, v, cf, cs, chunk == 0);
  }
}

// The coefficients of each batch row from its merged state, one row per block: grid (batch).
template <typename R, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK) row_coefs_kernel(RowArgs a, SplitArgs s) {
  using Op = typename R::Op;
  const typename Op::Merged fin = static_cast<const typename Op::Merged*>(s.final_states)[blockIdx.x];
  bool reread;
  const coefs_t<Op> cf = merged_coefs<R, WARP, BLOCK>(a, s.row0 + blockIdx.x, fin, reread);
  if (threadIdx.x == 0) static_cast<coefs_t<Op>*>(const_cast<void*>(s.row_coefs))[blockIdx.x] = cf;
}

// Merges each row's `count` states in groups of BLOCK (a fixed tree): out holds
// ceil(count / BLOCK) states per row. The host repeats it until one state per row is left.
template <typename S, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK) merge_states_kernel(const void* in, void* out, int64_t count) {
  __shared__ S scratch[BLOCK / WARP];
  const int64_t outs = (count + BLOCK - 1) / BLOCK;
  const int64_t k = static_cast<int64_t>(blockIdx.x) * BLOCK + threadIdx.x;
  const S* src = static_cast<const S*>(in) + blockIdx.y * count;
  S v = k < count ? src[k] : S::identity();
  v = block_allreduce<WARP, BLOCK>(v, scratch, CombineOp<S>{});
  if (threadIdx.x == 0) static_cast<S*>(out)[blockIdx.y * outs + blockIdx.x] = v;
}

}  // namespace gpu
}  // namespace onorm
