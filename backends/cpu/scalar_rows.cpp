#include "scalar_rows.hpp"

namespace onorm {
namespace cpu {
namespace {

template <typename T, typename... U>
constexpr bool kAnyDouble = (std::is_same<T, double>::value || ... || std::is_same<U, double>::value);

// Ops whose float statistics may not be trusted (kF64Fallback) take them in double here, where
// speed matters less; the others accumulate in float unless an input is f64. The finish runs
// in the same type and is rounded once to the output.
template <class Op, typename In0, typename In1>
using ScalarAcc = typename std::conditional<Op::kF64Fallback || kAnyDouble<In0, In1>, double, float>::type;

template <class Op, typename In0, typename In1>
ScalarInputs<In0, In1> inputs_of(const onorm_request& q, int64_t r) {
  const In0* x0 = static_cast<const In0*>(q.in[0].data) + r * q.in[0].row_stride;
  const In1* x1 = Op::kInputs > 1 ? static_cast<const In1*>(q.in[1].data) + r * q.in[1].row_stride : nullptr;
  return ScalarInputs<In0, In1>{x0, x1};
}

template <class Op, typename In0, typename In1, typename Out>
void run_typed(const onorm_request& q, int64_t r0, int64_t r1) {
  using Acc = ScalarAcc<Op, In0, In1>;
  const core::ops::ScalarMath<Acc> m;
  const auto params = Op::params(q.param);
  const int64_t cols = q.in[0].cols;
  const In0* col[2] = {static_cast<const In0*>(q.col[0]), static_cast<const In0*>(q.col[1])};
  for (int64_t r = r0; r < r1; ++r) {
    const ScalarInputs<In0, In1> x = inputs_of<Op, In0, In1>(q, r);
    Out* y = static_cast<Out*>(q.out[0].data) + r * q.out[0].row_stride;
    // ok == false (statistics the op distrusts) changes nothing here: they are double already.
    bool ok = true;
    const auto c = Op::coefs(row_state<Op, Acc>(q, x, r), params, ok);
    Op::write_row_outputs(c, q.row_out, r);
    Acc v[Op::kInputs];
    Acc cv[Op::kCols > 0 ? Op::kCols : 1];
    for (int64_t j = 0; j < cols; ++j) {
      x.template at<Op, Acc>(j, v);
      for (int k = 0; k < Op::kCols; ++k) cv[k] = col[k] ? load_as<Acc>(col[k], j) : static_cast<Acc>(Op::col_default(k));
      store_as(y, j, static_cast<double>(Op::finish(m, c, v, cv)));
    }
  }
}

}  // namespace

template <class Op>
typename Op::template Coefs<double> scalar_coefs_double(const onorm_request& q, int64_t r) {
  typename Op::template Coefs<double> out{};
  with_input_types<Op>(q, [&](auto t0, auto t1) {
    using In0 = typename decltype(t0)::type;
    using In1 = typename decltype(t1)::type;
    bool ok = true;
    const auto st = scalar_row_state<Op, double>(inputs_of<Op, In0, In1>(q, r), q.in[0].cols);
    out = Op::coefs(st, Op::params(q.param), ok);
  });
  return out;
}

template <class Op>
typename Op::template Coefs<float> scalar_coefs_f64(const onorm_request& q, int64_t r) {
  return Op::narrow(scalar_coefs_double<Op>(q, r));
}

#define ONORM_CPU_INSTANTIATE_F64(ID, name, Type)                                                           \
  template core::ops::Type::Coefs<float> scalar_coefs_f64<core::ops::Type>(const onorm_request&, int64_t); \
  template core::ops::Type::Coefs<double> scalar_coefs_double<core::ops::Type>(const onorm_request&, int64_t);
ONORM_OP_LIST(ONORM_CPU_INSTANTIATE_F64)
#undef ONORM_CPU_INSTANTIATE_F64

void scalar_run_rows(const onorm_request& q, int64_t r0, int64_t r1) {
  core::ops::visit(q.op, [&](auto op) {
    using Op = decltype(op);
    with_input_types<Op>(q, [&](auto t0, auto t1) {
      with_dtype(q.out[0].dtype, [&](auto to) {
        run_typed<Op, typename decltype(t0)::type, typename decltype(t1)::type, typename decltype(to)::type>(q, r0, r1);
      });
    });
  });
}

void scalar_add_rows(const onorm_rows& x, const onorm_rows& res, const onorm_rows& h, int64_t r0, int64_t h0,
                     int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const void* xr = row_of(x, r0 + i);
    const void* ar = row_of(res, r0 + i);
    void* hr = const_cast<void*>(row_of(h, h0 + i));
    for (int64_t j = 0; j < x.cols; ++j) store_at(hr, h.dtype, j, residual_at(xr, x.dtype, ar, res.dtype, h.dtype, j));
  }
}

}  // namespace cpu
}  // namespace onorm
