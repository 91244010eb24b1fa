#include "folded_columns.hpp"

#include <cstddef>

#include "onlinenorm/core/ops/dispatch.hpp"
#include "request_form.hpp"
#include "scalar_rows.hpp"
#include "widened_rows.hpp"

namespace onorm {
namespace cpu {

bool FoldedColumns::applies(size_t target_index, const onorm_request& q) {
  if (q.stage != ONORM_STAGE_WHOLE || core::ops::is_column_op(q.op) || core::ops::signature(q.op).cols == 0 ||
      plain_columns(q))
    return false;
  return q.in[0].dtype == ONORM_F32 || widened_rows_fit(target_index, q);
}

FoldedColumns::FoldedColumns(const onorm_request& q) : q_(q) {
  const int ncols = core::ops::signature(q.op).cols;
  const int64_t n = q.in[0].cols;
  cols_.reset(new float[static_cast<size_t>(n) * static_cast<size_t>(ncols)]);
  core::ops::visit(q.op, [&](auto op) {
    using Op = decltype(op);
    for (int k = 0; k < ncols; ++k) {
      if (!q.col[k] && q.col_offset[k] == 0.0) continue;  // the op's default, as before
      float* f = cols_.get() + static_cast<size_t>(k) * static_cast<size_t>(n);
      for (int64_t j = 0; j < n; ++j) {
        const double c = q.col[k] ? load_at(q.col[k], q.col_dtype, j) : static_cast<double>(Op::col_default(k));
        f[j] = static_cast<float>(c + q.col_offset[k]);
      }
      q_.col[k] = f;
    }
  });
  q_.col_dtype = ONORM_F32;
  for (int k = 0; k < ONORM_REQUEST_COLS; ++k) q_.col_offset[k] = 0.0;
}

}  // namespace cpu
}  // namespace onorm
