// The norms' backward in SIMD (simd_backward_supports, simd_backward_rows;
// norm_backward_simd-inl.h), compiled once per Highway target in a translation unit of its own
// (kernels.cpp says how the tables work).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_backward.cpp"  // this file, found through the include path
#include "hwy/foreach_target.h"                    // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels.hpp"
#include "norm_backward_simd-inl.h"

#if HWY_ONCE
namespace onorm {
namespace cpu {

HWY_EXPORT(BackwardSupports);
HWY_EXPORT(BackwardRows);

bool simd_backward_supports(size_t t, const onorm_request& q) { return HWY_DISPATCH_TABLE(BackwardSupports)[t](q); }
void simd_backward_rows(size_t t, const onorm_request& q, const BackwardCall& cols, int64_t r0, int64_t r1,
                        float* block, double* group) {
  HWY_DISPATCH_TABLE(BackwardRows)[t](q, cols, r0, r1, block, group);
}

}  // namespace cpu
}  // namespace onorm
#endif  // HWY_ONCE
