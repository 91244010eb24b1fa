// The CUDA backend module (libonlinenorm_cuda.so): the module table the core library opens
// with dlopen. cudart is linked statically, so the module loads on machines without a driver
// and then reports 0 devices with the runtime's reason.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <new>
#include <string>

#include "cuda_context.hpp"
#include "norm_options.hpp"
#include "request_route.hpp"
#include "tune.hpp"

namespace onorm {
namespace cuda {

onorm_status run_plan(CudaContext& ctx, const onorm_request& q, char* err, size_t err_len) {
  return gpu::visit_request(q, [&](auto op, auto in) {
    return run_rows<decltype(op), typename decltype(in)::type>(ctx, q, err, err_len);
  }, err, err_len);
}

namespace {

int device_count(char* why, size_t why_len) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    std::snprintf(why, why_len, "cuda: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    cudaGetLastError();
    return 0;
  }
  if (n == 0) std::snprintf(why, why_len, "cuda: no CUDA device");
  return n;
}

onorm_status open(int device, void** impl, char* err, size_t err_len) {
  int n = 0;
  ONORM_CUDA_TRY(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  if (device < 0 || device >= n) {
    std::snprintf(err, err_len, "cuda: device %d does not exist (%d devices)", device, n);
    return ONORM_ERROR_BACKEND_UNAVAILABLE;
  }
  ONORM_CUDA_TRY(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp prop{};
  ONORM_CUDA_TRY(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  if (prop.major < 7) {
    std::snprintf(err, err_len, "cuda: device %d (%s) has compute capability %d.%d; 7.0 or newer is needed",
                  device, prop.name, prop.major, prop.minor);
    return ONORM_ERROR_BACKEND_UNAVAILABLE;
  }
  if (prop.warpSize != 32) {
    std::snprintf(err, err_len, "cuda: unexpected warp size %d", prop.warpSize);
    return ONORM_ERROR_UNSUPPORTED;
  }
  auto* ctx = new (std::nothrow) CudaContext;
  if (!ctx) return ONORM_ERROR_OUT_OF_MEMORY;
  ctx->device = device;
  ctx->name = "cuda:" + std::to_string(device) + " (" + prop.name + ")";
  // The planner's capabilities (gpu/row_plan.hpp), then the ONLINENORM_TUNE keys (src/tune.hpp,
  // docs/tuning.md; onorm_create has checked their syntax and ranges).
  gpu::PlanCaps& caps = ctx->caps;
  caps.sms = prop.multiProcessorCount;
  caps.l2_bytes = prop.l2CacheSize;
  caps.smem_max = static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  int coop = 0;
  cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device);
  caps.coop = coop != 0;
  // 16-bit rows: the dense shapes' ops (one input, no options) stay in registers to 16384
  // columns, then clusters; the others from 4096 columns take the staged kernel, then clusters
  // from 16384 (PlanCaps), and an op with one block reduction (the backward passes, RMSNorm with
  // options) keeps rows of 8192 in registers (bench/RESULTS.md, issues 10, 11).
  caps.reg_max_cols_16 = 4096;
  caps.reg_max_cols_16_one_pass = 8192;
  caps.short_wide = true;
  const long long reg = tune::get("reg_cols", -1);
  if (reg >= 0)
    caps.reg_max_cols_f32 = caps.reg_max_cols_16 = caps.reg_max_cols_16_one_pass = caps.reg_max_cols_16_dense = reg;
  caps.force_two_read = tune::get("tworead", 0) != 0;
  // Two stages of stage_bytes per input (plus the merge scratch) must fit a block's shared memory.
  const long long stage = tune::get("stage_bytes", -1);
  const long long stage_cap = static_cast<long long>(prop.sharedMemPerBlockOptin) / 3 - 1024;
  if (stage > stage_cap) {
    std::snprintf(err, err_len, "%s: key 'stage_bytes' is %lld; this device allows at most %lld", tune::kEnv,
                  stage, stage_cap);
    delete ctx;
    return ONORM_ERROR_INVALID_ARGUMENT;
  }
  if (stage >= 0) caps.staged_chunk_bytes = stage / 16 * 16;
  caps.cluster = prop.major >= 9 && tune::get("cluster", 1) != 0;
  const long long cluster_cols = tune::get("cluster_cols", -1);
  if (cluster_cols >= 0) caps.cluster_min_cols_f32 = caps.cluster_min_cols_16 = cluster_cols;
  caps.cluster_max = static_cast<int>(tune::get("cluster_max", caps.cluster_max));
  caps.cluster_min_tier = static_cast<int>(tune::get("cluster_tier", caps.cluster_min_tier));
  caps.cluster_prefetch = tune::get("cluster_prefetch", 1) != 0;
  caps.cluster_stream = tune::get("cluster_stream", 1) != 0;
  caps.backward_stages = static_cast<int>(tune::get("backward_stages", caps.backward_stages));
  caps.short_wide = tune::get("short_wide", 1) != 0;
  caps.dense_min_cols_16 = tune::get("dense_cols", caps.dense_min_cols_16);
  const cudaError_t e = cudaEventCreateWithFlags(&ctx->ws_event, cudaEventDisableTiming);
  if (e != cudaSuccess) {
    delete ctx;
    return cuda_fail(e, "cudaEventCreate", err, err_len);
  }
  *impl = ctx;
  return ONORM_OK;
}

void close(void* impl) {
  auto* ctx = static_cast<CudaContext*>(impl);
  if (!ctx) return;
  cudaSetDevice(ctx->device);
  for (gpu::Workspace* w : {&ctx->ws, &ctx->column_ws}) {
    if (!w->ptr) continue;
    if (w->recorded) cudaEventSynchronize(ctx->ws_event);
    cudaFree(w->ptr);
  }
  if (ctx->ws_event) cudaEventDestroy(ctx->ws_event);
  delete ctx;
}

const char* name(void* impl) { return static_cast<CudaContext*>(impl)->name.c_str(); }

onorm_status set_stream(void* impl, void* stream, char*, size_t) {
  auto* ctx = static_cast<CudaContext*>(impl);
  std::lock_guard<std::mutex> lock(ctx->mu);
  ctx->stream = static_cast<cudaStream_t>(stream);
  return ONORM_OK;
}

cudaStream_t current_stream(CudaContext* ctx) {
  std::lock_guard<std::mutex> lock(ctx->mu);
  return ctx->stream;
}

onorm_status synchronize(void* impl, char* err, size_t err_len) {
  auto* ctx = static_cast<CudaContext*>(impl);
  ONORM_CUDA_TRY(cudaSetDevice(ctx->device), "cudaSetDevice");
  ONORM_CUDA_TRY(cudaStreamSynchronize(current_stream(ctx)), "cudaStreamSynchronize");
  return ONORM_OK;
}

int supports_dtype(void*, onorm_dtype dtype, int is_input) {
  return gpu::supports_dtype(dtype, is_input);
}

// The paths of gpu::route_request.
struct CudaPaths {
  CudaContext& ctx;
  char* err;
  size_t err_len;
  onorm_status norm_backward(const onorm_request& q) const { return run_norm_backward(ctx, q, err, err_len); }
  onorm_status state_merge(const onorm_request& q) const { return run_state_merge(ctx, q, err, err_len); }
  onorm_status cross_entropy(const onorm_request& q) const { return run_cross_entropy(ctx, q, err, err_len); }
  onorm_status softmax_topk(const onorm_request& q) const { return run_softmax_topk(ctx, q, err, err_len); }
  onorm_status rows(const onorm_request& q) const { return run_plan(ctx, q, err, err_len); }
};

onorm_status run(void* impl, const onorm_request* q, char* err, size_t err_len) {
  auto* ctx = static_cast<CudaContext*>(impl);
  ONORM_CUDA_TRY(cudaSetDevice(ctx->device), "cudaSetDevice");
  // One request at a time per context: the stream and the workspace are shared state.
  std::lock_guard<std::mutex> lock(ctx->mu);
  return gpu::route_request(*q, CudaPaths{*ctx, err, err_len}, "cuda", err, err_len);
}

onorm_status alloc(void* impl, size_t bytes, void** out, char* err, size_t err_len) {
  auto* ctx = static_cast<CudaContext*>(impl);
  ONORM_CUDA_TRY(cudaSetDevice(ctx->device), "cudaSetDevice");
  ONORM_CUDA_TRY(cudaMalloc(out, bytes ? bytes : 1), "cudaMalloc");
  return ONORM_OK;
}

onorm_status release(void* impl, void* ptr, char* err, size_t err_len) {
  auto* ctx = static_cast<CudaContext*>(impl);
  ONORM_CUDA_TRY(cudaSetDevice(ctx->device), "cudaSetDevice");
  ONORM_CUDA_TRY(cudaFree(ptr), "cudaFree");
  return ONORM_OK;
}

onorm_status copy(void* impl, void* dst, const void* src, size_t bytes, onorm_copy_kind kind, char* err,
                  size_t err_len) {
  auto* ctx = static_cast<CudaContext*>(impl);
  ONORM_CUDA_TRY(cudaSetDevice(ctx->device), "cudaSetDevice");
  const cudaMemcpyKind k = kind == ONORM_COPY_HOST_TO_DEVICE   ? cudaMemcpyHostToDevice
                           : kind == ONORM_COPY_DEVICE_TO_HOST ? cudaMemcpyDeviceToHost
                                                               : cudaMemcpyDeviceToDevice;
  const cudaStream_t st = current_stream(ctx);
  ONORM_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, k, st), "cudaMemcpyAsync");
  ONORM_CUDA_TRY(cudaStreamSynchronize(st), "cudaStreamSynchronize");
  return ONORM_OK;
}

const onorm_backend_module kModule = {
    ONORM_BACKEND_MODULE_ABI, ONORM_BACKEND_CUDA, "cuda", device_count, open, close, name,
    set_stream, synchronize, supports_dtype, run, alloc, release, copy};

}  // namespace
}  // namespace cuda
}  // namespace onorm

extern "C" __attribute__((visibility("default"))) const onorm_backend_module* onorm_backend_module_entry(void) {
  return &onorm::cuda::kModule;
}
