#include "options.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "npy.hpp"

namespace onorm_tool {

[[noreturn]] void usage_error(const std::string& msg, const char* usage) {
  throw UsageError(msg + "\n\n" + usage);
}

BackendSpec best_backend() {
  for (onorm_backend b : {ONORM_BACKEND_CUDA, ONORM_BACKEND_HIP})
    if (onorm_backend_device_count(b) > 0) return BackendSpec{b, 0};
  return BackendSpec{ONORM_BACKEND_CPU, 0};
}

void require_available(const BackendSpec& spec) {
  const int n = onorm_backend_device_count(spec.kind);
  if (n <= 0) {
    const char* why = onorm_backend_unavailable_reason(spec.kind);
    throw ToolError("backend " + spec.label() + " is unavailable: " + (why && *why ? why : "no device"));
  }
  if (spec.device >= n)
    throw ToolError("backend " + spec.label() + " is unavailable: " + backend_kind_name(spec.kind) + " has " +
                    std::to_string(n) + " device(s)");
}

BackendSpec backend_option(const std::string& text, const char* usage) {
  BackendSpec spec;
  if (!parse_backend(text, spec)) usage_error("unknown backend '" + text + "' (cpu, cuda[:N], hip[:N])", usage);
  return spec;
}

onorm_dtype dtype_option(const std::string& opt, const std::string& text, const char* usage) {
  onorm_dtype d;
  if (!parse_dtype(text, d)) usage_error("option '--" + opt + "': unknown dtype '" + text + "' (f32, f16, bf16, f64)", usage);
  return d;
}

ToolOp parse_op_or_usage(const std::string& text, const char* usage) {
  ToolOp op;
  if (!parse_tool_op(text, op)) usage_error("unknown op '" + text + "' (" + tool_op_names() + ")", usage);
  return op;
}

ToolOp op_option(const std::map<std::string, std::string>& o, const char* usage) {
  auto it = o.find("op");
  if (it == o.end()) usage_error("missing --op", usage);
  return parse_op_or_usage(it->second, usage);
}

Dist dist_option(const std::map<std::string, std::string>& o, const char* usage) {
  Dist d = Dist::normal;
  auto it = o.find("dist");
  if (it != o.end() && !parse_dist(it->second, d))
    usage_error("unknown distribution '" + it->second + "' (normal, uniform, large-offset, special)", usage);
  return d;
}

namespace {

// Output and parameter dtypes not given follow the input's (the quantized ops write their own).
void default_dtypes(Problem& p, const std::map<std::string, std::string>& o) {
  if (!o.count("out-dtype")) p.out = y_dtype(p.op, p.in);
  if (!o.count("param-dtype")) p.param = p.in;
}

}  // namespace

Problem problem_from_options(const std::map<std::string, std::string>& o, const char* usage, bool shape_required) {
  Problem p;
  p.op = op_option(o, usage);
  if (o.count("dtype")) p.in = dtype_option("dtype", o.at("dtype"), usage);
  if (o.count("out-dtype")) {
    if (p.op.norm && p.op.norm->quantized)
      usage_error("option '--out-dtype': " + std::string(p.op.name()) + " writes y as " +
                  dtype_name(*p.op.norm->quantized), usage);
    p.out = dtype_option("out-dtype", o.at("out-dtype"), usage);
  }
  for (const char* opt : {"weight-offset", "param-dtype"})
    if (o.count(opt) && !p.op.norm)
      usage_error("option '--" + std::string(opt) + "' does not apply to " + p.op.name() +
                  " (only to the norm ops of onorm_norm and onorm_norm_backward)", usage);
  if (o.count("param-dtype")) p.param = dtype_option("param-dtype", o.at("param-dtype"), usage);
  // The row ops' own options.
  for (const char* opt : {"label-smoothing", "z-loss"})
    if (o.count(opt) && p.op.row != RowOp::cross_entropy)
      usage_error("option '--" + std::string(opt) + "' does not apply to " + p.op.name() + " (only to cross_entropy)",
                  usage);
  if (o.count("k") && p.op.row != RowOp::softmax_topk)
    usage_error("option '--k' does not apply to " + std::string(p.op.name()) + " (only to softmax_topk)", usage);
  if (o.count("label-smoothing")) {
    p.label_smoothing = parse_double("label-smoothing", o.at("label-smoothing"));
    if (p.label_smoothing < 0 || p.label_smoothing > 1) usage_error("option '--label-smoothing': must be in [0, 1]", usage);
  }
  if (o.count("z-loss")) {
    p.z_loss = parse_double("z-loss", o.at("z-loss"));
    if (p.z_loss < 0) usage_error("option '--z-loss': must be >= 0", usage);
  }
  if (o.count("k")) p.k = parse_int("k", o.at("k"), 1, 1 << 20);
  if (o.count("weight-offset")) p.weight_offset = parse_double("weight-offset", o.at("weight-offset"));
  default_dtypes(p, o);
  if (o.count("eps")) {
    p.eps = parse_double("eps", o.at("eps"));
    if (p.eps < 0) usage_error("option '--eps': must be >= 0", usage);
  }
  if (shape_required) {
    if (!o.count("rows")) usage_error("missing --rows", usage);
    if (!o.count("cols")) usage_error("missing --cols", usage);
  }
  if (o.count("rows")) p.rows = parse_int("rows", o.at("rows"), 1, kMaxDim);
  if (o.count("cols")) p.cols = parse_int("cols", o.at("cols"), 1, kMaxDim);
  if (p.rows && p.cols && p.rows > kMaxDim / p.cols) usage_error("--rows x --cols is too large", usage);
  check_k(p, usage);
  return p;
}

void check_k(Problem& p, const char* usage) {
  if (p.op.row != RowOp::softmax_topk || !p.cols) return;
  if (!p.k) p.k = std::min<int64_t>(8, p.cols);
  if (p.k > p.cols) usage_error("option '--k': " + std::to_string(p.k) + " exceeds --cols " + std::to_string(p.cols), usage);
}

uint64_t seed_option(const std::map<std::string, std::string>& o) {
  return o.count("seed") ? static_cast<uint64_t>(parse_int("seed", o.at("seed"), 0, std::numeric_limits<int64_t>::max())) : 1;
}

void load_input(Problem& p, const std::map<std::string, std::string>& o) {
  const std::string& path = o.at("input");
  NpyArray a;
  std::string err;
  if (!read_npy_file(path, a, err)) throw ToolError(err);
  load_input_array(p, std::move(a), path, o);
}

void load_input_array(Problem& p, NpyArray a, const std::string& path, const std::map<std::string, std::string>& o) {
  const bool dtype_given = o.count("dtype") > 0, rows_given = o.count("rows") > 0, cols_given = o.count("cols") > 0;
  if (a.shape.size() != 2)
    throw ToolError(path + ": expected a 2-D array (rows, cols), got " + std::to_string(a.shape.size()) + "-D");
  if (a.shape[0] < 1 || a.shape[1] < 1) throw ToolError(path + ": empty array (shape has a 0)");
  if (rows_given && a.shape[0] != p.rows)
    throw ToolError(path + ": has " + std::to_string(a.shape[0]) + " rows, --rows says " + std::to_string(p.rows));
  if (cols_given && a.shape[1] != p.cols)
    throw ToolError(path + ": has " + std::to_string(a.shape[1]) + " cols, --cols says " + std::to_string(p.cols));
  p.rows = a.shape[0];
  p.cols = a.shape[1];
  onorm_dtype file;
  if (a.kind == 'f' && a.item_size == 4) file = ONORM_F32;
  else if (a.kind == 'f' && a.item_size == 2) file = ONORM_F16;
  else if (a.kind == 'f' && a.item_size == 8) file = ONORM_F64;
  else if (a.kind == 'u' && a.item_size == 2) {
    if (!dtype_given || p.in != ONORM_BF16)
      throw ToolError(path + ": a uint16 array is read as bf16 bits only with --dtype bf16");
    file = ONORM_BF16;
  } else {
    throw ToolError(path + ": dtype '" + a.descr + "' is not float32, float16, float64 or uint16 (bf16 bits)");
  }
  if (!dtype_given) p.in = file;
  default_dtypes(p, o);
  try {
    check_k(p, "");
  } catch (const UsageError&) {
    throw ToolError(path + ": --k " + std::to_string(p.k) + " exceeds its " + std::to_string(p.cols) + " cols");
  }
  const int64_t n = p.rows * p.cols;
  if (file == p.in) {
    p.x = std::move(a.data);
  } else if (file == ONORM_F64) {
    p.x.assign(static_cast<size_t>(n) * dtype_size(p.in), 0);
    for (int64_t i = 0; i < n; ++i) onorm_ref::encode(onorm_ref::decode(a.data.data(), ONORM_F64, i), p.x.data(), p.in, i);
  } else {
    throw ToolError(path + ": holds " + std::string(dtype_name(file)) + " but --dtype is " + dtype_name(p.in) +
                    " (only float64 files are converted)");
  }
}

}  // namespace onorm_tool
