#include "checking.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace onorm_tool {

namespace {

// Dense rows of p's shape over a host buffer (the reference only reads them).
onorm_rows rows_of(const Problem& p, const std::vector<unsigned char>& data, onorm_dtype dtype) {
  return onorm_rows{const_cast<unsigned char*>(data.data()), dtype, p.rows, p.cols, p.cols};
}

template <class T>
const T* or_null(const std::vector<T>& v) {
  return v.empty() ? nullptr : v.data();
}

// A quantized value's place on its grid: I8 the integer itself; E4M3 the rank of its code, the
// codes 0..126 being the non-negative values in increasing order.
double grid_rank(double q, onorm_dtype dtype) {
  if (dtype == ONORM_I8) return q;
  const double a = std::fabs(q);
  unsigned char lo = 0, hi = 126;  // the largest code whose value is <= a
  while (lo < hi) {
    const unsigned char mid = static_cast<unsigned char>((lo + hi + 1) / 2);
    if (onorm_ref::decode(&mid, ONORM_F8_E4M3, 0) <= a) lo = mid;
    else hi = static_cast<unsigned char>(mid - 1);
  }
  return std::signbit(q) ? -static_cast<double>(lo) : lo;
}

}  // namespace

Reference::Reference(const Problem& p) : p_(p) {
  const onorm_rows x = rows_of(p, p.x, p.in);
  second_ = rows_of(p, p.second, p.in);
  const bool layer = p.op.base == Op::layer_norm;
  if (p.op.row == RowOp::cross_entropy) {
    onorm_ref::CrossEntropySpec sp;
    sp.logits = x;
    sp.targets = p.targets.data();
    sp.label_smoothing = p.label_smoothing;
    sp.z_loss = p.z_loss;
    cross_entropy_ = onorm_ref::compute_cross_entropy(sp);
  } else if (p.op.row == RowOp::softmax_topk) {
    topk_ = onorm_ref::compute_topk(x, p.k, false);
  } else if (!p.op.norm) {
    const onorm_rows in[2] = {x, second_};
    list_ = onorm_ref::compute(p.op.base, in, p.inputs(), or_null(p.gamma), or_null(p.beta), p.eps);
  } else if (p.op.norm->backward) {
    onorm_ref::NormBackwardSpec sp;
    sp.layer = layer;
    sp.x = x;
    sp.dy = second_;
    sp.gamma = or_null(p.gamma);
    sp.param_dtype = p.param;
    sp.weight_offset = p.weight_offset;
    sp.mean = or_null(p.mean);
    sp.rstd = or_null(p.rstd);
    backward_ = onorm_ref::compute_norm_backward(sp);
  } else {
    norm_spec_.layer = layer;
    norm_spec_.x = x;
    norm_spec_.residual = p.op.norm->residual ? &second_ : nullptr;
    norm_spec_.h_dtype = p.in;  // residual_out has x's dtype
    norm_spec_.gamma = or_null(p.gamma);
    norm_spec_.beta = or_null(p.beta);
    norm_spec_.param_dtype = p.param;
    norm_spec_.eps = p.eps;
    norm_spec_.weight_offset = p.weight_offset;
    norm_ = onorm_ref::compute_norm(norm_spec_);
  }
}

const std::vector<double>& Reference::main_output() const {
  if (p_.op.row == RowOp::cross_entropy) return cross_entropy_.dlogits;
  if (p_.op.row == RowOp::softmax_topk) return topk_.values;
  if (!p_.op.norm) return list_.y;
  return p_.op.norm->backward ? backward_.dx : norm_.norm.y;
}

onorm_ref::Report Reference::check(const Outputs& o) const {
  const onorm_rows y = rows_of(p_, o.y, p_.out);
  if (p_.op.row == RowOp::cross_entropy)
    return onorm_ref::check_cross_entropy(cross_entropy_, o.loss.data(), o.lse.data(), &y);
  if (p_.op.row == RowOp::softmax_topk) {
    const onorm_rows values{const_cast<unsigned char*>(o.y.data()), p_.out, p_.rows, p_.k, p_.k};
    return onorm_ref::check_topk(topk_, p_.cols, values, o.indices.data());
  }
  if (!p_.op.norm)
    return onorm_ref::check(p_.op.base, list_, y, or_null(p_.gamma), p_.in, or_null(o.mean), or_null(o.rstd));
  if (p_.op.norm->backward) return check_backward(o);
  const onorm_rows h = rows_of(p_, o.residual_out, p_.in);
  onorm_ref::Report r = onorm_ref::check_norm(norm_spec_, norm_, y, or_null(o.y_scale), 0, or_null(o.mean),
                                              or_null(o.rstd), o.residual_out.empty() ? nullptr : &h);
  if (!p_.op.norm->quantized) return r;
  // The error figures of a quantized y: y alone (not the statistics' f32 ulp), dequantized.
  r.max_abs = r.max_rel = r.max_ulp = 0;
  for (int64_t i = 0; i < p_.rows; ++i) {
    const double scale = o.y_scale[static_cast<size_t>(i)];
    for (int64_t c = 0; c < p_.cols; ++c) {
      const double v = norm_.norm.y[static_cast<size_t>(i * p_.cols + c)];
      const double q = onorm_ref::decode(y.data, y.dtype, i * p_.cols + c);
      const double want = onorm_ref::quantize(v / scale, y.dtype);
      if (!std::isfinite(v) || !std::isfinite(q * scale) || std::isnan(want)) continue;
      const double err = std::fabs(q * scale - v);
      r.max_abs = std::max(r.max_abs, err);
      if (v != 0) r.max_rel = std::max(r.max_rel, err / std::fabs(v));
      r.max_ulp = std::max(r.max_ulp, std::fabs(grid_rank(q, y.dtype) - grid_rank(want, y.dtype)));
    }
  }
  return r;
}

onorm_ref::Report Reference::check_backward(const Outputs& o) const {
  const onorm_rows dx = rows_of(p_, o.y, p_.out);
  onorm_ref::Report r = onorm_ref::check_norm_backward(backward_, dx, or_null(o.dgamma), or_null(o.dbeta));
  // The reference's check leaves the ulp figure out: dx's, as the other ops report y's.
  for (int64_t e = 0; e < p_.rows * p_.cols; ++e) {
    const double want = backward_.dx[static_cast<size_t>(e)];
    const double got = onorm_ref::decode(dx.data, dx.dtype, e);
    if (std::isfinite(want) && std::isfinite(got))
      r.max_ulp = std::max(r.max_ulp, std::fabs(got - want) / onorm_ref::ulp(want, dx.dtype));
  }
  return r;
}

void perturb(const Problem& p, const Reference& ref, std::vector<unsigned char>& y, int64_t ulps) {
  const std::vector<double>& exact = ref.main_output();
  int64_t at = -1;
  double best = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(exact.size()); ++i) {
    const double a = std::fabs(exact[i]);
    if (std::isfinite(a) && a > best) {
      best = a;
      at = i;
    }
  }
  if (at < 0) return;
  const size_t sz = dtype_size(p.out);
  unsigned char* e = y.data() + at * sz;
  if (sz == 1) {
    *e = static_cast<unsigned char>(*e + ulps);
  } else if (sz == 2) {
    uint16_t v;
    std::memcpy(&v, e, 2);
    v = static_cast<uint16_t>(v + ulps);
    std::memcpy(e, &v, 2);
  } else if (sz == 4) {
    uint32_t v;
    std::memcpy(&v, e, 4);
    v = static_cast<uint32_t>(v + ulps);
    std::memcpy(e, &v, 4);
  } else {
    uint64_t v;
    std::memcpy(&v, e, 8);
    v = static_cast<uint64_t>(v + ulps);
    std::memcpy(e, &v, 8);
  }
}

namespace {

template <class T>
int64_t differing(const std::vector<T>& a, const std::vector<T>& b, size_t elem) {
  const size_t a_bytes = a.size() * sizeof(T), b_bytes = b.size() * sizeof(T);
  const unsigned char* pa = reinterpret_cast<const unsigned char*>(a.data());
  const unsigned char* pb = reinterpret_cast<const unsigned char*>(b.data());
  int64_t n = 0;
  for (size_t i = 0; i + elem <= a_bytes && i + elem <= b_bytes; i += elem)
    if (std::memcmp(pa + i, pb + i, elem) != 0) ++n;
  return n;
}

}  // namespace

int64_t outputs_differing(const Problem& p, const Outputs& a, const Outputs& b) {
  return differing(a.y, b.y, dtype_size(p.out)) + differing(a.residual_out, b.residual_out, dtype_size(p.in)) +
         differing(a.y_scale, b.y_scale, 4) + differing(a.dgamma, b.dgamma, 4) + differing(a.dbeta, b.dbeta, 4) +
         differing(a.loss, b.loss, 4) + differing(a.lse, b.lse, 4) + differing(a.indices, b.indices, 8);
}

std::string shape_text(const Problem& p) {
  return std::string(p.op.name()) + " " + std::to_string(p.rows) + "x" + std::to_string(p.cols) + " " +
         dtype_name(p.in) + " -> " + dtype_name(p.out);
}

std::string options_text(const Problem& p) {
  if (p.op.row == RowOp::softmax_topk) return ", k " + std::to_string(p.k);
  if (p.op.row == RowOp::cross_entropy) {
    char text[96];
    std::snprintf(text, sizeof text, ", label smoothing %g, z-loss %g", p.label_smoothing, p.z_loss);
    return text;
  }
  if (!p.op.norm) return "";
  char offset[32];
  std::snprintf(offset, sizeof offset, "%g", p.weight_offset);
  return std::string(", params ") + dtype_name(p.param) + ", weight offset " + offset;
}

std::string error_text(const Problem& p) {
  if (p.op.norm && p.op.norm->quantized)
    return std::string("y dequantized with the backend's y_scale, ulp = a step of the ") + dtype_name(p.out) +
           " grid";
  return std::string("ulp of ") + dtype_name(p.out);
}

std::string bound_text(const onorm_ref::Report& r) {
  return r.ok() ? "ok" : "FAIL(" + std::to_string(r.violations) + ")";
}

}  // namespace onorm_tool
