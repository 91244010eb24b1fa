// The CUDA backend's context, and the entry of the row kernels between the module table
// (cuda_module.cu) and the per-(op, input dtype) kernel files (cuda_rows.cu.in).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <mutex>
#include <string>

#include "backend_interface.h"
#include "row_plan.hpp"
#include "workspace.hpp"

namespace onorm {
namespace cuda {

struct CudaContext {
  int device = 0;
  std::string name;
  gpu::PlanCaps caps;
  std::mutex mu;                  // guards stream and workspaces
  cudaStream_t stream = nullptr;  // the legacy default stream until set
  gpu::Workspace ws;
  gpu::Workspace column_ws;        // folded column vectors (gpu/folded_columns.hpp)
  cudaEvent_t ws_event = nullptr;  // recorded after the workspaces' last user
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

// Runs a validated request of op Op whose first input's element type is In (instantiated by
// the files generated from cuda_rows.cu.in, one per pair). Call with ctx.mu held.
template <typename Op, typename In>
onorm_status run_rows(CudaContext& ctx, const onorm_request& q, char* err, size_t err_len);
// Runs a validated request of a column op (cuda_norm_backward.cu). Call with ctx.mu held.
onorm_status run_norm_backward(CudaContext& ctx, const onorm_request& q, char* err, size_t err_len);
// Runs a validated request of a driver op (cuda_cross_entropy.cu, cuda_softmax_topk.cu: top-k
// with k <= SoftmaxTopk::kGpuMaxK) or a merge of partial states (cuda_state_merge.cu). Call
// with ctx.mu held.
onorm_status run_cross_entropy(CudaContext& ctx, const onorm_request& q, char* err, size_t err_len);
onorm_status run_softmax_topk(CudaContext& ctx, const onorm_request& q, char* err, size_t err_len);
onorm_status run_state_merge(CudaContext& ctx, const onorm_request& q, char* err, size_t err_len);

// Runs a validated request of a row op (the norms' options included: gpu/norm_options.hpp; the
// stats and finish of partial states: gpu/partial_rows.hpp) through the row plan
// (cuda_module.cu: the row kernels are instantiated in their own files only).
onorm_status run_plan(CudaContext& ctx, const onorm_request& q, char* err, size_t err_len);

}  // namespace cuda
}  // namespace onorm
