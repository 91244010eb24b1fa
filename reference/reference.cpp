#include "reference.hpp"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace onorm_ref {
namespace {

double f16_value(uint16_t h) {
  const int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 31) v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (e == 0) v = std::ldexp(m, -24);
  else v = std::ldexp(1024 + m, e - 25);
  return sign ? -v : v;
}

double bf16_value(uint16_t h) {
  const int sign = h >> 15, e = (h >> 7) & 255, m = h & 127;
  double v;
  if (e == 255) v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (e == 0) v = std::ldexp(m, -133);
  else v = std::ldexp(128 + m, e - 134);
  return sign ? -v : v;
}

// OCP E4M3 ("fn"): bias 7, no infinities, S.1111.111 is NaN.
double e4m3_value(uint8_t c) {
  const int sign = c >> 7, e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double v = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return sign ? -v : v;
}

// Nearest-even encoding by search over the format's own values: slow but obviously right.
uint16_t encode_small(double v, double (*value)(uint16_t), int man_bits) {
  if (std::isnan(v)) return value == f16_value ? 0x7e00 : 0x7fc0;
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  const uint16_t inf_bits = value == f16_value ? 0x7c00 : 0x7f80;
  // Largest finite magnitude and the midpoint to infinity.
  const double max_finite = value(static_cast<uint16_t>(inf_bits - 1));
  const double half_ulp_max = std::ldexp(1.0, std::ilogb(max_finite) - man_bits - 1);
  if (a >= max_finite + half_ulp_max) return sign | inf_bits;
  uint16_t lo = 0, hi = static_cast<uint16_t>(inf_bits - 1);  // binary search on magnitude bits
  while (lo < hi) {
    const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (value(mid) <= a) lo = mid; else hi = static_cast<uint16_t>(mid - 1);
  }
  if (lo == inf_bits - 1) return sign | lo;
  const double below = value(lo), above = value(static_cast<uint16_t>(lo + 1));
  uint16_t pick;
  if (a - below < above - a) pick = lo;
  else if (a - below > above - a) pick = static_cast<uint16_t>(lo + 1);
  else pick = (lo & 1) ? static_cast<uint16_t>(lo + 1) : lo;
  return sign | pick;
}

template <typename T>
T load(const void* data, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(data) + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <typename T>
void store(void* data, int64_t i, T v) {
  std::memcpy(static_cast<char*>(data) + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

int mantissa_bits(onorm_dtype dtype) {
  switch (dtype) {
    case ONORM_F16: return 10;
    case ONORM_BF16: return 7;
    case ONORM_F32: return 23;
    default: return 52;
  }
}
int min_exponent(onorm_dtype dtype) {  // exponent of the smallest normal
  switch (dtype) {
    case ONORM_F16: return -14;
    case ONORM_BF16: return -126;
    case ONORM_F32: return -126;
    default: return -1022;
  }
}

}  // namespace

const std::vector<Op>& all_ops() {
  static const std::vector<Op> ops = {
#define ONORM_REF_OP_ITEM(ID, name, Type) Op::name,
      ONORM_OP_LIST(ONORM_REF_OP_ITEM)
#undef ONORM_REF_OP_ITEM
  };
  return ops;
}

const char* op_name(Op op) {
  switch (op) {
#define ONORM_REF_OP_NAME(ID, name, Type) \
  case Op::name:                          \
    return #name;
    ONORM_OP_LIST(ONORM_REF_OP_NAME)
#undef ONORM_REF_OP_NAME
  }
  return "?";
}

bool parse_op(const std::string& text, Op& op) {
  for (Op o : all_ops()) {
    if (text == op_name(o)) {
      op = o;
      return true;
    }
  }
  return false;
}

std::string op_names(const char* separator) {
  std::string s;
  for (Op o : all_ops()) s += (s.empty() ? "" : separator) + std::string(op_name(o));
  return s;
}

int op_inputs(Op op) { return op == Op::softmax_backward || op == Op::log_softmax_backward ? 2 : 1; }

double decode(const void* data, onorm_dtype dtype, int64_t i) {
  switch (dtype) {
    case ONORM_F32: return load<float>(data, i);
    case ONORM_F64: return load<double>(data, i);
    case ONORM_F16: return f16_value(load<uint16_t>(data, i));
    case ONORM_BF16: return bf16_value(load<uint16_t>(data, i));
    case ONORM_I8: return load<int8_t>(data, i);
    case ONORM_F8_E4M3: return e4m3_value(load<uint8_t>(data, i));
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

void encode(double v, void* data, onorm_dtype dtype, int64_t i) {
  switch (dtype) {
    case ONORM_F32: store<float>(data, i, static_cast<float>(v)); break;
    case ONORM_F64: store<double>(data, i, v); break;
    case ONORM_F16: store<uint16_t>(data, i, encode_small(v, f16_value, 10)); break;
    case ONORM_BF16: store<uint16_t>(data, i, encode_small(v, bf16_value, 7)); break;
    default: break;
  }
}

namespace {

// The backward passes, in double from the rounded inputs y and dy. softmax: dx_j = y_j (dy_j - s),
// s = sum_k y_k dy_k, the bound's scale |y_j| (|dy_j| + sum_k |y_k dy_k|); log-softmax:
// dx_j = dy_j - exp(y_j) s, s = sum_k dy_k, scale |dy_j| + exp(y_j) sum_k |dy_k|. A NaN in y or
// dy makes the row NaN.
Result backward_of_y(Op op, const onorm_rows& y, const onorm_rows& dy) {
  const bool log_sm = op == Op::log_softmax_backward;
  Result r;
  r.rows = y.rows;
  r.cols = y.cols;
  r.y.assign(static_cast<size_t>(y.rows * y.cols), 0.0);
  r.scale.assign(r.y.size(), 0.0);
  std::vector<double> yv(static_cast<size_t>(y.cols)), dv(static_cast<size_t>(y.cols));
  for (int64_t i = 0; i < y.rows; ++i) {
    double s = 0, s_abs = 0;
    bool any_nan = false;
    for (int64_t c = 0; c < y.cols; ++c) {
      yv[c] = decode(y.data, y.dtype, i * y.row_stride + c);
      dv[c] = decode(dy.data, dy.dtype, i * dy.row_stride + c);
      any_nan |= std::isnan(yv[c]) || std::isnan(dv[c]);
      const double t = log_sm ? dv[c] : yv[c] * dv[c];
      s += t;
      s_abs += std::fabs(t);
    }
    double* out = r.y.data() + i * y.cols;
    double* scale = r.scale.data() + i * y.cols;
    for (int64_t c = 0; c < y.cols; ++c) {
      const double e = log_sm ? std::exp(yv[c]) : 0.0;
      out[c] = any_nan ? std::numeric_limits<double>::quiet_NaN() : log_sm ? dv[c] - e * s : yv[c] * (dv[c] - s);
      scale[c] = log_sm ? std::fabs(dv[c]) + e * s_abs : std::fabs(yv[c]) * (std::fabs(dv[c]) + s_abs);
    }
  }
  return r;
}

}  // namespace

Result compute(Op op, const onorm_rows* in, int inputs, const void* gamma, const void* beta, double eps) {
  if (!in || inputs < op_inputs(op))
    throw std::invalid_argument(std::string("onorm_ref::compute: ") + op_name(op) + " reads " +
                                std::to_string(op_inputs(op)) + " row tensors");
  for (int k = 1; k < op_inputs(op); ++k)
    if (in[k].rows != in[0].rows || in[k].cols != in[0].cols)
      throw std::invalid_argument(std::string("onorm_ref::compute: ") + op_name(op) + ": inputs of different shapes");
  if (op_inputs(op) == 2) return backward_of_y(op, in[0], in[1]);
  return compute(op, in[0], gamma, beta, eps);
}

Result compute(Op op, const onorm_rows& x, const void* gamma, const void* beta, double eps) {
  if (op_inputs(op) != 1)
    throw std::invalid_argument(std::string("onorm_ref::compute: ") + op_name(op) + " reads " +
                                std::to_string(op_inputs(op)) + " row tensors");
  Result r;
  r.rows = x.rows;
  r.cols = x.cols;
  r.y.assign(static_cast<size_t>(x.rows * x.cols), 0.0);
  if (op == Op::layer_norm) r.mean.assign(static_cast<size_t>(x.rows), 0.0);
  if (op == Op::layer_norm || op == Op::rms_norm) r.rstd.assign(static_cast<size_t>(x.rows), 0.0);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> row(static_cast<size_t>(x.cols));
  for (int64_t i = 0; i < x.rows; ++i) {
    for (int64_t c = 0; c < x.cols; ++c) row[c] = decode(x.data, x.dtype, i * x.row_stride + c);
    double* out = r.y.data() + i * x.cols;
    const double n = static_cast<double>(x.cols);
    if (op == Op::softmax || op == Op::log_softmax) {
      bool any_nan = false, any_pos_inf = false;
      double m = -inf;
      for (double v : row) {
        any_nan |= std::isnan(v);
        any_pos_inf |= v == inf;
        if (v > m) m = v;
      }
      for (int64_t c = 0; c < x.cols; ++c) {
        if (any_nan || any_pos_inf) out[c] = nan;
        else if (m == -inf) out[c] = op == Op::softmax ? 0.0 : -inf;
      }
      if (any_nan || any_pos_inf || m == -inf) continue;
      double sum = 0;  // pairwise is unnecessary in double at these lengths (error ~n*1e-16)
      for (double v : row) sum += std::exp(v - m);
      const double log_sum = std::log(sum);
      for (int64_t c = 0; c < x.cols; ++c)
        out[c] = op == Op::softmax ? std::exp(row[c] - m) / sum : (row[c] - m) - log_sum;
      continue;
    }
    double mean = 0;
    if (op == Op::layer_norm) {
      for (double v : row) mean += v;
      mean /= n;
    }
    double ss = 0;
    for (double v : row) ss += (v - mean) * (v - mean);
    const double rstd = 1.0 / std::sqrt(ss / n + eps);
    if (op == Op::layer_norm) r.mean[i] = mean;
    r.rstd[i] = rstd;
    for (int64_t c = 0; c < x.cols; ++c) {
      const double g = gamma ? decode(gamma, x.dtype, c) : 1.0;
      const double b = (beta && op == Op::layer_norm) ? decode(beta, x.dtype, c) : 0.0;
      out[c] = (row[c] - mean) * rstd * g + b;
    }
  }
  return r;
}

namespace {
// The scale s_j = weight_offset + gamma_j (gamma NULL: 1) of every column.
std::vector<double> scales(const void* gamma, onorm_dtype param_dtype, double weight_offset, int64_t cols) {
  std::vector<double> s(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c)
    s[static_cast<size_t>(c)] = weight_offset + (gamma ? decode(gamma, param_dtype, c) : 1.0);
  return s;
}
}  // namespace

NormResult compute_norm(const NormSpec& sp) {
  const onorm_rows& x = sp.x;
  NormResult out;
  Result& r = out.norm;
  r.rows = x.rows;
  r.cols = x.cols;
  r.y.assign(static_cast<size_t>(x.rows * x.cols), 0.0);
  if (sp.layer) r.mean.assign(static_cast<size_t>(x.rows), 0.0);
  r.rstd.assign(static_cast<size_t>(x.rows), 0.0);
  out.h.assign(r.y.size(), 0.0);
  out.s = scales(sp.gamma, sp.param_dtype, sp.weight_offset, x.cols);
  const bool wide = x.dtype == ONORM_F64 || (sp.residual && sp.residual->dtype == ONORM_F64);
  const double n = static_cast<double>(x.cols);
  for (int64_t i = 0; i < x.rows; ++i) {
    double* h = out.h.data() + i * x.cols;
    for (int64_t c = 0; c < x.cols; ++c) {
      double v = decode(x.data, x.dtype, i * x.row_stride + c);
      if (sp.residual) {
        const double b = decode(sp.residual->data, sp.residual->dtype, i * sp.residual->row_stride + c);
        v = wide ? v + b : static_cast<double>(static_cast<float>(v) + static_cast<float>(b));
        unsigned char cell[8];
        encode(v, cell, sp.h_dtype, 0);
        v = decode(cell, sp.h_dtype, 0);
      }
      h[c] = v;
    }
    double mean = 0;
    if (sp.layer) {
      for (int64_t c = 0; c < x.cols; ++c) mean += h[c];
      mean /= n;
      r.mean[i] = mean;
    }
    double ss = 0;
    for (int64_t c = 0; c < x.cols; ++c) ss += (h[c] - mean) * (h[c] - mean);
    const double rstd = 1.0 / std::sqrt(ss / n + sp.eps);
    r.rstd[i] = rstd;
    for (int64_t c = 0; c < x.cols; ++c) {
      const double b = sp.layer && sp.beta ? decode(sp.beta, sp.param_dtype, c) : 0.0;
      r.y[i * x.cols + c] = (h[c] - mean) * rstd * out.s[c] + b;
    }
  }
  return out;
}

double quant_max(onorm_dtype dtype) { return dtype == ONORM_I8 ? 127.0 : 448.0; }

double quantize(double v, onorm_dtype dtype) {
  if (std::isnan(v)) return dtype == ONORM_I8 ? 0.0 : v;
  const double q = quant_max(dtype);
  const double a = std::min(std::fabs(v), q);
  double pick;
  if (dtype == ONORM_I8) {
    pick = std::floor(a);
    const double frac = a - pick;
    if (frac > 0.5 || (frac == 0.5 && std::fmod(pick, 2.0) != 0)) pick += 1;
  } else {
    // The nearest of the non-negative codes 0..126 (ordered by value), ties to the even code.
    int lo = 0;
    while (lo < 126 && e4m3_value(static_cast<uint8_t>(lo + 1)) <= a) ++lo;
    pick = e4m3_value(static_cast<uint8_t>(lo));
    if (lo < 126) {
      const double above = e4m3_value(static_cast<uint8_t>(lo + 1));
      if (above - a < a - pick || (above - a == a - pick && (lo & 1))) pick = above;
    }
  }
  return std::signbit(v) ? -pick : pick;
}

namespace {
// The neighbours on the quantized grid of a value q on it: q itself and the values one step
// below and above.
bool on_grid_near(double got, double want, onorm_dtype dtype) {
  if (std::isnan(want)) return dtype == ONORM_I8 ? got == 0.0 : std::isnan(got);
  if (got == want) return true;
  if (dtype == ONORM_I8) return std::fabs(got - want) <= 1.0;
  // The E4M3 grid in value order: the negative codes mirrored, then the positive ones.
  std::vector<double> grid;
  for (int c = 126; c >= 1; --c) grid.push_back(-e4m3_value(static_cast<uint8_t>(c)));
  for (int c = 0; c <= 126; ++c) grid.push_back(e4m3_value(static_cast<uint8_t>(c)));
  const auto at = std::find(grid.begin(), grid.end(), want) - grid.begin();
  for (long k = at - 1; k <= at + 1; ++k)
    if (k >= 0 && k < static_cast<long>(grid.size()) && grid[k] == got) return true;
  return false;
}
}  // namespace

Report check_norm(const NormSpec& sp, const NormResult& ref, const onorm_rows& y, const float* y_scale,
                  double static_scale, const float* mean, const float* rstd, const onorm_rows* residual_out) {
  const Op op = sp.layer ? Op::layer_norm : Op::rms_norm;
  const bool quantized = y.dtype == ONORM_I8 || y.dtype == ONORM_F8_E4M3;
  Report rep;
  if (!quantized) {
    // The norm's own check, with s_j as the scale of the mean term (passed as gamma in f64).
    rep = check(op, ref.norm, y, ref.s.data(), ONORM_F64, mean, rstd);
  } else {
    rep = check(op, ref.norm, onorm_rows{nullptr, ONORM_F32, 0, 0, 0}, nullptr, ONORM_F64, mean, rstd);
  }
  const int64_t cols = ref.norm.cols;
  for (int64_t i = 0; i < ref.norm.rows; ++i) {
    const double* v = ref.norm.y.data() + i * cols;
    if (quantized) {
      double scale = static_scale;
      if (y_scale) {
        double max_abs = 0;
        bool nan = false;
        for (int64_t c = 0; c < cols; ++c) {
          nan |= std::isnan(v[c]);
          max_abs = std::max(max_abs, std::fabs(v[c]));
        }
        const double want = nan ? std::numeric_limits<double>::quiet_NaN() : max_abs == 0 ? 1.0 : max_abs / quant_max(y.dtype);
        const double got = y_scale[i];
        ++rep.checked;
        const bool good = std::isnan(want) ? std::isnan(got) : std::fabs(got - want) <= 1e-5 * want;
        if (!good) rep.violation("y_scale", i, 0, got, want);
        scale = got;
      }
      for (int64_t c = 0; c < cols; ++c) {
        const double got = decode(y.data, y.dtype, i * y.row_stride + c);
        const double want = quantize(v[c] / scale, y.dtype);
        ++rep.checked;
        if (!on_grid_near(got, want, y.dtype)) rep.violation("y", i, c, got, want);
      }
    }
    if (residual_out) {
      for (int64_t c = 0; c < cols; ++c) {
        const double got = decode(residual_out->data, residual_out->dtype, i * residual_out->row_stride + c);
        const double want = ref.h[i * cols + c];
        ++rep.checked;
        const bool same = std::isnan(want) ? std::isnan(got) : got == want;
        if (!same) rep.violation("residual_out", i, c, got, want);
      }
    }
  }
  return rep;
}

double ulp(double v, onorm_dtype dtype) {
  const double a = std::fabs(v);
  int e = (a == 0 || !std::isfinite(a)) ? min_exponent(dtype) : std::ilogb(a);
  if (e < min_exponent(dtype)) e = min_exponent(dtype);
  return std::ldexp(1.0, e - mantissa_bits(dtype));
}

bool rounds_from_within(double got, double want, double b, onorm_dtype dtype) {
  if (std::isnan(got) || std::isnan(want) || std::isnan(b)) return false;
  auto rounded = [&](double v) {
    unsigned char cell[8];
    encode(v, cell, dtype, 0);
    return decode(cell, dtype, 0);
  };
  return rounded(want - b) <= got && got <= rounded(want + b);
}

double bound(Op op, onorm_dtype out, double ref, double row_mean, double row_rstd, double gamma_j, double scale) {
  double b;
  switch (op) {
    case Op::softmax: b = 1e-5 * std::fabs(ref) + 1e-30; break;
    case Op::log_softmax: b = ref > -80 ? 2e-5 + 1e-6 * std::fabs(ref) : 1e-5 * std::fabs(ref); break;
    case Op::layer_norm:
      b = 1e-5 * std::fabs(ref) + 1e-6 + std::ldexp(std::fabs(row_mean) * row_rstd * std::fabs(gamma_j), -20);
      break;
    case Op::rms_norm: b = 1e-5 * std::fabs(ref) + 1e-6; break;
    case Op::softmax_backward:
    case Op::log_softmax_backward: b = 1e-5 * scale + 1e-30; break;
    default: b = 0;
  }
  if (out == ONORM_F16 || out == ONORM_BF16) b += ulp(ref, out);
  return b;
}

NormBackwardResult compute_norm_backward(const NormBackwardSpec& sp) {
  NormBackwardResult out;
  const int64_t rows = sp.x.rows, cols = sp.x.cols;
  out.rows = rows;
  out.cols = cols;
  const size_t n = static_cast<size_t>(rows * cols);
  out.dx.assign(n, 0);
  out.dx_bound.assign(n, 0);
  out.dgamma.assign(static_cast<size_t>(cols), 0);
  out.dbeta = out.dgamma;
  out.dgamma_abs = out.dgamma;
  out.dbeta_abs = out.dgamma;
  const std::vector<double> s = scales(sp.gamma, sp.param_dtype, sp.weight_offset, cols);
  std::vector<double> g(s.size()), xhat(s.size());
  for (int64_t i = 0; i < rows; ++i) {
    const double mean = sp.layer ? static_cast<double>(sp.mean[i]) : 0.0;
    const double rstd = sp.rstd[i];
    double mg = 0, mgx = 0, mag = 0, magx = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const size_t k = static_cast<size_t>(c);
      const double x = decode(sp.x.data, sp.x.dtype, i * sp.x.row_stride + c);
      const double dy = decode(sp.dy.data, sp.dy.dtype, i * sp.dy.row_stride + c);
      g[k] = dy * s[k];
      xhat[k] = (x - mean) * rstd;
      mg += g[k];
      mgx += g[k] * xhat[k];
      mag += std::fabs(g[k]);
      magx += std::fabs(g[k] * xhat[k]);
      out.dgamma[k] += dy * xhat[k];
      out.dbeta[k] += dy;
      out.dgamma_abs[k] += std::fabs(dy * xhat[k]);
      out.dbeta_abs[k] += std::fabs(dy);
    }
    mg /= static_cast<double>(cols);
    mgx /= static_cast<double>(cols);
    mag /= static_cast<double>(cols);
    magx /= static_cast<double>(cols);
    if (!sp.layer) mg = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const size_t k = static_cast<size_t>(c);
      const double dr = sp.dresidual ? decode(sp.dresidual->data, sp.dresidual->dtype, i * sp.dresidual->row_stride + c) : 0.0;
      const size_t e = static_cast<size_t>(i * cols + c);
      out.dx[e] = rstd * (g[k] - mg - xhat[k] * mgx) + dr;
      out.dx_bound[e] = 1e-5 * (rstd * (std::fabs(g[k]) + (sp.layer ? mag : 0.0) + std::fabs(xhat[k]) * magx) + std::fabs(dr)) + 1e-30;
    }
  }
  return out;
}

Report check_norm_backward(const NormBackwardResult& ref, const onorm_rows& dx, const float* dgamma,
                           const float* dbeta) {
  Report rep;
  auto judge = [&](const char* what, int64_t i, int64_t c, double got, double want, double b,
                   bool rounded_ok = false) {
    ++rep.checked;
    const bool good = std::isnan(want) ? std::isnan(got) : (rounded_ok || got == want || std::fabs(got - want) <= b);
    if (!good) rep.violation(what, i, c, got, want);
    else if (!std::isnan(want) && std::isfinite(want) && std::isfinite(got)) {
      const double err = std::fabs(got - want);
      rep.max_abs = std::max(rep.max_abs, err);
      if (want != 0) rep.max_rel = std::max(rep.max_rel, err / std::fabs(want));
    }
  };
  const bool narrow = dx.dtype == ONORM_F16 || dx.dtype == ONORM_BF16;
  for (int64_t i = 0; i < ref.rows; ++i)
    for (int64_t c = 0; c < ref.cols; ++c) {
      const size_t e = static_cast<size_t>(i * ref.cols + c);
      const double want = ref.dx[e];
      const double b = ref.dx_bound[e] + (narrow ? ulp(want, dx.dtype) : 0.0);
      const double got = decode(dx.data, dx.dtype, i * dx.row_stride + c);
      judge("dx", i, c, got, want, b, rounds_from_within(got, want, ref.dx_bound[e], dx.dtype));
    }
  for (int64_t c = 0; c < ref.cols; ++c) {
    const size_t k = static_cast<size_t>(c);
    if (dgamma) judge("dgamma", 0, c, dgamma[k], ref.dgamma[k], 1e-5 * ref.dgamma_abs[k] + 1e-30);
    if (dbeta) judge("dbeta", 0, c, dbeta[k], ref.dbeta[k], 1e-5 * ref.dbeta_abs[k] + 1e-30);
  }
  return rep;
}

void Report::violation(const char* what, int64_t row, int64_t col, double got, double want) {
  if (violations == 0) {
    first_row = row;
    first_col = col;
    first_got = got;
    first_want = want;
    first_what = what;
  }
  ++violations;
}

std::string Report::describe() const {
  std::ostringstream s;
  s << checked << " values checked, " << violations << " outside the bound; max abs " << max_abs
    << ", max rel " << max_rel << ", max ulp " << max_ulp;
  if (violations) {
    s.precision(17);
    s << "; first: " << first_what << "[" << first_row << "][" << first_col << "] = " << first_got
      << ", want " << first_want;
  }
  return s.str();
}

Report check(Op op, const Result& ref, const onorm_rows& y, const void* gamma, onorm_dtype gamma_dtype,
             const float* mean, const float* rstd) {
  Report rep;
  // stat: a row statistic (mean, rstd). Where its exact value is not finite (a row holding
  // +-inf), the contract fixes only that y is NaN, so any non-finite statistic is accepted.
  auto judge = [&](const char* what, int64_t i, int64_t c, double got, double want, double b, onorm_dtype dt,
                   bool stat = false, bool rounded_ok = false) {
    ++rep.checked;
    bool good;
    if (stat && !std::isfinite(want)) good = !std::isfinite(got);
    else if (std::isnan(want)) good = std::isnan(got);
    else if (std::isinf(want)) good = got == want;
    else {
      const double err = std::fabs(got - want);
      good = rounded_ok || (std::isfinite(got) && err <= b);
      if (std::isfinite(got)) {
        rep.max_abs = std::max(rep.max_abs, err);
        if (want != 0) rep.max_rel = std::max(rep.max_rel, err / std::fabs(want));
        rep.max_ulp = std::max(rep.max_ulp, err / ulp(want, dt));
      }
    }
    if (!good) rep.violation(what, i, c, got, want);
  };
  for (int64_t i = 0; i < ref.rows; ++i) {
    const double row_mean = ref.mean.empty() ? 0.0 : ref.mean[i];
    const double row_rstd = ref.rstd.empty() ? 0.0 : ref.rstd[i];
    for (int64_t c = 0; y.data && c < ref.cols; ++c) {  // y.data NULL: statistics only
      const double want = ref.y[i * ref.cols + c];
      const double got = decode(y.data, y.dtype, i * y.row_stride + c);
      const double g = gamma ? decode(gamma, gamma_dtype, c) : 1.0;
      // The rounding to y's dtype of a value within the F32 bound is right, the reference's own
      // included: e.g. -inf, the f16 of a log-softmax of -1.4e38 (API.md's log-softmax bound
      // covers ref > -80 only).
      const double scale = ref.scale.empty() ? 0.0 : ref.scale[i * ref.cols + c];
      judge("y", i, c, got, want, bound(op, y.dtype, want, row_mean, row_rstd, g, scale), y.dtype, false,
            rounds_from_within(got, want, bound(op, ONORM_F32, want, row_mean, row_rstd, g, scale), y.dtype));
    }
    // Statistics come back as f32: a few f32 ulp of the exact value.
    if (mean && !ref.mean.empty())
      // The contract's own bound is 1e-6 * (|mean| + 1/rstd): a row of +-1e20 whose mean is 0
      // may get a mean of a few f32 ulp of 1e20 (the 1/rstd term, absent before).
      judge("mean", i, 0, mean[i], row_mean, 1e-5 * std::fabs(row_mean) + 1e-6 + 4 * ulp(row_mean, ONORM_F32) +
            std::ldexp(std::fabs(row_mean), -20) + (row_rstd > 0 ? 1e-6 / row_rstd : 0.0), ONORM_F32, true);
    if (rstd && !ref.rstd.empty())
      judge("rstd", i, 0, rstd[i], row_rstd, 1e-5 * std::fabs(row_rstd), ONORM_F32, true);
  }
  return rep;
}


// ---- API v2 part 2 ----------------------------------------------------------------------------

namespace {
using LD = long double;
const double kNaNd = std::numeric_limits<double>::quiet_NaN();
const double kInfd = std::numeric_limits<double>::infinity();

// Row i of x decoded into row; returns whether it holds a NaN, and its max (NaN-free part).
bool load_row(const onorm_rows& x, int64_t i, std::vector<double>& row, double& max, bool& pos_inf) {
  row.resize(static_cast<size_t>(x.cols));
  bool nan = false;
  pos_inf = false;
  max = -kInfd;
  for (int64_t c = 0; c < x.cols; ++c) {
    const double v = decode(x.data, x.dtype, i * x.row_stride + c);
    row[static_cast<size_t>(c)] = v;
    nan |= std::isnan(v);
    pos_inf |= v == kInfd;
    if (v > max) max = v;
  }
  return nan;
}

// sum_j exp(row_j - max) of the columns in sel (all columns when sel is NULL), in long double.
LD sum_exp_of(const std::vector<double>& row, double max, const std::vector<int64_t>* sel) {
  LD sum = 0;
  if (sel) {
    for (int64_t c : *sel) sum += std::exp(static_cast<LD>(row[static_cast<size_t>(c)]) - static_cast<LD>(max));
  } else {
    for (double v : row) sum += std::exp(static_cast<LD>(v) - static_cast<LD>(max));
  }
  return sum;
}

// log sum_j exp(row_j) of the columns in sel (all columns when sel is NULL), in long double.
LD lse_of(const std::vector<double>& row, double max, const std::vector<int64_t>* sel) {
  if (max == -kInfd) return -std::numeric_limits<LD>::infinity();
  return static_cast<LD>(max) + std::log(sum_exp_of(row, max, sel));
}
}  // namespace

CrossEntropyResult compute_cross_entropy(const CrossEntropySpec& sp) {
  const onorm_rows& x = sp.logits;
  CrossEntropyResult r;
  r.rows = x.rows;
  r.cols = x.cols;
  r.loss.assign(static_cast<size_t>(x.rows), 0.0);
  r.lse.assign(static_cast<size_t>(x.rows), 0.0);
  r.ignored.assign(static_cast<size_t>(x.rows), 0);
  r.dlogits.assign(static_cast<size_t>(x.rows * x.cols), 0.0);
  r.dbound.assign(r.dlogits.size(), 0.0);
  const LD ls = sp.label_smoothing, z = sp.z_loss, gs = sp.grad_scale, C = static_cast<LD>(x.cols);
  std::vector<double> row;
  for (int64_t i = 0; i < x.rows; ++i) {
    double max;
    bool pos_inf;
    const bool nan = load_row(x, i, row, max, pos_inf);
    const int64_t t = sp.targets[i];
    double* g = r.dlogits.data() + i * x.cols;
    double* b = r.dbound.data() + i * x.cols;
    const LD lse = nan || pos_inf ? static_cast<LD>(kNaNd) : lse_of(row, max, nullptr);
    r.lse[static_cast<size_t>(i)] = nan ? kNaNd : pos_inf ? kInfd : static_cast<double>(lse);
    if (t == sp.ignore_index) {  // loss 0, gradient 0
      r.ignored[static_cast<size_t>(i)] = 1;
      continue;
    }
    if (t < 0 || t >= x.cols || nan || pos_inf) {
      r.loss[static_cast<size_t>(i)] = kNaNd;
      for (int64_t c = 0; c < x.cols; ++c) g[c] = kNaNd;
      continue;
    }
    LD qx = 0;  // sum_j q_j x_j, terms with q_j = 0 left out
    for (int64_t c = 0; c < x.cols; ++c) {
      const LD q = (c == t ? 1 - ls : 0) + ls / C;
      if (q != 0) qx += q * static_cast<LD>(row[static_cast<size_t>(c)]);
    }
    r.loss[static_cast<size_t>(i)] = static_cast<double>(lse - qx + z * lse * lse);
    const LD a = 1 + 2 * z * lse;
    // exp(x - max) / sum, not exp(x - lse): lse near FLT_MAX has no digits left for log(sum).
    const LD sum = sum_exp_of(row, max, nullptr);
    for (int64_t c = 0; c < x.cols; ++c) {
      const LD p = std::exp(static_cast<LD>(row[static_cast<size_t>(c)]) - static_cast<LD>(max)) / sum;
      const LD q = (c == t ? 1 - ls : 0) + ls / C;
      g[c] = static_cast<double>(gs * (a * p - q));
      // Softmax's bound on the softmax term (1 + 2 z lse) p_j scaled by grad_scale, with the
      // lse's own allowed error carried through the factor, plus 1e-6 |grad_scale|.
      b[c] = static_cast<double>(std::fabs(gs) * (1e-5L * (std::fabs(a) + 2 * z * (std::fabs(lse) + 1)) * p + 1e-30L) +
                                 1e-6L * std::fabs(gs));
    }
  }
  return r;
}

Report check_cross_entropy(const CrossEntropyResult& ref, const float* loss, const float* lse,
                           const onorm_rows* dlogits) {
  Report rep;
  auto judge = [&](const char* what, int64_t i, int64_t c, double got, double want, double b, bool ok_rounded) {
    ++rep.checked;
    bool good;
    if (std::isnan(want)) good = std::isnan(got);
    else if (std::isinf(want)) good = got == want;
    else if (want == 0 && b == 0) good = got == 0;
    else {
      const double err = std::fabs(got - want);
      good = ok_rounded || (std::isfinite(got) && err <= b);
      if (std::isfinite(got)) {
        rep.max_abs = std::max(rep.max_abs, err);
        if (want != 0) rep.max_rel = std::max(rep.max_rel, err / std::fabs(want));
      }
    }
    if (!good) rep.violation(what, i, c, got, want);
  };
  for (int64_t i = 0; i < ref.rows; ++i) {
    const double L = ref.lse[static_cast<size_t>(i)], l = ref.loss[static_cast<size_t>(i)];
    const double stat_bound = 1e-6 * ((std::isfinite(L) ? std::fabs(L) : 0.0) + 1) + 1e-6 * (std::isfinite(l) ? std::fabs(l) : 0.0);
    if (loss) judge("loss", i, 0, loss[i], l, ref.ignored[static_cast<size_t>(i)] ? 0.0 : stat_bound, false);
    if (lse) judge("lse", i, 0, lse[i], L, stat_bound, false);
    if (!dlogits) continue;
    const bool narrow = dlogits->dtype == ONORM_F16 || dlogits->dtype == ONORM_BF16;
    for (int64_t c = 0; c < ref.cols; ++c) {
      const size_t e = static_cast<size_t>(i * ref.cols + c);
      const double want = ref.dlogits[e], b = ref.dbound[e];
      const double got = decode(dlogits->data, dlogits->dtype, i * dlogits->row_stride + c);
      judge("dlogits", i, c, got, want, b == 0 ? 0.0 : b + (narrow ? ulp(want, dlogits->dtype) : 0.0),
            b != 0 && rounds_from_within(got, want, b, dlogits->dtype));
    }
  }
  return rep;
}

TopkResult compute_topk(const onorm_rows& x, int64_t k, bool renormalize) {
  TopkResult r;
  r.rows = x.rows;
  r.k = k;
  r.values.assign(static_cast<size_t>(x.rows * k), 0.0);
  r.indices.assign(r.values.size(), 0);
  r.nan_row.assign(static_cast<size_t>(x.rows), 0);
  std::vector<double> row;
  std::vector<int64_t> order(static_cast<size_t>(x.cols));
  for (int64_t i = 0; i < x.rows; ++i) {
    double max;
    bool pos_inf;
    const bool nan = load_row(x, i, row, max, pos_inf);
    double* v = r.values.data() + i * k;
    int64_t* ix = r.indices.data() + i * k;
    if (nan) {
      r.nan_row[static_cast<size_t>(i)] = 1;
      for (int64_t j = 0; j < k; ++j) v[j] = kNaNd;
      continue;
    }
    for (int64_t c = 0; c < x.cols; ++c) order[static_cast<size_t>(c)] = c;
    // Values compare as numbers (-0 == +0); equal values keep the lower column first.
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return row[static_cast<size_t>(a)] > row[static_cast<size_t>(b)]; });
    const std::vector<int64_t> sel(order.begin(), order.begin() + k);
    for (int64_t j = 0; j < k; ++j) ix[j] = sel[static_cast<size_t>(j)];
    if (max == -kInfd) continue;  // values 0, columns 0..k-1 (the stable sort of equal values)
    if (pos_inf) {  // the v1 rule: a +inf makes a softmax row NaN
      for (int64_t j = 0; j < k; ++j) v[j] = kNaNd;
      continue;
    }
    // exp(x - m) / sum (not exp(x - lse): see compute_cross_entropy).
    const double m = renormalize ? row[static_cast<size_t>(sel[0])] : max;
    const LD sum = sum_exp_of(row, m, renormalize ? &sel : nullptr);
    for (int64_t j = 0; j < k; ++j)
      v[j] = static_cast<double>(
          std::exp(static_cast<LD>(row[static_cast<size_t>(sel[static_cast<size_t>(j)])]) - static_cast<LD>(m)) / sum);
  }
  return r;
}

Report check_topk(const TopkResult& ref, int64_t cols, const onorm_rows& values, const int64_t* indices) {
  Report rep;
  for (int64_t i = 0; i < ref.rows; ++i) {
    const bool nan_row = ref.nan_row[static_cast<size_t>(i)] != 0;
    std::vector<int64_t> seen;
    for (int64_t j = 0; j < ref.k; ++j) {
      const size_t e = static_cast<size_t>(i * ref.k + j);
      const double want = ref.values[e];
      const double got = decode(values.data, values.dtype, i * values.row_stride + j);
      ++rep.checked;
      bool good;
      if (std::isnan(want)) good = std::isnan(got);
      else {
        const double b = bound(Op::softmax, values.dtype, want, 0, 0, 0);
        good = std::isfinite(got) && (std::fabs(got - want) <= b ||
                                      rounds_from_within(got, want, bound(Op::softmax, ONORM_F32, want, 0, 0, 0), values.dtype));
        if (std::isfinite(got)) {
          rep.max_abs = std::max(rep.max_abs, std::fabs(got - want));
          if (want != 0) rep.max_rel = std::max(rep.max_rel, std::fabs(got - want) / want);
        }
      }
      if (!good) rep.violation("values", i, j, got, want);
      const int64_t gi = indices[e];
      ++rep.checked;
      if (nan_row) {
        const bool fresh = std::find(seen.begin(), seen.end(), gi) == seen.end();
        seen.push_back(gi);
        if (gi < 0 || gi >= cols || !fresh) rep.violation("indices (NaN row: k distinct columns)", i, j, gi, -1);
      } else if (gi != ref.indices[e]) {
        rep.violation("indices", i, j, static_cast<double>(gi), static_cast<double>(ref.indices[e]));
      }
    }
  }
  return rep;
}

RowSoftmaxState softmax_state_of(const onorm_rows& x, int64_t i) {
  std::vector<double> row;
  RowSoftmaxState s;
  bool pos_inf;
  s.nan = load_row(x, i, row, s.max, pos_inf) || pos_inf;
  if (s.nan) return s;
  if (s.max == -kInfd) return s;  // sum 0: the identity (also for cols == 0)
  LD sum = 0;
  for (double v : row) sum += std::exp(static_cast<LD>(v) - static_cast<LD>(s.max));
  s.sum_exp = static_cast<double>(sum);
  return s;
}

RowMoments moments_of(const onorm_rows& x, int64_t i) {
  RowMoments m;
  m.count = x.cols;
  if (x.cols == 0) return m;
  LD sum = 0;
  for (int64_t c = 0; c < x.cols; ++c) sum += decode(x.data, x.dtype, i * x.row_stride + c);
  const LD mean = sum / static_cast<LD>(x.cols);
  LD m2 = 0;
  for (int64_t c = 0; c < x.cols; ++c) {
    const LD d = static_cast<LD>(decode(x.data, x.dtype, i * x.row_stride + c)) - mean;
    m2 += d * d;
  }
  m.mean = static_cast<double>(mean);
  m.m2 = static_cast<double>(m2);
  return m;
}

}  // namespace onorm_ref
