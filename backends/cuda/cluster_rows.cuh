// Rows split over a thread-block cluster (sm_90+): the K blocks of a cluster hold one row,
// a slice each, in registers; each reduces its slice to a state, the cluster merges the K
// states through distributed shared memory in rank order (a fixed tree: every block gets the
// same bits), and each block finishes and writes its slice. The grid is persistent: a cluster
// walks rows c, c + clusters, ..., and the next row's slice is loaded into a second register
// set before the current row is reduced, so its bytes are in flight during the reductions and
// the cluster barriers. The row is read from global memory once, and no flag or workspace is
// involved: the cluster barrier is the hardware's. CUDA only (HIP has no clusters); the
// kernel is empty below sm_90 and the host routes there only on compute capability >= 9.0.
#pragma once

#include <cooperative_groups.h>

#include "row_slice.hpp"

namespace onorm {
namespace cuda {

// grid.x = clusters * K, cluster (K, 1, 1); s.chunk = columns per slice (a multiple of the
// vector width), s.chunks = K; rows [0, a.rows).
template <int OP, typename In, int WARP, int ITEMS, int BLOCK>
__global__ void __launch_bounds__(BLOCK) cluster_rows_kernel(gpu::RowArgs a, gpu::SplitArgs s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  using S = typename gpu::op_state<OP>::type;
  constexpr int E = ITEMS * gpu::io<In>::kVec;
  __shared__ gpu::StateScratch<S> scratch;
  __shared__ S published;  // this block's slice state, read by the whole cluster
  __shared__ S merged;     // the row's state (separate from scratch: the finish reuses scratch)
  cg::cluster_group cluster = cg::this_cluster();
  const int64_t K = s.chunks;
  const int64_t clusters = gridDim.x / K;
  const int64_t slice = cluster.block_rank();
  const int64_t col0 = slice * s.chunk;
  const int n = static_cast<int>(a.cols - col0 < s.chunk ? a.cols - col0 : s.chunk);
  const int lane = static_cast<int>(threadIdx.x);
  const bool x_vec = a.x_vec != 0;
  const float pad = OP == gpu::kOpSoftmax || OP == gpu::kOpLogSoftmax ? gpu::kNegInf : 0.0f;
  auto src = [&](int64_t row) { return static_cast<const In*>(a.x) + row * a.xs + col0; };
  auto cluster_merge = [&](const S& mine) -> S {
    if (threadIdx.x == 0) published = mine;
    cluster.sync();  // every block's state is published
    if (threadIdx.x < WARP) {
      S v = lane < K ? *cluster.map_shared_rank(&published, static_cast<unsigned>(lane)) : S::identity();
      v = gpu::group_allreduce<WARP>(v, lane, gpu::CombineOp<S>{});
      if (lane == 0) merged = v;
    }
    cluster.sync();  // all have read `published` (reusable, and no block leaves early); `merged` visible
    return merged;
  };
  int64_t row = blockIdx.x / K;
  if (row >= a.rows) return;  // uniform over the cluster
  float v[E];
  float next[E];
  gpu::load_items<In, ITEMS, BLOCK>(src(row), n, lane, v, x_vec, pad);
  for (;;) {
    const int64_t nrow = row + clusters;
    if (nrow < a.rows) gpu::load_items<In, ITEMS, BLOCK>(src(nrow), n, lane, next, x_vec, pad);
    float m_c = 0.0f;
    const S st = gpu::slice_state<OP, In, WARP, ITEMS, BLOCK>(v, n, lane, scratch.f, m_c);
    const S fin = cluster_merge(st);
    gpu::slice_finish<OP, In, ITEMS, BLOCK>(a, row, col0, n, lane, v, fin, m_c, slice == 0);
    if (nrow >= a.rows) break;
    row = nrow;
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] = next[e];
  }
#endif
}

}  // namespace cuda
}  // namespace onorm
