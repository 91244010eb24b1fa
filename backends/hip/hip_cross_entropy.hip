// The HIP entry of cross-entropy (gpu/cross_entropy_plan.hpp), per warp width; as in hip_rows.hip.in, a device
// pass instantiates only its own width, and HIP on NVIDIA only 32.
#include "gpu/cross_entropy_plan.hpp"
#include "hip_rows.hpp"

namespace onorm {
namespace hip {

template <int W>
onorm_status run_cross_entropy(HipContext& ctx, const onorm_request& q, char* err, size_t err_len) {
  HipRuntime rt(ctx, err, err_len);
  gpu::Launcher<HipRuntime> l(rt);
  return gpu::run_cross_entropy<W>(l, q);
}

#if defined(__HIP_PLATFORM_NVIDIA__)
template onorm_status run_cross_entropy<32>(HipContext&, const onorm_request&, char*, size_t);
#else
#if !defined(__HIP_DEVICE_COMPILE__) || __AMDGCN_WAVEFRONT_SIZE == 32
template onorm_status run_cross_entropy<32>(HipContext&, const onorm_request&, char*, size_t);
#endif
#if !defined(__HIP_DEVICE_COMPILE__) || __AMDGCN_WAVEFRONT_SIZE == 64
template onorm_status run_cross_entropy<64>(HipContext&, const onorm_request&, char*, size_t);
#endif
#endif

}  // namespace hip
}  // namespace onorm
