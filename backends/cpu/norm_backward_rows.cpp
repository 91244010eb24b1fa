#include "norm_backward_rows.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include <omp.h>

#include "kernels.hpp"
#include "scalar_rows.hpp"

namespace onorm {
namespace cpu {
namespace {

// Columns per task of the portable column sums: the sums of a tile stay in L1 while every row
// passes.
constexpr int64_t kColumnTile = 512;
// Groups of rows of the SIMD column sums: at least this many rows each, at most this many
// groups, and at most this many bytes of double partials in all; but up to kMinGroups groups
// (of kBackwardBlockRows rows at least) where fewer rows leave threads idle: a group is one
// thread's work, and long rows come few to a call.
constexpr int64_t kGroupRows = 256;
constexpr int64_t kMinGroups = 8;
constexpr int64_t kMaxGroups = 256;
constexpr int64_t kGroupBytes = int64_t(64) << 20;

// The scale s_j = weight_offset + gamma_j.
template <class Op>
double scale_at(const onorm_request& q, int64_t j) {
  const double g = q.col[0] ? load_at(q.col[0], q.col_dtype, j) : static_cast<double>(Op::col_default(0));
  return q.col_offset[0] + g;
}

// scale[j] = offset + gamma_at(j) rounded to float, j < cols; returns max_j |s_j| in double (NaN
// when a scale is NaN). Four independent maxima in locals: one running maximum, which the
// compiler kept on the stack, chained every column through memory (bench/RESULTS.md).
template <typename GammaAt>
double fill_scale_from(GammaAt gamma_at, double offset, int64_t cols, float* scale) {
  double m[4] = {0.0, 0.0, 0.0, 0.0};
  int nan_scale = 0;
  int64_t j = 0;
  for (; j + 4 <= cols; j += 4)
    for (int k = 0; k < 4; ++k) {
      const double s = offset + gamma_at(j + k);
      scale[j + k] = static_cast<float>(s);
      nan_scale |= s != s;
      m[k] = std::max(m[k], std::fabs(s));
    }
  for (; j < cols; ++j) {
    const double s = offset + gamma_at(j);
    scale[j] = static_cast<float>(s);
    nan_scale |= s != s;
    m[0] = std::max(m[0], std::fabs(s));
  }
  return nan_scale ? std::numeric_limits<double>::quiet_NaN() : std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
}

// The scale s_j = weight_offset + gamma_j of every column, rounded to float, and max_j |s_j|.
template <class Op>
double fill_scale(const onorm_request& q, float* scale) {
  const int64_t cols = q.in[0].cols;
  if (!q.col[0]) return fill_scale_from([](int64_t) { return static_cast<double>(Op::col_default(0)); }, q.col_offset[0], cols, scale);
  double max_scale = 0.0;
  with_dtype(q.col_dtype, [&](auto tag) {
    const auto* gamma = static_cast<const typename decltype(tag)::type*>(q.col[0]);
    max_scale = fill_scale_from([gamma](int64_t j) { return load_as<double>(gamma, j); }, q.col_offset[0], cols, scale);
  });
  return max_scale;
}

// Row r in double: dx, and the row's column contributions added to group[k * cols + j].
template <class Op>
void row_in_double(const onorm_request& q, int64_t r, double* group) {
  const onorm_rows &x = q.in[0], &dy = q.in[1], &dx = q.out[0];
  const int64_t cols = x.cols;
  const auto row = Op::template row<double>(q.row_in, r);
  const void *xr = row_of(x, r), *dyr = row_of(dy, r), *dr = q.inputs > 2 ? row_of(q.in[2], r) : nullptr;
  typename Op::template Sums<double> s{0, 0};
  for (int64_t j = 0; j < cols; ++j)
    Op::accumulate(s, row, load_at(xr, x.dtype, j), load_at(dyr, dy.dtype, j), scale_at<Op>(q, j));
  const auto c = Op::template coefs<double>(s, row, cols);
  // Each element is read before it is written: dx may alias x or dy.
  void* out = const_cast<void*>(row_of(dx, r));
  for (int64_t j = 0; j < cols; ++j) {
    const double xj = load_at(xr, x.dtype, j), dyj = load_at(dyr, dy.dtype, j);
    if (group) {
      double sums[2] = {0.0, 0.0};
      Op::column(sums, row, xj, dyj);
      for (int k = 0; k < Op::kColOuts; ++k) group[k * cols + j] += sums[k];
    }
    const double d = dr ? load_at(dr, q.in[2].dtype, j) : 0.0;
    store_at(out, dx.dtype, j, Op::dx(c, xj, dyj, scale_at<Op>(q, j), d));
  }
}

// Portable path, dgamma and dbeta: tiles of columns over threads, each column summed over the
// rows in order.
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

// Portable path: the column sums first (they read x and dy, which dx may overwrite), then dx.
template <class Op>
void portable_run(const onorm_request& q, int threads) {
  if (q.col_out[0] || q.col_out[1]) column_sums<Op>(q, threads);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int64_t r = 0; r < q.in[0].rows; ++r) row_in_double<Op>(q, r, nullptr);
}

// SIMD path. Groups of rows depend on the shape only, so the column sums are the same for any
// thread count.
template <class Op>
void simd_run(size_t t, const onorm_request& q, int threads) {
  const int64_t rows = q.in[0].rows, cols = q.in[0].cols;
  const size_t pitch = backward_accumulator_pitch(cols);
  std::vector<float> scale(pitch, 0.0f);
  const double max_scale = fill_scale<Op>(q, scale.data());
  const bool stream = rows * cols * static_cast<int64_t>(dtype_size(q.out[0].dtype)) >= kStreamBytes;
  const BackwardCall columns{scale.data(), max_scale, stream};
  if (!q.col_out[0] && !q.col_out[1]) {
    const int nt = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, rows)));
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
      const int k = omp_get_thread_num(), n = omp_get_num_threads();
      const int64_t r0 = rows * k / n, r1 = rows * (k + 1) / n;
      if (r1 > r0) simd_backward_rows(t, q, columns, r0, r1, nullptr, nullptr);
    }
    return;
  }
  const int outs = Op::kColOuts;
  const int64_t per_group = cols * outs;
  int64_t groups = std::max((rows + kGroupRows - 1) / kGroupRows,
                            std::min(kMinGroups, (rows + kBackwardBlockRows - 1) / kBackwardBlockRows));
  groups = std::min(groups, kMaxGroups);
  groups = std::max<int64_t>(1, std::min(groups, kGroupBytes / (per_group * 8)));
  // Each group's first flush writes its partials (start_backward_group, flush_backward_block).
  std::unique_ptr<double[]> partial(new double[static_cast<size_t>(groups * per_group)]);
  const int nt = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, groups)));
  std::vector<float> blocks(static_cast<size_t>(nt) * pitch * static_cast<size_t>(outs), 0.0f);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (int64_t g = 0; g < groups; ++g) {
    float* block = blocks.data() + static_cast<size_t>(omp_get_thread_num()) * pitch * static_cast<size_t>(outs);
    simd_backward_rows(t, q, columns, rows * g / groups, rows * (g + 1) / groups, block,
                       partial.get() + static_cast<size_t>(g * per_group));
  }
  for (int k = 0; k < outs; ++k) {
    if (!q.col_out[k]) continue;
    for (int64_t j = 0; j < cols; ++j) {
      double s = 0.0;
      for (int64_t g = 0; g < groups; ++g) s += partial[static_cast<size_t>(g * per_group + k * cols + j)];
      q.col_out[k][j] = static_cast<float>(s);
    }
  }
}

}  // namespace

void flush_backward_block(float* block, double* group, int64_t cols, int outs, bool& started) {
  const size_t pitch = backward_accumulator_pitch(cols);
  for (int k = 0; k < outs; ++k) {
    float* b = block + static_cast<size_t>(k) * pitch;
    double* g = group + k * cols;
    if (started) {
      for (int64_t j = 0; j < cols; ++j) g[j] += static_cast<double>(b[j]);
    } else {
      for (int64_t j = 0; j < cols; ++j) g[j] = static_cast<double>(b[j]);
    }
    std::fill(b, b + pitch, 0.0f);
  }
  started = true;
}

void start_backward_group(double* group, int64_t cols, int outs, bool& started) {
  if (!started) std::fill(group, group + cols * outs, 0.0);
  started = true;
}

void norm_backward_row_in_double(const onorm_request& q, int64_t r, double* group) {
  core::ops::visit_column_op(q.op, [&](auto op) { row_in_double<decltype(op)>(q, r, group); });
}

void norm_backward_run(size_t target_index, const onorm_request& q, int threads) {
  core::ops::visit_column_op(q.op, [&](auto op) {
    using Op = decltype(op);
    if (simd_backward_supports(target_index, q)) simd_run<Op>(target_index, q, threads);
    else portable_run<Op>(q, threads);
  });
}

}  // namespace cpu
}  // namespace onorm
