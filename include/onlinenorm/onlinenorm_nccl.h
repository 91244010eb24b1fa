/* onlinenorm::nccl: rows split by columns across the ranks of an NCCL (NVIDIA) or RCCL (AMD)
   communicator (docs/API.md, "multi-GPU rows"). Every rank holds the same rows, its own slice of
   their columns (rank order = column order), and calls the same function with the same shapes
   of rows and arguments; each call runs one collective, an all-gather of per-row states, on the
   context's stream (onorm_get_stream), and is asynchronous like every GPU call of the library.
   Results equal the single-device call on the whole rows within its bound; mean and rstd are
   bitwise the same on every rank (every rank merges the same states in the same order).
   A call refused for its arguments returns before the collective: all ranks must be refused
   alike (they are, for the same shapes and arguments), or the others wait in the collective. */
#ifndef ONLINENORM_ONLINENORM_NCCL_H
#define ONLINENORM_ONLINENORM_NCCL_H

#include "onlinenorm/onlinenorm.h"

#if defined(ONORM_USE_RCCL)
#include <rccl/rccl.h>
#else
#include <nccl.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* softmax (log == 0) or log-softmax of the rows whose slice this rank holds in x, into y. */
ONORM_API onorm_status onorm_nccl_softmax(onorm_context ctx, ncclComm_t comm, const onorm_rows* x, int log,
                                          const onorm_rows* y);
/* onorm_norm of the split rows: args' gamma and beta hold this rank's columns; a residual or a
   dynamic scale (y_scale, which needs every column's value) is ONORM_ERROR_UNSUPPORTED here. */
ONORM_API onorm_status onorm_nccl_norm(onorm_context ctx, ncclComm_t comm, const onorm_rows* x,
                                       const onorm_norm_args* args, const onorm_rows* y);
/* Cross-entropy of the split logits; targets are global columns, col_offset this rank's first
   column; every rank gets the whole loss. */
ONORM_API onorm_status onorm_nccl_cross_entropy(onorm_context ctx, ncclComm_t comm, const onorm_rows* logits,
                                                int64_t col_offset, const onorm_cross_entropy_args* args);

#ifdef __cplusplus
}
#endif

#endif /* ONLINENORM_ONLINENORM_NCCL_H */
