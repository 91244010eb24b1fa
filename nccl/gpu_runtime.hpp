// The few GPU runtime calls of onlinenorm::nccl, for CUDA with NCCL or HIP with RCCL
// (ONORM_USE_RCCL): stream-ordered scratch for the gathered states, and the errors' text.
#pragma once

#if defined(ONORM_USE_RCCL)
#include <hip/hip_runtime.h>
#define ONORM_RT(name) hip##name
#else
#include <cuda_runtime.h>
#define ONORM_RT(name) cuda##name
#endif

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace onorm {
namespace nccl {

using Stream = ONORM_RT(Stream_t);
using Pool = ONORM_RT(MemPool_t);

// The scratch comes from a memory pool of this library's own per device, which keeps up to
// kPoolKeepBytes between calls: the device's default pool gives its memory back at each
// synchronization, so every call would map it again (tens of microseconds), and its settings
// are the user's. Beyond the bound (states of millions of rows) memory goes back at a sync.
constexpr uint64_t kPoolKeepBytes = uint64_t(64) << 20;
inline bool pool_of(int device, Pool* out) {
  static std::mutex mu;
  static std::map<int, Pool> pools;
  std::lock_guard<std::mutex> lock(mu);
  auto it = pools.find(device);
  if (it == pools.end()) {
    ONORM_RT(MemPoolProps) props = {};
    props.allocType = ONORM_RT(MemAllocationTypePinned);
    props.location.type = ONORM_RT(MemLocationTypeDevice);
    props.location.id = device;
    Pool pool;
    if (ONORM_RT(MemPoolCreate)(&pool, &props) != ONORM_RT(Success)) return false;
    uint64_t keep = kPoolKeepBytes;
    if (ONORM_RT(MemPoolSetAttribute)(pool, ONORM_RT(MemPoolAttrReleaseThreshold), &keep) != ONORM_RT(Success)) {
      (void)ONORM_RT(MemPoolDestroy)(pool);
      return false;
    }
    it = pools.emplace(device, pool).first;
  }
  *out = it->second;
  return true;
}

inline bool malloc_async(void** p, size_t bytes, int device, Stream s) {
  Pool pool;
  return pool_of(device, &pool) && ONORM_RT(MallocFromPoolAsync)(p, bytes, pool, s) == ONORM_RT(Success);
}
inline bool free_async(void* p, Stream s) { return ONORM_RT(FreeAsync)(p, s) == ONORM_RT(Success); }
inline const char* last_runtime_error() { return ONORM_RT(GetErrorString)(ONORM_RT(GetLastError)()); }

#undef ONORM_RT

}  // namespace nccl
}  // namespace onorm
