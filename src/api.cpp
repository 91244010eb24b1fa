// The C ABI entry points: argument checks shared by all backends, then dispatch.
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "backend_interface.h"
#include "last_error.hpp"
#include "layer_api.h"
#include "registry.hpp"
#include "tune.hpp"
#include "onlinenorm/core/ops/dispatch.hpp"
#include "validate.hpp"

struct onorm_context_t {
  const onorm_backend_module* module;
  void* impl;
  onorm_backend kind;
  int device;
  void* stream;  // the last stream set_stream accepted
};

namespace {

using onorm::fail;

// The backends write and read the state records of core/ops by these layouts.
static_assert(sizeof(onorm::core::ops::CrossEntropy::StateRecord) == ONORM_LAYER_CROSS_ENTROPY_STATE_BYTES,
              "cross-entropy state layout");
static_assert(sizeof(onorm_softmax_state) == 8 && sizeof(onorm_moments_state) == 24, "state layouts");

// Runs body, turning C++ exceptions into statuses: nothing may unwind through the C ABI.
template <typename Body>
onorm_status guarded(const char* what, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(ONORM_ERROR_OUT_OF_MEMORY, what, ": out of host memory");
  } catch (const std::exception& e) {
    char message[512];
    std::snprintf(message, sizeof message, "%s: %s", what, e.what());
    return fail(ONORM_ERROR_INTERNAL, message);
  } catch (...) {
    return fail(ONORM_ERROR_INTERNAL, what, ": unknown exception");
  }
}

onorm_status backend_status(onorm_status status, const char* err) {
  if (status == ONORM_OK) return ONORM_OK;
  return fail(status, err[0] ? err : onorm_status_string(status));
}

// Checks and runs a request whose op and column/row/scalar slots the entry point filled;
// `given` lists the row tensors the caller passed, inputs then outputs (`inputs` + `outputs`
// of them: the op's own, and optional ones the caller named; NULL is an argument error).
onorm_status run_request(onorm_context ctx, onorm_request& request, const onorm_rows* const* given, int inputs,
                         int outputs) {
  const char* name = onorm::op_name(request.op);
  return guarded(name, [&]() -> onorm_status {
    if (!ctx) return fail(ONORM_ERROR_INVALID_ARGUMENT, std::string(name) + ": context is NULL");
    const onorm::core::ops::Signature& sig = onorm::core::ops::signature(request.op);
    for (int i = 0; i < inputs + outputs; ++i) {
      const char* slot = i < inputs ? sig.input[i] : sig.output[i - inputs];
      if (!given[i]) return fail(ONORM_ERROR_INVALID_ARGUMENT, std::string(name) + ": " + slot + " is NULL");
      if (i < inputs) request.in[i] = *given[i];
      else request.out[i - inputs] = *given[i];
    }
    request.inputs = inputs;
    request.outputs = outputs;
    bool empty = false;
    if (onorm_status s = onorm::validate_request(request, empty)) return s;
    auto refuse = [&](onorm_dtype dt, const char* what) {
      return fail(ONORM_ERROR_UNSUPPORTED, std::string(name) + ": backend " + ctx->module->kind_name +
                                               " does not take " + onorm::dtype_name(dt) + " " + what);
    };
    for (int i = 0; i < inputs + outputs; ++i) {
      const bool is_input = i < inputs;
      const onorm_dtype dt = is_input ? request.in[i].dtype : request.out[i - inputs].dtype;
      if (!ctx->module->supports_dtype(ctx->impl, dt, is_input)) return refuse(dt, is_input ? "input" : "output");
    }
    for (int k = 0; k < sig.cols; ++k)
      if (request.col[k] && !ctx->module->supports_dtype(ctx->impl, request.col_dtype, 1))
        return refuse(request.col_dtype, "parameters");
    if (empty) return ONORM_OK;
    char err[512] = {0};
    return backend_status(ctx->module->run(ctx->impl, &request, err, sizeof err), err);
  });
}

// The request of a version-1 call: its column vectors in x's dtype.
onorm_status run_plain(onorm_context ctx, onorm_request& request, const onorm_rows* const* given) {
  const onorm::core::ops::Signature& sig = onorm::core::ops::signature(request.op);
  if (given[0]) request.col_dtype = given[0]->dtype;
  return run_request(ctx, request, given, sig.inputs, sig.outputs);
}

// The head both args structs share (onorm_norm_args, onorm_norm_backward_args): a struct_size
// at least the library's and a kind of the enum. Sets layer for a valid kind.
onorm_status check_args_head(const char* function, const char* type, size_t struct_size, size_t expected,
                             onorm_norm_kind kind, bool& layer) {
  const std::string fn(function), ty(type);
  if (struct_size < expected)
    return fail(ONORM_ERROR_INVALID_ARGUMENT, fn + ": args->struct_size is " + std::to_string(struct_size) +
                                                  ", smaller than sizeof(" + ty + ") = " + std::to_string(expected) +
                                                  " (call " + ty + "_init)");
  layer = kind == ONORM_LAYER_NORM;
  if (!layer && kind != ONORM_RMS_NORM)
    return fail(ONORM_ERROR_INVALID_ARGUMENT,
                fn + ": kind " + std::to_string(static_cast<int>(kind)) + " is not an onorm_norm_kind");
  return ONORM_OK;
}

onorm_request request_of(onorm_op op) {
  onorm_request q{};
  q.op = op;
  return q;
}

}  // namespace

extern "C" {

onorm_status onorm_create(onorm_backend backend, int device, onorm_context* out) {
  return guarded("onorm_create", [&]() -> onorm_status {
    if (!out) return fail(ONORM_ERROR_INVALID_ARGUMENT, "onorm_create: out is NULL");
    *out = nullptr;
    char err[512] = {0};
    // Checked for every backend, so that a misspelt key never silently measures the default.
    if (!onorm::tune::validate(err, sizeof err)) return fail(ONORM_ERROR_INVALID_ARGUMENT, err);
    onorm_backend kind;
    int resolved = 0;
    if (onorm_status s = onorm::resolve_backend(backend, device, kind, resolved)) return s;
    const onorm_backend_module* module = onorm::backend_entry(kind).module;
    void* impl = nullptr;
    if (onorm_status s = module->open(resolved, &impl, err, sizeof err)) return backend_status(s, err);
    *out = new onorm_context_t{module, impl, kind, resolved, nullptr};
    return ONORM_OK;
  });
}

void onorm_destroy(onorm_context ctx) {
  if (!ctx) return;
  ctx->module->close(ctx->impl);
  delete ctx;
}

onorm_status onorm_set_stream(onorm_context ctx, void* stream) {
  if (!ctx) return fail(ONORM_ERROR_INVALID_ARGUMENT, "onorm_set_stream: context is NULL");
  char err[512] = {0};
  const onorm_status s = backend_status(ctx->module->set_stream(ctx->impl, stream, err, sizeof err), err);
  if (s == ONORM_OK && ctx->kind != ONORM_BACKEND_CPU) ctx->stream = stream;
  return s;
}

onorm_status onorm_get_stream(onorm_context ctx, void** stream) {
  if (!ctx || !stream) return fail(ONORM_ERROR_INVALID_ARGUMENT, "onorm_get_stream: context or stream is NULL");
  *stream = ctx->stream;
  return ONORM_OK;
}

onorm_status onorm_synchronize(onorm_context ctx) {
  if (!ctx) return fail(ONORM_ERROR_INVALID_ARGUMENT, "onorm_synchronize: context is NULL");
  char err[512] = {0};
  return backend_status(ctx->module->synchronize(ctx->impl, err, sizeof err), err);
}

const char* onorm_backend_name(onorm_context ctx) {
  return ctx ? ctx->module->name(ctx->impl) : "(no context)";
}

const char* onorm_status_string(onorm_status status) {
  switch (status) {
    case ONORM_OK: return "ok";
    case ONORM_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case ONORM_ERROR_UNSUPPORTED: return "unsupported";
    case ONORM_ERROR_BACKEND_UNAVAILABLE: return "backend unavailable";
    case ONORM_ERROR_DEVICE: return "device error";
    case ONORM_ERROR_OUT_OF_MEMORY: return "out of memory";
    case ONORM_ERROR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

const char* onorm_last_error(void) { return onorm::last_error_message(); }

onorm_status onorm_softmax(onorm_context ctx, const onorm_rows* x, const onorm_rows* y) {
  onorm_request q = request_of(ONORM_OP_SOFTMAX);
  const onorm_rows* given[] = {x, y};
  return run_plain(ctx, q, given);
}

onorm_status onorm_log_softmax(onorm_context ctx, const onorm_rows* x, const onorm_rows* y) {
  onorm_request q = request_of(ONORM_OP_LOG_SOFTMAX);
  const onorm_rows* given[] = {x, y};
  return run_plain(ctx, q, given);
}

onorm_status onorm_layer_norm(onorm_context ctx, const onorm_rows* x, const void* gamma,
                              const void* beta, double eps, const onorm_rows* y, float* mean,
                              float* rstd) {
  onorm_request q = request_of(ONORM_OP_LAYER_NORM);
  q.col[0] = gamma;
  q.col[1] = beta;
  q.row_out[0] = mean;
  q.row_out[1] = rstd;
  q.param[0] = eps;
  const onorm_rows* given[] = {x, y};
  return run_plain(ctx, q, given);
}

onorm_status onorm_rms_norm(onorm_context ctx, const onorm_rows* x, const void* gamma, double eps,
                            const onorm_rows* y, float* rstd) {
  onorm_request q = request_of(ONORM_OP_RMS_NORM);
  q.col[0] = gamma;
  q.row_out[0] = rstd;
  q.param[0] = eps;
  const onorm_rows* given[] = {x, y};
  return run_plain(ctx, q, given);
}

void onorm_norm_args_init(onorm_norm_args* args, onorm_norm_kind kind) {
  if (!args) return;
  *args = onorm_norm_args{};
  args->struct_size = sizeof(onorm_norm_args);
  args->kind = kind;
}

onorm_status onorm_norm(onorm_context ctx, const onorm_rows* x, const onorm_norm_args* args, const onorm_rows* y) {
  return guarded("onorm_norm", [&]() -> onorm_status {
    auto bad = [](const std::string& what) { return fail(ONORM_ERROR_INVALID_ARGUMENT, "onorm_norm: " + what); };
    if (!args) return bad("args is NULL");
    bool layer = false;
    if (onorm_status s = check_args_head("onorm_norm", "onorm_norm_args", args->struct_size, sizeof(onorm_norm_args),
                                         args->kind, layer))
      return s;
    if (!layer && (args->beta || args->mean)) return bad("RMSNorm takes no beta and no mean");
    if (args->residual_out && !args->residual) return bad("residual_out is given without residual");
    onorm_request q = request_of(layer ? ONORM_OP_LAYER_NORM : ONORM_OP_RMS_NORM);
    q.col[0] = args->gamma;
    q.col[1] = layer ? args->beta : nullptr;
    q.col_dtype = args->param_dtype;
    q.col_offset[0] = args->weight_offset;
    if (layer) {
      q.row_out[0] = args->mean;
      q.row_out[1] = args->rstd;
    } else {
      q.row_out[0] = args->rstd;
    }
    q.param[0] = args->eps;
    q.y_scale = args->y_scale;
    q.y_static_scale = args->y_static_scale;
    // Inputs x (and residual), outputs y (and residual_out).
    const onorm_rows* given[4];
    int inputs = 0, outputs = 0;
    given[inputs++] = x;
    if (args->residual) given[inputs++] = args->residual;
    given[inputs + outputs++] = y;
    if (args->residual_out) given[inputs + outputs++] = args->residual_out;
    return run_request(ctx, q, given, inputs, outputs);
  });
}

namespace {
// The backward passes of softmax and log-softmax: two row inputs, y and dy, and dx.
onorm_status backward_of_y(onorm_context ctx, onorm_op op, const onorm_rows* y, const onorm_rows* dy,
                           const onorm_rows* dx) {
  onorm_request q = request_of(op);
  const onorm_rows* given[] = {y, dy, dx};
  return run_plain(ctx, q, given);
}
}  // namespace

onorm_status onorm_softmax_backward(onorm_context ctx, const onorm_rows* y, const onorm_rows* dy,
                                    const onorm_rows* dx) {
  return backward_of_y(ctx, ONORM_OP_SOFTMAX_BACKWARD, y, dy, dx);
}

onorm_status onorm_log_softmax_backward(onorm_context ctx, const onorm_rows* y, const onorm_rows* dy,
                                        const onorm_rows* dx) {
  return backward_of_y(ctx, ONORM_OP_LOG_SOFTMAX_BACKWARD, y, dy, dx);
}

void onorm_norm_backward_args_init(onorm_norm_backward_args* args, onorm_norm_kind kind) {
  if (!args) return;
  *args = onorm_norm_backward_args{};
  args->struct_size = sizeof(onorm_norm_backward_args);
  args->kind = kind;
}

onorm_status onorm_norm_backward(onorm_context ctx, const onorm_rows* x, const onorm_rows* dy,
                                 const onorm_norm_backward_args* args, const onorm_rows* dx) {
  return guarded("onorm_norm_backward", [&]() -> onorm_status {
    auto bad = [](const std::string& what) {
      return fail(ONORM_ERROR_INVALID_ARGUMENT, "onorm_norm_backward: " + what);
    };
    if (!args) return bad("args is NULL");
    bool layer = false;
    if (onorm_status s = check_args_head("onorm_norm_backward", "onorm_norm_backward_args", args->struct_size,
                                         sizeof(onorm_norm_backward_args), args->kind, layer))
      return s;
    if (!layer && (args->mean || args->dbeta)) return bad("RMSNorm takes no mean and no dbeta");
    onorm_request q = request_of(layer ? ONORM_OP_LAYER_NORM_BACKWARD : ONORM_OP_RMS_NORM_BACKWARD);
    q.col[0] = args->gamma;
    q.col_dtype = args->param_dtype;
    q.col_offset[0] = args->weight_offset;
    if (layer) {
      q.row_in[0] = args->mean;
      q.row_in[1] = args->rstd;
      q.col_out[0] = args->dgamma;
      q.col_out[1] = args->dbeta;
    } else {
      q.row_in[0] = args->rstd;
      q.col_out[0] = args->dgamma;
    }
    // Inputs x, dy (and dresidual), output dx.
    const onorm_rows* given[4];
    int inputs = 0;
    given[inputs++] = x;
    given[inputs++] = dy;
    if (args->dresidual) given[inputs++] = args->dresidual;
    given[inputs] = dx;
    return run_request(ctx, q, given, inputs, 1);
  });
}

onorm_status onorm_layer_norm_backward(onorm_context ctx, const onorm_rows* x, const onorm_rows* dy,
                                       const void* gamma, const float* mean, const float* rstd,
                                       const onorm_rows* dx, float* dgamma, float* dbeta) {
  onorm_norm_backward_args a;
  onorm_norm_backward_args_init(&a, ONORM_LAYER_NORM);
  a.gamma = gamma;
  a.param_dtype = x ? x->dtype : ONORM_F32;
  a.mean = mean;
  a.rstd = rstd;
  a.dgamma = dgamma;
  a.dbeta = dbeta;
  return onorm_norm_backward(ctx, x, dy, &a, dx);
}

onorm_status onorm_rms_norm_backward(onorm_context ctx, const onorm_rows* x, const onorm_rows* dy,
                                     const void* gamma, const float* rstd, const onorm_rows* dx, float* dgamma) {
  onorm_norm_backward_args a;
  onorm_norm_backward_args_init(&a, ONORM_RMS_NORM);
  a.gamma = gamma;
  a.param_dtype = x ? x->dtype : ONORM_F32;
  a.rstd = rstd;
  a.dgamma = dgamma;
  return onorm_norm_backward(ctx, x, dy, &a, dx);
}

void onorm_cross_entropy_args_init(onorm_cross_entropy_args* args) {
  if (!args) return;
  *args = onorm_cross_entropy_args{};
  args->struct_size = sizeof(onorm_cross_entropy_args);
  args->ignore_index = -100;
  args->grad_scale = 1.0;
}

namespace {
// A cross-entropy request of stage `stage` over the slice [col_offset, +cols) of the rows: the
// whole call, a slice's stats (no outputs: states written) or a slice's finish from merged
// states.
onorm_status cross_entropy_of(const char* fn, onorm_context ctx, onorm_stage stage, const onorm_rows* logits,
                              int64_t col_offset, const onorm_cross_entropy_args* args,
                              const void* state_in, void* state_out) {
  return guarded(fn, [&]() -> onorm_status {
    const std::string name(fn);
    if (!args) return fail(ONORM_ERROR_INVALID_ARGUMENT, name + ": args is NULL");
    if (args->struct_size < sizeof(onorm_cross_entropy_args))
      return fail(ONORM_ERROR_INVALID_ARGUMENT,
                  name + ": args->struct_size is " + std::to_string(args->struct_size) +
                      ", smaller than sizeof(onorm_cross_entropy_args) = " +
                      std::to_string(sizeof(onorm_cross_entropy_args)) + " (call onorm_cross_entropy_args_init)");
    onorm_request q = request_of(ONORM_OP_CROSS_ENTROPY);
    q.stage = stage;
    q.state_in = state_in;
    q.state_out = state_out;
    q.cols_offset = col_offset;
    q.targets = args->targets;
    q.ignore_index = args->ignore_index;
    q.param[0] = args->label_smoothing;
    q.param[1] = args->z_loss;
    q.param[2] = args->grad_scale;
    const bool stats = stage == ONORM_STAGE_STATS;
    q.row_out[0] = stats ? nullptr : args->loss;
    q.row_out[1] = stats ? nullptr : args->lse;
    const onorm_rows* given[] = {logits, args->dlogits};
    return run_request(ctx, q, given, 1, !stats && args->dlogits ? 1 : 0);
  });
}

// The merge of `parts` x `rows` partial states of op (its records: softmax's, the moments,
// cross-entropy's).
onorm_status merge_of(onorm_context ctx, onorm_op op, int64_t parts, int64_t rows, const void* in, void* out) {
  onorm_request q = request_of(op);
  q.stage = ONORM_STAGE_MERGE;
  q.state_parts = parts;
  q.state_rows = rows;
  q.state_in = in;
  q.state_out = out;
  return run_request(ctx, q, nullptr, 0, 0);
}
}  // namespace

onorm_status onorm_cross_entropy(onorm_context ctx, const onorm_rows* logits, const onorm_cross_entropy_args* args) {
  return cross_entropy_of("onorm_cross_entropy", ctx, ONORM_STAGE_WHOLE, logits, 0, args, nullptr, nullptr);
}

onorm_status onorm_layer_cross_entropy_stats(onorm_context ctx, const onorm_rows* logits, int64_t col_offset,
                                             const onorm_cross_entropy_args* args, void* states) {
  return cross_entropy_of("cross_entropy stats", ctx, ONORM_STAGE_STATS, logits, col_offset, args, nullptr, states);
}

onorm_status onorm_layer_cross_entropy_merge(onorm_context ctx, int64_t parts, int64_t rows, const void* in, void* out) {
  return merge_of(ctx, ONORM_OP_CROSS_ENTROPY, parts, rows, in, out);
}

onorm_status onorm_layer_cross_entropy_finish(onorm_context ctx, const onorm_rows* logits, int64_t col_offset,
                                              const void* states, const onorm_cross_entropy_args* args) {
  return cross_entropy_of("cross_entropy finish", ctx, ONORM_STAGE_FINISH, logits, col_offset, args, states, nullptr);
}

onorm_status onorm_softmax_topk(onorm_context ctx, const onorm_rows* x, int64_t k, int renormalize,
                                const onorm_rows* values, int64_t* indices) {
  onorm_request q = request_of(ONORM_OP_SOFTMAX_TOPK);
  q.k = k;
  q.renormalize = renormalize != 0;
  q.indices = indices;
  const onorm_rows* given[] = {x, values};
  return run_request(ctx, q, given, 1, 1);
}

namespace {
// Partial row states: the statistics of op's rows into states.
onorm_status stats_of(onorm_context ctx, onorm_op op, const onorm_rows* x, void* states) {
  onorm_request q = request_of(op);
  q.stage = ONORM_STAGE_STATS;
  q.state_out = states;
  const onorm_rows* given[] = {x};
  return run_request(ctx, q, given, 1, 0);
}
}  // namespace

onorm_status onorm_softmax_stats(onorm_context ctx, const onorm_rows* x, onorm_softmax_state* states) {
  return stats_of(ctx, ONORM_OP_SOFTMAX, x, states);
}
onorm_status onorm_moments_stats(onorm_context ctx, const onorm_rows* x, onorm_moments_state* states) {
  return stats_of(ctx, ONORM_OP_LAYER_NORM, x, states);
}
onorm_status onorm_softmax_merge(onorm_context ctx, int64_t parts, int64_t rows, const onorm_softmax_state* in,
                                 onorm_softmax_state* out) {
  return merge_of(ctx, ONORM_OP_SOFTMAX, parts, rows, in, out);
}
onorm_status onorm_moments_merge(onorm_context ctx, int64_t parts, int64_t rows, const onorm_moments_state* in,
                                 onorm_moments_state* out) {
  return merge_of(ctx, ONORM_OP_LAYER_NORM, parts, rows, in, out);
}

onorm_status onorm_softmax_finish(onorm_context ctx, const onorm_rows* x, const onorm_softmax_state* states, int log,
                                  const onorm_rows* y) {
  onorm_request q = request_of(log ? ONORM_OP_LOG_SOFTMAX : ONORM_OP_SOFTMAX);
  q.stage = ONORM_STAGE_FINISH;
  q.state_in = states;
  const onorm_rows* given[] = {x, y};
  return run_plain(ctx, q, given);
}

onorm_status onorm_norm_finish(onorm_context ctx, const onorm_rows* x, const onorm_moments_state* states,
                               const onorm_norm_args* args, const onorm_rows* y) {
  return guarded("onorm_norm_finish", [&]() -> onorm_status {
    auto bad = [](const std::string& what) { return fail(ONORM_ERROR_INVALID_ARGUMENT, "onorm_norm_finish: " + what); };
    if (!args) return bad("args is NULL");
    bool layer = false;
    if (onorm_status s = check_args_head("onorm_norm_finish", "onorm_norm_args", args->struct_size,
                                         sizeof(onorm_norm_args), args->kind, layer))
      return s;
    if (!layer && (args->beta || args->mean)) return bad("RMSNorm takes no beta and no mean");
    if (args->residual || args->residual_out) return bad("a finish takes no residual (add it before the stats call)");
    onorm_request q = request_of(layer ? ONORM_OP_LAYER_NORM : ONORM_OP_RMS_NORM);
    q.stage = ONORM_STAGE_FINISH;
    q.state_in = states;
    q.col[0] = args->gamma;
    q.col[1] = layer ? args->beta : nullptr;
    q.col_dtype = args->param_dtype;
    q.col_offset[0] = args->weight_offset;
    q.row_out[0] = layer ? args->mean : args->rstd;
    q.row_out[1] = layer ? args->rstd : nullptr;
    q.param[0] = args->eps;
    q.y_scale = args->y_scale;
    q.y_static_scale = args->y_static_scale;
    const onorm_rows* given[] = {x, y};
    return run_request(ctx, q, given, 1, 1);
  });
}

onorm_status onorm_malloc(onorm_context ctx, size_t bytes, void** out) {
  if (!ctx || !out) return fail(ONORM_ERROR_INVALID_ARGUMENT, "onorm_malloc: context or out is NULL");
  *out = nullptr;
  char err[512] = {0};
  return backend_status(ctx->module->alloc(ctx->impl, bytes, out, err, sizeof err), err);
}

onorm_status onorm_free(onorm_context ctx, void* ptr) {
  if (!ctx) return fail(ONORM_ERROR_INVALID_ARGUMENT, "onorm_free: context is NULL");
  if (!ptr) return ONORM_OK;
  char err[512] = {0};
  return backend_status(ctx->module->release(ctx->impl, ptr, err, sizeof err), err);
}

onorm_status onorm_memcpy(onorm_context ctx, void* dst, const void* src, size_t bytes, onorm_copy_kind kind) {
  if (!ctx) return fail(ONORM_ERROR_INVALID_ARGUMENT, "onorm_memcpy: context is NULL");
  if (kind < ONORM_COPY_HOST_TO_DEVICE || kind > ONORM_COPY_DEVICE_TO_DEVICE)
    return fail(ONORM_ERROR_INVALID_ARGUMENT, "onorm_memcpy: kind is not an onorm_copy_kind");
  if (bytes == 0) return ONORM_OK;
  if (!dst || !src) return fail(ONORM_ERROR_INVALID_ARGUMENT, "onorm_memcpy: dst or src is NULL");
  char err[512] = {0};
  return backend_status(ctx->module->copy(ctx->impl, dst, src, bytes, kind, err, sizeof err), err);
}

size_t onorm_dtype_size(onorm_dtype dtype) { return onorm::dtype_size(dtype); }

onorm_backend onorm_context_backend(onorm_context ctx) { return ctx ? ctx->kind : ONORM_BACKEND_AUTO; }

int onorm_backend_device_count(onorm_backend backend) {
  try {
    return onorm::backend_entry(backend).device_count;
  } catch (...) {
    return 0;
  }
}

const char* onorm_backend_unavailable_reason(onorm_backend backend) {
  try {
    return onorm::backend_entry(backend).unavailable_reason.c_str();
  } catch (...) {
    return "internal error";
  }
}

}  // extern "C"
