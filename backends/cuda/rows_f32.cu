// Kernels and launch selection for f32 input (all output dtypes).
#include "cuda_launch.cuh"

namespace onorm {
namespace cuda {
template onorm_status launch_rows<float>(CudaContext&, const gpu::RowArgs&, char*, size_t);
}  // namespace cuda
}  // namespace onorm
