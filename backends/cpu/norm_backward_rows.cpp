#include "norm_backward_rows.hpp"

#include <algorithm>

#include "scalar_rows.hpp"

namespace onorm {
namespace cpu {
namespace {

// Columns per task of the column sums: the sums of a tile stay in L1 while every row passes.
constexpr int64_t kColumnTile = 512;

// The scale s_j = weight_offset + gamma_j.
template <class Op>
double scale_at(const onorm_request& q, int64_t j) {
  const double g = q.col[0] ? load_at(q.col[0], q.col_dtype, j) : static_cast<double>(Op::col_default(0));
  return q.col_offset[0] + g;
}

// dgamma, dbeta: tiles of columns over threads, each column summed over the rows in order.
template <class Op>
void column_sums(const onorm_request& q, int threads) {
  const onorm_rows &x = q.in[0], &dy = q.in[1];
  const int64_t tiles = (x.cols + kColumnTile - 1) / kColumnTile;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t c0 = t * kColumnTile, n = std::min(kColumnTile, x.cols - c0);
    double sums[kColumnTile][2] = {};
    for (int64_t r = 0; r < x.rows; ++r) {
      const auto row = Op::template row<double>(q.row_in, r);
      const void *xr = row_of(x, r), *dyr = row_of(dy, r);
      for (int64_t j = 0; j < n; ++j) Op::column(sums[j], row, load_at(xr, x.dtype, c0 + j), load_at(dyr, dy.dtype, c0 + j));
    }
    for (int k = 0; k < Op::kColOuts; ++k)
      if (q.col_out[k])
        for (int64_t j = 0; j < n; ++j) q.col_out[k][c0 + j] = static_cast<float>(sums[j][k]);
  }
}

template <class Op>
void rows_dx(const onorm_request& q, int threads) {
  const onorm_rows &x = q.in[0], &dy = q.in[1], &dx = q.out[0];
  const bool dresidual = q.inputs > 2;
  const int64_t cols = x.cols;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int64_t r = 0; r < x.rows; ++r) {
    const auto row = Op::template row<double>(q.row_in, r);
    const void *xr = row_of(x, r), *dyr = row_of(dy, r), *dr = dresidual ? row_of(q.in[2], r) : nullptr;
    typename Op::template Sums<double> s{0, 0};
    for (int64_t j = 0; j < cols; ++j)
      Op::accumulate(s, row, load_at(xr, x.dtype, j), load_at(dyr, dy.dtype, j), scale_at<Op>(q, j));
    const auto c = Op::template coefs<double>(s, row, cols);
    // Each element is read before it is written: dx may alias x or dy.
    void* out = const_cast<void*>(row_of(dx, r));
    for (int64_t j = 0; j < cols; ++j) {
      const double d = dr ? load_at(dr, q.in[2].dtype, j) : 0.0;
      store_at(out, dx.dtype, j, Op::dx(c, load_at(xr, x.dtype, j), load_at(dyr, dy.dtype, j), scale_at<Op>(q, j), d));
    }
  }
}

}  // namespace

void norm_backward_run(const onorm_request& q, int threads) {
  core::ops::visit_column_op(q.op, [&](auto op) {
    using Op = decltype(op);
    // The column sums first: they read x and dy, which dx may overwrite.
    if (q.col_out[0] || q.col_out[1]) column_sums<Op>(q, threads);
    rows_dx<Op>(q, threads);
  });
}

}  // namespace cpu
}  // namespace onorm
