/* Entry points of libonlinenorm for the library's own layers in other shared libraries
   (onlinenorm::nccl), outside the public contract: cross-entropy's partial states, with which a
   row split by columns across ranks is finished like a whole one (the same stats -> merge ->
   finish composition as the public softmax and moments states, docs/API.md). */
#ifndef ONLINENORM_LAYER_API_H
#define ONLINENORM_LAYER_API_H

#include "onlinenorm/onlinenorm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The bytes of one row's cross-entropy state. */
#define ONORM_LAYER_CROSS_ENTROPY_STATE_BYTES 32

/* The state of each row of the slice logits = columns [col_offset, col_offset + cols) of the
   whole rows (whose width the merged states count); args' targets (columns of the whole row) and
   ignore_index are read, its outputs are not. A slice of no columns writes the identity state. */
ONORM_API onorm_status onorm_layer_cross_entropy_stats(onorm_context ctx, const onorm_rows* logits, int64_t col_offset,
                                                       const onorm_cross_entropy_args* args, void* states);
/* As onorm_softmax_merge: part p's state of row r at in[p * rows + r]. */
ONORM_API onorm_status onorm_layer_cross_entropy_merge(onorm_context ctx, int64_t parts, int64_t rows, const void* in,
                                                       void* out);
/* Each row's loss (and lse) from its merged state, and the slice's dlogits when args asks. */
ONORM_API onorm_status onorm_layer_cross_entropy_finish(onorm_context ctx, const onorm_rows* logits, int64_t col_offset,
                                                        const void* states, const onorm_cross_entropy_args* args);

#ifdef __cplusplus
}
#endif

#endif
