// The copy ceiling's second measure (bench_cuda.cpp takes the faster of this and
// cudaMemcpyAsync): one 16-byte vector per thread, which on an H200 matched cudaMemcpyAsync
// where more vectors per thread or a grid-stride loop did not (bench/RESULTS.md).
#include "vector_copy.hpp"

#include <cstdint>

namespace {

constexpr int kBlock = 256;

__global__ void __launch_bounds__(kBlock) vector_copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                                             size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (i < n) dst[i] = src[i];
}

}  // namespace

cudaError_t vector_copy(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  const size_t n = bytes / sizeof(uint4);
  if (n > 0)
    vector_copy_kernel<<<static_cast<unsigned>((n + kBlock - 1) / kBlock), kBlock, 0, stream>>>(
        static_cast<const uint4*>(src), static_cast<uint4*>(dst), n);
  const size_t tail = bytes - n * sizeof(uint4);
  if (tail > 0)
    return cudaMemcpyAsync(static_cast<char*>(dst) + n * sizeof(uint4), static_cast<const char*>(src) + n * sizeof(uint4),
                           tail, cudaMemcpyDeviceToDevice, stream);
  return cudaGetLastError();
}
