// The vendor shim: the few device primitives the shared GPU templates need, for CUDA (nvcc)
// and HIP (hipcc / clang -x hip). Everything else in backends/gpu/ is vendor-neutral.
//
// What a vendor branch must provide (namespace onorm::gpu::shim):
//   ONORM_DEV                       __device__ __forceinline__
//   shfl_xor(v, lane_mask, width)   butterfly shuffle of float / double / int64_t within groups of `width`
//                                   lanes (width a power of two <= the warp width); every lane
//                                   of the warp calls it (full mask on CUDA).
//   ex2_approx(x)                   2^x, at most ~2 ulp relative error for results in the normal
//                                   range; may flush subnormal results to 0; NaN -> NaN,
//                                   -inf -> 0. (fast_exp() in math.hpp builds exp() on it.)
//   nan_max(a, b)                   core::nan_max on floats (a NaN from either side kept; it may
//                                   come back canonical), in as few instructions as the GPU has.
//   f16_to_f32 / f32_to_f16_rn / bf16_to_f32 / f32_to_bf16_rn   on uint16_t bit patterns,
//                                   round-to-nearest-even exactly as core/convert.hpp (NaN may be
//                                   canonicalized: it stays NaN).
//   f32x2_to_e4m3x2(lo, hi)         two floats to E4M3 codes (lo in the low byte) exactly as
//                                   core::quantize_e4m3, except that a NaN may lose its sign.
//   load_acquire_u64(p), store_release_u64(p, v)   device-scope acquire load / release store.
//   Vec16                           a 16-byte vector type for loads and stores (uint4).
//   kCudaRegisterCaps               whether __launch_bounds__' minimum blocks is CUDA's register
//                                   cap (AMD's compiler takes it as a waves-per-EU target, an
//                                   error where it cannot meet it): the caps measured on NVIDIA
//                                   apply only where it is.
//   sync_threads()                  block barrier.
//   sync_warp()                     warp barrier: the warp's shared-memory writes before it are
//                                   seen by its lanes' reads after it.
//   shfl_idx(v, src, width)         lane src's uint32_t v (within groups of `width` lanes); every
//                                   lane of the warp calls it.
//   warp_ballot(p)                  the warp's lanes where p is non-zero, as bits of a uint64_t
//                                   (lane i: bit i); every lane of the warp calls it.
//   popc64(m), lowest_bit64(m)      set bits of m; the index of its lowest set bit (m != 0).
//   popc32(m), lowest_bit32(m)      the same on a uint32_t (a 32-lane warp's ballot).
//   atomic_max_u64(p, v)            *p = max(*p, v) atomically (p in shared memory).
//   sync_threads_or(p)              block barrier that returns whether p was non-zero in any thread.
//   ONORM_DYNAMIC_SMEM(name)        declares `unsigned char* name`-like access to the block's
//                                   dynamic shared memory (16-byte aligned; on CUDA on a 128-byte
//                                   line: ptxas pads the static arrays before it, and stages the
//                                   copy engine fills off a line measured slower, bench/RESULTS.md).
//   cp_async_16(smem, gmem), cp_async_commit(), cp_async_wait<N>()
//                                   16-byte global -> shared copies in commit groups; wait<N>
//                                   leaves at most N groups in flight (may be synchronous).
// Warp width is NOT provided here: kernels take it as a template parameter (32 on NVIDIA and
// RDNA, 64 on CDNA), chosen by the host from the device properties.
#pragma once

#include <stdint.h>

// The vendor runtime before the core: it defines __host__ / __device__ (core/hd.hpp).
#if !defined(ONORM_GPU_SHIM_OVERRIDE) && (defined(__HIP__) || defined(__HIP_PLATFORM_AMD__))
#include <hip/hip_runtime.h>
#endif

#include "onlinenorm/core/convert.hpp"
#include "onlinenorm/core/quantize.hpp"

// [hip session] A test may substitute the whole vendor branch (tests/hip: a host SIMT emulator
// with 32- or 64-lane warps). HIP on NVIDIA (nvcc, __HIPCC__ defined by HIP's headers) takes
// the CUDA branch: its intrinsics are CUDA's; only clang's HIP mode (__HIP__) is AMD.
#if defined(ONORM_GPU_SHIM_OVERRIDE)
#include ONORM_GPU_SHIM_OVERRIDE
#elif defined(__HIP__) || defined(__HIP_PLATFORM_AMD__)
// ---------------------------------------------------------------- HIP (AMD)
#include <hip/hip_runtime.h>
#define ONORM_DEV __device__ __forceinline__
#define ONORM_DYNAMIC_SMEM(name) extern __shared__ __align__(16) unsigned char name[]
namespace onorm {
namespace gpu {
namespace shim {
using Vec16 = uint4;
constexpr bool kCudaRegisterCaps = false;
// [hip session] ROCm 7 makes the *_sync forms the default, with 64-bit masks (the upper half
// ignored on wave32); ROCm 5.2 (Debian, what this is compiled with) has only the unmasked forms.
#if defined(HIP_VERSION_MAJOR) && HIP_VERSION_MAJOR >= 7
#define ONORM_HIP_SHFL_XOR(v, m, w) __shfl_xor_sync(~0ull, (v), (m), (w))
#else
#define ONORM_HIP_SHFL_XOR(v, m, w) __shfl_xor((v), (m), (w))
#endif
ONORM_DEV float shfl_xor(float v, int m, int w) { return ONORM_HIP_SHFL_XOR(v, m, w); }
ONORM_DEV double shfl_xor(double v, int m, int w) { return ONORM_HIP_SHFL_XOR(v, m, w); }
ONORM_DEV int64_t shfl_xor(int64_t v, int m, int w) {
  return static_cast<int64_t>(ONORM_HIP_SHFL_XOR(static_cast<long long>(v), m, w));
}
ONORM_DEV float ex2_approx(float x) { return exp2f(x); }
ONORM_DEV float nan_max(float a, float b) { return core::nan_max(a, b); }
ONORM_DEV float f16_to_f32(uint16_t h) { return core::f16_to_f32(h); }
ONORM_DEV uint16_t f32_to_f16_rn(float f) { return core::f32_to_f16(f); }
ONORM_DEV float bf16_to_f32(uint16_t h) { return core::bf16_to_f32(h); }
ONORM_DEV uint16_t f32_to_bf16_rn(float f) { return core::f32_to_bf16(f); }
ONORM_DEV uint16_t f32x2_to_e4m3x2(float lo, float hi) {
  return static_cast<uint16_t>(core::quantize_e4m3(lo) | (core::quantize_e4m3(hi) << 8));
}
ONORM_DEV uint64_t load_acquire_u64(const uint64_t* p) {
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_AGENT);
}
ONORM_DEV void store_release_u64(uint64_t* p, uint64_t v) {
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_AGENT);
}
ONORM_DEV void sync_threads() { __syncthreads(); }
ONORM_DEV int sync_threads_or(int p) { return __syncthreads_or(p); }
// A wavefront runs in lockstep: its LDS writes need only be ordered before its reads.
ONORM_DEV void sync_warp() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}
#if defined(HIP_VERSION_MAJOR) && HIP_VERSION_MAJOR >= 7
ONORM_DEV uint32_t shfl_idx(uint32_t v, int src, int w) { return __shfl_sync(~0ull, v, src, w); }
ONORM_DEV uint64_t warp_ballot(int p) { return static_cast<uint64_t>(__ballot_sync(~0ull, p)); }
#else
ONORM_DEV uint32_t shfl_idx(uint32_t v, int src, int w) {
  return static_cast<uint32_t>(__shfl(static_cast<int>(v), src, w));
}
ONORM_DEV uint64_t warp_ballot(int p) { return static_cast<uint64_t>(__ballot(p)); }
#endif
ONORM_DEV int popc64(uint64_t m) { return __popcll(m); }
ONORM_DEV int lowest_bit64(uint64_t m) { return __ffsll(static_cast<unsigned long long>(m)) - 1; }
ONORM_DEV int popc32(uint32_t m) { return __popc(m); }
ONORM_DEV int lowest_bit32(uint32_t m) { return __ffs(m) - 1; }
ONORM_DEV void atomic_max_u64(uint64_t* p, uint64_t v) {
  atomicMax(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}
// Asynchronous global -> shared copies (here synchronous; a HIP branch may do better).
ONORM_DEV void cp_async_16(void* smem, const void* gmem) {
  *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
}
ONORM_DEV void cp_async_commit() {}
template <int N> ONORM_DEV void cp_async_wait() {}
}  // namespace shim
}  // namespace gpu
}  // namespace onorm

#else
// ---------------------------------------------------------------- CUDA
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define ONORM_DEV __device__ __forceinline__
#define ONORM_DYNAMIC_SMEM(name) extern __shared__ __align__(128) unsigned char name[]
namespace onorm {
namespace gpu {
namespace shim {
using Vec16 = uint4;
constexpr bool kCudaRegisterCaps = true;
ONORM_DEV float shfl_xor(float v, int m, int w) { return __shfl_xor_sync(0xffffffffu, v, m, w); }
ONORM_DEV double shfl_xor(double v, int m, int w) { return __shfl_xor_sync(0xffffffffu, v, m, w); }
ONORM_DEV int64_t shfl_xor(int64_t v, int m, int w) {
  return static_cast<int64_t>(__shfl_xor_sync(0xffffffffu, static_cast<long long>(v), m, w));
}
// ex2.approx.ftz.f32: max 2 ulp (PTX ISA), subnormal results flush to +0.
ONORM_DEV float ex2_approx(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
// max.NaN.f32 (sm_80+): one instruction where core::nan_max takes three.
ONORM_DEV float nan_max(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return core::nan_max(a, b);
#endif
}
// cvt.f32.f16 is exact; cvt.rn.f16.f32 / cvt.rn.bf16.f32 round to nearest even, overflow to
// inf, keep subnormals; NaN becomes the canonical NaN.
ONORM_DEV float f16_to_f32(uint16_t h) { return __half2float(__ushort_as_half(h)); }
ONORM_DEV uint16_t f32_to_f16_rn(float f) { return __half_as_ushort(__float2half_rn(f)); }
ONORM_DEV float bf16_to_f32(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }
ONORM_DEV uint16_t f32_to_bf16_rn(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  return core::f32_to_bf16(f);
#endif
}
// sm_89+: one instruction for two codes, round to nearest even, saturated to +-448, NaN 0x7f.
ONORM_DEV uint16_t f32x2_to_e4m3x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return static_cast<uint16_t>(core::quantize_e4m3(lo) | (core::quantize_e4m3(hi) << 8));
#endif
}
ONORM_DEV uint64_t load_acquire_u64(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
ONORM_DEV void store_release_u64(uint64_t* p, uint64_t v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
ONORM_DEV void sync_threads() { __syncthreads(); }
ONORM_DEV int sync_threads_or(int p) { return __syncthreads_or(p); }
ONORM_DEV void sync_warp() { __syncwarp(); }
ONORM_DEV uint32_t shfl_idx(uint32_t v, int src, int w) { return __shfl_sync(0xffffffffu, v, src, w); }
ONORM_DEV uint64_t warp_ballot(int p) { return __ballot_sync(0xffffffffu, p); }
ONORM_DEV int popc64(uint64_t m) { return __popcll(m); }
ONORM_DEV int lowest_bit64(uint64_t m) { return __ffsll(static_cast<long long>(m)) - 1; }
ONORM_DEV int popc32(uint32_t m) { return __popc(m); }
ONORM_DEV int lowest_bit32(uint32_t m) { return __ffs(static_cast<int>(m)) - 1; }
ONORM_DEV void atomic_max_u64(uint64_t* p, uint64_t v) {
  atomicMax(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}
// Asynchronous 16-byte global -> shared copy (cp.async, sm_80+), grouped by commit; wait<N>
// returns when at most N of this thread's groups are still in flight.
ONORM_DEV void cp_async_16(void* smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
#else
  *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
#endif
}
ONORM_DEV void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N> ONORM_DEV void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}
}  // namespace shim
}  // namespace gpu
}  // namespace onorm
#endif
