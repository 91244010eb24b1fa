// The CUDA entry of the partial row states' merge (gpu/partial_state.hpp).
#include "cuda_runtime.cuh"
#include "partial_state.hpp"

namespace onorm {
namespace cuda {

onorm_status run_state_merge(CudaContext& ctx, const onorm_request& q, char* err, size_t err_len) {
  CudaRuntime rt(ctx, err, err_len);
  gpu::Launcher<CudaRuntime> l(rt);
  return gpu::run_state_merge(l, q);
}

}  // namespace cuda
}  // namespace onorm
