// The HIP entry of the partial row states' merge (gpu/partial_state.hpp): a thread per row, no
// warp collective, so one instance serves every warp width.
#include "gpu/partial_state.hpp"
#include "hip_rows.hpp"

namespace onorm {
namespace hip {

onorm_status run_state_merge(HipContext& ctx, const onorm_request& q, char* err, size_t err_len) {
  HipRuntime rt(ctx, err, err_len);
  gpu::Launcher<HipRuntime> l(rt);
  return gpu::run_state_merge(l, q);
}

}  // namespace hip
}  // namespace onorm
