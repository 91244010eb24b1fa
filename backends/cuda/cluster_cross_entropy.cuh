// Cross-entropy of rows split over a thread-block cluster (sm_90+; gpu/cross_entropy_rows.hpp):
// the K blocks of a cluster hold one row, a slice each, in registers; each takes its slice's
// statistics (gpu::ce_slice_stats), delivers them into every peer's shared memory (Mailbox, as
// the row engine's clusters: cluster_rows.cuh), merges the K in a fixed tree
// (gpu::merge_slice_stats: every block gets the same bits), and writes its slice's gradient. The row is read once; every block's values
// are in registers before its statistics leave, so the gradient may overwrite the logits.
// A cluster walks rows c, c + clusters, ... (the mailbox's two sets alternate).
// CUDA only; the kernel is empty below sm_90 and the planner routes here only where the device
// has clusters.
#pragma once

#include <cooperative_groups.h>

#include "bulk_copy.cuh"
#include "cluster_rows.cuh"
#include "cross_entropy_rows.hpp"

namespace onorm {
namespace cuda {

// grid.x = clusters * K, cluster (K, 1, 1); chunk: columns per slice (a multiple of the vector
// width); stage WHOLE.
template <typename In, int WARP, int ITEMS, int BLOCK>
__global__ void __launch_bounds__(BLOCK, (gpu::ce_min_blocks<In, ITEMS, BLOCK, true>()))
    cluster_cross_entropy_kernel(gpu::CrossEntropyArgs a, int64_t chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using S = core::ops::CrossEntropy::SliceStats;
  __shared__ gpu::CeScratch<WARP, BLOCK> sc;
  __shared__ Mailbox<S> mail;
  __shared__ S merged;
  mailbox_open(mail);
  const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const unsigned K = cluster.num_blocks();
  const unsigned rank = cluster.block_rank();
  const int64_t col0 = static_cast<int64_t>(rank) * chunk;
  const int n = static_cast<int>(a.cols - col0 < chunk ? (a.cols > col0 ? a.cols - col0 : 0) : chunk);
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t clusters = gridDim.x / K;
  bulk::cluster_wait();  // every block's barriers are ready for the stores
  uint32_t j = 0;
  for (int64_t row = blockIdx.x / K; row < a.rows; row += clusters, ++j) {
    const unsigned set = j & 1u;
    const int64_t t = a.targets[row];
    float v[ITEMS * gpu::io<In>::kVec];
    gpu::ce_load_slice<In, ITEMS, BLOCK>(a, row, col0, n, lane, v);
    const gpu::CeTarget tg = gpu::ce_target_in<In, BLOCK>(a, row, t, col0, n, lane);
    if (threadIdx.x == 0) bulk::arrive_expect(&mail.full[set], static_cast<uint32_t>(K * sizeof(S)));
    const S mine = gpu::ce_stats_of<In, WARP, ITEMS, BLOCK>(a, v, n, lane, tg, sc);
    if (threadIdx.x < K) {  // thread p delivers this block's statistics to block p
      const unsigned p = threadIdx.x;
      bulk::store_to_peer(bulk::peer_address(&mail.slot[set][rank], p), reinterpret_cast<const uint32_t*>(&mine),
                          int(sizeof(S) / 4), bulk::peer_address(&mail.full[set], p));
    }
    if (threadIdx.x < WARP) {
      bulk::wait(&mail.full[set], (j >> 1) & 1u);
      const S st = gpu::merge_slice_stats<WARP>(lane < static_cast<int>(K) ? mail.slot[set][lane] : S::identity(), lane);
      if (lane == 0) merged = st;
    }
    __syncthreads();  // `merged` visible; the slots are read before the next row's stores into them
    if (a.dx) {
      gpu::ce_slice_finish<In, ITEMS, BLOCK>(a, row, col0, n, lane, v, gpu::ce_row_coefs(a, t, merged),
                                              static_cast<float>(mine.st.ms.m), tg);
    }
    // `merged` is rewritten only after the next row's first barrier.
    if (rank == 0 && threadIdx.x == 0) gpu::ce_row_loss(a, row, t, merged);
  }
#endif
}

}  // namespace cuda
}  // namespace onorm
