// The CUDA runtime calls of the shared launcher (gpu/launcher.hpp): errors, the workspace's
// memory and events, and what only CUDA has: the staged kernel's occupancy and cooperative
// launch, thread-block clusters (cluster_rows.cuh, cluster_norm_backward.cuh).
#pragma once

#include "cluster_cross_entropy.cuh"
#include "cluster_norm_backward.cuh"
#include "cluster_rows.cuh"
#include "cuda_context.hpp"
#include "launcher.hpp"
#include "runtime_calls.hpp"

namespace onorm {
namespace cuda {

constexpr int kWarp = 32;  // NVIDIA warp width; the templates take it as a parameter.

class CudaRuntime {
 public:
  ONORM_GPU_RUNTIME_CALLS(cuda, CudaRuntime, CudaContext, cuda_fail, true, true)

  template <typename R, int W, int BLOCK>
  int staged_per_sm(size_t smem, onorm_status& status) {
    auto kern = gpu::staged_kernel<R, W, BLOCK>;
    status = allow_dynamic_smem(kern, smem);
    if (status != ONORM_OK) return 0;
    int per_sm = 0;
    status = try_call(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, BLOCK, smem),
                      "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    return per_sm;
  }
  template <typename R, int W, int BLOCK>
  onorm_status staged(unsigned grid, size_t smem, bool coop, const gpu::RowArgs& a, const gpu::SplitArgs& s) {
    if (!coop) {
      gpu::staged_kernel<R, W, BLOCK><<<grid, BLOCK, smem, ctx_.stream>>>(a, s);
      return check("staged launch");
    }
    gpu::RowArgs args = a;
    gpu::SplitArgs split = s;
    void* params[] = {&args, &split};
    return try_call(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(gpu::staged_kernel<R, W, BLOCK>),
                                                dim3(grid), dim3(BLOCK), params, smem, ctx_.stream),
                    "cooperative staged launch");
  }

  template <typename R, int W, int ITEMS, int BLOCK>
  bool cluster_fits(int K, onorm_status& status) {
    if (K <= 8) return true;  // the portable cluster size
    return resident_clusters(cluster_rows_kernel<R, W, ITEMS, BLOCK>, K, BLOCK, 0, status) > 0;
  }
  template <typename R, int W, int ITEMS, int BLOCK>
  onorm_status cluster(unsigned grid, int K, const gpu::RowArgs& a, const gpu::SplitArgs& s) {
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = config(grid, K, BLOCK, attr);
    return try_call(cudaLaunchKernelEx(&cfg, cluster_rows_kernel<R, W, ITEMS, BLOCK>, a, s), "cluster launch");
  }
  // cluster_stream_kernel on as many clusters as are resident at once (at most one per row);
  // false where none fits.
  template <typename R, int W, int ITEMS, int BLOCK>
  bool cluster_stream(int K, const gpu::RowArgs& a, const gpu::SplitArgs& s, onorm_status& status) {
    const size_t smem = stream_smem_bytes<R>(s.chunk);
    if (int64_t(smem) > caps().smem_max) return false;
    return launch_resident(cluster_stream_kernel<R, W, ITEMS, BLOCK>, K, BLOCK, smem, a.rows, "cluster stream launch",
                           status, a, s);
  }

  // Cross-entropy over clusters of K blocks, slices of `chunk` columns (cluster_cross_entropy.cuh),
  // a cluster per row; false where none fits.
  template <typename In, int W, int ITEMS, int BLOCK>
  bool cross_entropy_cluster(int K, int64_t chunk, const gpu::CrossEntropyArgs& a, onorm_status& status) {
    auto kern = cluster_cross_entropy_kernel<In, W, ITEMS, BLOCK>;
    if (K > 8 && resident_clusters(kern, K, BLOCK, 0, status) < 1) return false;
    const int64_t clusters = std::min<int64_t>(a.rows, gpu::max_blocks<BLOCK>() / K);
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = config(unsigned(clusters * K), K, BLOCK, attr);
    status = try_call(cudaLaunchKernelEx(&cfg, kern, a, chunk), "cross entropy cluster launch");
    return true;
  }

  // The same on as many resident clusters as fit (at most one per row), each walking rows through
  // a shared-memory stage of `chunk` elements; false where none fits.
  template <typename In, int W, int ITEMS, int BLOCK>
  bool cross_entropy_cluster_stream(int K, int64_t chunk, const gpu::CrossEntropyArgs& a, onorm_status& status) {
    return launch_resident(cluster_cross_entropy_stream_kernel<In, W, ITEMS, BLOCK>, K, BLOCK, chunk * sizeof(In),
                           a.rows, "cross entropy cluster stream launch", status, a, chunk);
  }

  // Cross-entropy over clusters of K blocks reading their slices of `chunk` columns twice
  // (cluster_cross_entropy_reread_kernel), on as many resident clusters as fit (at most one per
  // row); false where none fits.
  template <typename In, int W, int BLOCK>
  bool cross_entropy_cluster_reread(int K, int64_t chunk, const gpu::CrossEntropyArgs& a, onorm_status& status) {
    return launch_resident(cluster_cross_entropy_reread_kernel<In, W, BLOCK>, K, BLOCK, 0, a.rows,
                           "cross entropy cluster reread launch", status, a, chunk);
  }

  // The norms' backward over clusters of C blocks, slices of `chunk` columns
  // (cluster_norm_backward.cuh): the rows a block stages at once (the most that fit) and how many
  // such clusters are resident at once (0: none fits), then the launch of `clusters` of them.
  template <typename Op, typename T, int W, int ITEMS, int BLOCK>
  int backward_clusters(int C, int chunk, int& stages, onorm_status& status) {
    auto kern = cluster_norm_backward_kernel<Op, T, W, ITEMS, BLOCK>;
    // Three rows in flight measured faster for f32 slices, two for 16-bit ones (bench/RESULTS.md).
    stages = caps().backward_stages > 0 ? caps().backward_stages : sizeof(T) == 4 ? 3 : 2;
    while (stages > 1 && int64_t(backward_stage_bytes<T>(chunk, stages)) > caps().smem_max) --stages;
    const size_t smem = backward_stage_bytes<T>(chunk, stages);
    if (int64_t(smem) > caps().smem_max) return 0;
    return resident_clusters(kern, C, BLOCK, smem, status);
  }
  template <typename Op, typename T, int W, int ITEMS, int BLOCK>
  onorm_status backward_cluster(unsigned clusters, int C, int chunk, int stages, const gpu::NormBackwardArgs& a) {
    cudaLaunchAttribute attr[1];
    cudaLaunchConfig_t cfg = config(clusters * unsigned(C), C, BLOCK, attr);
    cfg.dynamicSmemBytes = backward_stage_bytes<T>(chunk, stages);
    return try_call(cudaLaunchKernelEx(&cfg, cluster_norm_backward_kernel<Op, T, W, ITEMS, BLOCK>, a, chunk, stages),
                    "norm backward cluster launch");
  }

 private:
  // `kern` with `args` on as many clusters of K blocks of `block` threads (`smem` bytes of dynamic
  // shared memory each) as the device holds at once, at most `most`; false where none fits.
  template <typename... Params, typename... Args>
  bool launch_resident(void (*kern)(Params...), int K, int block, size_t smem, int64_t most, const char* what,
                       onorm_status& status, const Args&... args) {
    const int clusters = resident_clusters(kern, K, block, smem, status);
    if (clusters < 1) return false;
    cudaLaunchAttribute attr[1];
    cudaLaunchConfig_t cfg = config(unsigned(std::min<int64_t>(clusters, most) * K), K, block, attr);
    cfg.dynamicSmemBytes = smem;
    status = try_call(cudaLaunchKernelEx(&cfg, kern, args...), what);
    return true;
  }
  // A block's shared memory past 48 KB, static and dynamic together, must be allowed for the
  // kernel first: without it the occupancy queries report that nothing fits (48 KB of stages
  // beside a kernel's few hundred static bytes included).
  template <typename Kernel>
  onorm_status allow_dynamic_smem(Kernel kern, size_t smem) {
    cudaFuncAttributes fa{};
    if (onorm_status s = try_call(cudaFuncGetAttributes(&fa, kern), "cudaFuncGetAttributes")) return s;
    if (smem + fa.sharedSizeBytes <= 48 * 1024) return ONORM_OK;
    return try_call(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
                    "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  }
  // Clusters of K blocks of `block` threads with `smem` bytes of dynamic shared memory each that
  // the device holds at once (kernel attributes set as they need); 0 where none fits, which is
  // not an error of the request (the planner takes another placement) unless status says so.
  template <typename Kernel>
  int resident_clusters(Kernel kern, int K, int block, size_t smem, onorm_status& status) {
    status = allow_dynamic_smem(kern, smem);
    if (status != ONORM_OK) return 0;
    if (K > 8) {
      status = try_call(cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
                        "cudaFuncSetAttribute(NonPortableClusterSizeAllowed)");
      if (status != ONORM_OK) return 0;
    }
    cudaLaunchAttribute attr[1];
    cudaLaunchConfig_t cfg = config(unsigned(K), K, block, attr);
    cfg.dynamicSmemBytes = smem;
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, kern, &cfg) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return clusters;
  }
  cudaLaunchConfig_t config(unsigned grid, int K, int block, cudaLaunchAttribute* attr) const {
    cudaLaunchConfig_t cfg{};
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = unsigned(K);
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(block);
    cfg.stream = ctx_.stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
  }
};

template <typename Op, typename In>
onorm_status run_rows(CudaContext& ctx, const onorm_request& q, char* err, size_t err_len) {
  CudaRuntime rt(ctx, err, err_len);
  return gpu::launch_request<Op, In, kWarp>(rt, q, err, err_len,
                                           [&](const onorm_request& p) { return run_plan(ctx, p, err, err_len); });
}

}  // namespace cuda
}  // namespace onorm
