// The norms' output options in SIMD (simd_quantize_rows, simd_add_rows): the quantized output
// and the residual add, compiled once per Highway target in a translation unit of their own
// (kernels.cpp says how the tables work).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_options.cpp"  // this file, found through the include path
#include "hwy/foreach_target.h"                   // IWYU pragma: keep

#include "dispatch-inl.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels.hpp"
#include "quantize_simd-inl.h"
#include "residual_add-inl.h"
#include "scalar_rows.hpp"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {

// Rows [r0, r0 + n) of q's quantized y from their float values v (n rows of cols floats,
// divided in place where the rule divides).
void QuantizeRows(const onorm_request& q, int64_t r0, int64_t n, float* v) {
  const int64_t cols = q.out[0].cols;
  const bool e4m3 = q.out[0].dtype == ONORM_F8_E4M3;
  for (int64_t i = 0; i < n; ++i)
    QuantizeRow(e4m3, q.y_scale ? q.y_scale + r0 + i : nullptr, q.y_static_scale, v + i * cols,
                static_cast<size_t>(cols), const_cast<void*>(row_of(q.out[0], r0 + i)));
}

// The norms' residual add: rows [r0, r0 + n) of x and res into rows [h0, h0 + n) of h, all of
// x's dtype (one SimdType takes: option_blocks_fit); by streaming stores where asked.
void AddRows(const onorm_rows& x, const onorm_rows& res, const onorm_rows& h, int64_t r0, int64_t h0, int64_t n,
             bool stream) {
  WithSimdType(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (kCanStream && stream) {
      for (int64_t i = 0; i < n; ++i) AddRowColumns<T, true>(x, res, h, r0 + i, h0 + i, 0, static_cast<size_t>(x.cols));
      hwy::FlushStream();
    } else {
      for (int64_t i = 0; i < n; ++i) AddRowColumns<T>(x, res, h, r0 + i, h0 + i, 0, static_cast<size_t>(x.cols));
    }
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace onorm {
namespace cpu {

HWY_EXPORT(QuantizeRows);
HWY_EXPORT(AddRows);

void simd_quantize_rows(size_t t, const onorm_request& q, int64_t r0, int64_t n, float* v) {
  HWY_DISPATCH_TABLE(QuantizeRows)[t](q, r0, n, v);
}
void simd_add_rows(size_t t, const onorm_rows& x, const onorm_rows& res, const onorm_rows& h, int64_t r0, int64_t h0,
                   int64_t n, bool stream) {
  // A dtype this target has no SIMD loads of (f16 without F16C): the portable add, same bits.
  if (!simd_loads(t, x.dtype)) return scalar_add_rows(x, res, h, r0, h0, n);
  HWY_DISPATCH_TABLE(AddRows)[t](x, res, h, r0, h0, n, stream);
}

}  // namespace cpu
}  // namespace onorm
#endif  // HWY_ONCE
