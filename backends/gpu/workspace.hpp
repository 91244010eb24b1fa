// The device workspace of split rows (coop flags, two-read states), shared by CUDA and HIP:
// grown as needed, never shrunk; its users are ordered by an event recorded after each (also
// across streams). Rt is the backend's runtime: wait_event, free, malloc, zero (all
// returning onorm_status).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend_interface.h"

namespace onorm {
namespace gpu {

struct Workspace {
  void* ptr = nullptr;
  size_t bytes = 0;
  uint32_t epoch = 0;     // coop flags' tag; never 0 when used
  bool recorded = false;  // an event marks the last user
};

// At least `bytes` (zeroed when new: zero tags never match a launch's epoch).
template <typename Rt>
onorm_status grow_workspace(Workspace& w, size_t bytes, Rt& rt) {
  if (bytes <= w.bytes) return ONORM_OK;
  size_t want = w.bytes * 2;
  if (want < bytes) want = bytes;
  if (want < (size_t(1) << 16)) want = size_t(1) << 16;
  if (w.ptr) {
    // Earlier launches may still use the old buffer: wait for them before freeing it.
    if (w.recorded)
      if (onorm_status s = rt.wait_event()) return s;
    if (onorm_status s = rt.free(w.ptr)) return s;
    w.ptr = nullptr;
    w.bytes = 0;
  }
  if (onorm_status s = rt.malloc(&w.ptr, want)) return s;
  w.bytes = want;
  return rt.zero(w.ptr, want);
}

inline uint64_t next_epoch(Workspace& w) {
  if (++w.epoch == 0) ++w.epoch;
  return w.epoch;
}

}  // namespace gpu
}  // namespace onorm
