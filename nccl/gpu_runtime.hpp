// The few GPU runtime calls of onlinenorm::nccl, for CUDA with NCCL or HIP with RCCL
// (ONORM_USE_RCCL): stream-ordered scratch for the gathered states, and the errors' text.
#pragma once

#if defined(ONORM_USE_RCCL)
#include <hip/hip_runtime.h>
#else
#include <cuda_runtime.h>
#endif

#include <cstddef>

namespace onorm {
namespace nccl {

#if defined(ONORM_USE_RCCL)
using Stream = hipStream_t;
inline bool malloc_async(void** p, size_t bytes, Stream s) { return hipMallocAsync(p, bytes, s) == hipSuccess; }
inline bool free_async(void* p, Stream s) { return hipFreeAsync(p, s) == hipSuccess; }
inline const char* last_runtime_error() { return hipGetErrorString(hipGetLastError()); }
#else
using Stream = cudaStream_t;
inline bool malloc_async(void** p, size_t bytes, Stream s) { return cudaMallocAsync(p, bytes, s) == cudaSuccess; }
inline bool free_async(void* p, Stream s) { return cudaFreeAsync(p, s) == cudaSuccess; }
inline const char* last_runtime_error() { return cudaGetErrorString(cudaGetLastError()); }
#endif

}  // namespace nccl
}  // namespace onorm
