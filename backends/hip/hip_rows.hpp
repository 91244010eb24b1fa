// The HIP runtime calls of the shared launcher (gpu/launcher.hpp): errors, the workspace's
// memory and events. No clusters, no cooperative schedule (its forward progress on AMD GPUs
// could not be checked): the planner takes registers, then two reads. Included by the files
// generated from hip_rows.hip.in.
#pragma once

#include <hip/hip_runtime.h>

#include "gpu/launcher.hpp"
#include "hip_check.hpp"
#include "hip_context.hpp"

namespace onorm {
namespace hip {

class HipRuntime {
 public:
  static constexpr bool kClusters = false;
  static constexpr bool kStaged = false;
  HipRuntime(HipContext& ctx, char* err, size_t err_len) : ctx_(ctx), err_(err), err_len_(err_len) {}

  const gpu::PlanCaps& caps() const { return ctx_.caps; }
  gpu::Workspace& workspace() { return ctx_.ws; }
  hipStream_t stream() const { return ctx_.stream; }
  onorm_status check(const char* what) { return try_hip(hipGetLastError(), what); }
  onorm_status wait_event() { return try_hip(hipEventSynchronize(ctx_.ws_event), "hipEventSynchronize"); }
  onorm_status free(void* p) { return try_hip(hipFree(p), "hipFree(workspace)"); }
  onorm_status malloc(void** p, size_t n) { return try_hip(hipMalloc(p, n), "hipMalloc(workspace)"); }
  onorm_status zero(void* p, size_t n) { return try_hip(hipMemsetAsync(p, 0, n, ctx_.stream), "hipMemsetAsync"); }
  onorm_status stream_wait_event() {
    return try_hip(hipStreamWaitEvent(ctx_.stream, ctx_.ws_event, 0), "hipStreamWaitEvent");
  }
  onorm_status record_event() { return try_hip(hipEventRecord(ctx_.ws_event, ctx_.stream), "hipEventRecord"); }

 private:
  onorm_status try_hip(hipError_t e, const char* what) {
    return e == hipSuccess ? ONORM_OK : device_error(e, what, err_, err_len_);
  }
  HipContext& ctx_;
  char* err_;
  size_t err_len_;
};

template <int W, typename Op, typename In>
onorm_status run_rows(HipContext& ctx, const onorm_request& q, char* err, size_t err_len) {
  HipRuntime rt(ctx, err, err_len);
  return gpu::launch_request<Op, In, W>(rt, q, err, err_len);
}

}  // namespace hip
}  // namespace onorm
