// What of a backend request goes beyond the version-1 form (one dtype for x and the column
// vectors, no offsets, no residual, a float output): kernels that take only that form ask here.
#pragma once

#include "backend_interface.h"
#include "onlinenorm/core/ops/dispatch.hpp"

namespace onorm {

// The norms' residual add: the optional row tensor after the op's own inputs.
inline bool has_residual(const onorm_request& q) { return q.inputs > core::ops::signature(q.op).inputs; }
// The residual and residual_out row tensors of q (null where not given).
inline const onorm_rows* residual_of(const onorm_request& q) {
  return has_residual(q) ? &q.in[core::ops::signature(q.op).inputs] : nullptr;
}
inline const onorm_rows* residual_out_of(const onorm_request& q) {
  const int outs = core::ops::signature(q.op).outputs;
  return has_residual(q) && q.outputs > outs ? &q.out[outs] : nullptr;
}
inline bool is_quantized(onorm_dtype t) { return t == ONORM_I8 || t == ONORM_F8_E4M3; }
// Column vectors of x's dtype (or none given) and no offsets.
inline bool plain_columns(const onorm_request& q) {
  for (int k = 0; k < ONORM_REQUEST_COLS; ++k) {
    if (q.col_offset[k] != 0.0) return false;
    if (q.col[k] && q.col_dtype != q.in[0].dtype) return false;
  }
  return true;
}
inline bool version1_form(const onorm_request& q) {
  return !has_residual(q) && !is_quantized(q.out[0].dtype) && plain_columns(q);
}

}  // namespace onorm
