// A device-to-device copy by a kernel of 16-byte vectors (dst and src 16-byte aligned; a tail
// of fewer than 16 bytes by cudaMemcpyAsync), for the benchmark's copy ceiling.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

cudaError_t vector_copy(void* dst, const void* src, size_t bytes, cudaStream_t stream);
