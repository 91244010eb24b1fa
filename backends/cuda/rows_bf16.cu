// Kernels and launch selection for bf16 input (all output dtypes).
#include "cuda_launch.cuh"

namespace onorm {
namespace cuda {
template onorm_status launch_rows<core::bf16_bits>(CudaContext&, const gpu::RowArgs&, char*, size_t);
}  // namespace cuda
}  // namespace onorm
