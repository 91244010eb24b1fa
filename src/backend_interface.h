/* The interface between the core library and a backend: a table of C functions, so that a
   backend may live in the library itself (CPU) or in a module the library opens at run time
   (CUDA, HIP) without any C++ ABI crossing the boundary.
   Requests reach a backend validated (shared/API.md): shapes match, sizes are positive,
   pointers are non-null, nothing overlaps, and supports_dtype() accepted both dtypes. */
#ifndef ONLINENORM_BACKEND_INTERFACE_H
#define ONLINENORM_BACKEND_INTERFACE_H

#include "onlinenorm/core/ops/op_list.h"
#include "onlinenorm/onlinenorm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The request a backend runs: an op (core/ops/op_list.h) and its tensors by slot, as the op's
   signature names them (core/ops/<op>.hpp: kSignature). A new op or a new optional tensor is a
   new slot meaning, not a new interface. */
#define ONORM_REQUEST_INPUTS 3
#define ONORM_REQUEST_OUTPUTS 2
#define ONORM_REQUEST_COLS 2
#define ONORM_REQUEST_ROW_OUTS 2
#define ONORM_REQUEST_PARAMS 3
#define ONORM_REQUEST_ROW_INS 2
#define ONORM_REQUEST_COL_OUTS 2

typedef enum onorm_stage {
  ONORM_STAGE_WHOLE = 0, ONORM_STAGE_STATS = 1, ONORM_STAGE_MERGE = 2, ONORM_STAGE_FINISH = 3
} onorm_stage;

typedef struct onorm_request {
  onorm_op op;
  int inputs, outputs;                   /* slots filled: the op's row tensors, and its optional ones
                                            (the norms' residual and residual_out; dresidual) */
  onorm_rows in[ONORM_REQUEST_INPUTS];   /* row tensors read: rows >= 1, cols >= 1, one shape */
  onorm_rows out[ONORM_REQUEST_OUTPUTS]; /* row tensors written, the inputs' shape; an output may
                                            alias the inputs its signature names exactly (same
                                            data, stride, dtype size) */
  const void* col[ONORM_REQUEST_COLS];   /* cols elements of col_dtype, or NULL (the op's default) */
  onorm_dtype col_dtype;
  double col_offset[ONORM_REQUEST_COLS]; /* added to column k as it loads, the default included
                                            (the norms' weight_offset: the scale is offset + gamma) */
  float* row_out[ONORM_REQUEST_ROW_OUTS];/* rows floats, or NULL */
  double param[ONORM_REQUEST_PARAMS];    /* checked by the op's rule (eps: >= 0, not NaN) */
  /* Output 0 of dtype ONORM_I8 or ONORM_F8_E4M3 (the norms): q = quant(v / scale), with the
     row's scale max|v| / Q written to y_scale (dynamic), else y_static_scale. */
  float* y_scale;
  double y_static_scale;
  const float* row_in[ONORM_REQUEST_ROW_INS]; /* rows floats read (the norms' backward: mean, rstd) */
  float* col_out[ONORM_REQUEST_COL_OUTS];     /* cols floats written, sums over every row, or NULL
                                                 (dgamma, dbeta) */
  /* Partial row states (API.md): a row op's statistics only (STATS: no outputs; one state per row
     into state_out, the identity for cols == 0), its finish from given states (FINISH: state_in),
     or the merge of state_parts x state_rows states (MERGE: no row tensors; state_in into
     state_out, which may be state_in exactly). States are onorm_softmax_state (softmax,
     log-softmax) or onorm_moments_state (LayerNorm, RMSNorm). */
  onorm_stage stage;
  void* state_out;
  const void* state_in;
  int64_t state_parts, state_rows;
  /* Cross-entropy: rows targets (ignore_index: a zero row); softmax top-k: k and renormalize,
     rows * k indices written. */
  const int64_t* targets;
  int64_t ignore_index;
  /* Cross-entropy's partial states (rows split by columns across ranks): this slice's first
     column of the whole row (targets are the whole row's columns; the merged state counts its
     width); 0 for a whole call. */
  int64_t cols_offset;
  int64_t k;
  int renormalize;
  int64_t* indices;
} onorm_request;

/* Bumped whenever this struct or onorm_request changes; a module of another version is refused. */
#define ONORM_BACKEND_MODULE_ABI 5
#define ONORM_BACKEND_MODULE_ENTRY "onorm_backend_module_entry"

typedef struct onorm_backend_module {
  int abi; /* ONORM_BACKEND_MODULE_ABI */
  onorm_backend kind;
  const char* kind_name; /* "cpu", "cuda", "hip" */
  /* Devices usable now; on 0, writes the reason into why. Never fails otherwise. */
  int (*device_count)(char* why, size_t why_len);
  onorm_status (*open)(int device, void** impl, char* err, size_t err_len);
  void (*close)(void* impl);
  const char* (*name)(void* impl); /* valid until close */
  onorm_status (*set_stream)(void* impl, void* stream, char* err, size_t err_len);
  onorm_status (*synchronize)(void* impl, char* err, size_t err_len);
  /* Nonzero when the backend takes this dtype as input (is_input) or as output. */
  int (*supports_dtype)(void* impl, onorm_dtype dtype, int is_input);
  /* Runs a validated request. Must be safe to call from several threads on one impl. */
  onorm_status (*run)(void* impl, const onorm_request* request, char* err, size_t err_len);
  /* Memory where this backend computes; copies complete before they return. */
  onorm_status (*alloc)(void* impl, size_t bytes, void** out, char* err, size_t err_len);
  onorm_status (*release)(void* impl, void* ptr, char* err, size_t err_len);
  onorm_status (*copy)(void* impl, void* dst, const void* src, size_t bytes, onorm_copy_kind kind,
                       char* err, size_t err_len);
} onorm_backend_module;

/* Every loadable module exports this symbol (ONORM_BACKEND_MODULE_ENTRY). */
typedef const onorm_backend_module* (*onorm_backend_module_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif
