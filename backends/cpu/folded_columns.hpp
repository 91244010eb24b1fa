// The norms' column vectors beyond the version-1 form (param_dtype other than x's dtype, a
// weight_offset): folded once per call into f32 columns, s_j = float(weight_offset + gamma_j)
// and beta_j, so that the request takes the SIMD kernels rather than option_rows' double path:
// f32 rows directly (or the option blocks around them), 16-bit rows widened a block at a time
// (widened_rows.hpp). s_j is rounded to f32 once: y moves by at most 2^-24 of
// itself (API.md's bound is 1e-5).
#pragma once

#include <cstddef>
#include <memory>

#include "backend_interface.h"

namespace onorm {
namespace cpu {

class FoldedColumns {
 public:
  // Whether q (a whole-row norm request) has columns of another form to fold and rows that run
  // on f32 columns on target `target_index`: f32 rows, or 16-bit rows widened_rows takes.
  static bool applies(size_t target_index, const onorm_request& q);
  // Folds q's columns (std::bad_alloc before anything is written).
  explicit FoldedColumns(const onorm_request& q);
  // q with the folded columns: f32, no offsets.
  const onorm_request& request() const { return q_; }

 private:
  onorm_request q_;
  std::unique_ptr<float[]> cols_;
};

}  // namespace cpu
}  // namespace onorm
