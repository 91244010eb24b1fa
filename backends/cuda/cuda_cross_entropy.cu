// The CUDA entry of cross-entropy (gpu/cross_entropy_plan.hpp).
#include "cross_entropy_plan.hpp"
#include "cuda_runtime.cuh"

namespace onorm {
namespace cuda {

onorm_status run_cross_entropy(CudaContext& ctx, const onorm_request& q, char* err, size_t err_len) {
  CudaRuntime rt(ctx, err, err_len);
  gpu::Launcher<CudaRuntime> l(rt);
  return gpu::run_cross_entropy<kWarp>(l, q);
}

}  // namespace cuda
}  // namespace onorm
