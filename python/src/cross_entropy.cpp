// onorm_cross_entropy: per-row loss (and lse, and the gradient in the same pass).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <onlinenorm/onlinenorm.h>

#include <cstdint>
#include <optional>

#include "arrays.hpp"
#include "bindings.hpp"
#include "status.hpp"

using namespace nb::literals;

namespace {

void cross_entropy(const Context& ctx, const InArray& logits, const InArray& targets, const OutArray& loss,
                   const std::optional<OutArray>& lse, const std::optional<OutArray>& dlogits, int64_t ignore_index,
                   double label_smoothing, double z_loss, double grad_scale) {
  const onorm_rows xr = rows_of(ctx, logits, "logits");
  onorm_cross_entropy_args args;
  onorm_cross_entropy_args_init(&args);
  args.targets = int64s_of(ctx, targets, xr.rows, "targets");
  args.ignore_index = ignore_index;
  args.label_smoothing = label_smoothing;
  args.z_loss = z_loss;
  args.grad_scale = grad_scale;
  args.loss = floats_of(ctx, loss, xr.rows, "loss");
  if (lse) args.lse = floats_of(ctx, *lse, xr.rows, "lse");
  onorm_rows dlogits_rows;
  if (dlogits) {
    dlogits_rows = rows_of(ctx, *dlogits, "grad");
    args.dlogits = &dlogits_rows;
  }
  onorm_status status;
  {
    nb::gil_scoped_release release;
    status = onorm_cross_entropy(ctx.handle, &xr, &args);
  }
  check(status, "onorm_cross_entropy");
}

}  // namespace

void bind_cross_entropy(nb::module_& m) {
  m.def("cross_entropy", &cross_entropy, "ctx"_a, "logits"_a, "targets"_a, "loss"_a, "lse"_a.none(),
        "dlogits"_a.none(), "ignore_index"_a, "label_smoothing"_a, "z_loss"_a, "grad_scale"_a);
}
