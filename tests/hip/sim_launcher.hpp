// The emulator's launcher of the row plan (wave_rows_test.cpp), and the plan's units
// (gpu::plan_op per op, input type and warp width) on it, each compiled once in a translation
// unit of its own (generated from wave_rows_plan.cpp.in) so that they compile in parallel.
// Include after simt_device.hpp and gpu/row_plan.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "simt_device.hpp"
#include "gpu/row_plan.hpp"
#include "sim_kernels.hpp"

namespace onorm_sim_test {

// Launches the plan's kernels on the emulator; memory is host memory. The capabilities of the
// HIP backend: no clusters, no cooperative schedule (registers, then two reads).
class SimLauncher : public SimKernels {
 public:
  static constexpr bool kClusters = false;
  static constexpr bool kStaged = false;
  explicit SimLauncher(int hardware_warp) : SimKernels(hardware_warp, int64_t(1) << 20) {}

  template <typename R, int W, int TPR, int ITEMS, int BLOCK>
  onorm_status rows(unsigned grid, const onorm::gpu::RowArgs& a) {
    shapes_.push_back("rows_kernel<W" + std::to_string(W) + " TPR" + std::to_string(TPR) + " ITEMS" +
                      std::to_string(ITEMS) + " BLOCK" + std::to_string(BLOCK) + ">");
    return run(grid, 1, BLOCK, [a] { onorm::gpu::rows_kernel<R, W, TPR, ITEMS, BLOCK>(a); });
  }
  template <typename R, int W, int ITEMS, int BLOCK, int MODE>
  onorm_status split(unsigned gx, unsigned gy, const onorm::gpu::RowArgs& a, const onorm::gpu::SplitArgs& s) {
    shapes_.push_back("split_chunk_kernel<W" + std::to_string(W) + " K" + std::to_string(gx) + ">");
    return run(gx, gy, BLOCK, [a, s] { onorm::gpu::split_chunk_kernel<R, W, ITEMS, BLOCK, MODE>(a, s); });
  }
  template <typename R, int W, int BLOCK>
  onorm_status row_coefs(unsigned gx, const onorm::gpu::RowArgs& a, const onorm::gpu::SplitArgs& s) {
    return run(gx, 1, BLOCK, [a, s] { onorm::gpu::row_coefs_kernel<R, W, BLOCK>(a, s); });
  }
  template <typename S, int W, int BLOCK>
  onorm_status merge(unsigned gx, unsigned gy, const void* in, void* out, int64_t count) {
    return run(gx, gy, BLOCK, [in, out, count] { onorm::gpu::merge_states_kernel<S, W, BLOCK>(in, out, count); });
  }
  uint64_t next_epoch() { return ++epoch_; }

  const std::vector<std::string>& errors() const { return errors_; }
  std::string shapes() const {
    std::string s;
    for (const auto& x : shapes_) s += (s.empty() ? "" : ", ") + x;
    return s;
  }

 private:
  uint64_t epoch_ = 0;
  std::vector<std::string> shapes_;
};

}  // namespace onorm_sim_test

#define ONORM_SIM_PLAN_OP_(W, Type, In)                                                        \
  onorm_status onorm::gpu::plan_op<onorm::core::ops::Type, In, W, onorm_sim_test::SimLauncher>( \
      const onorm_request&, onorm_sim_test::SimLauncher&, char*, size_t);
#define ONORM_SIM_PLAN_EXTERN_(ID, name, Type)                       \
  extern template ONORM_SIM_PLAN_OP_(32, Type, float)                \
  extern template ONORM_SIM_PLAN_OP_(32, Type, onorm::core::f16_bits)  \
  extern template ONORM_SIM_PLAN_OP_(32, Type, onorm::core::bf16_bits) \
  extern template ONORM_SIM_PLAN_OP_(64, Type, float)                \
  extern template ONORM_SIM_PLAN_OP_(64, Type, onorm::core::f16_bits)  \
  extern template ONORM_SIM_PLAN_OP_(64, Type, onorm::core::bf16_bits)
ONORM_OP_LIST(ONORM_SIM_PLAN_EXTERN_)
