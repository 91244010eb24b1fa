#include "ops.hpp"

namespace onorm_tool {

const std::vector<NormOp>& norm_ops() {
#define ONORM_TOOL_FORWARD_ENTRY(name, kind, residual, quantized) NormOp{#name, kind, false, residual, quantized},
#define ONORM_TOOL_BACKWARD_ENTRY(name, kind) NormOp{#name, kind, true, false, std::nullopt},
  static const std::vector<NormOp> ops = {ONORM_TOOL_NORM_FORWARD_OPS(ONORM_TOOL_FORWARD_ENTRY)
                                              ONORM_TOOL_NORM_BACKWARD_OPS(ONORM_TOOL_BACKWARD_ENTRY)};
#undef ONORM_TOOL_FORWARD_ENTRY
#undef ONORM_TOOL_BACKWARD_ENTRY
  return ops;
}

namespace {

struct RowOpName {
  RowOp op;
  const char* name;
};
constexpr RowOpName kRowOps[] = {{RowOp::cross_entropy, "cross_entropy"}, {RowOp::softmax_topk, "softmax_topk"}};

}  // namespace

const char* ToolOp::name() const {
  for (const RowOpName& r : kRowOps)
    if (r.op == row) return r.name;
  return norm ? norm->name : onorm_ref::op_name(base);
}

std::vector<ToolOp> list_ops() {
  std::vector<ToolOp> out;
  for (Op op : onorm_ref::all_ops()) out.push_back(ToolOp{op, nullptr});
  return out;
}

bool parse_tool_op(const std::string& text, ToolOp& out) {
  Op op;
  if (onorm_ref::parse_op(text, op)) {
    out = ToolOp{op, nullptr};
    return true;
  }
  for (const NormOp& n : norm_ops())
    if (text == n.name) {
      out = ToolOp{n.kind == ONORM_LAYER_NORM ? Op::layer_norm : Op::rms_norm, &n};
      return true;
    }
  for (const RowOpName& r : kRowOps)
    if (text == r.name) {
      out = ToolOp{Op::softmax, nullptr, r.op};
      return true;
    }
  return false;
}

std::string tool_op_names(const char* separator) {
  std::string s = onorm_ref::op_names(separator);
  for (const NormOp& n : norm_ops()) s += separator + std::string(n.name);
  for (const RowOpName& r : kRowOps) s += separator + std::string(r.name);
  return s;
}

Tensors& Tensors::operator|=(const Tensors& o) {
  second |= o.second;
  gamma |= o.gamma;
  beta |= o.beta;
  mean |= o.mean;
  rstd |= o.rstd;
  residual_out |= o.residual_out;
  y_scale |= o.y_scale;
  dgamma |= o.dgamma;
  dbeta |= o.dbeta;
  targets |= o.targets;
  loss |= o.loss;
  lse |= o.lse;
  indices |= o.indices;
  return *this;
}

bool Tensors::covers(const Tensors& o) const {
  Tensors both = *this;
  both |= o;
  return both.second == second && both.gamma == gamma && both.beta == beta && both.mean == mean &&
         both.rstd == rstd && both.residual_out == residual_out && both.y_scale == y_scale &&
         both.dgamma == dgamma && both.dbeta == dbeta && both.targets == targets && both.loss == loss &&
         both.lse == lse && both.indices == indices;
}

Tensors tensors_of(const ToolOp& op) {
  Tensors t;
  const bool layer = op.base == Op::layer_norm;
  if (op.row == RowOp::cross_entropy) {
    t.targets = t.loss = t.lse = true;
    return t;
  }
  if (op.row == RowOp::softmax_topk) {
    t.indices = true;
    return t;
  }
  if (!op.norm) {
    t.second = onorm_ref::op_inputs(op.base) > 1;
    t.gamma = t.rstd = layer || op.base == Op::rms_norm;
    t.beta = t.mean = layer;
    return t;
  }
  // Like the list's norms, the forward ones write their statistics too: they are checked.
  t.gamma = t.rstd = true;
  t.mean = layer;
  if (op.norm->backward) {
    t.second = true;
    t.dgamma = true;
    t.dbeta = layer;
  } else {
    t.beta = layer;
    t.second = t.residual_out = op.norm->residual;
    t.y_scale = op.norm->quantized.has_value();
  }
  return t;
}

onorm_dtype y_dtype(const ToolOp& op, onorm_dtype float_out) {
  return op.norm && op.norm->quantized ? *op.norm->quantized : float_out;
}

double moved_bytes(const ToolOp& op, int64_t rows, int64_t cols, onorm_dtype in, onorm_dtype out,
                   onorm_dtype param, int64_t k) {
  const double elems = static_cast<double>(rows) * static_cast<double>(cols);
  const double x = elems * static_cast<double>(onorm_dtype_size(in));
  const double y = elems * static_cast<double>(onorm_dtype_size(out));
  const double r = static_cast<double>(rows);
  // Every tensor once: x, targets, dlogits, loss and lse; x, values and indices.
  if (op.row == RowOp::cross_entropy) return x + y + 8.0 * r + 2 * 4.0 * r;
  if (op.row == RowOp::softmax_topk)
    return x + r * static_cast<double>(k) * (static_cast<double>(onorm_dtype_size(out)) + 8.0);
  if (!op.norm) return row_inputs(op) * x + y;
  const Tensors t = tensors_of(op);
  const double per_row = 4.0 * static_cast<double>(rows), per_col = 4.0 * static_cast<double>(cols);
  const double params = static_cast<double>(cols) * static_cast<double>(onorm_dtype_size(param));
  return x + y + (t.second + t.residual_out) * x + (t.gamma + t.beta) * params +
         (t.mean + t.rstd + t.y_scale) * per_row + (t.dgamma + t.dbeta) * per_col;
}

std::string moved_text(const ToolOp& op) {
  if (op.row == RowOp::cross_entropy) return "x, targets read + dlogits, loss, lse written once";
  if (op.row == RowOp::softmax_topk) return "x read + values, indices written once";
  if (!op.norm) return row_inputs(op) > 1 ? "inputs read + y written once" : "x read + y written once";
  const Tensors t = tensors_of(op);
  const bool backward = op.norm->backward;
  std::string read = "x", written = backward ? "dx" : "y";
  auto add = [](std::string& list, bool on, const char* name) {
    if (on) list += std::string(", ") + name;
  };
  add(read, t.second, backward ? "dy" : "residual");
  add(read, t.gamma, "gamma");
  add(read, t.beta, "beta");
  if (t.residual_out) written = "residual_out, " + written;
  add(written, t.y_scale, "y_scale");
  add(backward ? read : written, t.mean, "mean");
  add(backward ? read : written, t.rstd, "rstd");
  add(written, t.dgamma, "dgamma");
  add(written, t.dbeta, "dbeta");
  return read + " read + " + written + " written once";
}

namespace {

onorm_status call_norm(onorm_context ctx, const NormOp& n, const OpCall& c) {
  const bool layer = n.kind == ONORM_LAYER_NORM;
  const onorm_rows x{c.x, c.in, c.rows, c.cols, c.cols};
  const onorm_rows second{c.second, c.in, c.rows, c.cols, c.cols};
  const onorm_rows y{c.y, c.out, c.rows, c.cols, c.cols};
  if (n.backward) {
    onorm_norm_backward_args a;
    onorm_norm_backward_args_init(&a, n.kind);
    a.gamma = c.gamma;
    a.param_dtype = c.param;
    a.weight_offset = c.weight_offset;
    a.mean = layer ? c.mean : nullptr;
    a.rstd = c.rstd;
    a.dgamma = c.dgamma;
    a.dbeta = layer ? c.dbeta : nullptr;
    return onorm_norm_backward(ctx, &x, &second, &a, &y);
  }
  const onorm_rows residual_out{c.residual_out, c.in, c.rows, c.cols, c.cols};
  onorm_norm_args a;
  onorm_norm_args_init(&a, n.kind);
  a.gamma = c.gamma;
  a.beta = layer ? c.beta : nullptr;
  a.param_dtype = c.param;
  a.eps = c.eps;
  a.weight_offset = c.weight_offset;
  if (n.residual) {
    a.residual = &second;
    a.residual_out = &residual_out;
  }
  a.mean = layer ? c.mean : nullptr;
  a.rstd = c.rstd;
  if (n.quantized) a.y_scale = c.y_scale;
  return onorm_norm(ctx, &x, &a, &y);
}

onorm_status call_row_op(onorm_context ctx, RowOp op, const OpCall& c) {
  const onorm_rows x{c.x, c.in, c.rows, c.cols, c.cols};
  if (op == RowOp::softmax_topk) {
    const onorm_rows values{c.y, c.out, c.rows, c.k, c.k};
    return onorm_softmax_topk(ctx, &x, c.k, 0, &values, c.indices);
  }
  const onorm_rows dlogits{c.y, c.out, c.rows, c.cols, c.cols};
  onorm_cross_entropy_args a;
  onorm_cross_entropy_args_init(&a);
  a.targets = c.targets;
  a.label_smoothing = c.label_smoothing;
  a.z_loss = c.z_loss;
  a.loss = c.loss;
  a.lse = c.lse;
  a.dlogits = &dlogits;
  return onorm_cross_entropy(ctx, &x, &a);
}

}  // namespace

onorm_status call_op(onorm_context ctx, const ToolOp& op, const OpCall& c) {
  if (op.row != RowOp::none) return call_row_op(ctx, op.row, c);
  if (op.norm) return call_norm(ctx, *op.norm, c);
  const onorm_rows x{c.x, c.in, c.rows, c.cols, c.cols};
  const onorm_rows y{c.y, c.out, c.rows, c.cols, c.cols};
  const onorm_rows dy{c.second, c.in, c.rows, c.cols, c.cols};
  switch (op.base) {
    case Op::softmax: return onorm_softmax(ctx, &x, &y);
    case Op::log_softmax: return onorm_log_softmax(ctx, &x, &y);
    case Op::layer_norm: return onorm_layer_norm(ctx, &x, c.gamma, c.beta, c.eps, &y, c.mean, c.rstd);
    case Op::rms_norm: return onorm_rms_norm(ctx, &x, c.gamma, c.eps, &y, c.rstd);
    case Op::softmax_backward: return onorm_softmax_backward(ctx, &x, &dy, &y);
    case Op::log_softmax_backward: return onorm_log_softmax_backward(ctx, &x, &dy, &y);
  }
  return ONORM_ERROR_INTERNAL;
}

}  // namespace onorm_tool
