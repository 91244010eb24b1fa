// The HIP backend's context: what it knows about its device (read once from hipDeviceProp_t),
// its stream and the workspace of split rows; and the entry point of the row kernels, one
// instance per warp width.
#pragma once

#include <hip/hip_runtime.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "backend_interface.h"
#include "gpu/row_plan.hpp"
#include "gpu/workspace.hpp"

namespace onorm {
namespace hip {

struct HipDevice {
  int index = 0;
  int warp_size = 0;          // hipDeviceProp_t::warpSize: 64 on CDNA (gfx9), 32 on RDNA and NVIDIA
  int multiprocessors = 0;    // compute units / SMs
  int64_t l2_bytes = 0;
  int major = 0, minor = 0;   // compute capability on NVIDIA, gfx major/minor on AMD
  bool is_amd = false;
  char arch[64] = {0};        // "gfx90a", "gfx1030", ... or "sm_90"
};

struct HipContext {
  HipDevice device;
  std::string name;
  gpu::PlanCaps caps;             // no clusters, no cooperative schedule: registers, two reads
  std::mutex mu;                  // guards stream and workspaces
  hipStream_t stream = nullptr;   // nullptr: the device's null stream
  gpu::Workspace ws;
  gpu::Workspace column_ws;        // folded column vectors (gpu/folded_columns.hpp)
  hipEvent_t ws_event = nullptr;  // recorded after the workspaces' last user
};

// Runs a validated request of op Op whose first input's element type is In on the context's
// stream with the kernels instantiated for warp width W (generated from hip_rows.hip.in, one
// file per triple). Asynchronous; launch failures are reported. Call with ctx.mu held.
template <int W, typename Op, typename In>
onorm_status run_rows(HipContext& ctx, const onorm_request& request, char* err, size_t err_len);
// Runs a validated request of a column op (hip_norm_backward.hip). Call with ctx.mu held.
template <int W>
onorm_status run_norm_backward(HipContext& ctx, const onorm_request& request, char* err, size_t err_len);
// Runs a validated request of a driver op (hip_cross_entropy.hip, hip_softmax_topk.hip: top-k
// with k <= SoftmaxTopk::kGpuMaxK) or a merge of partial states (hip_state_merge.hip). Call
// with ctx.mu held.
template <int W>
onorm_status run_cross_entropy(HipContext& ctx, const onorm_request& request, char* err, size_t err_len);
template <int W>
onorm_status run_softmax_topk(HipContext& ctx, const onorm_request& request, char* err, size_t err_len);
onorm_status run_state_merge(HipContext& ctx, const onorm_request& request, char* err, size_t err_len);

// Runs a validated request of a row op (the norms' options included: gpu/norm_options.hpp; the
// stats and finish of partial states: gpu/partial_rows.hpp) through the row plan
// (hip_backend.hip: the row kernels are instantiated in their own files only).
template <int W>
onorm_status run_plan(HipContext& ctx, const onorm_request& q, char* err, size_t err_len);

}  // namespace hip
}  // namespace onorm
