// The CUDA backend module (libonlinenorm_cuda.so): the module table the core library opens
// with dlopen. cudart is linked statically, so the module loads on machines without a driver
// and then reports 0 devices with the runtime's reason.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "cuda_context.hpp"
#include "tune.hpp"

namespace onorm {
namespace cuda {

onorm_status ensure_workspace(CudaContext& ctx, cudaStream_t stream, size_t bytes, char* err, size_t err_len) {
  if (bytes <= ctx.ws_bytes) return ONORM_OK;
  size_t grow = ctx.ws_bytes * 2;
  if (grow < bytes) grow = bytes;
  if (grow < (size_t(1) << 16)) grow = size_t(1) << 16;
  if (ctx.ws) {
    // Earlier launches may still use the old buffer: wait for them before freeing it.
    if (ctx.ws_event_recorded) ONORM_CUDA_TRY(cudaEventSynchronize(ctx.ws_event), "cudaEventSynchronize");
    ONORM_CUDA_TRY(cudaFree(ctx.ws), "cudaFree(workspace)");
    ctx.ws = nullptr;
    ctx.ws_bytes = 0;
  }
  ONORM_CUDA_TRY(cudaMalloc(&ctx.ws, grow), "cudaMalloc(workspace)");
  ctx.ws_bytes = grow;
  // Zeroed tags never match a launch's epoch (which is never 0).
  ONORM_CUDA_TRY(cudaMemsetAsync(ctx.ws, 0, grow, stream), "cudaMemsetAsync(workspace)");
  return ONORM_OK;
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
  ctx->info.sms = prop.multiProcessorCount;
  ctx->info.l2_bytes = prop.l2CacheSize;
  ctx->info.warp = prop.warpSize;
  int coop = 0;
  cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device);
  ctx->info.coop = coop;
  // ONLINENORM_TUNE keys (src/tune.hpp, docs/tuning.md; onorm_create has checked their syntax
  // and ranges). Defaults come from cuda_context.hpp and the device.
  DeviceInfo& info = ctx->info;
  const long long reg = tune::get("reg_cols", -1);
  if (reg >= 0) info.reg_max_cols_f32 = info.reg_max_cols_16 = reg;
  info.force_two_read = static_cast<int>(tune::get("tworead", info.force_two_read));
  info.pipelined = static_cast<int>(tune::get("pipeline", info.pipelined));
  // Three stages of stage_bytes (plus the merge scratch) must fit a block's shared memory.
  const long long stage = tune::get("stage_bytes", -1);
  const long long stage_cap = static_cast<long long>(prop.sharedMemPerBlockOptin) / 3 - 1024;
  if (stage > stage_cap) {
    std::snprintf(err, err_len, "%s: key 'stage_bytes' is %lld; this device allows at most %lld", tune::kEnv,
                  stage, stage_cap);
    delete ctx;
    return ONORM_ERROR_INVALID_ARGUMENT;
  }
  if (stage >= 0) info.staged_chunk_bytes = stage / 16 * 16;
  info.cluster = prop.major >= 9 && tune::get("cluster", 1) != 0;
  const long long cluster_cols = tune::get("cluster_cols", -1);
  if (cluster_cols >= 0) info.cluster_min_cols_f32 = info.cluster_min_cols_16 = cluster_cols;
  info.cluster_max = static_cast<int>(tune::get("cluster_max", info.cluster_max));
  info.cluster_min_tier = static_cast<int>(tune::get("cluster_tier", info.cluster_min_tier));
  info.cluster_prefetch = static_cast<int>(tune::get("cluster_prefetch", info.cluster_prefetch));
  info.short_wide = static_cast<int>(tune::get("short_wide", info.short_wide));
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
  if (ctx->ws) {
    if (ctx->ws_event_recorded) cudaEventSynchronize(ctx->ws_event);
    cudaFree(ctx->ws);
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

int supports_dtype(void*, onorm_dtype dtype, int) {
  return dtype == ONORM_F32 || dtype == ONORM_F16 || dtype == ONORM_BF16;
}

size_t dtype_bytes(onorm_dtype d) { return d == ONORM_F32 ? 4 : 2; }

bool aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

onorm_status run(void* impl, const onorm_request* q, char* err, size_t err_len) {
  auto* ctx = static_cast<CudaContext*>(impl);
  ONORM_CUDA_TRY(cudaSetDevice(ctx->device), "cudaSetDevice");
  gpu::RowArgs a{};
  a.x = q->in[0].data;
  a.y = q->out[0].data;
  a.rows = q->in[0].rows;
  a.cols = q->in[0].cols;
  a.xs = q->in[0].row_stride;
  a.ys = q->out[0].row_stride;
  a.gamma = q->col[0];
  a.beta = q->op == ONORM_OP_LAYER_NORM ? q->col[1] : nullptr;
  a.mean = mean_out(*q);
  a.rstd = rstd_out(*q);
  a.eps = q->param[0];
  a.op = q->op == ONORM_OP_SOFTMAX ? gpu::kOpSoftmax
         : q->op == ONORM_OP_LOG_SOFTMAX ? gpu::kOpLogSoftmax
         : q->op == ONORM_OP_LAYER_NORM ? gpu::kOpLayerNorm
                                          : gpu::kOpRmsNorm;
  a.out_dtype = q->out[0].dtype == ONORM_F32 ? gpu::kF32 : q->out[0].dtype == ONORM_F16 ? gpu::kF16 : gpu::kBF16;
  const size_t in_bytes = dtype_bytes(q->in[0].dtype), out_bytes = dtype_bytes(q->out[0].dtype);
  const int64_t vec = static_cast<int64_t>(16 / in_bytes);  // elements per input vector
  // Vector paths: every row start aligned for a VEC-element access.
  a.x_vec = aligned(a.x, 16) && a.xs % vec == 0;
  const size_t ystore = static_cast<size_t>(vec) * out_bytes < 16 ? static_cast<size_t>(vec) * out_bytes : 16;
  a.y_vec = aligned(a.y, ystore) && a.ys % vec == 0;
  a.gb_vec = aligned(a.gamma, 16) && aligned(a.beta, 16);
  switch (q->in[0].dtype) {
    case ONORM_F32: return launch_rows<float>(*ctx, a, err, err_len);
    case ONORM_F16: return launch_rows<core::f16_bits>(*ctx, a, err, err_len);
    case ONORM_BF16: return launch_rows<core::bf16_bits>(*ctx, a, err, err_len);
    default:
      std::snprintf(err, err_len, "cuda: input dtype %d is not supported", static_cast<int>(q->in[0].dtype));
      return ONORM_ERROR_UNSUPPORTED;
  }
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
