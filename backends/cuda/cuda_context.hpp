// The CUDA backend's context and the launcher interface between the module table
// (cuda_module.cu) and the per-input-dtype kernel files (rows_*.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <mutex>
#include <string>

#include "backend_interface.h"
#include "row_kernels.hpp"

namespace onorm {
namespace cuda {

struct DeviceInfo {
  int sms = 0;
  int l2_bytes = 0;
  int warp = 32;
  int coop = 0;  // cooperative launch supported
  // Tuning, from device properties with ONLINENORM_TUNE overrides (read at onorm_create):
  int64_t reg_max_cols_f32 = 16384;      // longest f32 row kept in registers
  int64_t reg_max_cols_16 = 4096;        // longest f16/bf16 row kept in registers
  int force_two_read = 0;                // long rows: skip the single-read schedule
  int pipelined = 0;                     // long rows: merge of round r-1 overlaps round r
  int64_t staged_chunk_bytes = 32768;    // one shared-memory stage of the staged kernel
  int cluster = 0;                       // thread-block clusters (compute capability >= 9.0)
  int64_t cluster_min_cols_f32 = 16384;  // shortest f32 row split over a cluster
  int64_t cluster_min_cols_16 = 32768;   // shortest f16/bf16 row split over a cluster
  int cluster_max = 16;                  // largest cluster (blocks per row)
  int cluster_min_tier = 0;              // smallest slice tried (cuda_launch.cuh ClusterTiers)
  int cluster_prefetch = 1;              // prefetch gamma / beta before the cluster merge
  int short_wide = 1;                    // short rows: fewer lanes per row, more vectors each
};

struct CudaContext {
  int device = 0;
  std::string name;
  DeviceInfo info;
  std::mutex mu;                    // guards stream, workspace and epoch
  cudaStream_t stream = nullptr;    // the legacy default stream until set
  // Workspace for split rows, grown as needed. Its users are ordered: every launch that
  // uses it waits for the event recorded after the previous one (also across streams).
  void* ws = nullptr;
  size_t ws_bytes = 0;
  uint32_t epoch = 0;               // coop flags' tag; never 0 when used
  cudaEvent_t ws_event = nullptr;
  bool ws_event_recorded = false;
};

// Formats "what: cudaGetErrorString" into err and maps the error to a status.
inline onorm_status cuda_fail(cudaError_t e, const char* what, char* err, size_t err_len) {
  std::snprintf(err, err_len, "cuda: %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
  return e == cudaErrorMemoryAllocation ? ONORM_ERROR_OUT_OF_MEMORY : ONORM_ERROR_DEVICE;
}

#define ONORM_CUDA_TRY(expr, what)                                  \
  do {                                                              \
    const cudaError_t onorm_e_ = (expr);                            \
    if (onorm_e_ != cudaSuccess) return cuda_fail(onorm_e_, what, err, err_len); \
  } while (0)

// Ensures the workspace holds `bytes` (zeroed when new). Call with ctx.mu held.
onorm_status ensure_workspace(CudaContext& ctx, cudaStream_t stream, size_t bytes, char* err, size_t err_len);

// Runs a validated request whose input dtype is In (float, core::f16_bits, core::bf16_bits).
template <typename In>
onorm_status launch_rows(CudaContext& ctx, const gpu::RowArgs& args, char* err, size_t err_len);

extern template onorm_status launch_rows<float>(CudaContext&, const gpu::RowArgs&, char*, size_t);
extern template onorm_status launch_rows<core::f16_bits>(CudaContext&, const gpu::RowArgs&, char*, size_t);
extern template onorm_status launch_rows<core::bf16_bits>(CudaContext&, const gpu::RowArgs&, char*, size_t);

}  // namespace cuda
}  // namespace onorm
