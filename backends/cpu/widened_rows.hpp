// Norm requests on 16-bit rows whose column vectors FoldedColumns folded to f32 (a weight_offset,
// a param_dtype other than x's): the rows widened to f32 a block at a time (in cache), and the
// f32 SIMD kernels run from the block into the caller's y of its own dtype. A 16-bit value
// widens exactly, so the statistics and the finish are the f32 rows' on the same values, and y
// rounds once. With a residual the block holds h = round_H(x + residual) (API.md's rule; stored
// into residual_out as it is made). The block's rows lie on 16 bytes whatever the caller's
// alignment: a row's bits do not depend on its place in the batch.
#pragma once

#include <cstddef>

#include "backend_interface.h"

namespace onorm {
namespace cpu {

// Whether q's rows run here on target `target_index` once its columns are f32: 16-bit rows, a
// residual and residual_out of f32, f16 or bf16 if any, y of x's dtype or f32, which the
// target's SIMD kernels store.
bool widened_rows_fit(size_t target_index, const onorm_request& q);

// Runs q (FoldedColumns' request: f32 columns, no offsets; widened_rows_fit) on `threads`
// threads (opts as for simd_run_rows). Scratch is allocated first (std::bad_alloc before any
// write).
void widened_rows_run(size_t target_index, const onorm_request& q, unsigned opts, int threads);

}  // namespace cpu
}  // namespace onorm
