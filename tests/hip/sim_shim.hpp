// The vendor shim's contract (backends/gpu/vendor_shim.hpp) on the host SIMT emulator: what a
// test includes in place of the CUDA or HIP branch (ONORM_GPU_SHIM_OVERRIDE), so that the shared
// device templates run, unchanged, with warps of 32 or 64 lanes.
//
// shfl_xor is emulated as the contract states it: every lane of the warp calls it, i.e. a
// masked shuffle whose mask is the whole hardware warp. A template instance whose WARP is not
// the emulated warp width, a group that does not cover its warp, or a partial warp (a block
// that is not a multiple of the width) is therefore reported by the emulator.
#pragma once

#include <stdint.h>

#include <cstring>

#include "onlinenorm/core/convert.hpp"
#include "onlinenorm/core/quantize.hpp"
#include "simt_device.hpp"

#define ONORM_DEV inline
#define ONORM_DYNAMIC_SMEM(name) unsigned char* name = static_cast<unsigned char*>(::onorm_sim::dynamic_shared())

struct alignas(8) uint2 {
  uint32_t x, y;
};
struct alignas(16) uint4 {
  uint32_t x, y, z, w;
};

namespace onorm {
namespace gpu {
namespace shim {

using Vec16 = uint4;
constexpr bool kCudaRegisterCaps = false;

inline uint64_t full_warp_mask() {
  return ::onorm_sim::warp_size() >= 64 ? ~uint64_t(0) : (uint64_t(1) << ::onorm_sim::warp_size()) - 1;
}
ONORM_DEV float shfl_xor(float v, int m, int w) { return ::onorm_sim::shfl_xor_sync(full_warp_mask(), v, m, w); }
ONORM_DEV double shfl_xor(double v, int m, int w) { return ::onorm_sim::shfl_xor_sync(full_warp_mask(), v, m, w); }
ONORM_DEV int64_t shfl_xor(int64_t v, int m, int w) {
  return ::onorm_sim::shfl_xor_sync(full_warp_mask(), v, m, w);
}
ONORM_DEV float ex2_approx(float x) { return ::exp2f(x); }
ONORM_DEV float nan_max(float a, float b) { return core::nan_max(a, b); }
ONORM_DEV float f16_to_f32(uint16_t h) { return core::f16_to_f32(h); }
ONORM_DEV uint16_t f32_to_f16_rn(float f) { return core::f32_to_f16(f); }
ONORM_DEV float bf16_to_f32(uint16_t h) { return core::bf16_to_f32(h); }
ONORM_DEV uint16_t f32_to_bf16_rn(float f) { return core::f32_to_bf16(f); }
ONORM_DEV uint16_t f32x2_to_e4m3x2(float lo, float hi) {
  return static_cast<uint16_t>(core::quantize_e4m3(lo) | (core::quantize_e4m3(hi) << 8));
}
// One block runs at a time: a flag another block must set would never be seen. The schedules
// that wait on other blocks (cooperative split rows) are not emulated; these report it.
ONORM_DEV uint64_t load_acquire_u64(const uint64_t* p) { return *p; }
ONORM_DEV void store_release_u64(uint64_t* p, uint64_t v) { *p = v; }
ONORM_DEV void sync_threads() { __syncthreads(); }
// Three barriers around one flag (one block runs at a time): the first keeps the last call's
// readers ahead of the reset.
ONORM_DEV int sync_threads_or(int p) {
  static int any;
  __syncthreads();
  if (::onorm_sim::thread_idx().x == 0 && ::onorm_sim::thread_idx().y == 0 && ::onorm_sim::thread_idx().z == 0) any = 0;
  __syncthreads();
  if (p) any = 1;
  __syncthreads();
  return any;
}
ONORM_DEV void sync_warp() { ::onorm_sim::syncwarp(full_warp_mask()); }
ONORM_DEV uint32_t shfl_idx(uint32_t v, int src, int w) {
  return ::onorm_sim::shfl_sync(full_warp_mask(), v, src, w);
}
ONORM_DEV uint64_t warp_ballot(int p) { return ::onorm_sim::ballot_sync(full_warp_mask(), p != 0); }
ONORM_DEV int popc64(uint64_t m) { return __builtin_popcountll(m); }
ONORM_DEV int lowest_bit64(uint64_t m) { return __builtin_ctzll(m); }
ONORM_DEV int popc32(uint32_t m) { return __builtin_popcount(m); }
ONORM_DEV int lowest_bit32(uint32_t m) { return __builtin_ctz(m); }
// One fiber runs at a time, switching only at collectives: a plain max is atomic.
ONORM_DEV void atomic_max_u64(uint64_t* p, uint64_t v) {
  if (v > *p) *p = v;
}
// Synchronous, as in the HIP branch.
ONORM_DEV void cp_async_16(void* smem, const void* gmem) { std::memcpy(smem, gmem, 16); }
ONORM_DEV void cp_async_commit() {}
template <int N> ONORM_DEV void cp_async_wait() {}

}  // namespace shim
}  // namespace gpu
}  // namespace onorm
