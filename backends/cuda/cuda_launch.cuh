// Launch selection for one input dtype; included by rows_f32.cu, rows_f16.cu, rows_bf16.cu
// (one translation unit per input dtype keeps compile units small and parallel).
//
// Regimes by row length (VEC = 16 / sizeof(In) elements per vector):
//   cols <= 1024 (f32) / 2048 (16-bit): a group of 4..32 lanes per row, 1..4 rows per group,
//                  many rows per block, rows in registers;
//   cols <= reg_max_cols (f32 16384 / 16-bit 4096; ONLINENORM_TUNE=reg_cols=N overrides):
//                  a block per row, the row in registers;
//   f32 16384 / 16-bit 32768 <= cols <= 16 slices (f32 262144, 16-bit 131072; sm_90+):
//                  cluster_rows_kernel, the row split over a thread-block cluster of K <= 16
//                  blocks, in registers, states merged through distributed shared memory;
//   longer:        staged_kernel: the row (or chunks of staged_chunk_bytes) in shared memory,
//                  a persistent grid with the next chunk's copy in flight; K > 1 chunks per
//                  row merge across a co-resident group (cooperative launch). Rows whose
//                  chunks exceed the co-resident grid take the two-read schedule in row
//                  batches sized to half the L2.
#pragma once

#include <algorithm>

#include "cluster_rows.cuh"
#include "cuda_context.hpp"
#include "register_shapes.hpp"

namespace onorm {
namespace cuda {

using gpu::RowArgs;
using gpu::SplitArgs;

constexpr int kWarp = 32;  // NVIDIA warp width; the templates take it as a parameter.
constexpr int kSplitBlock = 512;
constexpr int kStagedBlock = 256;

template <typename In>
struct SplitShape {
  static constexpr int kItems = gpu::io<In>::kVec == 4 ? 8 : 4;  // 32 floats per thread
  static constexpr int64_t kChunk = int64_t(kSplitBlock) * kItems * gpu::io<In>::kVec;
};

inline onorm_status check_launch(const char* what, char* err, size_t err_len) {
  ONORM_CUDA_TRY(cudaGetLastError(), what);
  return ONORM_OK;
}

// Launches rows_kernel over rows [0, a.rows) in pieces of at most 2^31 - 1 blocks.
template <int FAM, typename In, int TPR, int ITEMS, int BLOCK, int RPG>
onorm_status launch_reg(const RowArgs& a0, cudaStream_t st, char* err, size_t err_len) {
  constexpr int64_t kRpb = BLOCK / TPR * RPG;
  constexpr int64_t kMaxRows = int64_t(0x7fffffff) * kRpb;
  for (int64_t r0 = 0; r0 < a0.rows; r0 += kMaxRows) {
    const RowArgs a = gpu::rows_from<In>(a0, r0, std::min(kMaxRows, a0.rows - r0));
    const unsigned grid = static_cast<unsigned>((a.rows + kRpb - 1) / kRpb);
    gpu::rows_kernel<FAM, In, kWarp, TPR, ITEMS, BLOCK, RPG><<<grid, BLOCK, 0, st>>>(a);
    if (onorm_status s = check_launch("rows_kernel launch", err, err_len)) return s;
  }
  return ONORM_OK;
}

// Short rows on NVIDIA: half the lanes per row and twice the vectors per thread of the shared
// lists (fewer shuffle levels and more bytes in flight per thread: f32 64-128 columns 82-88%
// -> 93-98% of copy, bf16 64-128 63-76% -> 73-88% on an H200; bench/cuda/NOTES.md v5).
// ONLINENORM_TUNE=short_wide=0 takes the shared lists alone.
#define ONORM_CUDA_WIDE_SHAPES_VEC4(TRY) \
  TRY(4, 2, 256, 1)     /* 32 */        \
  TRY(8, 2, 256, 1)     /* 64 */        \
  TRY(16, 2, 256, 1)    /* 128 */       \
  TRY(16, 4, 256, 1)    /* 256 */
#define ONORM_CUDA_WIDE_SHAPES_VEC8(TRY) \
  TRY(4, 1, 256, 1)     /* 32 */        \
  TRY(4, 2, 256, 1)     /* 64 */        \
  TRY(8, 2, 256, 1)     /* 128 */       \
  TRY(16, 2, 256, 1)    /* 256 */

template <int FAM, typename In>
bool launch_registers(const CudaContext& ctx, const RowArgs& a, cudaStream_t st, char* err, size_t err_len,
                      onorm_status& status) {
  constexpr int V = gpu::io<In>::kVec;
  const int64_t c = a.cols;
  if (c > (V == 4 ? ctx.info.reg_max_cols_f32 : ctx.info.reg_max_cols_16)) return false;
#define ONORM_TRY_CFG(TPR, ITEMS, BLOCK, RPG)                                              \
  if (c <= int64_t(TPR) * ITEMS * V) {                                                     \
    status = launch_reg<FAM, In, TPR, ITEMS, BLOCK, RPG>(a, st, err, err_len);             \
    return true;                                                                           \
  }
  // (threads per row, vectors per thread, block, rows per group): gpu/register_shapes.hpp.
  if constexpr (V == 4) {
    if (ctx.info.short_wide) {
      ONORM_CUDA_WIDE_SHAPES_VEC4(ONORM_TRY_CFG)
    }
    ONORM_GPU_W32_SHAPES_VEC4(ONORM_TRY_CFG)
  } else {
    if (ctx.info.short_wide) {
      ONORM_CUDA_WIDE_SHAPES_VEC8(ONORM_TRY_CFG)
    }
    ONORM_GPU_W32_SHAPES_VEC8(ONORM_TRY_CFG)
  }
#undef ONORM_TRY_CFG
  return false;
}

// Cluster regime: slices from small to large, (BLOCK threads, E elements per thread): 32
// elements (128 bytes of f32, 64 of bf16) per thread, then twice the threads. Measured on an
// H200 (bench/cuda/NOTES.md v5): 16 f32 elements per thread were slower from 16384 columns on,
// 64 per thread cost up to 200 registers, and 16-bit rows of 16 slices of 512 threads (262144
// columns) lost to the staged schedule, so 16-bit rows stop at 16 x 8192 columns.
struct ClusterTier {
  int block, elems;
};
template <typename In>
struct ClusterTiers {
  static constexpr int kCount = sizeof(In) == 4 ? 2 : 1;
  static constexpr ClusterTier kTier[2] = {ClusterTier{256, 32}, ClusterTier{512, 32}};
  static constexpr int64_t cols(int t) { return int64_t(kTier[t].block) * kTier[t].elems; }
};

template <int OP, typename In, int TIER>
onorm_status launch_cluster_tier(const RowArgs& a, int K, int prefetch_params, cudaStream_t st, char* err,
                                 size_t err_len, bool& launched) {
  constexpr int64_t V = gpu::io<In>::kVec;
  constexpr int kBlock = ClusterTiers<In>::kTier[TIER].block;
  constexpr int kItems = ClusterTiers<In>::kTier[TIER].elems / int(V);
  auto kern = cluster_rows_kernel<OP, In, kWarp, kItems, kBlock>;
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = unsigned(K);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.blockDim = dim3(kBlock);
  cfg.stream = st;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const int64_t max_rows = int64_t(0x7fffffff) / K;
  cfg.gridDim = dim3(unsigned(std::min(max_rows, a.rows) * K));
  if (K > 8) {  // beyond the portable cluster size: ask for it, and check that one fits
    ONORM_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
                   "cudaFuncSetAttribute(NonPortableClusterSizeAllowed)");
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, kern, &cfg) != cudaSuccess || clusters < 1) {
      cudaGetLastError();  // not an error of the request: the caller takes another regime
      launched = false;
      return ONORM_OK;
    }
  }
  launched = true;
  gpu::SplitArgs s{};
  s.chunks = K;
  s.chunk = ((a.cols + K - 1) / K + V - 1) / V * V;
  s.prefetch_params = prefetch_params;
  for (int64_t r0 = 0; r0 < a.rows; r0 += max_rows) {
    s.row0 = r0;
    cfg.gridDim = dim3(unsigned(std::min(max_rows, a.rows - r0) * K));
    ONORM_CUDA_TRY(cudaLaunchKernelEx(&cfg, kern, a, s), "cluster launch");
  }
  return ONORM_OK;
}

// Takes rows from cluster_min_cols (per input width) to 16 slices of the largest tier on
// devices with clusters: the smallest slice whose cluster size K fits cluster_max. (A slice is
// at most a vector longer than the row's share and holds >= 8192 columns: no block is empty.)
template <int OP, typename In>
bool launch_cluster(const CudaContext& ctx, const RowArgs& a, cudaStream_t st, char* err, size_t err_len,
                    onorm_status& status) {
  using T = ClusterTiers<In>;
  const int64_t min_cols = sizeof(In) == 4 ? ctx.info.cluster_min_cols_f32 : ctx.info.cluster_min_cols_16;
  if (!ctx.info.cluster || a.cols < min_cols) return false;
  for (int tier = std::min(ctx.info.cluster_min_tier, T::kCount - 1); tier < T::kCount; ++tier) {
    const int64_t K = (a.cols + T::cols(tier) - 1) / T::cols(tier);
    if (K > ctx.info.cluster_max) continue;
    bool launched = false;
    if (tier == 0) status = launch_cluster_tier<OP, In, 0>(a, int(K), ctx.info.cluster_prefetch, st, err, err_len, launched);
    else status = launch_cluster_tier<OP, In, T::kCount - 1>(a, int(K), ctx.info.cluster_prefetch, st, err, err_len, launched);
    if (status != ONORM_OK || launched) return true;
  }
  return false;
}

// Orders this launch after the previous workspace user (possibly on another stream).
inline onorm_status ws_acquire(CudaContext& ctx, cudaStream_t st, char* err, size_t err_len) {
  if (ctx.ws_event_recorded) ONORM_CUDA_TRY(cudaStreamWaitEvent(st, ctx.ws_event, 0), "cudaStreamWaitEvent");
  return ONORM_OK;
}
inline onorm_status ws_release(CudaContext& ctx, cudaStream_t st, char* err, size_t err_len) {
  ONORM_CUDA_TRY(cudaEventRecord(ctx.ws_event, st), "cudaEventRecord");
  ctx.ws_event_recorded = true;
  return ONORM_OK;
}

template <int OP, typename In>
onorm_status launch_split(CudaContext& ctx, const RowArgs& a, cudaStream_t st, char* err, size_t err_len) {
  using S = typename gpu::op_state<OP>::type;
  using Shape = SplitShape<In>;
  constexpr int kItems = Shape::kItems;
  const int64_t K = (a.cols + Shape::kChunk - 1) / Shape::kChunk;
  std::lock_guard<std::mutex> lock(ctx.mu);

  // Single read: the staged persistent kernel (a block per row, or K chunks per row merged
  // across a co-resident row group).
  if (!ctx.info.force_two_read) {
    constexpr int V = gpu::io<In>::kVec;
    const int64_t stage_max = ctx.info.staged_chunk_bytes / int64_t(sizeof(In));
    const int64_t chunk = a.cols <= stage_max ? a.cols : stage_max;
    const int64_t Ks = (a.cols + chunk - 1) / chunk;
    const int64_t alloc = (chunk + V - 1) / V * V;
    const int stages = Ks > 1 && ctx.info.pipelined ? 3 : 2;
    const int slots = stages == 3 ? 4 : 2;
    const size_t smem = size_t(stages * alloc) * sizeof(In);
    auto kern = gpu::staged_kernel<OP, In, kWarp, kStagedBlock>;
    if (smem > 48 * 1024)
      ONORM_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
                     "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
    int staged_per_sm = 0;
    ONORM_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&staged_per_sm, kern, kStagedBlock, smem),
                   "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    const int64_t resident = int64_t(staged_per_sm) * ctx.info.sms;
    if (staged_per_sm > 0 && (Ks == 1 || (ctx.info.coop && Ks <= resident))) {
      const int64_t groups = std::min<int64_t>(std::max<int64_t>(resident / Ks, 1), a.rows);
      const int64_t grid = groups * Ks;
      SplitArgs s{};
      s.chunk = chunk;
      s.chunks = Ks;
      s.groups = groups;
      s.chunk_alloc = alloc;
      s.stages = stages;
      RowArgs args = a;
      if (Ks == 1) {
        gpu::staged_kernel<OP, In, kWarp, kStagedBlock><<<unsigned(grid), kStagedBlock, smem, st>>>(args, s);
        return check_launch("staged launch", err, err_len);
      }
      if (onorm_status e = ws_acquire(ctx, st, err, err_len)) return e;
      // The state slots, then two barrier flags per block (gpu::coop_barrier).
      if (onorm_status e = ensure_workspace(ctx, st, size_t((slots + 2) * grid) * sizeof(gpu::Entry), err, err_len))
        return e;
      if (++ctx.epoch == 0) ++ctx.epoch;
      s.epoch = ctx.epoch;
      s.entries = ctx.ws;
      void* params[] = {&args, &s};
      ONORM_CUDA_TRY(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kern), dim3(unsigned(grid)),
                                                 dim3(kStagedBlock), params, smem, st),
                     "cooperative staged launch");
      return ws_release(ctx, st, err, err_len);
    }
  }
  if (onorm_status e = ws_acquire(ctx, st, err, err_len)) return e;

  // Two reads: chunk states, a fixed merge tree, then the finish; the batch fits half the L2.
  const int64_t row_bytes = a.cols * int64_t(sizeof(In));
  int64_t batch = std::max<int64_t>(1, (int64_t(ctx.info.l2_bytes) / 2) / row_bytes);
  batch = std::min<int64_t>({batch, a.rows, 65535});
  const int64_t level1 = (K + kSplitBlock - 1) / kSplitBlock;
  constexpr bool kNorm = OP == gpu::kOpLayerNorm || OP == gpu::kOpRmsNorm;
  const size_t buf0 = size_t(batch * K) * sizeof(S);
  const size_t buf1 = size_t(batch * level1) * sizeof(S);
  const size_t buf2 = kNorm ? size_t(batch) * sizeof(core::NormCoefs) : 0;
  if (onorm_status s = ensure_workspace(ctx, st, buf0 + buf1 + buf2, err, err_len)) return s;
  char* b0 = static_cast<char*>(ctx.ws);
  char* b1 = b0 + buf0;
  for (int64_t r0 = 0; r0 < a.rows; r0 += batch) {
    const int64_t nb = std::min(batch, a.rows - r0);
    SplitArgs s{};
    s.chunk = Shape::kChunk;
    s.chunks = K;
    s.row0 = r0;
    s.entries = b0;
    const dim3 grid{unsigned(K), unsigned(nb), 1u};
    gpu::split_chunk_kernel<OP, In, kWarp, kItems, kSplitBlock, gpu::kModeStats><<<grid, kSplitBlock, 0, st>>>(a, s);
    if (onorm_status e = check_launch("split stats launch", err, err_len)) return e;
    char* in = b0;
    char* out = b1;
    for (int64_t count = K; count > 1; count = (count + kSplitBlock - 1) / kSplitBlock) {
      const int64_t outs = (count + kSplitBlock - 1) / kSplitBlock;
      gpu::merge_states_kernel<OP, kWarp, kSplitBlock><<<dim3(unsigned(outs), unsigned(nb)), kSplitBlock, 0, st>>>(
          in, out, count);
      if (onorm_status e = check_launch("split merge launch", err, err_len)) return e;
      std::swap(in, out);
    }
    s.final_states = in;
    if constexpr (kNorm) {  // statistics before the finish writes (in place: row_kernels.hpp)
      s.norm_stats = b1 + buf1;
      gpu::norm_stats_kernel<OP, In, kWarp, kSplitBlock><<<unsigned(nb), kSplitBlock, 0, st>>>(a, s);
      if (onorm_status e = check_launch("split norm statistics launch", err, err_len)) return e;
    }
    gpu::split_chunk_kernel<OP, In, kWarp, kItems, kSplitBlock, gpu::kModeFinish><<<grid, kSplitBlock, 0, st>>>(a, s);
    if (onorm_status e = check_launch("split finish launch", err, err_len)) return e;
  }
  return ws_release(ctx, st, err, err_len);
}

template <typename In>
onorm_status launch_rows(CudaContext& ctx, const RowArgs& a, char* err, size_t err_len) {
  cudaStream_t st;
  {
    std::lock_guard<std::mutex> lock(ctx.mu);
    st = ctx.stream;
  }
  onorm_status status = ONORM_OK;
  bool taken = false;
  switch (a.op) {
    case gpu::kOpSoftmax: taken = launch_cluster<gpu::kOpSoftmax, In>(ctx, a, st, err, err_len, status); break;
    case gpu::kOpLogSoftmax: taken = launch_cluster<gpu::kOpLogSoftmax, In>(ctx, a, st, err, err_len, status); break;
    case gpu::kOpLayerNorm: taken = launch_cluster<gpu::kOpLayerNorm, In>(ctx, a, st, err, err_len, status); break;
    default: taken = launch_cluster<gpu::kOpRmsNorm, In>(ctx, a, st, err, err_len, status); break;
  }
  if (taken) return status;
  const bool softmax = a.op == gpu::kOpSoftmax || a.op == gpu::kOpLogSoftmax;
  if (softmax ? launch_registers<gpu::kFamSoftmax, In>(ctx, a, st, err, err_len, status)
              : launch_registers<gpu::kFamNorm, In>(ctx, a, st, err, err_len, status))
    return status;
  switch (a.op) {
    case gpu::kOpSoftmax: return launch_split<gpu::kOpSoftmax, In>(ctx, a, st, err, err_len);
    case gpu::kOpLogSoftmax: return launch_split<gpu::kOpLogSoftmax, In>(ctx, a, st, err, err_len);
    case gpu::kOpLayerNorm: return launch_split<gpu::kOpLayerNorm, In>(ctx, a, st, err, err_len);
    default: return launch_split<gpu::kOpRmsNorm, In>(ctx, a, st, err, err_len);
  }
}

}  // namespace cuda
}  // namespace onorm
