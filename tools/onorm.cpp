// onorm: the onlinenorm command line. Backends available, one operator on one backend, the
// cross-backend comparison against a float64 reference, and the width sweep benchmark.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>

#include "npy.hpp"
#include "tool_common.hpp"

#ifndef ONORM_TOOL_VERSION
#define ONORM_TOOL_VERSION "unknown"
#endif
#ifndef ONORM_TOOL_SOURCE_DIR
#define ONORM_TOOL_SOURCE_DIR ""
#endif

using namespace onorm_tool;

namespace {

const char* const kMainUsage =
    "usage: onorm <command> [options]\n"
    "\n"
    "commands:\n"
    "  info      library version, backends (available or why not, devices), CPU targets\n"
    "  run       one operator on one backend: time, bandwidth, error against float64\n"
    "  compare   one operator on every backend over the same input: one table\n"
    "  bench     the width sweep on one backend, with a device copy as the ceiling\n"
    "\n"
    "options:\n"
    "  --help    this text\n"
    "  --version the tool's version\n"
    "\n"
    "`onorm <command> --help` describes a command's options.\n"
    "Exit status: 0 ok, 1 error, 2 usage error, 3 a result outside the contract's bound,\n"
    "130 interrupted.\n";

const char* const kInfoUsage =
    "usage: onorm info\n"
    "\n"
    "Prints the library version, each backend (cpu, cuda, hip) with its devices or the reason\n"
    "it is unavailable, and the CPU SIMD targets this machine can run.\n";

const char* const kRunUsage =
    "usage: onorm run --op OP --rows R --cols C [options]\n"
    "\n"
    "  --op OP            softmax | log_softmax | layer_norm | rms_norm\n"
    "  --rows R --cols C  the problem's shape\n"
    "  --dtype T          input dtype: f32 | f16 | bf16 | f64 (CPU only)   [f32]\n"
    "  --out-dtype T      output dtype                                   [same as --dtype]\n"
    "  --backend B        cpu | cuda[:N] | hip[:N]                        [best available]\n"
    "  --iters N          timed samples, median reported                 [20]\n"
    "  --seed S           input generator seed                           [1]\n"
    "  --dist D           normal | uniform | large-offset | special      [normal]\n"
    "  --eps E            LayerNorm/RMSNorm epsilon                      [1e-5]\n"
    "\n"
    "Times the operator (warm-up, then samples ending in onorm_synchronize), prints the median,\n"
    "the effective bandwidth (x read + y written once) and the error against a float64\n"
    "reference with the contract's bound. Exit 3 when the bound is violated.\n";

const char* const kCompareUsage =
    "usage: onorm compare --op OP (--rows R --cols C | --input FILE.npy) [options]\n"
    "\n"
    "  --op OP            softmax | log_softmax | layer_norm | rms_norm\n"
    "  --rows R --cols C  the problem's shape (taken from --input when given)\n"
    "  --dtype T          input dtype: f32 | f16 | bf16 | f64 (CPU only)   [f32, or the file's]\n"
    "  --out-dtype T      output dtype                                   [same as --dtype]\n"
    "  --backends LIST    comma-separated cpu,cuda[:N],hip[:N]; a backend may be repeated\n"
    "                     (a determinism check)                          [every available one]\n"
    "  --dist D           normal | uniform | large-offset | special      [normal]\n"
    "  --seed S           input generator seed                           [1]\n"
    "  --input FILE.npy   2-D C-order little-endian float32/float16/float64 array, or uint16\n"
    "                     holding bf16 bits with --dtype bf16; float64 with --dtype f32/f16/bf16\n"
    "                     is rounded to that dtype\n"
    "  --iters N          timed samples per backend                      [10]\n"
    "  --eps E            LayerNorm/RMSNorm epsilon                      [1e-5]\n"
    "  --json FILE        also write the results as JSON (schema in tools/README.md)\n"
    "\n"
    "Runs the operator on each backend over the same input, computes the float64 reference and\n"
    "prints one table: time, bandwidth, max abs/rel/ULP error, bitwise-differing elements\n"
    "between each pair of backends, and whether the contract's bound holds. Exit 3 when a\n"
    "bound is violated.\n";

const char* const kBenchUsage =
    "usage: onorm bench [options]\n"
    "\n"
    "  --backend B        cpu | cuda[:N] | hip[:N]                        [best available]\n"
    "  --ops LIST         operators                                      [all four]\n"
    "  --dtypes LIST      input (= output) dtypes                        [f32,bf16]\n"
    "  --widths LIST      row widths                       [64,128,...,1048576 (powers of 2)]\n"
    "  --mb M             MB (10^6 bytes) each case moves (x read + y written)\n"
    "                                                              [64 on CPU, 256 on GPUs]\n"
    "  --iters N          timed samples per case                [5 on CPU, 20 on GPUs]\n"
    "  --seed S           input generator seed                           [1]\n"
    "  --json FILE        write the results as JSON (schema in tools/README.md)\n"
    "  --png FILE         plot bandwidth against row width (needs python3 with matplotlib)\n"
    "\n"
    "Rows are chosen so that every case moves the same number of bytes. A device-to-device\n"
    "copy of the same byte count is measured in the same run as the ceiling. Ctrl-C finishes\n"
    "the current case, writes what was measured and exits 130.\n";

[[noreturn]] void usage_error(const std::string& msg, const char* usage) {
  throw UsageError(msg + "\n\n" + usage);
}

// ---------------------------------------------------------------- info

int cmd_info(int argc, char** argv) {
  auto opts = parse_options(argc, argv, 2, {{"help", false}});
  if (opts.count("help")) {
    std::cout << kInfoUsage;
    return kExitOk;
  }
  std::cout << "onorm " << ONORM_TOOL_VERSION << " (onlinenorm C ABI version " << ONORM_API_VERSION << ")\n";
  std::cout << "backends:\n";
  for (onorm_backend b : {ONORM_BACKEND_CPU, ONORM_BACKEND_CUDA, ONORM_BACKEND_HIP}) {
    const int n = onorm_backend_device_count(b);
    const char* why = onorm_backend_unavailable_reason(b);
    char head[32];
    std::snprintf(head, sizeof head, "  %-5s", backend_kind_name(b));
    if (n <= 0) {
      std::cout << head << "unavailable: " << (why && *why ? why : "no device") << "\n";
      continue;
    }
    std::cout << head << "available, " << n << " device" << (n == 1 ? "" : "s") << "\n";
    for (int d = 0; d < n; ++d) {
      BackendSpec spec{b, d};
      onorm_context ctx = nullptr;
      if (onorm_status s = onorm_create(b, d, &ctx)) {
        std::cout << "        " << spec.label() << ": cannot open: " << onorm_status_string(s) << " ("
                  << onorm_last_error() << ")\n";
        continue;
      }
      std::cout << "        " << spec.label() << "  " << onorm_backend_name(ctx) << "\n";
      onorm_destroy(ctx);
    }
  }
  const int nt = onorm_cpu_targets(nullptr, 0);
  std::vector<const char*> names(static_cast<size_t>(std::max(nt, 0)));
  const int got = onorm_cpu_targets(names.data(), nt);
  std::cout << "cpu targets (best first):";
  for (int i = 0; i < std::min(got, nt); ++i) std::cout << " " << names[i];
  std::cout << "\n";
  if (const char* cap = std::getenv("ONLINENORM_CPU_TARGET")) std::cout << "ONLINENORM_CPU_TARGET=" << cap << "\n";
  // The tuning variable (docs/tuning.md): a key the library refuses makes every context fail.
  if (const char* tune = std::getenv("ONLINENORM_TUNE")) {
    std::cout << "ONLINENORM_TUNE=" << tune;
    onorm_context ctx = nullptr;
    if (onorm_create(ONORM_BACKEND_CPU, 0, &ctx) == ONORM_ERROR_INVALID_ARGUMENT && !ctx)
      std::cout << " (invalid: " << onorm_last_error() << ")";
    onorm_destroy(ctx);
    std::cout << "\n";
  }
  // What ONORM_BACKEND_AUTO does with the variable: a value the library refuses is shown as
  // such, with its reason, not just echoed.
  if (const char* be = std::getenv("ONLINENORM_BACKEND")) {
    std::cout << "ONLINENORM_BACKEND=" << be;
    if (*be) {
      onorm_context ctx = nullptr;
      const onorm_status s = onorm_create(ONORM_BACKEND_AUTO, 0, &ctx);
      if (s == ONORM_OK) std::cout << " (AUTO selects " << onorm_backend_name(ctx) << ")";
      else if (s == ONORM_ERROR_INVALID_ARGUMENT) std::cout << " (invalid: " << onorm_last_error() << ")";
      else std::cout << " (" << onorm_status_string(s) << ": " << onorm_last_error() << ")";
      onorm_destroy(ctx);
    } else {
      std::cout << " (empty: same as unset)";
    }
    std::cout << "\n";
  }
  return kExitOk;
}

// ---------------------------------------------------------------- shared option handling

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

Op op_option(const std::map<std::string, std::string>& o, const char* usage) {
  auto it = o.find("op");
  if (it == o.end()) usage_error("missing --op", usage);
  Op op;
  if (!onorm_ref::parse_op(it->second, op))
    usage_error("unknown op '" + it->second + "' (softmax, log_softmax, layer_norm, rms_norm)", usage);
  return op;
}

Dist dist_option(const std::map<std::string, std::string>& o, const char* usage) {
  Dist d = Dist::normal;
  auto it = o.find("dist");
  if (it != o.end() && !parse_dist(it->second, d))
    usage_error("unknown distribution '" + it->second + "' (normal, uniform, large-offset, special)", usage);
  return d;
}

constexpr int64_t kMaxDim = int64_t{1} << 40;

// Builds the problem (generated) from --op/--rows/--cols/--dtype/--out-dtype/--eps/--dist/--seed.
Problem problem_from_options(const std::map<std::string, std::string>& o, const char* usage, bool shape_required) {
  Problem p;
  p.op = op_option(o, usage);
  if (o.count("dtype")) p.in = dtype_option("dtype", o.at("dtype"), usage);
  p.out = o.count("out-dtype") ? dtype_option("out-dtype", o.at("out-dtype"), usage) : p.in;
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
  return p;
}

uint64_t seed_option(const std::map<std::string, std::string>& o) {
  return o.count("seed") ? static_cast<uint64_t>(parse_int("seed", o.at("seed"), 0, std::numeric_limits<int64_t>::max())) : 1;
}

// Loads --input into p (shape and dtype from the file, checked against the options given).
void load_input(Problem& p, const std::string& path, bool dtype_given, bool out_dtype_given, bool rows_given,
                bool cols_given) {
  NpyArray a;
  std::string err;
  if (!read_npy_file(path, a, err)) throw ToolError(err);
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
  if (!out_dtype_given) p.out = p.in;
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

// ---------------------------------------------------------------- checking

struct Outcome {
  std::string label, device;
  Timing timing;
  std::vector<unsigned char> y;
  std::vector<float> mean, rstd;
  onorm_ref::Report report;
  double gbps = 0;
  std::string error;  // the backend failed to run (e.g. a dtype it does not take): no results
};

onorm_ref::Report check_outcome(const Problem& p, const onorm_ref::Result& ref, const Outcome& o) {
  const onorm_rows y{const_cast<unsigned char*>(o.y.data()), p.out, p.rows, p.cols, p.cols};
  return onorm_ref::check(p.op, ref, y, p.gamma.empty() ? nullptr : p.gamma.data(), p.in,
                          o.mean.empty() ? nullptr : o.mean.data(), o.rstd.empty() ? nullptr : o.rstd.data());
}

onorm_ref::Result reference_of(const Problem& p) {
  const onorm_rows x{const_cast<unsigned char*>(p.x.data()), p.in, p.rows, p.cols, p.cols};
  return onorm_ref::compute(p.op, x, p.gamma.empty() ? nullptr : p.gamma.data(),
                            p.beta.empty() ? nullptr : p.beta.data(), p.eps);
}

// Moves one element of y by `ulps` units in the last place (a deliberate fault, for testing
// that violations are caught): the element where |ref| is largest.
void perturb(const Problem& p, const onorm_ref::Result& ref, std::vector<unsigned char>& y, int64_t ulps) {
  int64_t at = -1;
  double best = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(ref.y.size()); ++i) {
    const double a = std::fabs(ref.y[i]);
    if (std::isfinite(a) && a > best) {
      best = a;
      at = i;
    }
  }
  if (at < 0) return;
  const size_t sz = dtype_size(p.out);
  unsigned char* e = y.data() + at * sz;
  if (sz == 2) {
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

int64_t bitwise_diff(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, size_t elem) {
  int64_t n = 0;
  for (size_t i = 0; i + elem <= a.size() && i + elem <= b.size(); i += elem)
    if (std::memcmp(a.data() + i, b.data() + i, elem) != 0) ++n;
  return n;
}

std::string shape_text(const Problem& p) {
  return std::string(onorm_ref::op_name(p.op)) + " " + std::to_string(p.rows) + "x" + std::to_string(p.cols) + " " +
         dtype_name(p.in) + " -> " + dtype_name(p.out);
}

std::string bound_text(const onorm_ref::Report& r) {
  return r.ok() ? "ok" : "FAIL(" + std::to_string(r.violations) + ")";
}

// ---------------------------------------------------------------- run

int cmd_run(int argc, char** argv) {
  const std::vector<OptionSpec> specs = {
      {"help", false}, {"op", true}, {"rows", true}, {"cols", true}, {"dtype", true}, {"out-dtype", true},
      {"backend", true}, {"iters", true}, {"seed", true}, {"dist", true}, {"eps", true},
      {"perturb-ulps", true, true}};
  std::map<std::string, std::string> o;
  try {
    o = parse_options(argc, argv, 2, specs);
  } catch (const UsageError& e) {
    usage_error(e.what(), kRunUsage);
  }
  if (o.count("help")) {
    std::cout << kRunUsage;
    return kExitOk;
  }
  Problem p;
  int iters = 20;
  BackendSpec spec;
  int64_t perturb_ulps = 0;
  try {
    p = problem_from_options(o, kRunUsage, true);
    if (o.count("iters")) iters = static_cast<int>(parse_int("iters", o.at("iters"), 1, 100000));
    spec = o.count("backend") ? backend_option(o.at("backend"), kRunUsage) : best_backend();
    if (o.count("perturb-ulps")) perturb_ulps = parse_int("perturb-ulps", o.at("perturb-ulps"), -1000000, 1000000);
  } catch (const UsageError& e) {
    const std::string m = e.what();
    if (m.find("usage:") != std::string::npos) throw;
    usage_error(m, kRunUsage);
  }
  const Dist dist = dist_option(o, kRunUsage);
  const uint64_t seed = seed_option(o);
  require_available(spec);
  generate_input(p, dist, seed);
  generate_params(p, seed);

  Outcome out;
  {
    DeviceRun dev(spec, p);
    out.device = dev.device_name();
    dev.run_once();
    dev.fetch(out.y, out.mean, out.rstd);
    out.timing = dev.time(iters);
  }
  const onorm_ref::Result ref = reference_of(p);
  if (perturb_ulps) perturb(p, ref, out.y, perturb_ulps);
  out.report = check_outcome(p, ref, out);
  const double gbps = p.moved_bytes() / out.timing.median_s / 1e9;
  std::printf("%s on %s (%s), input %s seed %llu\n", shape_text(p).c_str(), spec.label().c_str(),
              out.device.c_str(), dist_name(dist), static_cast<unsigned long long>(seed));
  std::printf("time       %.6g ms (median of %d samples, %d call%s each)\n", out.timing.median_s * 1e3,
              out.timing.samples, out.timing.batch, out.timing.batch == 1 ? "" : "s");
  std::printf("bandwidth  %.6g GB/s (x read + y written once: %.3f MB)\n", gbps, p.moved_bytes() / 1e6);
  std::printf("max error  abs %s  rel %s  ulp(%s) %s\n", fmt_sci(out.report.max_abs).c_str(),
              fmt_sci(out.report.max_rel).c_str(), dtype_name(p.out), fmt_fixed(out.report.max_ulp, 2).c_str());
  std::printf("bound      %s: %s\n", out.report.ok() ? "holds" : "VIOLATED", out.report.describe().c_str());
  return out.report.ok() ? kExitOk : kExitBound;
}

// ---------------------------------------------------------------- compare

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w;
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (w.size() <= i) w.push_back(0);
      w[i] = std::max(w[i], r[i].size());
    }
  for (size_t k = 0; k < rows.size(); ++k) {
    std::string line;
    for (size_t i = 0; i < rows[k].size(); ++i) {
      std::string cell = rows[k][i];
      if (i + 1 < rows[k].size()) cell.append(w[i] - cell.size() + 2, ' ');
      line += cell;
    }
    std::printf("%s\n", line.c_str());
    if (k == 0) {
      size_t total = 0;
      for (size_t i = 0; i < w.size(); ++i) total += w[i] + (i + 1 < w.size() ? 2 : 0);
      std::printf("%s\n", std::string(total, '-').c_str());
    }
  }
}

int cmd_compare(int argc, char** argv) {
  const std::vector<OptionSpec> specs = {
      {"help", false}, {"op", true}, {"rows", true}, {"cols", true}, {"dtype", true}, {"out-dtype", true},
      {"backends", true}, {"dist", true}, {"seed", true}, {"input", true}, {"json", true}, {"iters", true},
      {"eps", true}, {"perturb-ulps", true, true}};
  std::map<std::string, std::string> o;
  try {
    o = parse_options(argc, argv, 2, specs);
  } catch (const UsageError& e) {
    usage_error(e.what(), kCompareUsage);
  }
  if (o.count("help")) {
    std::cout << kCompareUsage;
    return kExitOk;
  }
  const bool from_file = o.count("input") > 0;
  Problem p;
  int iters = 10;
  std::vector<BackendSpec> backends;
  int64_t perturb_ulps = 0;
  std::string perturb_target;
  try {
    if (from_file && o.count("dist")) usage_error("--dist and --input exclude each other", kCompareUsage);
    p = problem_from_options(o, kCompareUsage, !from_file);
    if (o.count("iters")) iters = static_cast<int>(parse_int("iters", o.at("iters"), 1, 100000));
    if (o.count("backends")) {
      for (const std::string& b : split_list(o.at("backends"))) backends.push_back(backend_option(b, kCompareUsage));
    }
    if (o.count("perturb-ulps")) {  // hidden: N or N@LABEL (default: the first backend)
      std::string v = o.at("perturb-ulps");
      const size_t at = v.find('@');
      if (at != std::string::npos) {
        perturb_target = v.substr(at + 1);
        v = v.substr(0, at);
      }
      perturb_ulps = parse_int("perturb-ulps", v, -1000000, 1000000);
    }
  } catch (const UsageError& e) {
    const std::string m = e.what();
    if (m.find("usage:") != std::string::npos) throw;
    usage_error(m, kCompareUsage);
  }
  const Dist dist = dist_option(o, kCompareUsage);
  const uint64_t seed = seed_option(o);
  if (backends.empty()) {
    for (onorm_backend b : {ONORM_BACKEND_CPU, ONORM_BACKEND_CUDA, ONORM_BACKEND_HIP})
      if (onorm_backend_device_count(b) > 0) backends.push_back(BackendSpec{b, 0});
  }
  for (const BackendSpec& b : backends) require_available(b);
  std::unique_ptr<OutputFile> json_out;  // opened now: an unwritable path is found before the runs
  if (o.count("json")) json_out.reset(new OutputFile(o.at("json")));

  if (from_file) load_input(p, o.at("input"), o.count("dtype") > 0, o.count("out-dtype") > 0, o.count("rows") > 0,
                             o.count("cols") > 0);
  else generate_input(p, dist, seed);
  generate_params(p, seed);

  // Unique labels: a repeated backend becomes "cpu#2".
  std::vector<Outcome> outs(backends.size());
  for (size_t i = 0; i < backends.size(); ++i) {
    std::string label = backends[i].label();
    int dup = 1;
    for (size_t j = 0; j < i; ++j)
      if (backends[j].label() == backends[i].label()) ++dup;
    outs[i].label = dup > 1 ? label + "#" + std::to_string(dup) : label;
  }
  if (!perturb_target.empty()) {
    bool found = false;
    for (const Outcome& oc : outs) found |= oc.label == perturb_target;
    if (!found) usage_error("--perturb-ulps: no backend labelled '" + perturb_target + "'", kCompareUsage);
  }

  bool any_error = false;
  for (size_t i = 0; i < backends.size(); ++i) {
    try {
      DeviceRun dev(backends[i], p);
      outs[i].device = dev.device_name();
      dev.run_once();
      dev.fetch(outs[i].y, outs[i].mean, outs[i].rstd);
      outs[i].timing = dev.time(iters);
      outs[i].gbps = p.moved_bytes() / outs[i].timing.median_s / 1e9;
    } catch (const ToolError& e) {  // reported in the table; the other backends still run
      outs[i].error = e.what();
      outs[i].y.clear();
      any_error = true;
    }
  }
  const onorm_ref::Result ref = reference_of(p);
  bool all_ok = true;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].error.empty()) continue;
    if (perturb_ulps && (perturb_target.empty() ? i == 0 : outs[i].label == perturb_target))
      perturb(p, ref, outs[i].y, perturb_ulps);
    outs[i].report = check_outcome(p, ref, outs[i]);
    all_ok &= outs[i].report.ok();
  }
  const size_t esz = dtype_size(p.out);
  std::vector<std::vector<int64_t>> diff(outs.size(), std::vector<int64_t>(outs.size(), 0));
  for (size_t i = 0; i < outs.size(); ++i)
    for (size_t j = 0; j < outs.size(); ++j)
      diff[i][j] = i == j || !outs[i].error.empty() || !outs[j].error.empty() ? -1
                                                                            : bitwise_diff(outs[i].y, outs[j].y, esz);

  std::string input_text = from_file ? "input " + o.at("input")
                                     : std::string("input ") + dist_name(dist) + " seed " + std::to_string(seed);
  std::printf("%s, %s, eps %g; error against float64, ulp of %s\n", shape_text(p).c_str(), input_text.c_str(),
              p.eps, dtype_name(p.out));
  std::vector<std::vector<std::string>> table;
  std::vector<std::string> head = {"backend", "device", "time_ms", "GB/s", "max_abs", "max_rel", "max_ulp", "bound"};
  for (const Outcome& oc : outs) head.push_back("!=" + oc.label);
  table.push_back(head);
  for (size_t i = 0; i < outs.size(); ++i) {
    const Outcome& oc = outs[i];
    std::vector<std::string> r;
    if (oc.error.empty())
      r = {oc.label, oc.device, fmt_sig(oc.timing.median_s * 1e3, 4), fmt_sig(oc.gbps, 4), fmt_sci(oc.report.max_abs),
           fmt_sci(oc.report.max_rel), fmt_fixed(oc.report.max_ulp, 2), bound_text(oc.report)};
    else
      r = {oc.label, oc.device.empty() ? "-" : oc.device, "-", "-", "-", "-", "-", "ERROR"};
    for (size_t j = 0; j < outs.size(); ++j) r.push_back(diff[i][j] < 0 ? "-" : std::to_string(diff[i][j]));
    table.push_back(r);
  }
  print_table(table);
  for (const Outcome& oc : outs) {
    if (!oc.error.empty()) std::printf("%s: ERROR: %s\n", oc.label.c_str(), oc.error.c_str());
    else if (!oc.report.ok()) std::printf("%s: bound VIOLATED: %s\n", oc.label.c_str(), oc.report.describe().c_str());
  }

  if (o.count("json")) {
    Json j;
    j.begin_object();
    j.key("schema").value("onorm-compare/1");
    j.key("version").value(ONORM_TOOL_VERSION);
    j.key("op").value(onorm_ref::op_name(p.op));
    j.key("rows").value(p.rows);
    j.key("cols").value(p.cols);
    j.key("dtype").value(dtype_name(p.in));
    j.key("out_dtype").value(dtype_name(p.out));
    j.key("eps").value(p.eps);
    j.key("input").begin_object();
    if (from_file) {
      j.key("source").value("file");
      j.key("path").value(o.at("input"));
    } else {
      j.key("source").value("generated");
      j.key("dist").value(dist_name(dist));
    }
    j.key("seed").value(static_cast<int64_t>(seed));
    j.end_object();
    j.key("backends").begin_array();
    for (size_t i = 0; i < outs.size(); ++i) {
      const Outcome& oc = outs[i];
      j.begin_object();
      j.key("label").value(oc.label);
      j.key("backend").value(backend_kind_name(backends[i].kind));
      j.key("device_index").value(backends[i].device);
      j.key("device").value(oc.device);
      j.key("error");
      if (oc.error.empty()) j.null();
      else j.value(oc.error);
      const bool ran = oc.error.empty();
      auto num = [&](const char* k, double v) {
        j.key(k);
        if (ran) j.value(v);
        else j.null();
      };
      num("time_ms", oc.timing.median_s * 1e3);
      j.key("samples").value(ran ? oc.timing.samples : 0);
      j.key("calls_per_sample").value(ran ? oc.timing.batch : 0);
      j.key("bytes_moved").value(static_cast<int64_t>(p.x_bytes() + p.y_bytes()));
      num("gbps", oc.gbps);
      num("max_abs_err", oc.report.max_abs);
      num("max_rel_err", oc.report.max_rel);
      num("max_ulp_err", oc.report.max_ulp);
      j.key("checked").value(oc.report.checked);
      j.key("violations").value(oc.report.violations);
      j.key("bound_ok").value(ran && oc.report.ok());
      j.key("first_violation");
      if (!ran || oc.report.ok()) {
        j.null();
      } else {
        j.begin_object();
        j.key("what").value(oc.report.first_what);
        j.key("row").value(oc.report.first_row);
        j.key("col").value(oc.report.first_col);
        j.key("got").value(oc.report.first_got);
        j.key("want").value(oc.report.first_want);
        j.end_object();
      }
      j.key("bitwise_diff").begin_object();
      for (size_t k = 0; k < outs.size(); ++k)
        if (k != i) {
          j.key(outs[k].label);
          if (diff[i][k] < 0) j.null();
          else j.value(diff[i][k]);
        }
      j.end_object();
      j.end_object();
    }
    j.end_array();
    j.key("pairs").begin_array();
    for (size_t a = 0; a < outs.size(); ++a)
      for (size_t b = a + 1; b < outs.size(); ++b) {
        j.begin_object();
        j.key("a").value(outs[a].label);
        j.key("b").value(outs[b].label);
        j.key("differing_elements");
        if (diff[a][b] < 0) j.null();
        else j.value(diff[a][b]);
        j.end_object();
      }
    j.end_array();
    j.key("bound_ok").value(all_ok && !any_error);
    j.key("errors").value(any_error);
    j.end_object();
    json_out->write(j.str());
  }
  if (any_error) return kExitError;
  return all_ok ? kExitOk : kExitBound;
}

// ---------------------------------------------------------------- bench

volatile sig_atomic_t g_interrupted = 0;
void on_sigint(int) { g_interrupted = 1; }

std::string hms(double s) {
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

// Runs argv as a child process; returns its exit status (or -1 when it could not start).
int run_process(const std::vector<std::string>& args, bool quiet) {
  std::vector<char*> av;
  for (const std::string& a : args) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (quiet) {
      if (std::freopen("/dev/null", "w", stdout) == nullptr) _exit(127);
      if (std::freopen("/dev/null", "w", stderr) == nullptr) _exit(127);
    }
    execvp(av[0], av.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string exe_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string p(buf, static_cast<size_t>(n));
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? "" : p.substr(0, slash);
}

bool file_exists(const std::string& p) { return !p.empty() && access(p.c_str(), R_OK) == 0; }

// Draws the PNG with tools/plot_bench.py through a python3 that has matplotlib.
void plot_png(const std::string& json_path, const std::string& png_path) {
  std::vector<std::string> scripts;
  if (const char* s = std::getenv("ONORM_PLOT_SCRIPT")) scripts.push_back(s);
  const std::string dir = exe_dir();
  if (!dir.empty()) {
    scripts.push_back(dir + "/plot_bench.py");
    scripts.push_back(dir + "/../share/onlinenorm/plot_bench.py");
  }
  scripts.push_back(std::string(ONORM_TOOL_SOURCE_DIR) + "/plot_bench.py");
  std::string script;
  for (const std::string& s : scripts)
    if (file_exists(s)) {
      script = s;
      break;
    }
  if (script.empty()) throw ToolError("--png: plot_bench.py not found beside onorm (set ONORM_PLOT_SCRIPT)");
  std::vector<std::string> pythons;
  if (const char* py = std::getenv("ONORM_PYTHON")) {
    pythons.push_back(py);  // only that one when set
  } else {
    pythons.push_back("python3");
    pythons.push_back("/usr/bin/python3");
  }
  std::string python;
  bool any_python = false;
  for (const std::string& py : pythons) {
    const int rc = run_process({py, "-c", "import matplotlib"}, true);
    if (rc == 0) {
      python = py;
      break;
    }
    if (rc != 127 && rc != -1) any_python = true;
  }
  if (python.empty())
    throw ToolError(any_python ? "--png: python3 is there but matplotlib is not (Debian: apt-get install python3-matplotlib; "
                                 "or set ONORM_PYTHON to a python with matplotlib); the JSON is at " + json_path
                               : "--png: python3 was not found (Debian: apt-get install python3 python3-matplotlib); "
                                 "the JSON is at " + json_path);
  if (run_process({python, script, json_path, png_path}, false) != 0)
    throw ToolError("--png: " + script + " failed; the JSON is at " + json_path);
}

struct BenchCase {
  Op op;
  onorm_dtype dtype;
  int64_t cols, rows;
  Timing t;
  double gbps = 0;
  bool done = false;
  std::string skipped;  // why the case was not measured (memory, a backend error)
};

// Host memory this process can still take: MemAvailable, and the address-space limit when one
// is set (ulimit -v). Negative when unknown.
double host_memory_available() {
  double avail = -1;
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      unsigned long long kb = 0;
      if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
        avail = static_cast<double>(kb) * 1024.0;
        break;
      }
    }
    std::fclose(f);
  }
  if (avail < 0) {
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) avail = static_cast<double>(pages) * static_cast<double>(page);
  }
  struct rlimit lim {};
  if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    double used = 0;
    if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
      char line[256];
      while (std::fgets(line, sizeof line, f)) {
        unsigned long long kb = 0;
        if (std::sscanf(line, "VmSize: %llu kB", &kb) == 1) used = static_cast<double>(kb) * 1024.0;
      }
      std::fclose(f);
    }
    const double left = std::max(0.0, static_cast<double>(lim.rlim_cur) - used);
    avail = avail < 0 ? left : std::min(avail, left);
  }
  return avail;
}

// Bytes one dtype's setup holds at its peak, on the host and on the device, for the largest
// case (elems), the widest norm row (param_cols) and the most norm rows (stat_rows); the copy
// ceiling's two buffers included. On the CPU backend "device" memory is host memory.
struct MemoryNeed {
  double host = 0, device = 0;
};
MemoryNeed bench_memory(bool gpu, onorm_dtype d, int64_t elems, int64_t cols, int64_t param_cols,
                        int params, int64_t stat_rows, int stats, double copy_bytes) {
  const double ds = static_cast<double>(dtype_size(d));
  const double x = static_cast<double>(elems) * ds;
  const double pc = static_cast<double>(param_cols);
  MemoryNeed m;
  // host: the generated input, one float row while generating, the parameters and their floats
  m.host = x + static_cast<double>(cols) * 4.0 + params * pc * (ds + 4.0);
  // device: x, y, parameters, statistics, and the copy ceiling's source and destination
  m.device = 2.0 * x + params * pc * ds + stats * static_cast<double>(stat_rows) * 4.0 + 2.0 * copy_bytes;
  if (!gpu) {
    m.host += m.device;
    m.device = 0;
  }
  return m;
}

std::string gb_text(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, bytes >= 1e11 ? "%.0f GB" : "%.3g GB", bytes / 1e9);
  return buf;
}

std::string case_text(const BenchCase& c) {
  return std::string(onorm_ref::op_name(c.op)) + " " + dtype_name(c.dtype) + " cols=" + std::to_string(c.cols);
}

int cmd_bench(int argc, char** argv) {
  const std::vector<OptionSpec> specs = {{"help", false}, {"backend", true}, {"ops", true},  {"dtypes", true},
                                         {"widths", true}, {"mb", true},      {"iters", true}, {"seed", true},
                                         {"json", true},  {"png", true}};
  std::map<std::string, std::string> o;
  BackendSpec spec;
  std::vector<Op> ops = {Op::softmax, Op::log_softmax, Op::layer_norm, Op::rms_norm};
  std::vector<onorm_dtype> dtypes = {ONORM_F32, ONORM_BF16};
  std::vector<int64_t> widths;
  for (int64_t w = 64; w <= 1048576; w *= 2) widths.push_back(w);
  double mb = 0;
  int iters = 0;
  uint64_t seed = 1;
  try {
    o = parse_options(argc, argv, 2, specs);
    if (o.count("help")) {
      std::cout << kBenchUsage;
      return kExitOk;
    }
    spec = o.count("backend") ? backend_option(o.at("backend"), kBenchUsage) : best_backend();
    if (o.count("ops")) {
      ops.clear();
      for (const std::string& s : split_list(o.at("ops"))) {
        Op op;
        if (!onorm_ref::parse_op(s, op)) usage_error("unknown op '" + s + "' (softmax, log_softmax, layer_norm, rms_norm)", kBenchUsage);
        ops.push_back(op);
      }
    }
    if (o.count("dtypes")) {
      dtypes.clear();
      for (const std::string& s : split_list(o.at("dtypes"))) dtypes.push_back(dtype_option("dtypes", s, kBenchUsage));
    }
    if (o.count("widths")) {
      widths.clear();
      for (const std::string& s : split_list(o.at("widths"))) widths.push_back(parse_int("widths", s, 1, kMaxDim));
    }
    if (o.count("mb")) {
      mb = parse_double("mb", o.at("mb"));
      if (mb <= 0 || mb > 65536) usage_error("option '--mb': must be in (0, 65536]", kBenchUsage);
    }
    if (o.count("iters")) iters = static_cast<int>(parse_int("iters", o.at("iters"), 1, 100000));
    seed = seed_option(o);
  } catch (const UsageError& e) {
    const std::string m = e.what();
    if (m.find("usage:") != std::string::npos) throw;
    usage_error(m, kBenchUsage);
  }
  require_available(spec);
  // Where the results go is checked before anything is measured.
  std::unique_ptr<OutputFile> json_out;
  if (o.count("json")) json_out.reset(new OutputFile(o.at("json")));
  if (o.count("png")) {
    const std::string& png = o.at("png");
    const size_t slash = png.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : png.substr(0, slash);
    if (access(dir.c_str(), W_OK) != 0)
      throw ToolError(png + ": cannot write into " + dir + " (" + std::strerror(errno) + ")");
  }
  const bool gpu = spec.kind != ONORM_BACKEND_CPU;
  if (mb == 0) mb = gpu ? 256 : 64;
  if (iters == 0) iters = gpu ? 20 : 5;
  const int64_t case_bytes = std::max<int64_t>(1, std::llround(mb * 1e6));
  const size_t copy_bytes = static_cast<size_t>(std::max<int64_t>(1, case_bytes / 2));

  std::vector<BenchCase> cases;
  for (onorm_dtype d : dtypes)
    for (Op op : ops)
      for (int64_t w : widths) {
        const int64_t per_row = w * 2 * static_cast<int64_t>(dtype_size(d));
        const int64_t rows = std::max<int64_t>(1, case_bytes / per_row);
        cases.push_back(BenchCase{op, d, w, rows, {}, 0, false, {}});
      }

  // Memory, before anything is allocated: per dtype, the largest cases are dropped (with a
  // message) until the rest fit in the host memory there is. Device memory is not known in
  // advance: a failed onorm_malloc skips that dtype's cases with the library's message.
  const double host_avail = host_memory_available();
  auto skip = [&](BenchCase& c, const std::string& why) {
    c.skipped = why;
    std::fprintf(stderr, "onorm: skipping %s: %s\n", case_text(c).c_str(), why.c_str());
  };
  struct Group {
    onorm_dtype d;
    int64_t elems = 0, cols = 0, param_cols = 0, stat_rows = 0;
    int params = 0, stats = 0;
  };
  auto group_of = [&](onorm_dtype d) {
    Group g{d};
    for (const BenchCase& c : cases) {
      if (c.dtype != d || !c.skipped.empty()) continue;
      g.elems = std::max(g.elems, c.rows * c.cols);
      g.cols = std::max(g.cols, c.cols);
      if (c.op == Op::layer_norm || c.op == Op::rms_norm) {
        g.param_cols = std::max(g.param_cols, c.cols);
        g.stat_rows = std::max(g.stat_rows, c.rows);
        g.params = std::max(g.params, c.op == Op::layer_norm ? 2 : 1);
        g.stats = std::max(g.stats, c.op == Op::layer_norm ? 2 : 1);
      }
    }
    return g;
  };
  if (host_avail >= 0) {
    for (onorm_dtype d : dtypes) {
      for (;;) {
        const Group g = group_of(d);
        if (g.elems == 0) break;
        const MemoryNeed need = bench_memory(gpu, d, g.elems, g.cols, g.param_cols, g.params, g.stat_rows,
                                             g.stats, static_cast<double>(copy_bytes));
        if (need.host <= 0.9 * host_avail) break;
        // Drop the cases of the largest footprint and look again.
        int64_t biggest = 0;
        for (const BenchCase& c : cases)
          if (c.dtype == d && c.skipped.empty()) biggest = std::max(biggest, c.rows * c.cols + c.cols);
        for (BenchCase& c : cases)
          if (c.dtype == d && c.skipped.empty() && c.rows * c.cols + c.cols == biggest)
            skip(c, "needs about " + gb_text(need.host) + " of host memory, " + gb_text(host_avail) + " available");
      }
    }
  }
  size_t runnable = 0;
  for (const BenchCase& c : cases) runnable += c.skipped.empty();
  if (runnable == 0) throw ToolError("bench: no case fits in memory (see the messages above); lower --widths or --mb");

  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  struct sigaction old {};
  sigaction(SIGINT, &sa, &old);

  const bool tty = isatty(STDOUT_FILENO) != 0;
  std::string device;
  double copy_gbps = 0, copy_ms = 0;
  bool copy_measured = false;
  const auto start = std::chrono::steady_clock::now();
  size_t done = 0;
  double measuring_s = 0;  // time inside the cases, for the estimate (setup excluded)
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  for (size_t di = 0; di < dtypes.size() && !g_interrupted; ++di) {
    const onorm_dtype d = dtypes[di];
    const Group g = group_of(d);
    if (g.elems == 0) continue;
    // One allocation per dtype that every case of it views: x and y as large as the largest
    // case; gamma/beta (as wide as the widest norm row) and statistics only when a norm runs.
    Problem base;
    base.op = g.params == 2 ? Op::layer_norm : g.params == 1 ? Op::rms_norm : Op::softmax;
    base.in = base.out = d;
    base.cols = g.cols;
    base.rows = (g.elems + g.cols - 1) / g.cols;
    if (tty && done) std::printf("\n");  // below the progress line updated in place
    std::printf("setting up %s: x and y of %lld elements (%s each)\n", dtype_name(d),
                static_cast<long long>(base.rows * base.cols),
                gb_text(static_cast<double>(base.x_bytes())).c_str());
    std::fflush(stdout);
    std::unique_ptr<DeviceRun> dev;
    try {
      generate_input(base, Dist::normal, seed, &g_interrupted);
      if (g.params) {  // as wide as the widest norm row, which may be narrower than x's
        Problem params;
        params.op = base.op;
        params.in = params.out = d;
        params.cols = g.param_cols;
        generate_params(params, seed);
        base.gamma = std::move(params.gamma);
        base.beta = std::move(params.beta);
      }
      if (g_interrupted) break;
      dev.reset(new DeviceRun(spec, base, g.stat_rows));
      std::vector<unsigned char>().swap(base.x);  // on the device now; DeviceRun does not read it again
    } catch (const Interrupted&) {
      break;
    } catch (const ToolError& e) {
      for (BenchCase& c : cases)
        if (c.dtype == d && c.skipped.empty()) skip(c, e.what());
      continue;
    }
    device = dev->device_name();
    if (!copy_measured && !g_interrupted) {  // the ceiling: a device-to-device copy moving the same bytes
      void *src = nullptr, *dst = nullptr;
      if (onorm_status s = onorm_malloc(dev->ctx(), copy_bytes, &src)) throw_status("copy buffer", s);
      if (onorm_status s = onorm_malloc(dev->ctx(), copy_bytes, &dst)) {
        onorm_free(dev->ctx(), src);
        throw_status("copy buffer", s);
      }
      try {
        const Timing t = time_calls(dev->ctx(), [&] {
          return onorm_memcpy(dev->ctx(), dst, src, copy_bytes, ONORM_COPY_DEVICE_TO_DEVICE);
        }, iters);
        copy_ms = t.median_s * 1e3;
        copy_gbps = 2.0 * static_cast<double>(copy_bytes) / t.median_s / 1e9;
      } catch (...) {
        onorm_free(dev->ctx(), src);
        onorm_free(dev->ctx(), dst);
        throw;
      }
      onorm_free(dev->ctx(), src);
      onorm_free(dev->ctx(), dst);
      copy_measured = true;
      std::printf("%s (%s): device copy %.2f GB/s (%.1f MB copied, read + write counted)\n", spec.label().c_str(),
                  device.c_str(), copy_gbps, static_cast<double>(copy_bytes) / 1e6);
      std::fflush(stdout);
    }
    for (BenchCase& c : cases) {
      if (c.dtype != d || !c.skipped.empty()) continue;
      if (g_interrupted) break;
      dev->reshape(c.op, c.rows, c.cols);
      const double case_start = elapsed();
      try {
        c.t = dev->time(iters);
      } catch (const ToolError& e) {
        skip(c, e.what());
        continue;
      }
      measuring_s += elapsed() - case_start;
      c.gbps = static_cast<double>(c.rows * c.cols) * 2.0 * dtype_size(d) / c.t.median_s / 1e9;
      c.done = true;
      ++done;
      const double el = elapsed();
      const double left = measuring_s / static_cast<double>(done) * static_cast<double>(runnable - done);
      char line[256];
      std::snprintf(line, sizeof line, "[%3zu/%zu] %-11s %-4s cols=%-8lld %9.2f GB/s (%5.1f%% of copy)  elapsed %s, ~%s left",
                    done, runnable, onorm_ref::op_name(c.op), dtype_name(d), static_cast<long long>(c.cols), c.gbps,
                    copy_gbps > 0 ? 100.0 * c.gbps / copy_gbps : 0.0, hms(el).c_str(), hms(left).c_str());
      if (tty) std::printf("\r%s\033[K", line);
      else std::printf("%s\n", line);
      std::fflush(stdout);
    }
  }
  if (tty) std::printf("\n");
  sigaction(SIGINT, &old, nullptr);
  if (g_interrupted) std::printf("interrupted: %zu of %zu cases measured\n", done, runnable);

  // Summary table.
  std::vector<std::vector<std::string>> table;
  table.push_back({"op", "dtype", "cols", "rows", "time_ms", "GB/s", "%copy"});
  for (const BenchCase& c : cases) {
    if (!c.done) continue;
    table.push_back({onorm_ref::op_name(c.op), dtype_name(c.dtype), std::to_string(c.cols), std::to_string(c.rows),
                     fmt_sig(c.t.median_s * 1e3, 4), fmt_sig(c.gbps, 4),
                     fmt_fixed(copy_gbps > 0 ? 100.0 * c.gbps / copy_gbps : 0.0, 1)});
  }
  if (done) print_table(table);
  int above = 0;
  for (const BenchCase& c : cases) above += c.done && c.gbps > copy_gbps;
  if (above)
    std::printf("note: %d case(s) beat the copy: onorm_memcpy returns only when its copy is done, so its figure "
                "includes one synchronization per call, which batched operator calls amortize\n", above);

  Json j;
  j.begin_object();
  j.key("schema").value("onorm-bench/1");
  j.key("version").value(ONORM_TOOL_VERSION);
  j.key("backend").value(spec.label());
  j.key("device").value(device);
  j.key("bytes_per_case").value(case_bytes);
  j.key("iters").value(iters);
  j.key("seed").value(static_cast<int64_t>(seed));
  j.key("interrupted").value(g_interrupted != 0);
  j.key("copy").begin_object();
  j.key("bytes_copied").value(static_cast<int64_t>(copy_measured ? copy_bytes : 0));
  j.key("bytes_moved").value(static_cast<int64_t>(copy_measured ? 2 * copy_bytes : 0));
  j.key("time_ms").value(copy_ms);
  j.key("gbps").value(copy_gbps);
  j.key("method").value("onorm_memcpy device-to-device, median per call; each call returns when the copy is done");
  j.end_object();
  j.key("results").begin_array();
  for (const BenchCase& c : cases) {
    if (!c.done) continue;
    j.begin_object();
    j.key("op").value(onorm_ref::op_name(c.op));
    j.key("dtype").value(dtype_name(c.dtype));
    j.key("out_dtype").value(dtype_name(c.dtype));
    j.key("cols").value(c.cols);
    j.key("rows").value(c.rows);
    j.key("bytes_moved").value(c.rows * c.cols * 2 * static_cast<int64_t>(dtype_size(c.dtype)));
    j.key("time_ms").value(c.t.median_s * 1e3);
    j.key("samples").value(c.t.samples);
    j.key("calls_per_sample").value(c.t.batch);
    j.key("gbps").value(c.gbps);
    j.key("fraction_of_copy").value(copy_gbps > 0 ? c.gbps / copy_gbps : 0.0);
    j.end_object();
  }
  j.end_array();
  j.key("skipped").begin_array();
  for (const BenchCase& c : cases) {
    if (c.skipped.empty()) continue;
    j.begin_object();
    j.key("op").value(onorm_ref::op_name(c.op));
    j.key("dtype").value(dtype_name(c.dtype));
    j.key("cols").value(c.cols);
    j.key("rows").value(c.rows);
    j.key("reason").value(c.skipped);
    j.end_object();
  }
  j.end_array();
  j.end_object();

  if (json_out) {
    json_out->write(j.str());
    std::printf("wrote %s\n", json_out->path().c_str());
  }
  if (o.count("png")) {
    std::string json_path;
    bool temp_json = false;
    if (json_out) {
      json_path = json_out->path();
    } else {
      char tmpl[] = "/tmp/onorm-bench-XXXXXX.json";
      const int fd = mkstemps(tmpl, 5);
      if (fd < 0) throw ToolError("cannot create a temporary file for the plot's data");
      close(fd);
      json_path = tmpl;
      temp_json = true;
      write_text_file(json_path, j.str());
    }
    // A failed plot keeps the JSON (its message says where), so that nothing measured is lost.
    plot_png(json_path, o.at("png"));
    if (temp_json) unlink(json_path.c_str());
    std::printf("wrote %s\n", o.at("png").c_str());
  }
  return g_interrupted ? kExitInterrupted : kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) throw UsageError(std::string("missing command\n\n") + kMainUsage);
    const std::string cmd = argv[1];
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      std::cout << kMainUsage;
      return kExitOk;
    }
    if (cmd == "--version") {
      std::cout << "onorm " << ONORM_TOOL_VERSION << "\n";
      return kExitOk;
    }
    if (cmd == "info") return cmd_info(argc, argv);
    if (cmd == "run") return cmd_run(argc, argv);
    if (cmd == "compare") return cmd_compare(argc, argv);
    if (cmd == "bench") return cmd_bench(argc, argv);
    throw UsageError("unknown command '" + cmd + "'\n\n" + kMainUsage);
  } catch (const UsageError& e) {
    std::string m = e.what();
    if (m.find("usage:") == std::string::npos) {
      const std::string cmd = argc >= 2 ? argv[1] : "";
      const char* usage = cmd == "info" ? kInfoUsage : cmd == "run" ? kRunUsage : cmd == "compare" ? kCompareUsage
                          : cmd == "bench" ? kBenchUsage : kMainUsage;
      m += std::string("\n\n") + usage;
    }
    std::fprintf(stderr, "onorm: %s", m.c_str());
    if (m.back() != '\n') std::fprintf(stderr, "\n");
    return kExitUsage;
  } catch (const ToolError& e) {
    std::fprintf(stderr, "onorm: error: %s\n", e.what());
    return kExitError;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "onorm: error: out of host memory\n");
    return kExitError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "onorm: error: %s\n", e.what());
    return kExitError;
  }
}
