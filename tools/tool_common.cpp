#include "tool_common.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "onlinenorm/core/convert.hpp"

namespace onorm_tool {

// ---------------------------------------------------------------- names

bool parse_dtype(const std::string& s, onorm_dtype& out) {
  if (s == "f32" || s == "float32") out = ONORM_F32;
  else if (s == "f16" || s == "float16") out = ONORM_F16;
  else if (s == "bf16" || s == "bfloat16") out = ONORM_BF16;
  else if (s == "f64" || s == "float64") out = ONORM_F64;
  else return false;
  return true;
}

const char* dtype_name(onorm_dtype d) {
  switch (d) {
    case ONORM_F32: return "f32";
    case ONORM_F16: return "f16";
    case ONORM_BF16: return "bf16";
    case ONORM_F64: return "f64";
    case ONORM_F8_E4M3: return "f8_e4m3";
    case ONORM_I8: return "i8";
  }
  return "?";
}

size_t dtype_size(onorm_dtype d) {
  switch (d) {
    case ONORM_F32: return 4;
    case ONORM_F16: case ONORM_BF16: return 2;
    case ONORM_F64: return 8;
    case ONORM_F8_E4M3: case ONORM_I8: return 1;
  }
  return 0;
}

const char* backend_kind_name(onorm_backend b) {
  switch (b) {
    case ONORM_BACKEND_CPU: return "cpu";
    case ONORM_BACKEND_CUDA: return "cuda";
    case ONORM_BACKEND_HIP: return "hip";
    case ONORM_BACKEND_AUTO: return "auto";
  }
  return "?";
}

std::string BackendSpec::label() const {
  std::string s = backend_kind_name(kind);
  // The CPU is "cpu" (its only device); any other index is kept so that messages name it.
  if (kind != ONORM_BACKEND_CPU || device != 0) s += ":" + std::to_string(device);
  return s;
}

bool parse_backend(const std::string& s, BackendSpec& out) {
  std::string name = s;
  int device = 0;
  const size_t colon = s.find(':');
  if (colon != std::string::npos) {
    name = s.substr(0, colon);
    const std::string idx = s.substr(colon + 1);
    if (idx.empty() || idx.size() > 4 || idx.find_first_not_of("0123456789") != std::string::npos) return false;
    device = std::atoi(idx.c_str());
  }
  if (name == "cpu") out.kind = ONORM_BACKEND_CPU;
  else if (name == "cuda") out.kind = ONORM_BACKEND_CUDA;
  else if (name == "hip") out.kind = ONORM_BACKEND_HIP;
  else return false;
  out.device = device;
  return true;
}

// ---------------------------------------------------------------- command line

std::map<std::string, std::string> parse_options(int argc, char** argv, int first,
                                                 const std::vector<OptionSpec>& specs) {
  std::map<std::string, std::string> out;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h") arg = "--help";
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0)
      throw UsageError("unexpected argument '" + arg + "'");
    std::string name = arg.substr(2), value;
    bool has_inline = false;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline = true;
    }
    const OptionSpec* spec = nullptr;
    for (const OptionSpec& s : specs)
      if (s.name == name) spec = &s;
    if (!spec) throw UsageError("unknown option '--" + name + "'");
    if (spec->takes_value) {
      if (!has_inline) {
        if (i + 1 >= argc) throw UsageError("option '--" + name + "' needs a value");
        value = argv[++i];
      }
      if (value.empty()) throw UsageError("option '--" + name + "' needs a non-empty value");
    } else if (has_inline) {
      throw UsageError("option '--" + name + "' takes no value");
    }
    if (out.count(name)) throw UsageError("option '--" + name + "' given twice");
    out[name] = value;
  }
  return out;
}

int64_t parse_int(const std::string& opt, const std::string& text, int64_t lo, int64_t hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || !(text[0] == '-' || std::isdigit(static_cast<unsigned char>(text[0]))))
    throw UsageError("option '--" + opt + "': '" + text + "' is not an integer");
  if (v < lo || v > hi)
    throw UsageError("option '--" + opt + "': " + text + " is outside [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  return v;
}

double parse_double(const std::string& opt, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    throw UsageError("option '--" + opt + "': '" + text + "' is not a finite number");
  return v;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// ---------------------------------------------------------------- inputs

bool parse_dist(const std::string& s, Dist& out) {
  if (s == "normal") out = Dist::normal;
  else if (s == "uniform") out = Dist::uniform;
  else if (s == "large-offset") out = Dist::large_offset;
  else if (s == "special") out = Dist::special;
  else return false;
  return true;
}

const char* dist_name(Dist d) {
  switch (d) {
    case Dist::normal: return "normal";
    case Dist::uniform: return "uniform";
    case Dist::large_offset: return "large-offset";
    case Dist::special: return "special";
  }
  return "?";
}

namespace {

// splitmix64: a small generator whose output is the same on every platform and compiler.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {  // Box-Muller, one value per call
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

float max_finite(onorm_dtype d) {
  switch (d) {
    case ONORM_F16: return 65504.0f;
    case ONORM_BF16: return 3.3895313892515355e38f;
    default: return std::numeric_limits<float>::max();
  }
}
float min_normal(onorm_dtype d) {
  return d == ONORM_F16 ? 6.103515625e-05f : std::numeric_limits<float>::min();
}

}  // namespace

void encode_floats(const float* src, size_t n, onorm_dtype dtype, unsigned char* dst) {
  switch (dtype) {
    case ONORM_F32: std::memcpy(dst, src, n * 4); break;
    case ONORM_F64:
      for (size_t i = 0; i < n; ++i) {
        const double v = src[i];
        std::memcpy(dst + 8 * i, &v, 8);
      }
      break;
    case ONORM_F16:
    case ONORM_BF16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = dtype == ONORM_F16 ? onorm::core::f32_to_f16(src[i]) : onorm::core::f32_to_bf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      break;
    default: throw ToolError("cannot encode dtype " + std::string(dtype_name(dtype)));
  }
}

namespace {

void generate_rows(const Problem& p, std::vector<unsigned char>& x, Dist dist, uint64_t seed,
                   const volatile sig_atomic_t* cancel) {
  std::vector<float> row(static_cast<size_t>(p.cols));
  Rng rng{seed * 0x2545f4914f6cdd1dull + 1};
  const float inf = std::numeric_limits<float>::infinity();
  const bool softmax_like = p.op.base == Op::softmax || p.op.base == Op::log_softmax;
  // The backward passes sum y * dy (or dy) in float: huge values stay where their products
  // cannot overflow.
  const float huge = p.inputs() > 1 ? 1e9f : 1e18f;
  const size_t row_bytes = static_cast<size_t>(p.cols) * dtype_size(p.in);
  x.resize(p.x_bytes());
  for (int64_t r = 0; r < p.rows; ++r) {
    const int kind = dist == Dist::special ? static_cast<int>(r % 8) : -1;
    for (int64_t c = 0; c < p.cols; ++c) {
      if (cancel && (c & 0xffff) == 0 && *cancel) throw Interrupted();
      float x;
      switch (dist) {
        case Dist::normal: x = static_cast<float>(rng.normal()); break;
        case Dist::uniform: x = static_cast<float>(6.0 * rng.uniform() - 3.0); break;
        case Dist::large_offset: x = static_cast<float>(1e4 + rng.normal()); break;
        case Dist::special:
        default:
          switch (kind) {
            case 0: x = -inf; break;                                    // a fully masked row
            case 3: {                                                   // huge magnitudes
              const float big = softmax_like ? max_finite(p.in) : std::min(max_finite(p.in), huge);
              x = static_cast<float>(big * (0.5 + 0.5 * rng.uniform()));
              if (!softmax_like && (c & 1)) x = -x;
              break;
            }
            case 4: x = (c % 2) ? -inf : static_cast<float>(rng.normal()); break;  // partly masked
            case 5: x = 3.0f; break;                                    // a constant row
            case 6: x = static_cast<float>(min_normal(p.in) * 4.0 * rng.uniform()); break;  // tiny
            default: x = static_cast<float>(rng.normal()); break;
          }
          break;
      }
      row[static_cast<size_t>(c)] = x;
    }
    if (kind == 1) row[static_cast<size_t>((r * 7) % p.cols)] = std::numeric_limits<float>::quiet_NaN();
    if (kind == 2) row[static_cast<size_t>((r * 5) % p.cols)] = inf;
    encode_floats(row.data(), row.size(), p.in, x.data() + static_cast<size_t>(r) * row_bytes);
  }
}

}  // namespace

void generate_input(Problem& p, Dist dist, uint64_t seed, const volatile sig_atomic_t* cancel) {
  generate_rows(p, p.x, dist, seed, cancel);
}

void generate_second_input(Problem& p, Dist dist, uint64_t seed, const volatile sig_atomic_t* cancel) {
  p.second.clear();
  if (p.inputs() > 1) generate_rows(p, p.second, dist, seed ^ 0x5bd1e9955bd1e995ull, cancel);
}

void generate_params(Problem& p, uint64_t seed) {
  p.gamma.clear();
  p.beta.clear();
  const Tensors t = tensors_of(p.op);
  if (!t.gamma) return;
  Rng rng{seed * 0x9e3779b97f4a7c15ull + 7};
  std::vector<float> g(static_cast<size_t>(p.cols)), b(static_cast<size_t>(p.cols));
  for (int64_t c = 0; c < p.cols; ++c) {
    g[c] = static_cast<float>(0.5 + rng.uniform());
    b[c] = static_cast<float>(rng.uniform() - 0.5);
  }
  p.gamma.resize(static_cast<size_t>(p.cols) * dtype_size(p.param));
  encode_floats(g.data(), g.size(), p.param, p.gamma.data());
  if (t.beta) {
    p.beta.resize(p.gamma.size());
    encode_floats(b.data(), b.size(), p.param, p.beta.data());
  }
}

void generate_statistics(Problem& p) {
  p.mean.clear();
  p.rstd.clear();
  if (writes_statistics(p.op)) return;
  onorm_ref::NormSpec forward;
  forward.layer = p.op.base == Op::layer_norm;
  forward.x = onorm_rows{p.x.data(), p.in, p.rows, p.cols, p.cols};
  forward.eps = p.eps;
  const onorm_ref::Result ref = onorm_ref::compute_norm(forward).norm;
  p.mean.assign(ref.mean.begin(), ref.mean.end());
  p.rstd.assign(ref.rstd.begin(), ref.rstd.end());
}

void generate_targets(Problem& p, uint64_t seed) {
  p.targets.clear();
  if (!tensors_of(p.op).targets) return;
  Rng rng{seed * 0xd1342543de82ef95ull + 3};
  for (int64_t r = 0; r < p.rows; ++r)
    p.targets.push_back(r % 7 == 3 ? -100 : static_cast<int64_t>(rng.next() % static_cast<uint64_t>(p.cols)));
}

// ---------------------------------------------------------------- running

void throw_status(const std::string& what, onorm_status s) {
  const char* detail = onorm_last_error();
  throw ToolError(what + ": " + onorm_status_string(s) + (detail && *detail ? std::string(" (") + detail + ")" : ""));
}

Timing time_calls(onorm_context ctx, const std::function<onorm_status()>& fn, int samples, double min_sample_s) {
  using clock = std::chrono::steady_clock;
  auto check = [&](onorm_status s, const char* what) {
    if (s != ONORM_OK) throw_status(what, s);
  };
  // Warm-up, then one timed call to pick the batch size.
  check(fn(), "warm-up");
  check(onorm_synchronize(ctx), "onorm_synchronize");
  auto t0 = clock::now();
  check(fn(), "run");
  check(onorm_synchronize(ctx), "onorm_synchronize");
  const double one = std::chrono::duration<double>(clock::now() - t0).count();
  Timing t;
  t.batch = one >= min_sample_s ? 1 : static_cast<int>(std::min(1000.0, std::ceil(min_sample_s / std::max(one, 1e-7))));
  std::vector<double> per_call;
  for (int s = 0; s < std::max(samples, 1); ++s) {
    t0 = clock::now();
    for (int b = 0; b < t.batch; ++b) check(fn(), "run");
    check(onorm_synchronize(ctx), "onorm_synchronize");
    per_call.push_back(std::chrono::duration<double>(clock::now() - t0).count() / t.batch);
  }
  std::sort(per_call.begin(), per_call.end());
  const size_t m = per_call.size();
  t.median_s = m % 2 ? per_call[m / 2] : 0.5 * (per_call[m / 2 - 1] + per_call[m / 2]);
  t.samples = static_cast<int>(m);
  return t;
}

DeviceRun::DeviceRun(const BackendSpec& spec, const Problem& p, int64_t stats_rows, const Tensors& also)
    : p_(p), label_(spec.label()), op_(p.op), out_(p.out), rows_(p.rows), cols_(p.cols) {
  capacity_ = p.rows * p.cols;
  stats_capacity_ = std::max(p.rows, stats_rows);
  param_cols_ = static_cast<int64_t>(p.gamma.size() / dtype_size(p.param));
  allocated_ = tensors_of(p.op);
  allocated_ |= also;
  if (onorm_status s = onorm_create(spec.kind, spec.device, &ctx_)) {
    ctx_ = nullptr;
    throw_status("backend " + label_, s);
  }
  try {
    name_ = onorm_backend_name(ctx_);
    x_ = alloc_copy(p.x, "x");
    y_ = alloc(p.y_bytes());
    const Tensors& t = allocated_;
    if (t.second) second_ = alloc_copy(p.second, "the second input");
    if (t.gamma) gamma_ = alloc_copy(p.gamma, "gamma");
    if (t.beta) beta_ = alloc_copy(p.beta, "beta");
    // Outputs of the forward norms; the backward's inputs where p holds them.
    if (t.mean) mean_ = alloc_floats(stats_capacity_, p.mean);
    if (t.rstd) rstd_ = alloc_floats(stats_capacity_, p.rstd);
    if (t.residual_out) residual_out_ = alloc(p.x_bytes());
    if (t.y_scale) y_scale_ = alloc_floats(stats_capacity_, {});
    if (t.dgamma) dgamma_ = alloc_floats(param_cols_, {});
    if (t.dbeta) dbeta_ = alloc_floats(param_cols_, {});
    if (t.targets) {
      targets_ = static_cast<int64_t*>(alloc(p.targets.size() * 8));
      upload(targets_, p.targets.data(), p.targets.size() * 8);
    }
    if (t.loss) loss_ = alloc_floats(p.rows, {});
    if (t.lse) lse_ = alloc_floats(p.rows, {});
    if (t.indices) indices_ = static_cast<int64_t*>(alloc(static_cast<size_t>(p.rows * p.k) * 8));
  } catch (...) {
    release();
    throw;
  }
}

DeviceRun::~DeviceRun() { release(); }

void DeviceRun::release() {
  if (!ctx_) return;
  for (void* ptr : {x_, second_, y_, gamma_, beta_, residual_out_, static_cast<void*>(mean_),
                    static_cast<void*>(rstd_), static_cast<void*>(y_scale_), static_cast<void*>(dgamma_),
                    static_cast<void*>(dbeta_), static_cast<void*>(loss_), static_cast<void*>(lse_),
                    static_cast<void*>(targets_), static_cast<void*>(indices_)})
    if (ptr) onorm_free(ctx_, ptr);
  x_ = second_ = y_ = gamma_ = beta_ = residual_out_ = nullptr;
  mean_ = rstd_ = y_scale_ = dgamma_ = dbeta_ = loss_ = lse_ = nullptr;
  targets_ = indices_ = nullptr;
  onorm_destroy(ctx_);
  ctx_ = nullptr;
}

void* DeviceRun::alloc(size_t bytes) {
  void* ptr = nullptr;
  if (onorm_status s = onorm_malloc(ctx_, bytes ? bytes : 1, &ptr)) throw_status(label_ + ": onorm_malloc", s);
  return ptr;
}

void* DeviceRun::alloc_copy(const std::vector<unsigned char>& host, const char* what) {
  if (host.empty()) throw ToolError(std::string("internal: no ") + what + " to put on the device");
  void* ptr = alloc(host.size());
  upload(ptr, host.data(), host.size());
  return ptr;
}

float* DeviceRun::alloc_floats(int64_t n, const std::vector<float>& host) {
  float* ptr = static_cast<float*>(alloc(static_cast<size_t>(n) * 4));
  upload(ptr, host.data(), std::min(host.size(), static_cast<size_t>(n)) * 4);
  return ptr;
}

void DeviceRun::upload(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (onorm_status s = onorm_memcpy(ctx_, dst, src, bytes, ONORM_COPY_HOST_TO_DEVICE))
    throw_status(label_ + ": onorm_memcpy to the device", s);
}

void DeviceRun::download(void* dst, const void* src, size_t bytes) {
  if (onorm_status s = onorm_memcpy(ctx_, dst, src, bytes, ONORM_COPY_DEVICE_TO_HOST))
    throw_status(label_ + ": onorm_memcpy from the device", s);
}

void DeviceRun::reshape(const ToolOp& op, int64_t rows, int64_t cols) {
  const Tensors need = tensors_of(op);
  const onorm_dtype out = y_dtype(op, p_.out);
  const bool per_row = need.mean || need.rstd || need.y_scale;
  if (rows * cols > capacity_ || dtype_size(out) > dtype_size(p_.out) || !allocated_.covers(need) ||
      (need.gamma && cols > param_cols_) || (per_row && rows > stats_capacity_))
    throw ToolError("internal: reshape beyond the buffers allocated");
  op_ = op;
  out_ = out;
  rows_ = rows;
  cols_ = cols;
}

onorm_status DeviceRun::call() {
  OpCall c;
  c.rows = rows_;
  c.cols = cols_;
  c.in = p_.in;
  c.out = out_;
  c.param = p_.param;
  c.eps = p_.eps;
  c.weight_offset = p_.weight_offset;
  c.x = x_;
  c.second = second_;
  c.y = y_;
  c.gamma = gamma_;
  c.beta = beta_;
  c.residual_out = residual_out_;
  c.mean = mean_;
  c.rstd = rstd_;
  c.y_scale = y_scale_;
  c.dgamma = dgamma_;
  c.dbeta = dbeta_;
  c.k = p_.k;
  c.label_smoothing = p_.label_smoothing;
  c.z_loss = p_.z_loss;
  c.targets = targets_;
  c.loss = loss_;
  c.lse = lse_;
  c.indices = indices_;
  return call_op(ctx_, op_, c);
}

void DeviceRun::run_once() {
  if (onorm_status s = call()) throw_status(label_ + ": " + op_.name(), s);
  if (onorm_status s = onorm_synchronize(ctx_)) throw_status(label_ + ": onorm_synchronize", s);
}

Timing DeviceRun::time(int samples) {
  try {
    return time_calls(ctx_, [this] { return call(); }, samples);
  } catch (const ToolError& e) {
    throw ToolError(label_ + ": " + op_.name() + ": " + e.what());
  }
}

void DeviceRun::fetch(Outputs& out) {
  const Tensors t = tensors_of(op_);
  const size_t elems = static_cast<size_t>(rows_ * cols_), rows = static_cast<size_t>(rows_),
               cols = static_cast<size_t>(cols_);
  auto take = [&](auto& host, const void* device, bool wanted, size_t n, size_t elem) {
    host.clear();
    if (!wanted) return;
    host.resize(n * elem / sizeof(host[0]));
    download(host.data(), device, n * elem);
  };
  const size_t y_elems = op_.row == RowOp::softmax_topk ? rows * static_cast<size_t>(p_.k) : elems;
  take(out.y, y_, true, y_elems, dtype_size(out_));
  take(out.mean, mean_, t.mean && writes_statistics(op_), rows, 4);
  take(out.rstd, rstd_, t.rstd && writes_statistics(op_), rows, 4);
  take(out.residual_out, residual_out_, t.residual_out, elems, dtype_size(p_.in));
  take(out.y_scale, y_scale_, t.y_scale, rows, 4);
  take(out.dgamma, dgamma_, t.dgamma, cols, 4);
  take(out.dbeta, dbeta_, t.dbeta, cols, 4);
  take(out.loss, loss_, t.loss, rows, 4);
  take(out.lse, lse_, t.lse, rows, 4);
  take(out.indices, indices_, t.indices, y_elems, 8);
}

}  // namespace onorm_tool
