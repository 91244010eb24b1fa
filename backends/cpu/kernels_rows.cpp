// Whole rows (simd_run_rows): the row drivers (row_drivers-inl.h) of every op and storage type,
// compiled once per Highway target, in a translation unit of their own so that the kernels'
// targets compile in parallel with the other kernel files (kernels.cpp says how tables work).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_rows.cpp"  // this file, found through the include path
#include "hwy/foreach_target.h"                // IWYU pragma: keep

#include "dispatch-inl.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels.hpp"
#include "row_drivers-inl.h"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {

void RunRows(const onorm_request& q, int64_t r0, int64_t r1, unsigned opts, float* scratch, const ResidualSum* sum) {
  core::ops::visit(q.op, [&](auto op) {
    WithSimdType(q.in[0].dtype, [&](auto in) {
      WithSimdType(q.out[0].dtype, [&](auto out) {
        WithStoreType<typename decltype(out)::type>([&](auto store) {
          RunRowsT<decltype(op), typename decltype(in)::type, typename decltype(store)::type>(q, r0, r1, opts, scratch, sum);
        });
      });
    });
  });
  if (opts & kOptStream) hwy::FlushStream();
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace onorm {
namespace cpu {

HWY_EXPORT(RunRows);

void simd_run_rows(size_t t, const onorm_request& q, int64_t r0, int64_t r1, unsigned opts, float* scratch,
                   const ResidualSum* sum) {
  HWY_DISPATCH_TABLE(RunRows)[t](q, r0, r1, opts, scratch, sum);
}

}  // namespace cpu
}  // namespace onorm
#endif  // HWY_ONCE
