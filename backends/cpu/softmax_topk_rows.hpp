// Softmax top-k on the CPU (API.md, "softmax top-k"; the order in core/ops/softmax_topk.hpp):
// per row, softmax's statistics from the SIMD chunk kernels, the k first (key, column) pairs by
// a partial selection and a sort of those k, and their values: exp(x - M) / D over the whole
// row, or over the k selected logits (renormalize), in double, rounded once to values' dtype.
#pragma once

#include <cstddef>

#include "backend_interface.h"

namespace onorm {
namespace cpu {

// Runs a validated top-k request on `threads` threads (std::bad_alloc for its scratch before
// anything is written).
void softmax_topk_run(size_t target_index, const onorm_request& q, int threads);

}  // namespace cpu
}  // namespace onorm
