// A small SIMT emulator on the host: runs GPU kernel code, unchanged, with a warp (wavefront) of
// any width, so that the 64-wide paths of the shared device templates (backends/gpu), which no
// machine here can run, execute and are checked for what goes wrong when code written for 32
// lanes meets 64: lane masks, shared arrays sized for 32, partial warps, shuffles that read a
// lane that is not there.
//
// Every thread of a block is a fiber (fiber.hpp); one block runs at a time, blocks in order.
// A thread runs until it reaches a collective (a shuffle, ballot, __syncwarp, __syncthreads) or
// returns. A warp collective completes once every live lane of the warp is waiting somewhere;
// the lanes waiting at it take part, the others do not. Reading from a lane that does not take
// part (exited, waiting elsewhere, beyond the block's last thread), a *_sync mask that names such
// a lane or leaves out the caller, two different collectives reached by one warp at once, and a
// block that can make no progress are recorded as errors (and the value read is poisoned: all
// bits set, a NaN for floats), never silently accepted.
//
// Shared memory: `__shared__` variables become function-local statics (one block runs at a
// time, so that is per-block storage); onorm_sim::dynamic_shared() is the dynamic part.
// It is a test device: single-threaded, slow (a context switch per thread per collective).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

namespace onorm_sim {

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

enum class CollectiveKind : int { shfl_idx, shfl_up, shfl_down, shfl_xor, ballot, syncwarp };

// A lane's part in a warp collective.
struct Collective {
  CollectiveKind kind;
  bool has_mask;       // a *_sync variant: `mask` names the lanes that must take part
  uint64_t mask;
  int arg;             // source lane, delta or lane mask
  int width;           // group width (a power of two <= the warp size)
  size_t bytes;        // value size, at most 16
  unsigned char in[16];
  unsigned char out[16];
  bool predicate;      // ballot input
  uint64_t ballot;     // ballot result
};

// The emulator's state for one launch. Kernels reach it through the functions below.
class Machine;
Machine& machine();

int warp_size();                 // the emulated hardware's warp width (like ROCm 7: not constexpr)
const dim3& thread_idx();
const dim3& block_idx();
const dim3& block_dim();
const dim3& grid_dim();
void syncthreads();
void warp_collective(Collective& c);  // blocks the calling lane until the collective completes
void* dynamic_shared();               // the launch's dynamic shared memory
void record_error(const std::string& what);
unsigned lane_id();

// Launches `kernel` (a callable run by every thread) on grid x block with the given warp width
// and dynamic shared memory bytes. Returns the errors recorded (empty when none).
std::vector<std::string> launch(int warp_width, dim3 grid, dim3 block, size_t dynamic_shared_bytes,
                                const std::function<void()>& kernel);

// ---- typed wrappers ---------------------------------------------------------------------------

template <typename T>
T shuffle(CollectiveKind kind, T value, int arg, int width, bool has_mask, uint64_t mask) {
  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 16, "shuffle of a value up to 16 bytes");
  Collective c{};
  c.kind = kind;
  c.has_mask = has_mask;
  c.mask = mask;
  c.arg = arg;
  c.width = width;
  c.bytes = sizeof(T);
  std::memcpy(c.in, &value, sizeof(T));
  warp_collective(c);
  T out;
  std::memcpy(&out, c.out, sizeof(T));
  return out;
}

// HIP's (ROCm 5) unmasked forms, width defaulting to the warp size.
template <typename T> T shfl(T v, int src, int width) { return shuffle(CollectiveKind::shfl_idx, v, src, width, false, 0); }
template <typename T> T shfl_up(T v, int d, int width) { return shuffle(CollectiveKind::shfl_up, v, d, width, false, 0); }
template <typename T> T shfl_down(T v, int d, int width) { return shuffle(CollectiveKind::shfl_down, v, d, width, false, 0); }
template <typename T> T shfl_xor(T v, int m, int width) { return shuffle(CollectiveKind::shfl_xor, v, m, width, false, 0); }
// CUDA's (and ROCm 6.2+'s) masked forms; the mask is 64-bit here, as in ROCm 7.
template <typename T> T shfl_sync(uint64_t mask, T v, int src, int width) { return shuffle(CollectiveKind::shfl_idx, v, src, width, true, mask); }
template <typename T> T shfl_up_sync(uint64_t mask, T v, int d, int width) { return shuffle(CollectiveKind::shfl_up, v, d, width, true, mask); }
template <typename T> T shfl_down_sync(uint64_t mask, T v, int d, int width) { return shuffle(CollectiveKind::shfl_down, v, d, width, true, mask); }
template <typename T> T shfl_xor_sync(uint64_t mask, T v, int m, int width) { return shuffle(CollectiveKind::shfl_xor, v, m, width, true, mask); }
uint64_t ballot(bool predicate);                      // unmasked (HIP): 64-bit result
uint64_t ballot_sync(uint64_t mask, bool predicate);  // masked
void syncwarp(uint64_t mask);

}  // namespace onorm_sim
