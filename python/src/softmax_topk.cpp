// onorm_softmax_topk: the k largest entries of each row, their softmax and their columns.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <onlinenorm/onlinenorm.h>

#include <cstdint>

#include "arrays.hpp"
#include "bindings.hpp"
#include "status.hpp"

using namespace nb::literals;

namespace {

void softmax_topk(const Context& ctx, const InArray& x, int64_t k, bool renormalize, const OutArray& values,
                  const OutArray& indices) {
  const onorm_rows xr = rows_of(ctx, x, "x"), vr = rows_of(ctx, values, "values");
  // The C ABI reads rows * k indices only when 1 <= k <= cols: an unchecked k must not size them.
  int64_t* idx = int64s_of(ctx, indices, vr.rows * vr.cols, "indices");
  onorm_status status;
  {
    nb::gil_scoped_release release;
    status = onorm_softmax_topk(ctx.handle, &xr, k, renormalize ? 1 : 0, &vr, idx);
  }
  check(status, "onorm_softmax_topk");
}

}  // namespace

void bind_softmax_topk(nb::module_& m) {
  m.def("softmax_topk", &softmax_topk, "ctx"_a, "x"_a, "k"_a, "renormalize"_a, "values"_a, "indices"_a);
}
