/* The list of row operators: the one place an op is named. The backend request's op id
   (onorm_op), the op names of the C ABI's messages, the tool and the benches, validation's and
   the reference's dispatch, and the backends' dispatch (core/ops/dispatch.hpp) all expand it.
   X(ID, name, Type): ONORM_OP_<ID>, its text, its definition onorm::core::ops::Type
   (core/ops/<name>.hpp, included below for C++). C-compatible: included by
   src/backend_interface.h. */
#ifndef ONLINENORM_CORE_OPS_OP_LIST_H
#define ONLINENORM_CORE_OPS_OP_LIST_H

#define ONORM_OP_LIST(X)                                             \
  X(SOFTMAX, softmax, Softmax)                                       \
  X(LOG_SOFTMAX, log_softmax, LogSoftmax)                            \
  X(LAYER_NORM, layer_norm, LayerNorm)                               \
  X(RMS_NORM, rms_norm, RmsNorm)                                     \
  X(SOFTMAX_BACKWARD, softmax_backward, SoftmaxBackward)             \
  X(LOG_SOFTMAX_BACKWARD, log_softmax_backward, LogSoftmaxBackward)

/* Ops with column sums (dgamma, dbeta over every row) and per-row inputs (the forward's mean and
   rstd): not on the row engine's placements; each backend runs them with its own driver, the
   math in core/ops/norm_backward.hpp. Their ids follow the row ops'. */
#define ONORM_COLUMN_OP_LIST(X)                                       \
  X(LAYER_NORM_BACKWARD, layer_norm_backward, LayerNormBackward)     \
  X(RMS_NORM_BACKWARD, rms_norm_backward, RmsNormBackward)

/* Ops with per-row integer inputs or outputs (cross-entropy's targets, top-k's indices): each
   backend runs them with its own driver, the math in core/ops/<name>.hpp. Their ids follow the
   column ops'. */
#define ONORM_DRIVER_OP_LIST(X)                                       \
  X(CROSS_ENTROPY, cross_entropy, CrossEntropy)                      \
  X(SOFTMAX_TOPK, softmax_topk, SoftmaxTopk)

#define ONORM_OP_ENUM_ENTRY(ID, name, Type) ONORM_OP_##ID,
typedef enum onorm_op {
  ONORM_OP_LIST(ONORM_OP_ENUM_ENTRY) ONORM_OP_COUNT, /* the row ops */
  ONORM_OP_COLUMN_OPS_BEFORE_ = ONORM_OP_COUNT - 1,
  ONORM_COLUMN_OP_LIST(ONORM_OP_ENUM_ENTRY) ONORM_OP_COLUMN_END_,
  ONORM_OP_DRIVER_OPS_BEFORE_ = ONORM_OP_COLUMN_END_ - 1,
  ONORM_DRIVER_OP_LIST(ONORM_OP_ENUM_ENTRY) ONORM_OP_ALL_COUNT /* every op */
} onorm_op;
#undef ONORM_OP_ENUM_ENTRY

#ifdef __cplusplus
#include "onlinenorm/core/ops/cross_entropy.hpp"
#include "onlinenorm/core/ops/layer_norm.hpp"
#include "onlinenorm/core/ops/log_softmax.hpp"
#include "onlinenorm/core/ops/log_softmax_backward.hpp"
#include "onlinenorm/core/ops/norm_backward.hpp"
#include "onlinenorm/core/ops/rms_norm.hpp"
#include "onlinenorm/core/ops/softmax.hpp"
#include "onlinenorm/core/ops/softmax_backward.hpp"
#include "onlinenorm/core/ops/softmax_topk.hpp"
#endif

#endif
