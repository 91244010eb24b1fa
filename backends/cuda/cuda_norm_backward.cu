// The CUDA entry of the norms' backward (gpu/norm_backward.hpp).
#include "cuda_runtime.cuh"
#include "norm_backward.hpp"

namespace onorm {
namespace cuda {

onorm_status run_norm_backward(CudaContext& ctx, const onorm_request& q, char* err, size_t err_len) {
  CudaRuntime rt(ctx, err, err_len);
  return gpu::run_norm_backward<kWarp>(rt, q);
}

}  // namespace cuda
}  // namespace onorm
