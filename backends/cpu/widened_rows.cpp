#include "widened_rows.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include "kernels.hpp"
#include "onlinenorm/core/convert.hpp"
#include "onlinenorm/core/ops/dispatch.hpp"
#include "onlinenorm/core/residual.hpp"
#include "request_form.hpp"
#include "scalar_rows.hpp"

namespace onorm {
namespace cpu {
namespace {

// Floats a block of widened rows holds (x and y in place): a few hundred KB, in L2.
constexpr int64_t kBlockFloats = int64_t(1) << 16;

int64_t padded_cols(int64_t cols) { return (cols + 3) / 4 * 4; }  // rows on 16 bytes

// A row of n 16-bit values into floats (exact): a loop per dtype, which the compiler vectorizes.
void widen_row(const void* src, onorm_dtype t, float* v, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  if (t == ONORM_BF16) {
    for (int64_t j = 0; j < n; ++j) v[j] = core::bf16_to_f32(s[j]);
  } else {
    for (int64_t j = 0; j < n; ++j) v[j] = core::f16_to_f32(s[j]);
  }
}

// Row r's h (core::residual_add: H is residual_out's dtype, else x's; no input is f64 here),
// stored into residual_out where given and widened into v (exact).
template <typename X, typename Res, typename H>
void add_row(const onorm_request& q, const onorm_rows* res, const onorm_rows* h_out, int64_t r, float* v, int64_t n) {
  const X* x = static_cast<const X*>(row_of(q.in[0], r));
  const Res* a = static_cast<const Res*>(row_of(*res, r));
  H* h = h_out ? static_cast<H*>(const_cast<void*>(row_of(*h_out, r))) : nullptr;
  for (int64_t j = 0; j < n; ++j) {
    const double hj = core::residual_add<H>(load_as<double>(x, j), load_as<double>(a, j), false);
    v[j] = static_cast<float>(hj);
    if (h) store_as(h, j, hj);
  }
}

bool f32_or_16bit(onorm_dtype t) { return t == ONORM_F32 || t == ONORM_BF16 || t == ONORM_F16; }

// The request of a block of f32 rows (data set per block) whose y is the caller's rows, without
// the residual (added as the block is filled).
onorm_request block_request(const onorm_request& q, int64_t block, int64_t stride) {
  onorm_request b = q;
  b.in[0] = onorm_rows{nullptr, ONORM_F32, block, q.in[0].cols, stride};
  const core::ops::Signature& sig = core::ops::signature(q.op);
  b.inputs = sig.inputs;
  b.outputs = sig.outputs;
  return b;
}

}  // namespace

bool widened_rows_fit(size_t target_index, const onorm_request& q) {
  const onorm_dtype x = q.in[0].dtype, y = q.out[0].dtype;
  const onorm_rows* res = residual_of(q);
  const onorm_rows* h = residual_out_of(q);
  return q.stage == ONORM_STAGE_WHOLE && (x == ONORM_BF16 || x == ONORM_F16) && (y == x || y == ONORM_F32) &&
         (!res || f32_or_16bit(res->dtype)) && (!h || f32_or_16bit(h->dtype)) &&
         simd_supports(target_index, block_request(q, 1, 4));
}

void widened_rows_run(size_t target_index, const onorm_request& q, unsigned opts, int threads) {
  const int64_t rows = q.in[0].rows, cols = q.in[0].cols, stride = padded_cols(cols);
  const int64_t block = std::max<int64_t>(1, std::min(rows, kBlockFloats / stride));
  const onorm_request b = block_request(q, block, stride);
  const onorm_rows* res = residual_of(q);
  const onorm_rows* h_out = residual_out_of(q);
  const onorm_dtype h_dtype = h_out ? h_out->dtype : q.in[0].dtype;
  const unsigned block_opts = opts & ~kOptNextRow;
  const size_t kept = static_cast<size_t>(
      core::ops::visit(q.op, [&](auto op) { return kept_scratch_cols<decltype(op)>(b, block_opts); }));
  const int nt = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, rows)));
  // Each thread's block on 16 bytes too (the rows' bits may not depend on the thread).
  // x's dtype throughout: the add (in SIMD where the target loads x) into residual_out, or into
  // a 16-bit block of h here.
  const bool same_dtype_add = res && res->dtype == q.in[0].dtype && h_dtype == q.in[0].dtype;
  const size_t h_block = same_dtype_add && !h_out ? static_cast<size_t>(block * cols + 1) / 2 : 0;  // floats
  const size_t per_thread = (static_cast<size_t>(block * stride) + kept + h_block + 3) / 4 * 4;
  std::unique_ptr<float[]> scratch(new float[per_thread * static_cast<size_t>(nt)]);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    float* v = scratch.get() + per_thread * static_cast<size_t>(t);
    const int64_t r_begin = rows * t / n, r_end = rows * (t + 1) / n;
    for (int64_t r0 = r_begin; r0 < r_end; r0 += block) {
      const int64_t nb = std::min(block, r_end - r0);
      if (same_dtype_add) {
        const onorm_rows h = h_out ? *h_out : onorm_rows{v + block * stride + kept, q.in[0].dtype, nb, cols, cols};
        const int64_t h0 = h_out ? r0 : 0;
        simd_add_rows(target_index, q.in[0], *res, h, r0, h0, nb, false);
        for (int64_t i = 0; i < nb; ++i) widen_row(row_of(h, h0 + i), h.dtype, v + i * stride, cols);
      } else if (res) {
        with_dtype(q.in[0].dtype, [&](auto xt) {
          with_dtype(res->dtype, [&](auto rt) {
            with_dtype(h_dtype, [&](auto ht) {
              using X = typename decltype(xt)::type;
              using Res = typename decltype(rt)::type;
              using H = typename decltype(ht)::type;
              for (int64_t i = 0; i < nb; ++i) add_row<X, Res, H>(q, res, h_out, r0 + i, v + i * stride, cols);
            });
          });
        });
      } else {
        for (int64_t i = 0; i < nb; ++i) widen_row(row_of(q.in[0], r0 + i), q.in[0].dtype, v + i * stride, cols);
      }
      // The block's rows in, the caller's rows r0.. out (x's rows are in the block already:
      // y may be x).
      onorm_request s = b;
      s.in[0].data = v;
      s.in[0].rows = nb;
      s.out[0] = onorm_rows{const_cast<void*>(row_of(q.out[0], r0)), q.out[0].dtype, nb, cols, q.out[0].row_stride};
      for (int k = 0; k < ONORM_REQUEST_ROW_OUTS; ++k) s.row_out[k] = q.row_out[k] ? q.row_out[k] + r0 : nullptr;
      simd_run_rows(target_index, s, 0, nb, block_opts, v + block * stride);
    }
  }
}

}  // namespace cpu
}  // namespace onorm
