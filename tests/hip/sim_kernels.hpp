// What the emulator's launchers share (sim_launcher.hpp's SimLauncher, driver_ops_test.cpp's
// DriverLauncher): the warp width, the planner's capabilities, a poisoned workspace, and the
// kernels' launches on the emulator with their errors kept. Include after simt_device.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "simt_device.hpp"
#include "gpu/partial_rows.hpp"
#include "gpu/row_plan.hpp"

namespace onorm_sim_test {

class SimKernels {
 public:
  // l2_bytes: small, so that the two-read schedules run several row batches.
  SimKernels(int hardware_warp, int64_t l2_bytes) : warp_(hardware_warp) { caps_.l2_bytes = l2_bytes; }
  const onorm::gpu::PlanCaps& caps() const { return caps_; }
  // The planner's capabilities, for a test to change (a placement's bounds).
  onorm::gpu::PlanCaps& caps() { return caps_; }
  template <typename R, int W, int TPR, int ITEMS, int BLOCK, int STAGE>
  onorm_status stage_rows(unsigned grid, const onorm::gpu::RowArgs& a, const onorm::gpu::SplitArgs& s) {
    ++stage_rows_launches_;
    return run(grid, 1, BLOCK, [a, s] { onorm::gpu::stage_rows_kernel<R, W, TPR, ITEMS, BLOCK, STAGE>(a, s); });
  }
  int stage_rows_launches() const { return stage_rows_launches_; }
  void* workspace(size_t bytes, onorm_status& status) {
    workspace_.assign(bytes, 0xa5);  // poisoned: a state read before it is written shows
    status = ONORM_OK;
    return workspace_.data();
  }
  void* column_workspace(size_t bytes, onorm_status& status) {
    column_workspace_.assign(bytes, 0xa5);
    status = ONORM_OK;
    return column_workspace_.data();
  }
  onorm_status fold_columns(unsigned grid, const onorm::gpu::FoldArgs& f) {
    return run(grid, 1, onorm::gpu::kFoldBlock, [f] { onorm::gpu::fold_columns_kernel<onorm::gpu::kFoldBlock>(f); });
  }

 protected:
  template <typename F>
  onorm_status run(unsigned gx, unsigned gy, int block, F kernel) {
    const auto e = onorm_sim::launch(warp_, dim3(gx, gy), dim3(static_cast<unsigned>(block)), 0, kernel);
    errors_.insert(errors_.end(), e.begin(), e.end());
    return e.empty() ? ONORM_OK : ONORM_ERROR_DEVICE;
  }
  std::vector<std::string> errors_;

 private:
  int warp_;
  int stage_rows_launches_ = 0;
  onorm::gpu::PlanCaps caps_;
  std::vector<unsigned char> workspace_;
  std::vector<unsigned char> column_workspace_;
};

}  // namespace onorm_sim_test
