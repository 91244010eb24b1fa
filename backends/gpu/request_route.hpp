// Which of a GPU backend's paths a request takes, the same on CUDA and HIP: tensors the device
// cannot address refused first (check_alignment), then the column ops (the norms' backward),
// the merge of partial row states, cross-entropy, softmax top-k (k up to the kernels' most),
// and every other request through the row planner. The caller holds the context's lock.
#pragma once

#include <cstdio>

#include "alignment.hpp"
#include "backend_interface.h"
#include "onlinenorm/core/ops/dispatch.hpp"
#include "onlinenorm/core/ops/softmax_topk.hpp"

namespace onorm {
namespace gpu {

// `paths`: the backend's calls, each taking the request and returning its status:
// norm_backward, state_merge, cross_entropy, softmax_topk, rows. `backend` names it in messages.
template <typename Paths>
onorm_status route_request(const onorm_request& q, const Paths& paths, const char* backend, char* err,
                           size_t err_len) {
  if (onorm_status s = check_alignment(q, err, err_len)) return s;
  if (core::ops::is_column_op(q.op)) return paths.norm_backward(q);
  if (q.stage == ONORM_STAGE_MERGE) return paths.state_merge(q);
  if (q.op == ONORM_OP_CROSS_ENTROPY) return paths.cross_entropy(q);
  if (q.op == ONORM_OP_SOFTMAX_TOPK) {
    if (q.k > core::ops::SoftmaxTopk::kGpuMaxK) {
      std::snprintf(err, err_len, "%s: softmax top-k takes k up to %lld, got %lld", backend,
                    static_cast<long long>(core::ops::SoftmaxTopk::kGpuMaxK), static_cast<long long>(q.k));
      return ONORM_ERROR_UNSUPPORTED;
    }
    return paths.softmax_topk(q);
  }
  return paths.rows(q);
}

}  // namespace gpu
}  // namespace onorm
