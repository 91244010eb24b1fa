#include "scalar_rows.hpp"

namespace onorm {
namespace cpu {
namespace {

template <typename In, typename Out>
void run_typed(const onorm_request& q, int64_t r0, int64_t r1) {
  using Acc = typename std::conditional<std::is_same<In, double>::value, double, float>::type;
  const In* x = static_cast<const In*>(q.in[0].data);
  Out* y = static_cast<Out*>(q.out[0].data);
  const In* gamma = static_cast<const In*>(q.col[0]);
  const In* beta = static_cast<const In*>(q.col[1]);
  const int64_t cols = q.in[0].cols;
  for (int64_t r = r0; r < r1; ++r) {
    const In* xr = x + r * q.in[0].row_stride;
    Out* yr = y + r * q.out[0].row_stride;
    switch (q.op) {
      case ONORM_OP_SOFTMAX: scalar_softmax_row<In, Out, Acc>(xr, yr, cols, false); break;
      case ONORM_OP_LOG_SOFTMAX: scalar_softmax_row<In, Out, Acc>(xr, yr, cols, true); break;
      case ONORM_OP_LAYER_NORM:
      case ONORM_OP_RMS_NORM:
        scalar_norm_row<In, Out>(xr, yr, cols, gamma, beta, q.param[0], q.op == ONORM_OP_RMS_NORM,
                                 mean_out(q) ? mean_out(q) + r : nullptr, rstd_out(q) ? rstd_out(q) + r : nullptr);
        break;
    }
  }
}

template <typename In>
void run_out(const onorm_request& q, int64_t r0, int64_t r1) {
  switch (q.out[0].dtype) {
    case ONORM_F32: return run_typed<In, float>(q, r0, r1);
    case ONORM_F16: return run_typed<In, core::f16_bits>(q, r0, r1);
    case ONORM_BF16: return run_typed<In, core::bf16_bits>(q, r0, r1);
    case ONORM_F64: return run_typed<In, double>(q, r0, r1);
    default: return;  // validated before
  }
}

}  // namespace

namespace {
template <typename In>
void norm_stats_f64(const onorm_request& q, int64_t r, double& mean, double& rstd) {
  const ScalarRow<In, double> row{static_cast<const In*>(q.in[0].data) + r * q.in[0].row_stride, q.in[0].cols};
  if (q.op == ONORM_OP_LAYER_NORM) {
    const core::Welford<double> w = scalar_welford_state(row);
    mean = w.mean;
    rstd = w.rstd(q.param[0]);
  } else {
    mean = 0;
    rstd = scalar_sum_sq_state(row).rstd(q.param[0]);
  }
}
}  // namespace

void scalar_norm_stats_f64(const onorm_request& q, int64_t r, double& mean, double& rstd) {
  switch (q.in[0].dtype) {
    case ONORM_F16: return norm_stats_f64<core::f16_bits>(q, r, mean, rstd);
    case ONORM_BF16: return norm_stats_f64<core::bf16_bits>(q, r, mean, rstd);
    case ONORM_F64: return norm_stats_f64<double>(q, r, mean, rstd);
    default: return norm_stats_f64<float>(q, r, mean, rstd);
  }
}

void scalar_run_rows(const onorm_request& q, int64_t r0, int64_t r1) {
  switch (q.in[0].dtype) {
    case ONORM_F32: return run_out<float>(q, r0, r1);
    case ONORM_F16: return run_out<core::f16_bits>(q, r0, r1);
    case ONORM_BF16: return run_out<core::bf16_bits>(q, r0, r1);
    case ONORM_F64: return run_out<double>(q, r0, r1);
    default: return;
  }
}

}  // namespace cpu
}  // namespace onorm
