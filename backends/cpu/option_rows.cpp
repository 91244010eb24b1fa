#include "option_rows.hpp"

#include "onlinenorm/core/quantize.hpp"
#include "request_form.hpp"
#include "scalar_rows.hpp"
#include "validate.hpp"

namespace onorm {
namespace cpu {
namespace {

// One row's h: x, or core::residual_add of x and the residual, H the dtype of residual_out
// (else x's).
struct OptionRow {
  const void* x;
  onorm_dtype xt;
  const void* r;  // nullptr: no residual
  onorm_dtype rt;
  onorm_dtype ht;
  double h(int64_t j) const { return r ? residual_at(x, xt, r, rt, ht, j) : load_at(x, xt, j); }
  template <class Op, typename Acc>
  void at(int64_t c, Acc* v) const {
    v[0] = h(c);
  }
  template <typename Acc>
  Acc first(int64_t c) const {
    return h(c);
  }
};

template <class Op>
void run_op(const onorm_request& q, int64_t r0, int64_t r1) {
  static_assert(Op::kInputs == 1, "the options are the norms': one input besides the residual");
  const core::ops::ScalarMath<double> m;
  const auto params = Op::params(q.param);
  const int64_t cols = q.in[0].cols;
  const bool residual = has_residual(q), residual_out = q.outputs > 1;
  const onorm_dtype yt = q.out[0].dtype;
  const bool quantized = is_quantized(yt);
  const double q_max = yt == ONORM_I8 ? core::kI8Max : core::kE4M3Max;
  constexpr int NC = Op::kCols > 0 ? Op::kCols : 1;
  for (int64_t r = r0; r < r1; ++r) {
    const OptionRow x{row_of(q.in[0], r), q.in[0].dtype, residual ? row_of(q.in[1], r) : nullptr,
                      residual ? q.in[1].dtype : q.in[0].dtype, residual_out ? q.out[1].dtype : q.in[0].dtype};
    bool ok = true;  // the statistics are double already
    const auto c = Op::coefs(row_state<Op, double>(q, x, r), params, ok);
    Op::write_row_outputs(c, q.row_out, r);
    auto v_at = [&](int64_t j, double& h) {
      h = x.h(j);
      double cv[NC];
      for (int k = 0; k < Op::kCols; ++k) {
        cv[k] = q.col[k] ? load_at(q.col[k], q.col_dtype, j) : static_cast<double>(Op::col_default(k));
        if (q.col_offset[k] != 0.0) cv[k] += q.col_offset[k];
      }
      return Op::finish(m, c, &h, cv);
    };
    float scale = 0.0f;
    if (quantized && q.y_scale) {
      double max_abs = 0, h = 0;
      for (int64_t j = 0; j < cols; ++j) max_abs = core::nan_max_abs(max_abs, v_at(j, h));
      scale = static_cast<float>(core::quant_scale(max_abs, q_max));
      q.y_scale[r] = scale;
    }
    const core::QuantRow rq = core::quant_row(q.y_scale != nullptr, scale, q.y_static_scale);
    // Every element is read before it is written: y may alias x, residual_out x or the residual.
    void* y = const_cast<void*>(row_of(q.out[0], r));
    void* hout = residual_out ? const_cast<void*>(row_of(q.out[1], r)) : nullptr;
    for (int64_t j = 0; j < cols; ++j) {
      double h = 0;
      const double v = v_at(j, h);
      if (yt == ONORM_I8) static_cast<int8_t*>(y)[j] = core::quantize_i8(core::quant_input(rq, static_cast<float>(v)));
      else if (yt == ONORM_F8_E4M3) static_cast<uint8_t*>(y)[j] = core::quantize_e4m3(core::quant_input(rq, static_cast<float>(v)));
      else store_at(y, yt, j, v);
      if (hout) store_at(hout, q.out[1].dtype, j, h);
    }
  }
}

}  // namespace

void option_run_rows(const onorm_request& q, int64_t r0, int64_t r1) {
  core::ops::visit(q.op, [&](auto op) {
    using Op = decltype(op);
    if constexpr (Op::kSignature.residual || Op::kSignature.quantized_output) run_op<Op>(q, r0, r1);
  });
}

}  // namespace cpu
}  // namespace onorm
