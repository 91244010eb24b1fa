// The norms' backward (core/ops/norm_backward.hpp) for rows longer than a block holds in registers
// (norm_backward_registers.hpp), split over a thread-block cluster (sm_90+; HIP and older devices
// take the two-read kernels of norm_backward.hpp). The C blocks of a cluster own a slice of the
// columns each and walk a run of rows together:
//   loads        the copy engine lands a block's slices of x and dy in shared memory up to two
//                rows ahead (`stages` buffers: rows j + 1, j + 2 arrive while row j is reduced
//                and written; a block waits on its slowest peer every row, and the rows in
//                flight absorb that), so each is read from memory once;
//   row sums     float per thread, a block tree, then every block's pair delivered to every
//                block (Mailbox) and added in rank order by one fixed tree: every block gets the
//                same bits, and the shape depends on the width only (a row's dx is the same in
//                any batch);
//   column sums  dgamma / dbeta of the slice in float registers over the cluster's run of at
//                most kBackwardChainRows rows, one partial row per cluster, added in cluster
//                order by column_merge_kernel (no atomics: the same call gives the same bits).
#pragma once

#include <cooperative_groups.h>

#include "bulk_copy.cuh"
#include "cluster_rows.cuh"
#include "norm_backward_args.hpp"
#include "onlinenorm/core/ops/norm_backward.hpp"
#include "reduce.hpp"

namespace onorm {
namespace cuda {

// Shared memory of a block: `stages` buffers of x's and dy's slices, `chunk` elements each.
template <typename T>
constexpr size_t backward_stage_bytes(int64_t chunk, int stages) {
  return size_t(2 * stages * chunk) * sizeof(T);
}
constexpr int kBackwardMaxStages = 3;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// Thread 0: the copy of `row`'s slices of x and dy into buffer b, landing on `landed`.
template <typename T>
__device__ __forceinline__ void stage_backward_row(const gpu::NormBackwardArgs& a, int64_t row, int64_t col0, int n,
                                                   unsigned char* buffer, size_t slice_bytes, uint64_t* landed) {
  const uint32_t bytes = static_cast<uint32_t>(n * int64_t(sizeof(T)));
  bulk::arrive_expect(landed, 2 * bytes);
  if (!bytes) return;
  bulk::copy(buffer, static_cast<const T*>(a.x) + row * a.sx + col0, bytes, landed);
  bulk::copy(buffer + slice_bytes, static_cast<const T*>(a.dy) + row * a.sdy + col0, bytes, landed);
}
#endif

// grid.x = clusters * C, cluster (C, 1, 1); cluster c takes rows [c, c + 1) * a.rows_per_group;
// block rank r the columns [r, r + 1) * chunk (a multiple of the vector width); dynamic shared
// memory: backward_stage_bytes<T>(chunk, stages), 1 <= stages <= kBackwardMaxStages (one: the
// next row is asked for once this one is written). Rows of one dtype, every row 16-byte aligned.
template <typename Op, typename T, int WARP, int ITEMS, int BLOCK>
__global__ void __launch_bounds__(BLOCK, (BLOCK <= 256 ? 2 : 1))
    cluster_norm_backward_kernel(gpu::NormBackwardArgs a, int chunk, int stages) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  using Pair = gpu::Vals<float, 2>;
  using Sums = typename Op::template Sums<float>;
  constexpr int V = gpu::Elems<T>::kVec, E = ITEMS * V, K = Op::kColOuts;
  __shared__ Pair scratch[BLOCK / WARP];
  __shared__ Mailbox<Pair> mail;
  __shared__ Pair row_sums;
  __shared__ uint64_t landed[kBackwardMaxStages];
  ONORM_DYNAMIC_SMEM(stage);
  const cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const int C = static_cast<int>(cluster.num_blocks());
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t r0 = static_cast<int64_t>(blockIdx.x / C) * a.rows_per_group;
  const int64_t r1 = r0 + a.rows_per_group < a.rows ? r0 + a.rows_per_group : a.rows;
  const int64_t col0 = static_cast<int64_t>(rank) * chunk;
  const int n = a.cols - col0 <= 0 ? 0 : a.cols - col0 < chunk ? static_cast<int>(a.cols - col0) : chunk;
  const size_t slice_bytes = size_t(chunk) * sizeof(T);
  // A thread's columns: vector i starts at (tid + i * BLOCK) * V within the slice.
  float scale[E], col[E][K];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const int j = (tid + i * BLOCK) * V + e;
      scale[i * V + e] = j < n ? gpu::scale_at<Op>(a, col0 + j) : 0.0f;
#pragma unroll
      for (int k = 0; k < K; ++k) col[i * V + e][k] = 0.0f;
    }
  if (tid == 0) {
    for (int b = 0; b < stages; ++b) bulk::init(&landed[b]);
    for (int b = 0; b < stages && r0 + b < r1; ++b)
      stage_backward_row<T>(a, r0 + b, col0, n, stage + 2 * b * slice_bytes, slice_bytes, &landed[b]);
  }
  mailbox_open(mail);
  __syncthreads();       // the stage's barriers are initialized
  bulk::cluster_wait();  // every block's mailbox is ready for the stores
  for (int64_t row = r0; row < r1; ++row) {
    const uint32_t j = static_cast<uint32_t>(row - r0), set = j & 1u, b = j % stages, use = j / stages;
    const auto* xs = reinterpret_cast<const gpu::shim::Vec16*>(stage + 2 * b * slice_bytes);
    const auto* dys = reinterpret_cast<const gpu::shim::Vec16*>(stage + (2 * b + 1) * slice_bytes);
    if (tid == 0) bulk::arrive_expect(&mail.full[set], static_cast<uint32_t>(C * sizeof(Pair)));
    const auto rv = Op::template row<float>(a.row_in, row);
    bulk::wait(&landed[b], use & 1u);
    Sums s{0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      if ((tid + i * BLOCK) * V >= n) continue;
      float x[V], dy[V];
      gpu::io<T>::unpack(xs[tid + i * BLOCK], x);
      gpu::io<T>::unpack(dys[tid + i * BLOCK], dy);
#pragma unroll
      for (int e = 0; e < V; ++e) Op::accumulate(s, rv, x[e], dy[e], scale[i * V + e]);
    }
    const Pair mine = gpu::block_allreduce<WARP, BLOCK>(Pair{{s.g, s.gc}}, scratch, gpu::AddOp{});
    if (tid < C)  // thread t delivers this block's sums to block t
      bulk::store_to_peer(bulk::peer_address(&mail.slot[set][rank], static_cast<unsigned>(tid)),
                          reinterpret_cast<const uint32_t*>(&mine), 2,
                          bulk::peer_address(&mail.full[set], static_cast<unsigned>(tid)));
    if (tid < WARP) {
      bulk::wait(&mail.full[set], (j >> 1) & 1u);
      Pair t = tid < C ? mail.slot[set][tid] : Pair{{0.0f, 0.0f}};
      t = gpu::group_allreduce<WARP>(t, tid, gpu::AddOp{});
      if (tid == 0) row_sums = t;
    }
    __syncthreads();  // row_sums visible; the slots are read before the next row's stores
    const auto c = Op::template coefs<float>(Sums{row_sums.v[0], row_sums.v[1]}, rv, a.cols);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int j = (tid + i * BLOCK) * V;
      if (j >= n) continue;
      float x[V], dy[V], out[V];
      gpu::io<T>::unpack(xs[tid + i * BLOCK], x);
      gpu::io<T>::unpack(dys[tid + i * BLOCK], dy);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const float d = a.dres ? gpu::load_dtype(a.dres, a.drt, row * a.sdres + col0 + j + e) : 0.0f;
        out[e] = Op::dx(c, x[e], dy[e], scale[i * V + e], d);
        Op::column(col[i * V + e], rv, x[e], dy[e]);
      }
      gpu::Elems<T>::store_vec(a.dx, row * a.sdx + col0 + j, out);
    }
    __syncthreads();  // every thread is done with buffer b: it takes row + stages
    if (tid == 0 && row + stages < r1) {
      bulk::fence_before_copy();
      stage_backward_row<T>(a, row + stages, col0, n, stage + 2 * b * slice_bytes, slice_bytes, &landed[b]);
    }
  }
  if (!a.col_out[0] && !a.col_out[1]) return;
  float* const partial = a.partial_f32 + static_cast<int64_t>(blockIdx.x / C) * K * a.cols;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const int j = (tid + i * BLOCK) * V + e;
      if (j >= n) continue;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        if (a.direct) {
          if (a.col_out[k]) a.col_out[k][col0 + j] = col[i * V + e][k];
        } else {
          partial[k * a.cols + col0 + j] = col[i * V + e][k];
        }
      }
    }
#endif
}

}  // namespace cuda
}  // namespace onorm
