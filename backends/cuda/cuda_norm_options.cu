// The CUDA entry of the norms' residual add and quantized output (gpu/norm_options.hpp).
#include "cuda_runtime.cuh"
#include "norm_options.hpp"

namespace onorm {
namespace cuda {

onorm_status run_norm_options(CudaContext& ctx, const onorm_request& q, char* err, size_t err_len) {
  CudaRuntime rt(ctx, err, err_len);
  return gpu::run_norm_options<kWarp>(rt, q, [&](const onorm_request& p) { return run_plan(ctx, p, err, err_len); });
}

}  // namespace cuda
}  // namespace onorm
