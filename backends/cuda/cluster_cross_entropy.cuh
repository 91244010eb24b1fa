// Cross-entropy of rows split over a thread-block cluster (sm_90+; gpu/cross_entropy_rows.hpp):
// the K blocks of a cluster hold one row, a slice each, in registers; each takes its slice's
// statistics (gpu::ce_slice_stats), delivers them into every peer's shared memory (Mailbox, as
// the row engine's clusters: cluster_rows.cuh), merges the K in a fixed tree
// (gpu::merge_slice_stats: every block gets the same bits), and writes its slice's gradient. The
// row is read once; every block's values are in registers before its statistics leave, so the
// gradient may overwrite the logits.
// A cluster walks rows c, c + clusters, ... (the mailbox's two sets alternate); rows whose bytes
// the copy engine can move stream through a shared-memory stage on resident clusters.
// CUDA only; the kernels are empty below sm_90 and the planner routes here only where the device
// has clusters.
#pragma once

#include <cooperative_groups.h>

#include "bulk_copy.cuh"
#include "cluster_rows.cuh"
#include "cross_entropy_rows.hpp"

namespace onorm {
namespace cuda {

// A block's shared memory for its cluster's rows: the reductions' scratch, the mailbox of the
// slices' statistics, the row's merged statistics.
template <int WARP, int BLOCK>
struct ClusterCeShared {
  gpu::CeScratch<WARP, BLOCK> sc;
  Mailbox<core::ops::CrossEntropy::SliceStats> mail;
  core::ops::CrossEntropy::SliceStats merged;
};

// This block's place in its cluster: K blocks, its rank, its slice [col0, col0 + n).
struct ClusterSlice {
  unsigned K, rank;
  int64_t col0;
  int n;
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// The slice of chunk columns this block holds (every thread, at the start: the mailbox opened,
// this block's arrival on the cluster's barrier).
template <int WARP, int BLOCK>
__device__ __forceinline__ ClusterSlice open_cluster_slice(const gpu::CrossEntropyArgs& a, int64_t chunk,
                                                           ClusterCeShared<WARP, BLOCK>& sh) {
  const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  ClusterSlice c;
  c.K = cluster.num_blocks();
  c.rank = cluster.block_rank();
  c.col0 = static_cast<int64_t>(c.rank) * chunk;
  c.n = static_cast<int>(a.cols - c.col0 < chunk ? (a.cols > c.col0 ? a.cols - c.col0 : 0) : chunk);
  mailbox_open(sh.mail);
  return c;
}

// Thread 0, before its block's statistics of the cluster's j-th row: the arrival on this
// block's mailbox (set j & 1) that expects every block's statistics (clusters of two or more).
template <int WARP, int BLOCK>
__device__ __forceinline__ void expect_slice_stats(uint32_t j, const ClusterSlice& cs, ClusterCeShared<WARP, BLOCK>& sh) {
  using S = core::ops::CrossEntropy::SliceStats;
  if (cs.K > 1) bulk::arrive_expect(&sh.mail.full[j & 1u], static_cast<uint32_t>(cs.K * sizeof(S)));
}

// This block's statistics of the cluster's j-th row (`mine`, in threads 0..K-1 at least)
// delivered into every block's mailbox (set j & 1), the K merged in a fixed tree
// (gpu::merge_slice_stats: every block gets the same bits) into sh.merged. Ends with a barrier.
template <int WARP, int BLOCK>
__device__ __forceinline__ void cluster_merge(const core::ops::CrossEntropy::SliceStats& mine, uint32_t j,
                                              const ClusterSlice& cs, ClusterCeShared<WARP, BLOCK>& sh) {
  using S = core::ops::CrossEntropy::SliceStats;
  const unsigned set = j & 1u;
  // A cluster of one block (rows streamed a block each) merges its own statistics alone: the
  // same tree, no mailbox (shared memory of the cluster needs two blocks at least).
  if (cs.K == 1) {
    if (threadIdx.x < WARP) {
      const int lane = static_cast<int>(threadIdx.x);
      const S st = gpu::merge_slice_stats<WARP>(lane == 0 ? mine : S::identity(), lane);
      if (lane == 0) sh.merged = st;
    }
    __syncthreads();  // `merged` visible
    return;
  }
  if (threadIdx.x < cs.K) {  // thread p delivers this block's statistics to block p
    const unsigned p = threadIdx.x;
    bulk::store_to_peer(bulk::peer_address(&sh.mail.slot[set][cs.rank], p), reinterpret_cast<const uint32_t*>(&mine),
                        int(sizeof(S) / 4), bulk::peer_address(&sh.mail.full[set], p));
  }
  if (threadIdx.x < WARP) {
    const int lane = static_cast<int>(threadIdx.x);
    bulk::wait(&sh.mail.full[set], (j >> 1) & 1u);
    const S st = gpu::merge_slice_stats<WARP>(lane < static_cast<int>(cs.K) ? sh.mail.slot[set][lane] : S::identity(), lane);
    if (lane == 0) sh.merged = st;
  }
  __syncthreads();  // `merged` visible; the slots are read before the next row's stores into them
}

// One row of a cluster's blocks, this block's slice [col0, col0 + n) in v: the slice's
// statistics, their delivery into every block's mailbox (set j & 1), the merge, the gradient's
// stores, and (rank 0, thread 0) the loss.
template <typename In, int WARP, int ITEMS, int BLOCK>
__device__ __forceinline__ void cluster_ce_row(const gpu::CrossEntropyArgs& a, int64_t row, uint32_t j,
                                               const ClusterSlice& cs, int lane, float* v,
                                               ClusterCeShared<WARP, BLOCK>& sh) {
  using S = core::ops::CrossEntropy::SliceStats;
  const int64_t col0 = cs.col0;
  const int n = cs.n;
  gpu::CeScratch<WARP, BLOCK>& sc = sh.sc;
  const S& merged = sh.merged;
  const int64_t t = a.targets[row];
  const gpu::CeTarget tg = gpu::ce_target_in<In, BLOCK>(a, row, t, col0, n, lane);
  if (threadIdx.x == 0) expect_slice_stats(j, cs, sh);
  const S mine = gpu::ce_stats_of<In, WARP, ITEMS, BLOCK>(a, v, n, lane, tg, sc);
  cluster_merge<WARP, BLOCK>(mine, j, cs, sh);
  if (a.dx) {
    gpu::ce_slice_finish<In, ITEMS, BLOCK>(a, row, col0, n, lane, v, gpu::ce_row_coefs(a, t, merged),
                                            static_cast<float>(mine.st.ms.m), tg);
  }
  // `merged` is rewritten only after the next row's first barrier.
  if (cs.rank == 0 && threadIdx.x == 0) gpu::ce_row_loss(a, row, t, merged);
}

// Thread 0: the copy of `row`'s slice into the stage, landing on `landed`.
template <typename In>
__device__ __forceinline__ void stage_ce_slice(const gpu::CrossEntropyArgs& a, int64_t row, int64_t col0, int n,
                                               unsigned char* stage, uint64_t* landed) {
  const uint32_t bytes = static_cast<uint32_t>(n * int64_t(sizeof(In)));
  bulk::arrive_expect(landed, bytes);
  if (bytes) bulk::copy(stage, static_cast<const In*>(a.x) + row * a.x_stride + col0, bytes, landed);
}
#endif

// grid.x = clusters * K, cluster (K, 1, 1); chunk: columns per slice (a multiple of the vector
// width); stage WHOLE. A cluster per row, the slice loaded into registers.
template <typename In, int WARP, int ITEMS, int BLOCK>
__global__ void __launch_bounds__(BLOCK, (gpu::ce_min_blocks<In, ITEMS, BLOCK, true>()))
    cluster_cross_entropy_kernel(gpu::CrossEntropyArgs a, int64_t chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ ClusterCeShared<WARP, BLOCK> sh;
  const ClusterSlice cs = open_cluster_slice(a, chunk, sh);
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t clusters = gridDim.x / cs.K;
  bulk::cluster_wait();  // every block's barriers are ready for the stores
  uint32_t j = 0;
  for (int64_t row = blockIdx.x / cs.K; row < a.rows; row += clusters, ++j) {
    float v[ITEMS * gpu::io<In>::kVec];
    gpu::ce_load_slice<In, ITEMS, BLOCK>(a, row, cs.col0, cs.n, lane, v);
    cluster_ce_row<In, WARP, ITEMS, BLOCK>(a, row, j, cs, lane, v, sh);
  }
#endif
}

// The same on a resident grid of clusters, each walking rows c, c + clusters, ...: the copy
// engine brings the block's slice of the next row into shared memory (dynamic: chunk elements)
// while the block reduces, merges and writes the current one (cluster_rows.cuh's stream, for
// rows whose bytes start on 16 and are a multiple of 16).
template <typename In, int WARP, int ITEMS, int BLOCK>
__global__ void __launch_bounds__(BLOCK, (gpu::ce_min_blocks<In, ITEMS, BLOCK, true>()))
    cluster_cross_entropy_stream_kernel(gpu::CrossEntropyArgs a, int64_t chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ ClusterCeShared<WARP, BLOCK> sh;
  __shared__ uint64_t landed;  // the stage's barrier: one phase per row
  ONORM_DYNAMIC_SMEM(stage);
  const ClusterSlice cs = open_cluster_slice(a, chunk, sh);
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t step = gridDim.x / cs.K;
  int64_t row = blockIdx.x / cs.K;
  if (threadIdx.x == 0) {
    bulk::init(&landed);
    if (row < a.rows) stage_ce_slice<In>(a, row, cs.col0, cs.n, stage, &landed);
  }
  __syncthreads();  // the stage's barrier is initialized
  bulk::cluster_wait();
  for (uint32_t j = 0; row < a.rows; row += step, ++j) {
    bulk::wait(&landed, j & 1u);
    float v[ITEMS * gpu::io<In>::kVec];
    gpu::load_items<In, ITEMS, BLOCK>(reinterpret_cast<const In*>(stage), cs.n, lane, v, true,
                                      core::neg_infinity<float>());
    __syncthreads();  // every thread holds its values: the stage takes the next row
    if (threadIdx.x == 0 && row + step < a.rows) {
      bulk::fence_before_copy();
      stage_ce_slice<In>(a, row + step, cs.col0, cs.n, stage, &landed);
    }
    cluster_ce_row<In, WARP, ITEMS, BLOCK>(a, row, j, cs, lane, v, sh);
  }
#endif
}

// Rows longer than the clusters hold in registers, fewer than the device has multiprocessors: a
// cluster per row (walking rows c, c + clusters, ...), each block's slice read twice: its
// statistics (gpu::block_logit_stats), the cluster's merge, then the gradient
// (gpu::write_dlogits, reading the slice again, mostly from L2). grid.x = clusters * K, cluster
// (K, 1, 1); chunk: columns per slice (a multiple of the vector width); stage WHOLE. In place: a
// block writes only its own slice, each element by the thread that read it, after the merge
// (every block has read its slice and the target's logit by then).
template <typename In, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 1024 / BLOCK) cluster_cross_entropy_reread_kernel(gpu::CrossEntropyArgs a, int64_t chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using CE = core::ops::CrossEntropy;
  __shared__ ClusterCeShared<WARP, BLOCK> sh;
  __shared__ core::LogitStats<double> scratch[BLOCK / WARP];
  const ClusterSlice cs = open_cluster_slice(a, chunk, sh);
  const int64_t clusters = gridDim.x / cs.K;
  const bool sum_x = a.param[0] > 0.0;  // label smoothing's
  bulk::cluster_wait();  // every block's barriers are ready for the stores
  uint32_t j = 0;
  for (int64_t row = blockIdx.x / cs.K; row < a.rows; row += clusters, ++j) {
    const In* x = static_cast<const In*>(a.x) + row * a.x_stride;
    const int64_t t = a.targets[row];
    if (threadIdx.x == 0) expect_slice_stats(j, cs, sh);
    CE::SliceStats mine{gpu::block_logit_stats<In, WARP, BLOCK>(x + cs.col0, cs.n, a.x_vec != 0, sum_x, scratch),
                        0.0f, 0};
    if (threadIdx.x < cs.K && gpu::slice_holds_target(a, t, cs.col0, cs.n)) {
      mine.target_logit = gpu::io<In>::load1(x + t);
      mine.holds_target = 1;
    }
    cluster_merge<WARP, BLOCK>(mine, j, cs, sh);
    if (a.dx) gpu::write_dlogits_as<In, BLOCK>(a, x, row, cs.col0, cs.n, cs.col0, gpu::ce_row_coefs(a, t, sh.merged));
    if (cs.rank == 0 && threadIdx.x == 0) gpu::ce_row_loss(a, row, t, sh.merged);
  }
#endif
}

}  // namespace cuda
}  // namespace onorm
