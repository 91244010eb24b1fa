// The arguments of the norms' backward kernels on GPUs (norm_backward.hpp) and the scale
// s_j = weight_offset + gamma_j they share.
#pragma once

#include "dtype_io.hpp"

namespace onorm {
namespace gpu {

struct NormBackwardArgs {
  const void* x;
  const void* dy;
  const void* dres;  // NULL: no dresidual
  void* dx;
  const void* gamma;  // NULL: 1
  int64_t rows, cols;
  int64_t sx, sdy, sdres, sdx;  // row strides in elements
  int xt, dyt, drt, dxt, gt;
  float offset;  // weight_offset
  const float* row_in[2];
  float* col_out[2];
  double* partial;  // [group][column sum][cols]
  int64_t rows_per_group;  // the column partials' groups; a register block's rows
  float* partial_f32;      // [block][column sum][cols]: the register blocks' column sums
  int direct;              // one register block: it writes dgamma / dbeta itself
  int vec;  // x, dy, dx of one type, every row 16-byte aligned and cols a multiple of its vector
};

// s_j = weight_offset + gamma_j.
template <typename Op>
ONORM_DEV float scale_at(const NormBackwardArgs& a, int64_t j) {
  return a.offset + (a.gamma ? load_dtype(a.gamma, a.gt, j) : Op::col_default(0));
}

}  // namespace gpu
}  // namespace onorm
