// Cross-entropy on the CPU (API.md, "cross-entropy"; the math in core/ops/cross_entropy.hpp):
// per row, softmax's statistics from the SIMD chunk kernels (the softmax call's chunks and
// merge tree), the sum of the logits over fixed chunks when label smoothing asks for it, the
// target's logit read before anything is written (dlogits may be the logits), the loss, and the
// gradient: softmax's SIMD finish exp(x - M) S, the smoothing's shift taken off in float and
// the target's element from its saved logit, rounded once to dlogits' dtype. Rows spread over
// threads; a row's results depend on that row alone.
#pragma once

#include <cstddef>

#include "backend_interface.h"

namespace onorm {
namespace cpu {

// Runs a validated cross-entropy request on `threads` threads (std::bad_alloc for its scratch
// before anything is written).
void cross_entropy_run(size_t target_index, const onorm_request& q, int threads);

}  // namespace cpu
}  // namespace onorm
