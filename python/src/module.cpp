// The extension onlinenorm._onlinenorm: one function per C ABI entry point, arrays in and out
// through DLPack, and compare (onorm compare's code, compare_binding.cpp). Shapes, output
// allocation and defaults live in the Python layer (onlinenorm/).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <onlinenorm/onlinenorm.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "compare_binding.hpp"
#include "context.hpp"
#include "status.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using OptIn = std::optional<InArray>;
using OptOut = std::optional<OutArray>;

void softmax(const Context& ctx, const InArray& x, const OutArray& y, bool log) {
  const onorm_rows xr = rows_of(ctx, x, "x"), yr = rows_of(ctx, y, "out");
  onorm_status status;
  {
    nb::gil_scoped_release release;
    status = log ? onorm_log_softmax(ctx.handle, &xr, &yr) : onorm_softmax(ctx.handle, &xr, &yr);
  }
  check(status, log ? "onorm_log_softmax" : "onorm_softmax");
}

void softmax_backward(const Context& ctx, const InArray& y, const InArray& dy, const OutArray& dx, bool log) {
  const onorm_rows yr = rows_of(ctx, y, "y"), dyr = rows_of(ctx, dy, "dy"), dxr = rows_of(ctx, dx, "out");
  onorm_status status;
  {
    nb::gil_scoped_release release;
    status = log ? onorm_log_softmax_backward(ctx.handle, &yr, &dyr, &dxr)
                 : onorm_softmax_backward(ctx.handle, &yr, &dyr, &dxr);
  }
  check(status, log ? "onorm_log_softmax_backward" : "onorm_softmax_backward");
}

void norm(const Context& ctx, int kind, const InArray& x, const OutArray& y, int y_dtype, const OptIn& gamma,
          const OptIn& beta, double eps, double weight_offset, const OptIn& residual, const OptOut& residual_out,
          const OptOut& mean, const OptOut& rstd, const OptOut& y_scale, double y_static_scale) {
  const onorm_rows xr = rows_of(ctx, x, "x"), yr = rows_of(ctx, y, "out", y_dtype);
  onorm_norm_args args;
  onorm_norm_args_init(&args, static_cast<onorm_norm_kind>(kind));
  args.param_dtype = params_of(ctx, gamma, beta, xr.cols, xr.dtype, &args.gamma, &args.beta);
  args.eps = eps;
  args.weight_offset = weight_offset;
  onorm_rows residual_rows, residual_out_rows;
  if (residual) {
    residual_rows = rows_of(ctx, *residual, "residual");
    args.residual = &residual_rows;
  }
  if (residual_out) {
    residual_out_rows = rows_of(ctx, *residual_out, "residual_out");
    args.residual_out = &residual_out_rows;
  }
  if (mean) args.mean = floats_of(ctx, *mean, xr.rows, "mean");
  if (rstd) args.rstd = floats_of(ctx, *rstd, xr.rows, "rstd");
  if (y_scale) args.y_scale = floats_of(ctx, *y_scale, xr.rows, "y_scale");
  args.y_static_scale = y_static_scale;
  onorm_status status;
  {
    nb::gil_scoped_release release;
    status = onorm_norm(ctx.handle, &xr, &args, &yr);
  }
  check(status, "onorm_norm");
}

void norm_backward(const Context& ctx, int kind, const InArray& x, const InArray& dy, const OutArray& dx,
                   const OptIn& gamma, double weight_offset, const OptIn& mean, const InArray& rstd,
                   const OptIn& dresidual, const OptOut& dgamma, const OptOut& dbeta) {
  const onorm_rows xr = rows_of(ctx, x, "x"), dyr = rows_of(ctx, dy, "dy"), dxr = rows_of(ctx, dx, "out");
  onorm_norm_backward_args args;
  onorm_norm_backward_args_init(&args, static_cast<onorm_norm_kind>(kind));
  const void* no_beta;
  args.param_dtype = params_of(ctx, gamma, std::nullopt, xr.cols, xr.dtype, &args.gamma, &no_beta);
  args.weight_offset = weight_offset;
  if (mean) args.mean = floats_of(ctx, *mean, xr.rows, "mean");
  args.rstd = floats_of(ctx, rstd, xr.rows, "rstd");
  onorm_rows dresidual_rows;
  if (dresidual) {
    dresidual_rows = rows_of(ctx, *dresidual, "dresidual");
    args.dresidual = &dresidual_rows;
  }
  if (dgamma) args.dgamma = floats_of(ctx, *dgamma, xr.cols, "dgamma");
  if (dbeta) args.dbeta = floats_of(ctx, *dbeta, xr.cols, "dbeta");
  onorm_status status;
  {
    nb::gil_scoped_release release;
    status = onorm_norm_backward(ctx.handle, &xr, &dyr, &args, &dxr);
  }
  check(status, "onorm_norm_backward");
}

std::vector<std::string> cpu_targets() {
  const int n = onorm_cpu_targets(nullptr, 0);
  std::vector<const char*> names(n);
  onorm_cpu_targets(names.data(), n);
  return std::vector<std::string>(names.begin(), names.end());
}

}  // namespace

NB_MODULE(_onlinenorm, m) {
  m.doc() = "The onlinenorm C ABI (include/onlinenorm/onlinenorm.h); the public API is the package onlinenorm.";
  m.attr("API_VERSION") = ONORM_API_VERSION;
  m.attr("BACKEND_AUTO") = static_cast<int>(ONORM_BACKEND_AUTO);
  m.attr("BACKEND_CPU") = static_cast<int>(ONORM_BACKEND_CPU);
  m.attr("BACKEND_CUDA") = static_cast<int>(ONORM_BACKEND_CUDA);
  m.attr("BACKEND_HIP") = static_cast<int>(ONORM_BACKEND_HIP);
  m.attr("LAYER_NORM") = static_cast<int>(ONORM_LAYER_NORM);
  m.attr("RMS_NORM") = static_cast<int>(ONORM_RMS_NORM);
  m.attr("DTYPE_F8_E4M3") = static_cast<int>(ONORM_F8_E4M3);
  m.attr("DTYPE_I8") = static_cast<int>(ONORM_I8);

  nb::class_<Context>(m, "Context", "An onorm_context: one backend and device.")
      .def(
          "__init__",
          [](Context* self, int backend, int device) {
            new (self) Context(static_cast<onorm_backend>(backend), device);
          },
          "backend"_a, "device"_a)
      .def_prop_ro("name", [](const Context& c) { return std::string(onorm_backend_name(c.handle)); })
      .def_prop_ro("kind", [](const Context& c) { return static_cast<int>(c.kind); })
      .def_ro("device", &Context::device)
      .def(
          "set_stream",
          [](Context& c, uintptr_t stream) {
            check(onorm_set_stream(c.handle, reinterpret_cast<void*>(stream)), "onorm_set_stream");
          },
          "stream"_a, "The cudaStream_t / hipStream_t (an integer) later calls are ordered on.")
      .def("synchronize", [](Context& c) {
        onorm_status status;
        {
          nb::gil_scoped_release release;
          status = onorm_synchronize(c.handle);
        }
        check(status, "onorm_synchronize");
      });

  m.def("softmax", &softmax, "ctx"_a, "x"_a, "y"_a, "log"_a);
  m.def("softmax_backward", &softmax_backward, "ctx"_a, "y"_a, "dy"_a, "dx"_a, "log"_a);
  m.def("norm", &norm, "ctx"_a, "kind"_a, "x"_a, "y"_a, "y_dtype"_a, "gamma"_a.none(), "beta"_a.none(), "eps"_a,
        "weight_offset"_a, "residual"_a.none(), "residual_out"_a.none(), "mean"_a.none(), "rstd"_a.none(),
        "y_scale"_a.none(), "y_static_scale"_a);
  m.def("norm_backward", &norm_backward, "ctx"_a, "kind"_a, "x"_a, "dy"_a, "dx"_a, "gamma"_a.none(),
        "weight_offset"_a, "mean"_a.none(), "rstd"_a, "dresidual"_a.none(), "dgamma"_a.none(), "dbeta"_a.none());
  bind_cross_entropy(m);
  bind_softmax_topk(m);
  bind_row_states(m);
  m.def("backend_device_count", [](int b) { return onorm_backend_device_count(static_cast<onorm_backend>(b)); });
  m.def("backend_unavailable_reason",
        [](int b) { return std::string(onorm_backend_unavailable_reason(static_cast<onorm_backend>(b))); });
  m.def("cpu_targets", &cpu_targets);
  m.def("compare", &compare_document, "options"_a, "x"_a.none(),
        "onorm compare's JSON document for its options (names without \"--\"); x stands for --input.");
}
