// Dispatch of a validated request to the shared row kernels (backends/gpu) for warp width W.
// PLACEHOLDER until backends/gpu lands: no kernel runs yet, every request is UNSUPPORTED.
#pragma once

#include <cstdio>

#include "hip_check.hpp"
#include "hip_device.hpp"

namespace onorm {
namespace hip {

template <int W>
onorm_status run_rows(const HipDevice&, hipStream_t, const onorm_request&, char* err, size_t err_len) {
  std::snprintf(err, err_len, "hip: row kernels for warp width %d are not built yet", W);
  return ONORM_ERROR_UNSUPPORTED;
}

}  // namespace hip
}  // namespace onorm
