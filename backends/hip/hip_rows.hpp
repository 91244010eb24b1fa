// The HIP launcher of the row plan (row_plan.hpp): hipLaunchKernelGGL of the shared row kernels
// (backends/gpu/row_kernels.hpp) for warp width W, and the split-row workspace. Included by
// the files generated from hip_rows.hip.in, one (width, input dtype) instantiation each.
#pragma once

#include <hip/hip_runtime.h>

#include <cstdio>

#include "hip_check.hpp"
#include "hip_context.hpp"
#include "row_plan.hpp"

namespace onorm {
namespace hip {

class HipLauncher {
 public:
  HipLauncher(HipContext& ctx, hipStream_t stream, char* err, size_t err_len)
      : ctx_(ctx), stream_(stream), err_(err), err_len_(err_len) {}

  template <int FAM, typename In, int W, int TPR, int ITEMS, int BLOCK, int RPG>
  onorm_status rows(unsigned grid, const gpu::RowArgs& a) {
    hipLaunchKernelGGL((gpu::rows_kernel<FAM, In, W, TPR, ITEMS, BLOCK, RPG>), dim3(grid), dim3(BLOCK), 0, stream_, a);
    return check("rows_kernel launch");
  }
  template <int OP, typename In, int W, int ITEMS, int BLOCK, int MODE>
  onorm_status split(unsigned gx, unsigned gy, const gpu::RowArgs& a, const gpu::SplitArgs& s) {
    hipLaunchKernelGGL((gpu::split_chunk_kernel<OP, In, W, ITEMS, BLOCK, MODE>), dim3(gx, gy), dim3(BLOCK), 0,
                       stream_, a, s);
    return check(MODE == gpu::kModeStats ? "split stats launch" : "split finish launch");
  }
  template <int OP, typename In, int W, int BLOCK>
  onorm_status norm_stats(unsigned gx, const gpu::RowArgs& a, const gpu::SplitArgs& s) {
    hipLaunchKernelGGL((gpu::norm_stats_kernel<OP, In, W, BLOCK>), dim3(gx), dim3(BLOCK), 0, stream_, a, s);
    return check("split norm statistics launch");
  }
  template <int OP, int W, int BLOCK>
  onorm_status merge(unsigned gx, unsigned gy, const void* in, void* out, int64_t count) {
    hipLaunchKernelGGL((gpu::merge_states_kernel<OP, W, BLOCK>), dim3(gx, gy), dim3(BLOCK), 0, stream_, in, out,
                       count);
    return check("split merge launch");
  }
  // The workspace, at least `bytes`, ordered after its previous user. Call with ctx.mu held.
  void* workspace(size_t bytes, onorm_status& status) {
    status = grow(bytes);
    if (status == ONORM_OK && ctx_.ws_event_recorded) status = try_hip(hipStreamWaitEvent(stream_, ctx_.ws_event, 0), "hipStreamWaitEvent");
    used_ws_ = status == ONORM_OK;
    return ctx_.ws;
  }
  int64_t l2_bytes() const { return ctx_.device.l2_bytes > 0 ? ctx_.device.l2_bytes : (int64_t(4) << 20); }

  // Records the workspace's release after the last launch that used it.
  onorm_status finish() {
    if (!used_ws_) return ONORM_OK;
    onorm_status s = try_hip(hipEventRecord(ctx_.ws_event, stream_), "hipEventRecord");
    if (s == ONORM_OK) ctx_.ws_event_recorded = true;
    return s;
  }

 private:
  onorm_status try_hip(hipError_t e, const char* what) {
    return e == hipSuccess ? ONORM_OK : device_error(e, what, err_, err_len_);
  }
  onorm_status check(const char* what) { return try_hip(hipGetLastError(), what); }
  onorm_status grow(size_t bytes) {
    if (bytes <= ctx_.ws_bytes) return ONORM_OK;
    size_t want = ctx_.ws_bytes * 2;
    if (want < bytes) want = bytes;
    if (want < (size_t(1) << 16)) want = size_t(1) << 16;
    if (ctx_.ws) {
      // Earlier launches may still use the old buffer.
      if (ctx_.ws_event_recorded) {
        if (onorm_status s = try_hip(hipEventSynchronize(ctx_.ws_event), "hipEventSynchronize")) return s;
      }
      if (onorm_status s = try_hip(hipFree(ctx_.ws), "hipFree(workspace)")) return s;
      ctx_.ws = nullptr;
      ctx_.ws_bytes = 0;
    }
    if (onorm_status s = try_hip(hipMalloc(&ctx_.ws, want), "hipMalloc(workspace)")) return s;
    ctx_.ws_bytes = want;
    return ONORM_OK;
  }

  HipContext& ctx_;
  hipStream_t stream_;
  char* err_;
  size_t err_len_;
  bool used_ws_ = false;
};

template <int W, typename In>
onorm_status run_rows(HipContext& ctx, const onorm_request& request, char* err, size_t err_len) {
  // One request at a time per context: the stream and the workspace are shared state.
  std::lock_guard<std::mutex> lock(ctx.mu);
  HipLauncher launcher(ctx, ctx.stream, err, err_len);
  const onorm_status s = plan_request<In, W>(row_args(request), launcher);
  const onorm_status f = launcher.finish();
  return s != ONORM_OK ? s : f;
}

}  // namespace hip
}  // namespace onorm
