// Partial row states: each column slice's state (stats), the states merged in a fixed order
// (merge), and each slice finished with its row's merged state (finish). The states cross as
// their memory (arrays.hpp, states_of).
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

using OptIn = std::optional<InArray>;
using OptOut = std::optional<OutArray>;

template <class State>
void stats(const Context& ctx, const InArray& x, const OutArray& states) {
  const onorm_rows xr = rows_of(ctx, x, "x");
  State* s = states_of<State>(ctx, states, xr.rows, "states");
  constexpr bool softmax = std::is_same_v<State, onorm_softmax_state>;
  onorm_status status;
  {
    nb::gil_scoped_release release;
    if constexpr (softmax) status = onorm_softmax_stats(ctx.handle, &xr, s);
    else status = onorm_moments_stats(ctx.handle, &xr, s);
  }
  check(status, softmax ? "onorm_softmax_stats" : "onorm_moments_stats");
}

template <class State>
void merge(const Context& ctx, int64_t parts, int64_t rows, const InArray& in, const OutArray& out) {
  if (parts < 0 || rows < 0) throw nb::value_error("parts and rows must not be negative");
  const State* i = states_of<State>(ctx, in, parts * rows, "parts");
  State* o = states_of<State>(ctx, out, rows, "out");
  constexpr bool softmax = std::is_same_v<State, onorm_softmax_state>;
  onorm_status status;
  {
    nb::gil_scoped_release release;
    if constexpr (softmax) status = onorm_softmax_merge(ctx.handle, parts, rows, i, o);
    else status = onorm_moments_merge(ctx.handle, parts, rows, i, o);
  }
  check(status, softmax ? "onorm_softmax_merge" : "onorm_moments_merge");
}

void softmax_finish(const Context& ctx, const InArray& x, const InArray& states, bool log, const OutArray& y) {
  const onorm_rows xr = rows_of(ctx, x, "x"), yr = rows_of(ctx, y, "out");
  const onorm_softmax_state* s = states_of<onorm_softmax_state>(ctx, states, xr.rows, "state");
  onorm_status status;
  {
    nb::gil_scoped_release release;
    status = onorm_softmax_finish(ctx.handle, &xr, s, log ? 1 : 0, &yr);
  }
  check(status, "onorm_softmax_finish");
}

void norm_finish(const Context& ctx, int kind, const InArray& x, const InArray& states, const OutArray& y,
                 int y_dtype, const OptIn& gamma, const OptIn& beta, double eps, double weight_offset,
                 const OptOut& mean, const OptOut& rstd, double y_static_scale) {
  const onorm_rows xr = rows_of(ctx, x, "x"), yr = rows_of(ctx, y, "out", y_dtype);
  const onorm_moments_state* s = states_of<onorm_moments_state>(ctx, states, xr.rows, "state");
  onorm_norm_args args;
  onorm_norm_args_init(&args, static_cast<onorm_norm_kind>(kind));
  args.param_dtype = params_of(ctx, gamma, beta, xr.cols, xr.dtype, &args.gamma, &args.beta);
  args.eps = eps;
  args.weight_offset = weight_offset;
  if (mean) args.mean = floats_of(ctx, *mean, xr.rows, "mean");
  if (rstd) args.rstd = floats_of(ctx, *rstd, xr.rows, "rstd");
  args.y_static_scale = y_static_scale;
  onorm_status status;
  {
    nb::gil_scoped_release release;
    status = onorm_norm_finish(ctx.handle, &xr, s, &args, &yr);
  }
  check(status, "onorm_norm_finish");
}

}  // namespace

void bind_row_states(nb::module_& m) {
  m.def("softmax_stats", &stats<onorm_softmax_state>, "ctx"_a, "x"_a, "states"_a);
  m.def("moments_stats", &stats<onorm_moments_state>, "ctx"_a, "x"_a, "states"_a);
  m.def("softmax_merge", &merge<onorm_softmax_state>, "ctx"_a, "parts"_a, "rows"_a, "in"_a, "out"_a);
  m.def("moments_merge", &merge<onorm_moments_state>, "ctx"_a, "parts"_a, "rows"_a, "in"_a, "out"_a);
  m.def("softmax_finish", &softmax_finish, "ctx"_a, "x"_a, "states"_a, "log"_a, "y"_a);
  m.def("norm_finish", &norm_finish, "ctx"_a, "kind"_a, "x"_a, "states"_a, "y"_a, "y_dtype"_a, "gamma"_a.none(),
        "beta"_a.none(), "eps"_a, "weight_offset"_a, "mean"_a.none(), "rstd"_a.none(), "y_static_scale"_a);
}
