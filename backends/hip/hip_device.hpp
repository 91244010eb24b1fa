// What the HIP backend knows about its device, read once from hipDeviceProp_t at open, and the
// entry points of the row kernels, one instance per warp width.
#pragma once

#include <hip/hip_runtime.h>

#include <cstddef>

#include "backend_interface.h"

namespace onorm {
namespace hip {

struct HipDevice {
  int index = 0;
  int warp_size = 0;           // hipDeviceProp_t::warpSize: 64 on CDNA (gfx9), 32 on RDNA and NVIDIA
  int multiprocessors = 0;     // compute units / SMs
  int max_threads_per_block = 0;
  size_t shared_per_block = 0; // bytes of static + dynamic shared memory a block may use
  int major = 0, minor = 0;    // compute capability on NVIDIA, gfx major/minor on AMD
  bool is_amd = false;
  char arch[64] = {0};         // "gfx90a", "gfx1030", ... or "sm_90"
};

// Runs a validated request on `stream` with kernels instantiated for warp width W (one .hip file
// per width). The launch is asynchronous; failures to launch are reported here.
template <int W>
onorm_status run_rows(const HipDevice& device, hipStream_t stream, const onorm_request& request,
                      char* err, size_t err_len);
// Defined and explicitly instantiated in hip_rows_w32.hip and hip_rows_w64.hip.

}  // namespace hip
}  // namespace onorm
