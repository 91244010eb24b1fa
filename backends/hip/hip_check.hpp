// Error mapping of the HIP backend: every HIP runtime failure becomes ONORM_ERROR_DEVICE (out of
// memory: ONORM_ERROR_OUT_OF_MEMORY) with hipGetErrorString's text and the call that failed.
#pragma once

#include <hip/hip_runtime.h>

#include <cstdio>

#include "backend_interface.h"

namespace onorm {
namespace hip {

inline onorm_status device_error(hipError_t e, const char* what, char* err, size_t err_len) {
  if (err && err_len) {
    std::snprintf(err, err_len, "hip: %s failed: %s (%s, %d)", what, hipGetErrorString(e),
                  hipGetErrorName(e), static_cast<int>(e));
  }
  return e == hipErrorOutOfMemory ? ONORM_ERROR_OUT_OF_MEMORY : ONORM_ERROR_DEVICE;
}

}  // namespace hip
}  // namespace onorm

// Returns from the enclosing function (which has `char* err, size_t err_len`) on failure.
#define ONORM_HIP_TRY(expr)                                                     \
  do {                                                                          \
    const hipError_t onorm_hip_e_ = (expr);                                     \
    if (onorm_hip_e_ != hipSuccess) {                                           \
      return ::onorm::hip::device_error(onorm_hip_e_, #expr, err, err_len);     \
    }                                                                           \
  } while (0)
