// Which softmax top-k kernel takes a request (shared by CUDA and HIP): a warp per row
// (softmax_topk_warp.hpp) for rows of up to kTopkWarpMaxCols columns and k up to kTopkWarpMaxK,
// else a block per row (softmax_topk.hpp). The choice depends on the row's width and k alone
// (a row's results may not depend on how many rows the call has).
#pragma once

#include "softmax_topk.hpp"
#include "softmax_topk_warp.hpp"
#include "visit_dtype.hpp"

namespace onorm {
namespace gpu {

constexpr int64_t kTopkWarpMaxCols = 65536;

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
  return a;
}

// Runs a validated softmax top-k request with k <= SoftmaxTopk::kGpuMaxK on warp width WARP
// with launcher l (launcher.hpp).
template <int WARP, typename L>
onorm_status run_softmax_topk(L& l, const onorm_request& q) {
  const onorm_rows& x = q.in[0];
  const TopkArgs a = topk_args(q);
  const bool warp_rows = a.k <= kTopkWarpMaxK && a.cols <= kTopkWarpMaxCols;
  constexpr int64_t kWarpsPerBlock = kTopkWarpBlock / WARP;
  const int64_t blocks = warp_rows ? (a.rows + kWarpsPerBlock - 1) / kWarpsPerBlock : a.rows;
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
