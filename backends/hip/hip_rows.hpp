// The HIP runtime calls of the shared launcher (gpu/launcher.hpp): errors, the workspace's
// memory and events. No clusters, no cooperative schedule (its forward progress on AMD GPUs
// could not be checked): the planner takes registers, then two reads. Included by the files
// generated from hip_rows.hip.in.
#pragma once

#include <hip/hip_runtime.h>

#include "gpu/launcher.hpp"
#include "gpu/runtime_calls.hpp"
#include "hip_check.hpp"
#include "hip_context.hpp"

namespace onorm {
namespace hip {

class HipRuntime {
 public:
  ONORM_GPU_RUNTIME_CALLS(hip, HipRuntime, HipContext, device_error, false, false)
};

template <int W, typename Op, typename In>
onorm_status run_rows(HipContext& ctx, const onorm_request& q, char* err, size_t err_len) {
  HipRuntime rt(ctx, err, err_len);
  return gpu::launch_request<Op, In, W>(rt, q, err, err_len,
                                       [&](const onorm_request& p) { return run_plan<W>(ctx, p, err, err_len); });
}

}  // namespace hip
}  // namespace onorm
