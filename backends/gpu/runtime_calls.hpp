// The runtime calls of the launcher (launcher.hpp) that CUDA and HIP spell alike but for their
// prefix (cuda / hip), written once: a backend's runtime class `Self` pastes them with its
// prefix P, its context type Ctx (caps, ws, column_ws, ws_event, stream), its error mapping
// fail(error, what, err, err_len) and its capabilities (kClusters, kStaged: the calls for them,
// which differ between the vendors, stay in the class).
#pragma once

#define ONORM_GPU_RUNTIME_CALLS(P, Self, Ctx, fail, clusters, staged)                                     \
  static constexpr bool kClusters = clusters;                                                             \
  static constexpr bool kStaged = staged;                                                                 \
  Self(Ctx& ctx, char* err, size_t err_len) : ctx_(ctx), err_(err), err_len_(err_len) {}                  \
  onorm_status try_call(P##Error_t e, const char* what) {                                                 \
    return e == P##Success ? ONORM_OK : fail(e, what, err_, err_len_);                                    \
  }                                                                                                       \
  const gpu::PlanCaps& caps() const { return ctx_.caps; }                                                \
  gpu::Workspace& workspace() { return ctx_.ws; }                                                         \
  gpu::Workspace& column_workspace() { return ctx_.column_ws; }                                           \
  P##Stream_t stream() const { return ctx_.stream; }                                                      \
  onorm_status check(const char* what) { return try_call(P##GetLastError(), what); }                      \
  onorm_status wait_event() { return try_call(P##EventSynchronize(ctx_.ws_event), #P "EventSynchronize"); } \
  onorm_status free(void* p) { return try_call(P##Free(p), #P "Free(workspace)"); }                        \
  onorm_status malloc(void** p, size_t n) { return try_call(P##Malloc(p, n), #P "Malloc(workspace)"); }    \
  onorm_status zero(void* p, size_t n) {                                                                  \
    return try_call(P##MemsetAsync(p, 0, n, ctx_.stream), #P "MemsetAsync(workspace)");                   \
  }                                                                                                       \
  onorm_status malloc_async(void** p, size_t n) {                                                         \
    return try_call(P##MallocAsync(p, n, ctx_.stream), #P "MallocAsync(staging)");                        \
  }                                                                                                       \
  onorm_status free_async(void* p) { return try_call(P##FreeAsync(p, ctx_.stream), #P "FreeAsync(staging)"); } \
  onorm_status stream_wait_event() {                                                                      \
    return try_call(P##StreamWaitEvent(ctx_.stream, ctx_.ws_event, 0), #P "StreamWaitEvent");             \
  }                                                                                                       \
  onorm_status record_event() { return try_call(P##EventRecord(ctx_.ws_event, ctx_.stream), #P "EventRecord"); } \
  Ctx& ctx_;                                                                                              \
  char* err_;                                                                                             \
  size_t err_len_;
