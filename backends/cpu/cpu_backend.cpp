// The CPU backend's entry in the registry: the module table, threads over rows.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend_interface.h"
#include "scalar_rows.hpp"

namespace onorm {
namespace cpu {
namespace {

struct CpuContext {
  std::string name;
};

int device_count(char*, size_t) { return 1; }

onorm_status open(int device, void** impl, char* err, size_t err_len) {
  if (device != 0) {
    std::snprintf(err, err_len, "cpu backend has one device (0); asked for %d", device);
    return ONORM_ERROR_BACKEND_UNAVAILABLE;
  }
  auto* ctx = new CpuContext;
  ctx->name = "cpu (scalar, " + std::to_string(omp_get_max_threads()) + " threads)";
  *impl = ctx;
  return ONORM_OK;
}

void close(void* impl) { delete static_cast<CpuContext*>(impl); }
const char* name(void* impl) { return static_cast<CpuContext*>(impl)->name.c_str(); }
onorm_status set_stream(void*, void*, char*, size_t) { return ONORM_OK; }
onorm_status synchronize(void*, char*, size_t) { return ONORM_OK; }

int supports_dtype(void*, onorm_dtype dtype, int) {
  return dtype == ONORM_F32 || dtype == ONORM_F16 || dtype == ONORM_BF16 || dtype == ONORM_F64;
}

onorm_status run(void*, const onorm_request* q, char*, size_t) {
  const int64_t rows = q->x.rows;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) scalar_run_rows(*q, r, r + 1);
  return ONORM_OK;
}

onorm_status alloc(void*, size_t bytes, void** out, char* err, size_t err_len) {
  *out = std::malloc(bytes ? bytes : 1);
  if (*out) return ONORM_OK;
  std::snprintf(err, err_len, "cpu: could not allocate %zu bytes", bytes);
  return ONORM_ERROR_OUT_OF_MEMORY;
}
onorm_status release(void*, void* ptr, char*, size_t) {
  std::free(ptr);
  return ONORM_OK;
}
onorm_status copy(void*, void* dst, const void* src, size_t bytes, onorm_copy_kind, char*, size_t) {
  std::memmove(dst, src, bytes);
  return ONORM_OK;
}

const onorm_backend_module kModule = {
    ONORM_BACKEND_MODULE_ABI, ONORM_BACKEND_CPU, "cpu", device_count, open, close, name,
    set_stream, synchronize, supports_dtype, run, alloc, release, copy};

}  // namespace
}  // namespace cpu

extern "C" const onorm_backend_module* onorm_cpu_backend_module(void) { return &cpu::kModule; }

}  // namespace onorm

// Placeholder until the Highway kernels land: the scalar kernels are the only target.
extern "C" ONORM_API int onorm_cpu_targets(const char** names, int capacity) {
  if (capacity > 0 && names) names[0] = "SCALAR";
  return 1;
}

namespace onorm {

}  // namespace onorm
