// The CUDA entry of softmax top-k (gpu/softmax_topk_plan.hpp).
#include "cuda_runtime.cuh"
#include "softmax_topk_plan.hpp"

namespace onorm {
namespace cuda {

onorm_status run_softmax_topk(CudaContext& ctx, const onorm_request& q, char* err, size_t err_len) {
  CudaRuntime rt(ctx, err, err_len);
  gpu::Launcher<CudaRuntime> l(rt);
  return gpu::run_softmax_topk<kWarp>(l, q);
}

}  // namespace cuda
}  // namespace onorm
