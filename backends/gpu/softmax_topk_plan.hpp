// Which softmax top-k kernel takes a request (shared by CUDA and HIP): for k up to kTopkWarpMaxK
// a warp per row (softmax_topk_warp.hpp), or per slice of kTopkWarpMaxCols columns at most (up to
// a block's warps a row); else a block per row (softmax_topk.hpp). The choice depends on the
// row's width and k alone (a row's results may not depend on how many rows the call has).
#pragma once

#include <algorithm>

#include "softmax_topk.hpp"
#include "softmax_topk_warp.hpp"
#include "visit_dtype.hpp"

namespace onorm {
namespace gpu {

// The kernels' arguments of a validated request.
inline TopkArgs topk_args(const onorm_request& q) {
  const onorm_rows &x = q.in[0], &v = q.out[0];
  TopkArgs a{};
  a.x = x.data;
  a.x_stride = x.row_stride;
  a.x_vec = rows_aligned16(x);
  a.values = v.data;
  a.values_stride = v.row_stride;
  a.values_dtype = v.dtype;
  a.indices = q.indices;
  a.rows = x.rows;
  a.cols = x.cols;
  a.k = q.k;
  a.renormalize = q.renormalize;
  a.slices = 1;
  return a;
}

// Eight slices a row only up to this k: past it, the first warp's merge of seven lists of k
// entries (and the row's wait on its slowest warp) cost more than the block kernel
// (bench/RESULTS.md, "long rows in slices of a warp").
constexpr int64_t kTopkWarpEightSlicesMaxK = 8;

// The warp kernel's warps a row: the fewest, a power of two, whose slices have at most
// kTopkWarpMaxCols columns; 0 where k or the row is too large for it (the block kernel).
template <int WARP>
int topk_warp_slices(int64_t cols, int64_t k) {
  if (k > kTopkWarpMaxK) return 0;
  const int most = k <= kTopkWarpEightSlicesMaxK ? kTopkWarpBlock / WARP : std::min(4, kTopkWarpBlock / WARP);
  int s = 1;
  while (s * kTopkWarpMaxCols < cols && s < most) s *= 2;
  return s * kTopkWarpMaxCols >= cols ? s : 0;
}

// Runs a validated softmax top-k request with k <= SoftmaxTopk::kGpuMaxK on warp width WARP
// with launcher l (launcher.hpp).
template <int WARP, typename L>
onorm_status run_softmax_topk(L& l, const onorm_request& q) {
  const onorm_rows& x = q.in[0];
  TopkArgs a = topk_args(q);
  a.slices = topk_warp_slices<WARP>(a.cols, a.k);
  const bool warp_rows = a.slices > 0;
  const int64_t rows_per_block = warp_rows ? kTopkWarpBlock / WARP / a.slices : 1;
  const int64_t blocks = (a.rows + rows_per_block - 1) / rows_per_block;
  const unsigned grid = row_blocks(blocks, l.caps().sms);
  return visit_dtype(
      x.dtype,
      [&](auto in) {
        using In = typename decltype(in)::type;
        return warp_rows ? l.template softmax_topk_warp<In, WARP>(grid, a) : l.template softmax_topk<In, WARP>(grid, a);
      },
      nullptr, 0);
}

}  // namespace gpu
}  // namespace onorm
