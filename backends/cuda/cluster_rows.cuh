// Rows split over a thread-block cluster (sm_90+): the K blocks of a cluster hold one row,
// a slice each, in registers; each reduces its slice (gpu::slice_passes), the cluster merges
// the K merge states through distributed shared memory in rank order (a fixed tree: every
// block gets the same bits), and each block finishes and writes its slice. The row is read
// from global memory once, and no flag or workspace is involved: the cluster barrier is the
// hardware's. One cluster per row, not persistent: a persistent grid that loaded the next
// row during the reductions measured slower (fewer blocks resident; bench/cuda/NOTES.md).
// The norms' options (RowOptions) as in the register rows: the residual added as the slice
// loads, h stored before the finish, y quantized with the cluster's maximum.
// CUDA only (HIP has no clusters); the kernel is empty below sm_90 and the planner routes
// here only on devices of compute capability 9.0 or newer.
#pragma once

#include <cooperative_groups.h>

#include "row_options.hpp"
#include "slices.hpp"

namespace onorm {
namespace cuda {

// The finish reads the column vectors after the cluster barrier: ask for this thread's lines
// now, so that they arrive during the reductions and the barrier.
template <typename R, int ITEMS, int BLOCK>
__device__ __forceinline__ void prefetch_cols(const gpu::RowArgs& a, int64_t col0, int n, int lane) {
  constexpr int VEC = R::kVec;
#pragma unroll
  for (int q = 0; q < R::Op::kCols; ++q) {
    const auto* col = static_cast<const typename R::In*>(a.col[q]);
    if (!col) continue;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int c = (lane + i * BLOCK) * VEC;
      if (c < n) asm volatile("prefetch.global.L1 [%0];" ::"l"(col + col0 + c));
    }
  }
}

// A quantized y (RowOptions): the row's max |y| over the cluster (each block's through
// distributed shared memory, in rank order), the dynamic scale (written by rank 0), the stores.
template <typename R, int WARP, int ITEMS, int BLOCK>
__device__ __forceinline__ void cluster_store_quantized(const gpu::RowArgs& a, int64_t row, int64_t col0, int n,
                                                        int lane, const float* y, int64_t K,
                                                        gpu::Scratch<typename R::Op, WARP, BLOCK>& scratch) {
  namespace cg = cooperative_groups;
  __shared__ float block_max, row_max;
  float scale = 0.0f;
  if (a.opt.y_scale) {
    cg::cluster_group cluster = cg::this_cluster();
    const float m = gpu::block_allreduce<WARP, BLOCK>(gpu::items_max_abs<R, ITEMS, BLOCK>(n, lane, y), scratch.f,
                                                      gpu::MaxOp{});
    if (threadIdx.x == 0) block_max = m;
    cluster.sync();  // every block's maximum is published
    if (threadIdx.x < WARP) {
      float t = lane < K ? *cluster.map_shared_rank(&block_max, static_cast<unsigned>(lane)) : 0.0f;
      t = gpu::group_allreduce<WARP>(t, lane, gpu::MaxOp{});
      if (lane == 0) row_max = t;
    }
    cluster.sync();  // no block leaves (its block_max) before all have read; row_max visible
    scale = gpu::row_quant_scale(a, row_max);
    if (cluster.block_rank() == 0 && threadIdx.x == 0) a.opt.y_scale[row] = scale;
  }
  gpu::store_quantized<R, ITEMS, BLOCK>(a, row, col0, n, lane, y, scale);
}

// grid.x = rows of this launch * K, cluster (K, 1, 1); s.chunk = columns per slice (a multiple
// of the vector width), s.chunks = K, s.row0 = the launch's first row.
template <typename R, int WARP, int ITEMS, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 1024 / BLOCK) cluster_rows_kernel(gpu::RowArgs a, gpu::SplitArgs s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  using Op = typename R::Op;
  using S = typename Op::Merged;
  __shared__ gpu::Scratch<Op, WARP, BLOCK> scratch;
  __shared__ S published;  // this block's slice state, read by the whole cluster
  __shared__ S merged;     // the row's state (separate from scratch: the finish reuses scratch)
  cg::cluster_group cluster = cg::this_cluster();
  const int64_t K = s.chunks;
  const int64_t row = s.row0 + blockIdx.x / K;
  const int64_t slice = cluster.block_rank();
  const int64_t col0 = slice * s.chunk;
  const int n = static_cast<int>(a.cols - col0 < s.chunk ? a.cols - col0 : s.chunk);
  const int lane = static_cast<int>(threadIdx.x);
  float v[Op::kInputs][ITEMS * R::kVec];
  gpu::load_inputs<R, ITEMS, BLOCK>(a, row, col0, n, lane, v);
  if constexpr (R::kOptions) {
    if (a.opt.res) gpu::add_residual<R, ITEMS, BLOCK>(a, row, col0, n, lane, v);
  }
  if (s.prefetch_cols) prefetch_cols<R, ITEMS, BLOCK>(a, col0, n, lane);
  const gpu::ChunkStats<Op> cs = gpu::slice_passes<R, WARP, ITEMS, BLOCK>(v, n, lane, scratch);
  if (threadIdx.x == 0) published = cs.merged();
  cluster.sync();  // every block's state is published
  if (threadIdx.x < WARP) {
    S st = lane < K ? *cluster.map_shared_rank(&published, static_cast<unsigned>(lane)) : S::identity();
    st = gpu::group_merge<WARP>(st, lane);
    if (lane == 0) merged = st;
  }
  cluster.sync();  // no block leaves (its shared memory) before all have read; `merged` visible
  bool reread;
  const gpu::coefs_t<Op> cf = gpu::merged_coefs<R, WARP, BLOCK>(a, row, merged, reread);
  // The row was read again in double (cluster-uniform: the same merged state everywhere). In
  // place, no block writes its slice before every block has read the row. (Loading v again
  // after the call, to keep it dead across it, cost more spills: ptxas, sm_90a.)
  if (reread) cluster.sync();
  if constexpr (R::kOptions) {
    gpu::store_h<R, ITEMS, BLOCK>(a, row, col0, n, lane, v[0]);
    if (gpu::is_quantized_dtype(a.out_dtype)) {
      gpu::slice_finish_values<R, ITEMS, BLOCK>(a, row, col0, n, lane, v, cf, cs, slice == 0);
      cluster_store_quantized<R, WARP, ITEMS, BLOCK>(a, row, col0, n, lane, v[0], K, scratch);
      return;
    }
  }
  gpu::slice_finish<R, ITEMS, BLOCK>(a, row, col0, n, lane, v, cf, cs, slice == 0);
#endif
}

}  // namespace cuda
}  // namespace onorm
