// onlinenorm::nccl: a row split by columns across ranks is the partial-states composition
// (docs/API.md) with the states gathered between its steps: each rank's stats of its slice,
// one in-place all-gather of them (rank-major: exactly the merge's part-major layout), the merge
// of every part in rank order (the same bits on every rank), and each rank's finish of its own
// slice. Everything is ordered on the context's stream.
#include "onlinenorm/onlinenorm_nccl.h"

#include <string>

#include "gpu_runtime.hpp"
#include "last_error.hpp"
#include "layer_api.h"

namespace onorm {
namespace nccl {
namespace {

onorm_status refuse(const char* fn, const std::string& why) {
  return fail(ONORM_ERROR_INVALID_ARGUMENT, (std::string(fn) + ": " + why).c_str());
}

onorm_status nccl_failed(const char* fn, const char* what, ncclResult_t r) {
  return fail(ONORM_ERROR_DEVICE, (std::string(fn) + ": " + what + ": " + ncclGetErrorString(r)).c_str());
}

// What every call checks before any collective: a GPU context, a communicator, x, and this
// rank's place in the communicator.
struct Call {
  const char* fn;
  int ranks = 0, rank = 0, device = 0;
  Stream stream = nullptr;
};

onorm_status begin(Call& c, onorm_context ctx, ncclComm_t comm, const onorm_rows* x) {
  if (!ctx) return refuse(c.fn, "context is NULL");
  if (!comm) return refuse(c.fn, "comm is NULL");
  if (!x) return refuse(c.fn, "x is NULL");
#if defined(ONORM_USE_RCCL)
  const onorm_backend gpu = ONORM_BACKEND_HIP;
#else
  const onorm_backend gpu = ONORM_BACKEND_CUDA;
#endif
  if (onorm_context_backend(ctx) != gpu)
    return fail(ONORM_ERROR_UNSUPPORTED,
                (std::string(c.fn) + ": the context's backend is not this layer's GPU (" + onorm_backend_name(ctx) + ")").c_str());
  if (ncclResult_t r = ncclCommCount(comm, &c.ranks)) return nccl_failed(c.fn, "ncclCommCount", r);
  if (ncclResult_t r = ncclCommUserRank(comm, &c.rank)) return nccl_failed(c.fn, "ncclCommUserRank", r);
  if (ncclResult_t r = ncclCommCuDevice(comm, &c.device)) return nccl_failed(c.fn, "ncclCommCuDevice", r);
  void* stream = nullptr;
  if (onorm_status s = onorm_get_stream(ctx, &stream)) return s;
  c.stream = static_cast<Stream>(stream);
  return ONORM_OK;
}

// The gathered states of every rank and their merge, in stream-ordered scratch:
// states[p * rows + r] is rank p's state of row r, merged[r] the merge.
template <typename Record>
struct Gathered {
  void* scratch = nullptr;
  Record* states = nullptr;
  Record* merged = nullptr;
};

template <typename Record, typename Stats, typename Merge>
onorm_status gather_and_merge(const Call& c, ncclComm_t comm, const onorm_rows* x,
                              Gathered<Record>& g, Stats&& stats, Merge&& merge) {
  const int64_t rows = x->rows;
  const size_t bytes = sizeof(Record) * static_cast<size_t>(rows) * static_cast<size_t>(c.ranks + 1);
  if (!malloc_async(&g.scratch, bytes, c.device, c.stream))
    return fail(ONORM_ERROR_OUT_OF_MEMORY,
                (std::string(c.fn) + ": no device memory for " + std::to_string(bytes) + " bytes of states: " +
                 last_runtime_error()).c_str());
  g.states = static_cast<Record*>(g.scratch);
  g.merged = g.states + rows * c.ranks;
  Record* mine = g.states + rows * c.rank;
  if (onorm_status s = stats(mine)) return s;
  if (ncclResult_t r = ncclAllGather(mine, g.states, sizeof(Record) * static_cast<size_t>(rows), ncclUint8, comm, c.stream))
    return nccl_failed(c.fn, "ncclAllGather", r);
  return merge(c.ranks, rows, g.states, g.merged);
}

template <typename Record>
onorm_status release(const Call& c, Gathered<Record>& g, onorm_status s) {
  if (g.scratch && !free_async(g.scratch, c.stream) && s == ONORM_OK)
    return fail(ONORM_ERROR_DEVICE, (std::string(c.fn) + ": freeing the states: " + last_runtime_error()).c_str());
  return s;
}

}  // namespace
}  // namespace nccl
}  // namespace onorm

using onorm::nccl::Call;
using onorm::nccl::Gathered;

extern "C" {

onorm_status onorm_nccl_softmax(onorm_context ctx, ncclComm_t comm, const onorm_rows* x, int log, const onorm_rows* y) {
  Call c{"onorm_nccl_softmax"};
  if (onorm_status s = onorm::nccl::begin(c, ctx, comm, x)) return s;
  if (!y) return onorm::nccl::refuse(c.fn, "y is NULL");
  if (x->rows == 0) return ONORM_OK;
  Gathered<onorm_softmax_state> g;
  onorm_status s = onorm::nccl::gather_and_merge(
      c, comm, x, g, [&](onorm_softmax_state* mine) { return onorm_softmax_stats(ctx, x, mine); },
      [&](int64_t parts, int64_t rows, const onorm_softmax_state* in, onorm_softmax_state* out) {
        return onorm_softmax_merge(ctx, parts, rows, in, out);
      });
  if (s == ONORM_OK) s = onorm_softmax_finish(ctx, x, g.merged, log, y);
  return onorm::nccl::release(c, g, s);
}

onorm_status onorm_nccl_norm(onorm_context ctx, ncclComm_t comm, const onorm_rows* x, const onorm_norm_args* args,
                             const onorm_rows* y) {
  Call c{"onorm_nccl_norm"};
  if (onorm_status s = onorm::nccl::begin(c, ctx, comm, x)) return s;
  if (!args) return onorm::nccl::refuse(c.fn, "args is NULL");
  if (!y) return onorm::nccl::refuse(c.fn, "y is NULL");
  if (args->struct_size < sizeof(onorm_norm_args)) return onorm::nccl::refuse(c.fn, "args->struct_size is too small");
  if (args->residual || args->residual_out || args->y_scale)
    return onorm::fail(ONORM_ERROR_UNSUPPORTED,
                       "onorm_nccl_norm: a residual and a dynamic scale (y_scale) are not taken across ranks");
  if (x->rows == 0) return ONORM_OK;
  Gathered<onorm_moments_state> g;
  onorm_status s = onorm::nccl::gather_and_merge(
      c, comm, x, g, [&](onorm_moments_state* mine) { return onorm_moments_stats(ctx, x, mine); },
      [&](int64_t parts, int64_t rows, const onorm_moments_state* in, onorm_moments_state* out) {
        return onorm_moments_merge(ctx, parts, rows, in, out);
      });
  if (s == ONORM_OK) s = onorm_norm_finish(ctx, x, g.merged, args, y);
  return onorm::nccl::release(c, g, s);
}

onorm_status onorm_nccl_cross_entropy(onorm_context ctx, ncclComm_t comm, const onorm_rows* logits,
                                      int64_t col_offset, const onorm_cross_entropy_args* args) {
  Call c{"onorm_nccl_cross_entropy"};
  if (onorm_status s = onorm::nccl::begin(c, ctx, comm, logits)) return s;
  if (!args) return onorm::nccl::refuse(c.fn, "args is NULL");
  if (logits->rows == 0) return ONORM_OK;
  struct Bytes {
    unsigned char b[ONORM_LAYER_CROSS_ENTROPY_STATE_BYTES];
  };
  Gathered<Bytes> g;
  onorm_status s = onorm::nccl::gather_and_merge(
      c, comm, logits, g,
      [&](Bytes* mine) { return onorm_layer_cross_entropy_stats(ctx, logits, col_offset, args, mine); },
      [&](int64_t parts, int64_t rows, const Bytes* in, Bytes* out) {
        return onorm_layer_cross_entropy_merge(ctx, parts, rows, in, out);
      });
  if (s == ONORM_OK) s = onorm_layer_cross_entropy_finish(ctx, logits, col_offset, g.merged, args);
  return onorm::nccl::release(c, g, s);
}

}  // extern "C"
