// The norms' column vectors beyond the version-1 form (param_dtype other than x's dtype, a
// weight_offset) on f32 rows: folded once per call into f32 columns, s_j = float(weight_offset
// + gamma_j) and beta_j, so that the request takes the SIMD kernels rather than option_rows'
// double path. s_j is rounded to f32 once: y moves by at most 2^-24 of itself (API.md's bound
// is 1e-5). 16-bit rows keep the double path: their SIMD kernels read columns of x's dtype, to
// which s_j does not round within the bound.
#pragma once

#include <memory>

#include "backend_interface.h"

namespace onorm {
namespace cpu {

class FoldedColumns {
 public:
  // Whether q (a whole-row request) has f32 rows and columns of another form to fold.
  static bool applies(const onorm_request& q);
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
