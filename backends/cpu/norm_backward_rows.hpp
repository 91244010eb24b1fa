// The norms' backward pass on the CPU (API.md, "backward passes"; the math in
// core/ops/norm_backward.hpp): dx per row, and the column sums dgamma and dbeta over every row.
// Portable code, the tensors read by their run-time dtypes, sums and finish in double. Each
// column's sum runs over the rows in order, so it is the same whatever the thread count.
#pragma once

#include "backend_interface.h"

namespace onorm {
namespace cpu {

// Runs one validated request of a column op (core/ops/op_list.h) on `threads` threads.
void norm_backward_run(const onorm_request& q, int threads);

}  // namespace cpu
}  // namespace onorm
