// The HIP entry of softmax top-k (gpu/softmax_topk_plan.hpp), per warp width; as in hip_rows.hip.in, a device
// pass instantiates only its own width, and HIP on NVIDIA only 32.
#include "gpu/softmax_topk_plan.hpp"
#include "hip_rows.hpp"

namespace onorm {
namespace hip {

template <int W>
onorm_status run_softmax_topk(HipContext& ctx, const onorm_request& q, char* err, size_t err_len) {
  HipRuntime rt(ctx, err, err_len);
  gpu::Launcher<HipRuntime> l(rt);
  return gpu::run_softmax_topk<W>(l, q);
}

#if defined(__HIP_PLATFORM_NVIDIA__)
template onorm_status run_softmax_topk<32>(HipContext&, const onorm_request&, char*, size_t);
#else
#if !defined(__HIP_DEVICE_COMPILE__) || __AMDGCN_WAVEFRONT_SIZE == 32
template onorm_status run_softmax_topk<32>(HipContext&, const onorm_request&, char*, size_t);
#endif
#if !defined(__HIP_DEVICE_COMPILE__) || __AMDGCN_WAVEFRONT_SIZE == 64
template onorm_status run_softmax_topk<64>(HipContext&, const onorm_request&, char*, size_t);
#endif
#endif

}  // namespace hip
}  // namespace onorm
