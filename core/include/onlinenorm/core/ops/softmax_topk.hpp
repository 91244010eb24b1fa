// Softmax top-k (API.md, "softmax top-k"): per row the k largest entries, ties broken by the lower
// column, in descending order; their softmax over the whole row (Softmax's coefficients from the
// row's MaxSum), or with renormalize the softmax over the k selected logits alone. The order is
// that of the values as floats: -0 and +0 tie; a NaN counts above everything (a NaN row's values
// are NaN whichever k columns are chosen). A driver op (core/ops/op_list.h).
#pragma once

#include <string.h>

#include "onlinenorm/core/ops/row_op.hpp"

namespace onorm {
namespace core {
namespace ops {

struct SoftmaxTopk {
  static constexpr Signature kSignature{1, {"x"}, 1, {"values"}, 0, {}, 0, {}, 0, {}, {}, false, {0u, 0u}};
  // The largest k the GPU drivers take (API.md allows UNSUPPORTED above 1024).
  static constexpr int64_t kGpuMaxK = 1024;

  // An unsigned key whose order is the selection order of the values (larger key: earlier):
  // -0 maps to +0, every NaN to the largest key.
  ONORM_HD_INLINE static uint32_t key(float v) {
    if (is_nan(v)) return 0xffffffffu;
    if (v == 0.0f) v = 0.0f;
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  }
  // Whether (key a, column ia) comes before (key b, column ib).
  ONORM_HD_INLINE static bool before(uint32_t a, int64_t ia, uint32_t b, int64_t ib) {
    return a > b || (a == b && ia < ib);
  }
};

}  // namespace ops
}  // namespace core
}  // namespace onorm
