// Rows split over a thread-block cluster (sm_90+): the K blocks of a cluster hold one row,
// a slice each, in registers; each reduces its slice to a state (gpu::slice_state), the
// cluster merges the K states through distributed shared memory in rank order (a fixed tree:
// every block gets the same bits), and each block finishes and writes its slice. The row is
// read from global memory once, and no flag or workspace is involved: the cluster barrier is
// the hardware's. One cluster per row, not persistent: a persistent grid that loaded the next
// row during the reductions measured slower (fewer blocks resident; bench/cuda/NOTES.md v5).
// CUDA only (HIP has no clusters); the kernel is empty below sm_90 and the host routes there
// only on devices of compute capability 9.0 or newer.
#pragma once

#include <cooperative_groups.h>

#include "row_kernels.hpp"

namespace onorm {
namespace cuda {

// The norm finish reads gamma (and beta) after the cluster barrier: ask for this thread's
// lines now, so that they arrive during the reductions and the barrier.
template <typename In, int ITEMS, int BLOCK>
__device__ __forceinline__ void prefetch_norm_params(const gpu::RowArgs& a, int64_t col0, int n, int lane) {
  constexpr int VEC = gpu::io<In>::kVec;
  const In* g = static_cast<const In*>(a.gamma);
  const In* b = static_cast<const In*>(a.beta);
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int c = (lane + i * BLOCK) * VEC;
    if (c < n) {
      if (g) asm volatile("prefetch.global.L1 [%0];" ::"l"(g + col0 + c));
      if (b) asm volatile("prefetch.global.L1 [%0];" ::"l"(b + col0 + c));
    }
  }
}

// grid.x = rows of this launch * K, cluster (K, 1, 1); s.chunk = columns per slice (a multiple
// of the vector width), s.chunks = K, s.row0 = the launch's first row.
template <int OP, typename In, int WARP, int ITEMS, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 1024 / BLOCK) cluster_rows_kernel(gpu::RowArgs a, gpu::SplitArgs s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  using S = typename gpu::op_state<OP>::type;
  constexpr int E = ITEMS * gpu::io<In>::kVec;
  __shared__ gpu::StateScratch<S> scratch;
  __shared__ S published;  // this block's slice state, read by the whole cluster
  __shared__ S merged;     // the row's state (separate from scratch: the finish reuses scratch)
  cg::cluster_group cluster = cg::this_cluster();
  const int64_t K = s.chunks;
  const int64_t row = s.row0 + blockIdx.x / K;
  const int64_t slice = cluster.block_rank();
  const int64_t col0 = slice * s.chunk;
  const int n = static_cast<int>(a.cols - col0 < s.chunk ? a.cols - col0 : s.chunk);
  const int lane = static_cast<int>(threadIdx.x);
  constexpr float kPad = OP == gpu::kOpSoftmax || OP == gpu::kOpLogSoftmax ? gpu::kNegInf : 0.0f;
  float v[E];
  gpu::load_items<In, ITEMS, BLOCK>(static_cast<const In*>(a.x) + row * a.xs + col0, n, lane, v, a.x_vec != 0,
                                    kPad);
  if constexpr (OP == gpu::kOpLayerNorm || OP == gpu::kOpRmsNorm)
    if (s.prefetch_params) prefetch_norm_params<In, ITEMS, BLOCK>(a, col0, n, lane);
  float m_c = 0.0f;
  const S mine = gpu::slice_state<OP, In, WARP, ITEMS, BLOCK>(v, n, lane, scratch, m_c);
  if (threadIdx.x == 0) published = mine;
  cluster.sync();  // every block's state is published
  if (threadIdx.x < WARP) {
    S st = lane < K ? *cluster.map_shared_rank(&published, static_cast<unsigned>(lane)) : S::identity();
    if constexpr (OP == gpu::kOpLayerNorm) st = gpu::group_merge<WARP>(st, lane);  // double: fewer registers
    else st = gpu::group_allreduce<WARP>(st, lane, gpu::CombineOp<S>{});
    if (lane == 0) merged = st;
  }
  cluster.sync();  // no block leaves (its shared memory) before all have read; `merged` visible
  const S fin = merged;
  core::NormCoefs cf{};
  if constexpr (OP == gpu::kOpLayerNorm || OP == gpu::kOpRmsNorm) {
    if (gpu::state_ok(fin, a.eps)) {
      cf = gpu::state_coefs(fin, a.eps);
    } else {  // the row is read again in double; cluster-uniform (same fin everywhere)
      cf = gpu::row_stats_f64<In, WARP, BLOCK>(static_cast<const In*>(a.x) + row * a.xs, a.cols, a.eps,
                                               OP == gpu::kOpRmsNorm);
      cluster.sync();  // in place: no block writes its slice before every block has read the row
      // The slice again (its own columns, not written yet): v is not live across the double
      // path's call (one branch: the compiler sees it dead there), which keeps the hot path's
      // register count.
      gpu::load_items<In, ITEMS, BLOCK>(static_cast<const In*>(a.x) + row * a.xs + col0, n, lane, v, a.x_vec != 0,
                                        kPad);
    }
  }
  gpu::slice_finish<OP, In, ITEMS, BLOCK>(a, row, col0, n, lane, v, fin, m_c, cf, slice == 0);
#endif
}

}  // namespace cuda
}  // namespace onorm
