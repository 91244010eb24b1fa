/* onlinenorm: the stable C ABI. The contract is ../../docs/API.md (copied from shared/API.md).
   Row operators (softmax, log-softmax, LayerNorm, RMSNorm) on CPU, CUDA and HIP backends. */
#ifndef ONLINENORM_ONLINENORM_H
#define ONLINENORM_ONLINENORM_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define ONORM_API __declspec(dllexport)
#else
#define ONORM_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* 2: version 1, the norms with options (onorm_norm), the backward passes, cross-entropy, softmax
   top-k and partial row states; docs/API.md lists the version-2 sections. */
#define ONORM_API_VERSION 2

/* In C++ the enums get int as their fixed underlying type, so that any int a C caller passes
   is a valid value (checked and refused at run time, not undefined behaviour). Same ABI. */
#ifdef __cplusplus
#define ONORM_ENUM_BASE : int
#else
#define ONORM_ENUM_BASE
#endif

typedef enum onorm_status ONORM_ENUM_BASE {
  ONORM_OK = 0,
  ONORM_ERROR_INVALID_ARGUMENT = 1,    /* null pointer, negative size, bad stride, bad eps, partial overlap, size overflow */
  ONORM_ERROR_UNSUPPORTED = 2,         /* a valid request this backend does not implement (say, a dtype) */
  ONORM_ERROR_BACKEND_UNAVAILABLE = 3, /* backend not compiled in, or no such device */
  ONORM_ERROR_DEVICE = 4,              /* the CUDA or HIP runtime reported an error */
  ONORM_ERROR_OUT_OF_MEMORY = 5,
  ONORM_ERROR_INTERNAL = 6
} onorm_status;

typedef enum onorm_backend ONORM_ENUM_BASE {
  ONORM_BACKEND_AUTO = 0, ONORM_BACKEND_CPU = 1, ONORM_BACKEND_CUDA = 2, ONORM_BACKEND_HIP = 3
} onorm_backend;

typedef enum onorm_dtype ONORM_ENUM_BASE {
  ONORM_F32 = 0, ONORM_F16 = 1, ONORM_BF16 = 2, ONORM_F64 = 3, ONORM_F8_E4M3 = 4,
  ONORM_I8 = 5                          /* v2: quantized norm output only */
} onorm_dtype;

typedef struct onorm_context_t* onorm_context;

/* A batch of rows. Element (r, c) lives at
   (char*)data + (r * row_stride + c) * element_size(dtype); row_stride >= cols, counted in elements. */
typedef struct onorm_rows {
  void* data;
  onorm_dtype dtype;
  int64_t rows;
  int64_t cols;
  int64_t row_stride;
} onorm_rows;

ONORM_API onorm_status onorm_create(onorm_backend backend, int device, onorm_context* out);
ONORM_API void         onorm_destroy(onorm_context ctx);                 /* NULL is a no-op */
ONORM_API onorm_status onorm_set_stream(onorm_context ctx, void* stream); /* cudaStream_t / hipStream_t; ignored on CPU */
ONORM_API onorm_status onorm_synchronize(onorm_context ctx);
/* The stream the context's calls are ordered on: the last onorm_set_stream's (NULL, the default
   stream, until then; NULL on the CPU). For layers that order their own work with the
   library's, such as onlinenorm::nccl. */
ONORM_API onorm_status onorm_get_stream(onorm_context ctx, void** stream);
ONORM_API const char*  onorm_backend_name(onorm_context ctx);   /* e.g. "cpu (AVX3_ZEN4, 2 threads)", "cuda:0 (NVIDIA H200)" */
ONORM_API const char*  onorm_status_string(onorm_status status);
ONORM_API const char*  onorm_last_error(void);                  /* thread-local detail of this thread's last failure */

ONORM_API onorm_status onorm_softmax(onorm_context ctx, const onorm_rows* x, const onorm_rows* y);
ONORM_API onorm_status onorm_log_softmax(onorm_context ctx, const onorm_rows* x, const onorm_rows* y);
ONORM_API onorm_status onorm_layer_norm(onorm_context ctx, const onorm_rows* x,
                                        const void* gamma, const void* beta, double eps,
                                        const onorm_rows* y, float* mean, float* rstd);
ONORM_API onorm_status onorm_rms_norm(onorm_context ctx, const onorm_rows* x,
                                      const void* gamma, double eps,
                                      const onorm_rows* y, float* rstd);

/* Version 2 (docs/API.md, "backward passes"): dx_j = y_j * (dy_j - sum_k y_k dy_k). y, dy and
   dx may have any float dtype the backend takes, independently; dx may alias y or dy exactly. */
ONORM_API onorm_status onorm_softmax_backward(onorm_context ctx, const onorm_rows* y, const onorm_rows* dy,
                                              const onorm_rows* dx);
/* dx_j = dy_j - exp(y_j) * sum_k dy_k, y the log-softmax output; dtypes and aliases as above. */
ONORM_API onorm_status onorm_log_softmax_backward(onorm_context ctx, const onorm_rows* y, const onorm_rows* dy,
                                                  const onorm_rows* dx);

/* Version 2 (docs/API.md, "norms with options"): per row, h = x, or with a residual
   h_j = round_H(x_j + residual_j) (H: residual_out's dtype when given, else x's), stored in
   residual_out; LayerNorm or RMSNorm of h with the scale s_j = weight_offset + gamma_j (gamma and
   beta of param_dtype); y rounded to its dtype, or quantized to ONORM_I8 / ONORM_F8_E4M3 with a
   per-row dynamic scale (y_scale: max|v| / Q) or a static one (y_static_scale). */
typedef enum onorm_norm_kind ONORM_ENUM_BASE { ONORM_LAYER_NORM = 0, ONORM_RMS_NORM = 1 } onorm_norm_kind;

typedef struct onorm_norm_args {
  size_t struct_size;             /* sizeof(onorm_norm_args) as the caller compiled it */
  onorm_norm_kind kind;
  const void* gamma;              /* cols elements of param_dtype, NULL: all 1 (scale weight_offset + 1) */
  const void* beta;               /* cols elements of param_dtype, NULL: all 0; must be NULL for RMSNorm */
  onorm_dtype param_dtype;        /* dtype of gamma and beta: F32, F16, BF16 (F64 on CPU) */
  double eps;
  double weight_offset;           /* the scale is weight_offset + gamma_j (1 for Gemma-style norms) */
  const onorm_rows* residual;     /* optional: the row normalized is h = x + residual */
  const onorm_rows* residual_out; /* optional (needs residual): h is stored here */
  float* mean;                    /* optional, rows floats; LayerNorm only (NULL for RMSNorm) */
  float* rstd;                    /* optional, rows floats */
  float* y_scale;                 /* dynamic quantization: rows floats, written */
  double y_static_scale;          /* static quantization: > 0 and finite */
} onorm_norm_args;

/* Zeroes *args, sets struct_size and kind (NULL is a no-op). */
ONORM_API void onorm_norm_args_init(onorm_norm_args* args, onorm_norm_kind kind);
ONORM_API onorm_status onorm_norm(onorm_context ctx, const onorm_rows* x, const onorm_norm_args* args,
                                  const onorm_rows* y);

/* Version 2 (docs/API.md, "backward passes"): the norms' backward, x the row that was normalized
   (h when a residual was fused), mean and rstd the forward's, taken as given. With
   s_j = weight_offset + gamma_j, g_j = dy_j s_j, xhat_j = (x_j - mean) rstd (RMSNorm: x_j rstd):
     LayerNorm dx_j = rstd (g_j - mean_k g_k - xhat_j mean_k(g_k xhat_k)) + dresidual_j
     RMSNorm   dx_j = rstd (g_j - xhat_j mean_k(g_k xhat_k)) + dresidual_j
   dgamma_j = sum_r dy_rj xhat_rj and dbeta_j = sum_r dy_rj, deterministic (a fixed order, no
   floating-point atomics). dx may alias x or dy exactly; dgamma and dbeta overlap nothing. */
typedef struct onorm_norm_backward_args {
  size_t struct_size;             /* sizeof(onorm_norm_backward_args) */
  onorm_norm_kind kind;
  const void* gamma;              /* as in onorm_norm_args */
  onorm_dtype param_dtype;
  double weight_offset;
  const float* mean;              /* LayerNorm: required, the forward pass's mean */
  const float* rstd;              /* required, the forward pass's rstd */
  const onorm_rows* dresidual;    /* optional: the gradient arriving at residual_out, added to dx */
  float* dgamma;                  /* optional: cols floats, overwritten */
  float* dbeta;                   /* optional: cols floats, overwritten; LayerNorm only (NULL for RMSNorm) */
} onorm_norm_backward_args;

/* Zeroes *args, sets struct_size and kind (NULL is a no-op). */
ONORM_API void onorm_norm_backward_args_init(onorm_norm_backward_args* args, onorm_norm_kind kind);
ONORM_API onorm_status onorm_norm_backward(onorm_context ctx, const onorm_rows* x, const onorm_rows* dy,
                                           const onorm_norm_backward_args* args, const onorm_rows* dx);
/* onorm_norm_backward with gamma in x's dtype (NULL: all 1) and nothing else set. */
ONORM_API onorm_status onorm_layer_norm_backward(onorm_context ctx, const onorm_rows* x, const onorm_rows* dy,
                                                 const void* gamma, const float* mean, const float* rstd,
                                                 const onorm_rows* dx, float* dgamma, float* dbeta);
ONORM_API onorm_status onorm_rms_norm_backward(onorm_context ctx, const onorm_rows* x, const onorm_rows* dy,
                                               const void* gamma, const float* rstd, const onorm_rows* dx,
                                               float* dgamma);

/* Version 2 (docs/API.md, "cross-entropy"): per row with C = cols, t = target,
   lse = log(sum_j exp(x_j)), q_j = (1 - ls) [j == t] + ls / C:
     loss = lse - sum_j q_j x_j + z_loss lse^2,
     dlogits_j = grad_scale ((1 + 2 z_loss lse) softmax_j - q_j).
   Rows whose target is ignore_index: loss 0, a zero gradient row, lse still written. A target
   outside [0, C) that is not ignore_index makes the row's loss and gradient NaN (data, not an
   argument error). dlogits may alias logits exactly. */
typedef struct onorm_cross_entropy_args {
  size_t struct_size;             /* sizeof(onorm_cross_entropy_args) */
  const int64_t* targets;         /* rows class indices (device memory on GPUs) */
  int64_t ignore_index;           /* rows whose target equals it: loss 0, gradient 0 (e.g. -100) */
  double label_smoothing;         /* in [0, 1] */
  double z_loss;                  /* >= 0: adds z_loss * lse^2 to each row's loss */
  float* loss;                    /* required: rows floats */
  float* lse;                     /* optional: rows floats, log-sum-exp of each row */
  const onorm_rows* dlogits;      /* optional: the gradient, computed in the same pass */
  double grad_scale;              /* the gradient is of sum_r grad_scale * loss_r */
} onorm_cross_entropy_args;

/* Zeroes *args and sets struct_size, ignore_index -100 and grad_scale 1 (NULL is a no-op). */
ONORM_API void onorm_cross_entropy_args_init(onorm_cross_entropy_args* args);
ONORM_API onorm_status onorm_cross_entropy(onorm_context ctx, const onorm_rows* logits,
                                           const onorm_cross_entropy_args* args);

/* Version 2 (docs/API.md, "softmax top-k"): per row the k largest entries (ties: the lower column
   first) in descending order; values (rows x k, any float dtype) their softmax over the whole row,
   or with renormalize != 0 the softmax over the k selected logits; indices (rows * k int64, row r
   at indices + r * k) their columns. 1 <= k <= cols; k above 1024 may be UNSUPPORTED. */
ONORM_API onorm_status onorm_softmax_topk(onorm_context ctx, const onorm_rows* x, int64_t k, int renormalize,
                                          const onorm_rows* values, int64_t* indices);

/* Version 2 (docs/API.md, "partial row states"): a row split into column slices is normalized by
   each slice's state, the states merged in a fixed order, and each slice finished with the merged
   state. States live where the backend computes (device memory on GPUs). */
typedef struct onorm_softmax_state { float max; float sum_exp; } onorm_softmax_state; /* sum of exp(x - max) */
typedef struct onorm_moments_state { int64_t count; double mean; double m2; } onorm_moments_state;

/* One state per row of x; cols == 0 writes the identity state of each row. */
ONORM_API onorm_status onorm_softmax_stats(onorm_context ctx, const onorm_rows* x, onorm_softmax_state* states);
ONORM_API onorm_status onorm_moments_stats(onorm_context ctx, const onorm_rows* x, onorm_moments_state* states);
/* Part p's state of row r is in[p * rows + r]; merged left to right in p, pairwise. out may be in
   exactly (it then receives the merged states in part 0's place). */
ONORM_API onorm_status onorm_softmax_merge(onorm_context ctx, int64_t parts, int64_t rows,
                                           const onorm_softmax_state* in, onorm_softmax_state* out);
ONORM_API onorm_status onorm_moments_merge(onorm_context ctx, int64_t parts, int64_t rows,
                                           const onorm_moments_state* in, onorm_moments_state* out);
/* softmax (log == 0) or log-softmax of the slice x with each row's merged state. */
ONORM_API onorm_status onorm_softmax_finish(onorm_context ctx, const onorm_rows* x,
                                            const onorm_softmax_state* states, int log, const onorm_rows* y);
/* The norm of args->kind of the slice x with each row's merged moments: gamma/beta are the
   slice's own columns; eps, weight_offset, static quantization and mean/rstd as onorm_norm. A
   residual is INVALID_ARGUMENT; dynamic quantization (y_scale) is UNSUPPORTED. RMSNorm takes
   mean(x^2) = m2 / count + mean^2. */
ONORM_API onorm_status onorm_norm_finish(onorm_context ctx, const onorm_rows* x,
                                         const onorm_moments_state* states, const onorm_norm_args* args,
                                         const onorm_rows* y);

/* Additions beyond the version-1 contract (they change none of it). */

/* Size in bytes of one element of dtype; 0 for a value outside the enum. */
ONORM_API size_t onorm_dtype_size(onorm_dtype dtype);
/* Which backend kind a context runs on (never ONORM_BACKEND_AUTO). */
ONORM_API onorm_backend onorm_context_backend(onorm_context ctx);
/* Number of devices a backend kind sees now (CPU: 1); 0 when it is not compiled in or has none.
   Never fails: a missing driver or module is 0 devices. */
ONORM_API int onorm_backend_device_count(onorm_backend backend);
/* Why a backend kind is unavailable (module missing, no driver, ...), or "" when available. */
ONORM_API const char* onorm_backend_unavailable_reason(onorm_backend backend);

/* Memory where the context's backend computes (device memory on CUDA/HIP, host memory on CPU),
   so that programs, tests and tools can feed any backend without linking its runtime.
   Copies are synchronous with respect to the context's stream. */
typedef enum onorm_copy_kind ONORM_ENUM_BASE {
  ONORM_COPY_HOST_TO_DEVICE = 0, ONORM_COPY_DEVICE_TO_HOST = 1, ONORM_COPY_DEVICE_TO_DEVICE = 2
} onorm_copy_kind;
ONORM_API onorm_status onorm_malloc(onorm_context ctx, size_t bytes, void** out);
ONORM_API onorm_status onorm_free(onorm_context ctx, void* ptr); /* NULL is a no-op */
ONORM_API onorm_status onorm_memcpy(onorm_context ctx, void* dst, const void* src, size_t bytes,
                                    onorm_copy_kind kind);

/* CPU SIMD targets this machine can run, best first (Highway's names: "AVX3_ZEN4", "AVX3",
   "AVX2", "SSE4", "EMU128", ...). Writes up to capacity pointers to static strings into names
   (which may be NULL when capacity is 0) and returns how many there are. Setting
   ONLINENORM_CPU_TARGET=<name> caps the CPU backend's choice for contexts created after it. */
ONORM_API int onorm_cpu_targets(const char** names, int capacity);

#ifdef __cplusplus
}
#endif

#endif /* ONLINENORM_ONLINENORM_H */
