// The HIP backend's host side: the module table (src/backend_interface.h) in HIP's runtime API.
// The same file compiles for AMD GPUs (clang, ONLINENORM_HIP_PLATFORM=amd) and for NVIDIA GPUs
// through HIP's NVIDIA platform (nvcc). The row kernels come from the shared device templates
// (backends/gpu), instantiated per warp width and input dtype (hip_rows.hip.in); the warp
// width is hipDeviceProp_t::warpSize, read here at run time, never a compile-time constant.
#include <hip/hip_runtime.h>

#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <new>
#include <string>

#include "backend_interface.h"
#include "gpu/norm_options.hpp"
#include "gpu/request_route.hpp"
#include "hip_check.hpp"
#include "hip_context.hpp"

namespace onorm {
namespace hip {
namespace {

hipStream_t current_stream(HipContext* ctx) {
  std::lock_guard<std::mutex> lock(ctx->mu);
  return ctx->stream;
}

int device_count(char* why, size_t why_len) {
  int count = 0;
  const hipError_t e = hipGetDeviceCount(&count);
  if (e != hipSuccess) {
    std::snprintf(why, why_len, "hip: hipGetDeviceCount failed: %s", hipGetErrorString(e));
    return 0;
  }
  if (count <= 0) std::snprintf(why, why_len, "hip: no device");
  return count > 0 ? count : 0;
}

onorm_status open(int index, void** impl, char* err, size_t err_len) {
  int count = 0;
  ONORM_HIP_TRY(hipGetDeviceCount(&count));
  if (index < 0 || index >= count) {
    std::snprintf(err, err_len, "hip: device %d does not exist (%d device(s))", index, count);
    return ONORM_ERROR_BACKEND_UNAVAILABLE;
  }
  hipDeviceProp_t prop;
  std::memset(&prop, 0, sizeof prop);
  ONORM_HIP_TRY(hipGetDeviceProperties(&prop, index));
  ONORM_HIP_TRY(hipSetDevice(index));

  HipDevice d;
  d.index = index;
  d.warp_size = prop.warpSize;
  d.multiprocessors = prop.multiProcessorCount;
  d.l2_bytes = prop.l2CacheSize;
  d.major = prop.major;
  d.minor = prop.minor;
#if defined(__HIP_PLATFORM_AMD__)
  d.is_amd = true;
  // gcnArchName is "gfx90a:sramecc+:xnack-": keep the processor name.
  std::snprintf(d.arch, sizeof d.arch, "%.*s", static_cast<int>(std::strcspn(prop.gcnArchName, ":")),
                prop.gcnArchName);
#else
  d.is_amd = false;
  std::snprintf(d.arch, sizeof d.arch, "sm_%d%d", prop.major, prop.minor);
#endif
  if (d.warp_size != 32 && d.warp_size != 64) {
    std::snprintf(err, err_len, "hip: device %d (%s) reports warpSize %d; kernels exist for 32 and 64",
                  index, prop.name, d.warp_size);
    return ONORM_ERROR_UNSUPPORTED;
  }

  auto* ctx = new (std::nothrow) HipContext;
  if (!ctx) return ONORM_ERROR_OUT_OF_MEMORY;
  ctx->device = d;
  if (d.l2_bytes > 0) ctx->caps.l2_bytes = d.l2_bytes;
  ctx->caps.sms = d.multiprocessors;
  const hipError_t ev = hipEventCreateWithFlags(&ctx->ws_event, hipEventDisableTiming);
  if (ev != hipSuccess) {
    delete ctx;
    return device_error(ev, "hipEventCreateWithFlags", err, err_len);
  }
  char name[384];
  std::snprintf(name, sizeof name, "hip:%d (%s, %s, %s%d%s)", index, prop.name, d.arch,
                d.is_amd ? "wave" : "warp ", d.warp_size, d.is_amd ? "" : ", HIP on NVIDIA");
  ctx->name = name;
  *impl = ctx;
  return ONORM_OK;
}

void close(void* impl) {
  auto* ctx = static_cast<HipContext*>(impl);
  if (!ctx) return;
  // Failures here have nowhere to go: close cannot fail.
  (void)hipSetDevice(ctx->device.index);
  for (gpu::Workspace* w : {&ctx->ws, &ctx->column_ws}) {
    if (!w->ptr) continue;
    if (w->recorded) (void)hipEventSynchronize(ctx->ws_event);
    (void)hipFree(w->ptr);
  }
  if (ctx->ws_event) (void)hipEventDestroy(ctx->ws_event);
  delete ctx;
}

const char* name(void* impl) { return static_cast<HipContext*>(impl)->name.c_str(); }

onorm_status set_stream(void* impl, void* stream, char*, size_t) {
  auto* ctx = static_cast<HipContext*>(impl);
  std::lock_guard<std::mutex> lock(ctx->mu);
  ctx->stream = static_cast<hipStream_t>(stream);
  return ONORM_OK;
}

onorm_status synchronize(void* impl, char* err, size_t err_len) {
  auto* ctx = static_cast<HipContext*>(impl);
  ONORM_HIP_TRY(hipSetDevice(ctx->device.index));
  ONORM_HIP_TRY(hipStreamSynchronize(current_stream(ctx)));
  return ONORM_OK;
}

int supports_dtype(void*, onorm_dtype dtype, int is_input) {
  return gpu::supports_dtype(dtype, is_input);
}

}  // namespace

template <int W>
onorm_status run_plan(HipContext& ctx, const onorm_request& q, char* err, size_t err_len) {
  return gpu::visit_request(q, [&](auto op, auto in) {
    return run_rows<W, decltype(op), typename decltype(in)::type>(ctx, q, err, err_len);
  }, err, err_len);
}
template onorm_status run_plan<32>(HipContext&, const onorm_request&, char*, size_t);
#if !defined(__HIP_PLATFORM_NVIDIA__)  // NVIDIA GPUs have no 64-wide warps (hip_rows.hip.in)
template onorm_status run_plan<64>(HipContext&, const onorm_request&, char*, size_t);
#endif

namespace {

// The paths of gpu::route_request for warps of W lanes.
template <int W>
struct HipPaths {
  HipContext& ctx;
  char* err;
  size_t err_len;
  onorm_status norm_backward(const onorm_request& q) const { return run_norm_backward<W>(ctx, q, err, err_len); }
  onorm_status state_merge(const onorm_request& q) const { return run_state_merge(ctx, q, err, err_len); }
  onorm_status cross_entropy(const onorm_request& q) const { return run_cross_entropy<W>(ctx, q, err, err_len); }
  onorm_status softmax_topk(const onorm_request& q) const { return run_softmax_topk<W>(ctx, q, err, err_len); }
  onorm_status rows(const onorm_request& q) const { return run_plan<W>(ctx, q, err, err_len); }
};

template <int W>
onorm_status run_width(HipContext& ctx, const onorm_request& q, char* err, size_t err_len) {
  // One request at a time per context: the stream and the workspace are shared state.
  std::lock_guard<std::mutex> lock(ctx.mu);
  return gpu::route_request(q, HipPaths<W>{ctx, err, err_len}, "hip", err, err_len);
}

onorm_status run(void* impl, const onorm_request* request, char* err, size_t err_len) {
  auto* ctx = static_cast<HipContext*>(impl);
  // The calling thread's current device may be another one.
  ONORM_HIP_TRY(hipSetDevice(ctx->device.index));
  switch (ctx->device.warp_size) {
    case 32: return run_width<32>(*ctx, *request, err, err_len);
#if defined(__HIP_PLATFORM_NVIDIA__)
    case 64:  // no such NVIDIA GPU; open() accepted the width, so say so here
      std::snprintf(err, err_len, "hip: 64-wide warps on an NVIDIA GPU are not supported");
      return ONORM_ERROR_UNSUPPORTED;
#else
    case 64: return run_width<64>(*ctx, *request, err, err_len);
#endif
    default:
      std::snprintf(err, err_len, "hip: no kernels for warp width %d", ctx->device.warp_size);
      return ONORM_ERROR_INTERNAL;
  }
}

onorm_status alloc(void* impl, size_t bytes, void** out, char* err, size_t err_len) {
  auto* ctx = static_cast<HipContext*>(impl);
  ONORM_HIP_TRY(hipSetDevice(ctx->device.index));
  *out = nullptr;
  ONORM_HIP_TRY(hipMalloc(out, bytes ? bytes : 1));
  return ONORM_OK;
}

onorm_status release(void* impl, void* ptr, char* err, size_t err_len) {
  auto* ctx = static_cast<HipContext*>(impl);
  ONORM_HIP_TRY(hipSetDevice(ctx->device.index));
  ONORM_HIP_TRY(hipFree(ptr));
  return ONORM_OK;
}

// Ordered after the work already queued on the context's stream, complete on return.
onorm_status copy(void* impl, void* dst, const void* src, size_t bytes, onorm_copy_kind kind,
                  char* err, size_t err_len) {
  auto* ctx = static_cast<HipContext*>(impl);
  hipMemcpyKind k = hipMemcpyDeviceToDevice;
  switch (kind) {
    case ONORM_COPY_HOST_TO_DEVICE: k = hipMemcpyHostToDevice; break;
    case ONORM_COPY_DEVICE_TO_HOST: k = hipMemcpyDeviceToHost; break;
    case ONORM_COPY_DEVICE_TO_DEVICE: k = hipMemcpyDeviceToDevice; break;
    default:
      std::snprintf(err, err_len, "hip: copy kind %d is not an onorm_copy_kind", static_cast<int>(kind));
      return ONORM_ERROR_INVALID_ARGUMENT;
  }
  if (bytes == 0) return ONORM_OK;
  ONORM_HIP_TRY(hipSetDevice(ctx->device.index));
  const hipStream_t stream = current_stream(ctx);
  ONORM_HIP_TRY(hipMemcpyAsync(dst, src, bytes, k, stream));
  ONORM_HIP_TRY(hipStreamSynchronize(stream));
  return ONORM_OK;
}

const onorm_backend_module kModule = {
    ONORM_BACKEND_MODULE_ABI, ONORM_BACKEND_HIP, "hip", device_count, open, close, name,
    set_stream, synchronize, supports_dtype, run, alloc, release, copy};

}  // namespace
}  // namespace hip
}  // namespace onorm

extern "C" __attribute__((visibility("default"))) const onorm_backend_module* onorm_backend_module_entry(void) {
  return &onorm::hip::kModule;
}
