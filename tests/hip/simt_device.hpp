// The GPU dialect's names on top of the SIMT emulator, so that device code written for CUDA or
// HIP compiles for the host unchanged: include this after every standard header, then the
// device code. warpSize is the emulated hardware's width and, as in ROCm 7, not a constant.
#pragma once

#include <cmath>

#include "simt.hpp"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

#define threadIdx (::onorm_sim::thread_idx())
#define blockIdx (::onorm_sim::block_idx())
#define blockDim (::onorm_sim::block_dim())
#define gridDim (::onorm_sim::grid_dim())
#define warpSize (::onorm_sim::warp_size())
#define __syncthreads() ::onorm_sim::syncthreads()
#define __threadfence() ((void)0)
#define __threadfence_block() ((void)0)

using ::onorm_sim::dim3;

// The vector type the device code reads shared memory through (16 bytes at a time).
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

// CUDA's masked shuffles (32-bit masks there; 64-bit here, as ROCm 7's) ...
template <typename T> inline T __shfl_sync(uint64_t mask, T v, int src, int width = warpSize) { return ::onorm_sim::shfl_sync(mask, v, src, width); }
template <typename T> inline T __shfl_up_sync(uint64_t mask, T v, unsigned d, int width = warpSize) { return ::onorm_sim::shfl_up_sync(mask, v, static_cast<int>(d), width); }
template <typename T> inline T __shfl_down_sync(uint64_t mask, T v, unsigned d, int width = warpSize) { return ::onorm_sim::shfl_down_sync(mask, v, static_cast<int>(d), width); }
template <typename T> inline T __shfl_xor_sync(uint64_t mask, T v, int m, int width = warpSize) { return ::onorm_sim::shfl_xor_sync(mask, v, m, width); }
inline uint64_t __ballot_sync(uint64_t mask, int p) { return ::onorm_sim::ballot_sync(mask, p != 0); }
inline void __syncwarp(uint64_t mask = ~uint64_t(0) >> (64 - warpSize)) { ::onorm_sim::syncwarp(mask); }
// ... and HIP's (ROCm 5) unmasked ones.
template <typename T> inline T __shfl(T v, int src, int width = warpSize) { return ::onorm_sim::shfl(v, src, width); }
template <typename T> inline T __shfl_up(T v, unsigned d, int width = warpSize) { return ::onorm_sim::shfl_up(v, static_cast<int>(d), width); }
template <typename T> inline T __shfl_down(T v, unsigned d, int width = warpSize) { return ::onorm_sim::shfl_down(v, static_cast<int>(d), width); }
template <typename T> inline T __shfl_xor(T v, int m, int width = warpSize) { return ::onorm_sim::shfl_xor(v, m, width); }
inline uint64_t __ballot(int p) { return ::onorm_sim::ballot(p != 0); }
inline unsigned __lane_id() { return ::onorm_sim::lane_id(); }

// Fast-math intrinsics as their exact counterparts.
inline float __expf(float x) { return ::expf(x); }
inline float __logf(float x) { return ::logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / ::sqrtf(x); }
template <typename T> inline T __ldg(const T* p) { return *p; }
// Atomics: one thread runs at a time, switching only at collectives, so a plain update is atomic.
template <typename T> inline T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
