// onorm bench: the width sweep on one backend, with a device copy as the ceiling; cases
// planned to fit the host memory there is; Ctrl-C keeps what was measured.
#include <signal.h>
#include <sys/resource.h>
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

#include "commands.hpp"
#include "options.hpp"
#include "output.hpp"
#include "plot.hpp"

#ifndef ONORM_TOOL_VERSION
#define ONORM_TOOL_VERSION "unknown"
#endif

namespace onorm_tool {

const char* const kBenchUsage =
    "usage: onorm bench [options]\n"
    "\n"
    "  --backend B        cpu | cuda[:N] | hip[:N]                        [best available]\n"
    "  --ops LIST         operators: any --op of onorm run              [the library's list:\n"
    "                    " ONORM_TOOL_OP_NAMES "]\n"
    "  --dtypes LIST      input (= output) dtypes                        [f32,bf16]\n"
    "  --widths LIST      row widths                       [64,128,...,1048576 (powers of 2)]\n"
    "  --mb M             MB (10^6 bytes) each case moves (counted as onorm run does)\n"
    "                                                              [64 on CPU, 256 on GPUs]\n"
    "  --iters N          timed samples per case                [5 on CPU, 20 on GPUs]\n"
    "  --seed S           input generator seed                           [1]\n"
    "  --json FILE        write the results as JSON (schema in tools/README.md)\n"
    "  --png FILE         plot bandwidth against row width (needs python3 with matplotlib)\n"
    "\n"
    "Rows are chosen so that every case moves the same number of bytes. A device-to-device\n"
    "copy of the same byte count is measured in the same run as the ceiling. Ctrl-C finishes\n"
    "the current case, writes what was measured and exits 130. The norm ops run with gamma (and\n"
    "beta) in the case's dtype and weight offset 0; their backward reads mean 0 and rstd 1, the\n"
    "statistics of the N(0,1) input.\n";

namespace {

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

struct BenchCase {
  ToolOp op;
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

// One dtype's cases: their largest (elems), widest (cols), widest norm row (param_cols), most
// rows with per-row floats (stat_rows), and every tensor one of them takes.
struct Group {
  onorm_dtype d = ONORM_F32;
  int64_t elems = 0, cols = 0, param_cols = 0, stat_rows = 0;
  Tensors tensors;
  bool reads_statistics = false;  // a norm's backward runs: mean and rstd are inputs from the host
};

// Bytes one dtype's setup holds at its peak, on the host and on the device; the copy ceiling's
// two buffers included. On the CPU backend "device" memory is host memory.
struct MemoryNeed {
  double host = 0, device = 0;
};
MemoryNeed bench_memory(bool gpu, const Group& g, double copy_bytes) {
  const Tensors& t = g.tensors;
  const double ds = static_cast<double>(dtype_size(g.d));
  const double x = static_cast<double>(g.elems) * ds;
  const double pc = static_cast<double>(g.param_cols);
  const double row_floats = static_cast<double>(g.stat_rows) * 4.0;
  const int inputs = 1 + t.second, params = t.gamma + t.beta, stats = t.mean + t.rstd + t.y_scale;
  MemoryNeed m;
  // host: the generated inputs, one float row while generating, the parameters and their floats,
  // the backward's statistics
  m.host = inputs * x + static_cast<double>(g.cols) * 4.0 + params * pc * (ds + 4.0) +
           (g.reads_statistics ? (t.mean + t.rstd) * row_floats : 0.0);
  // device: the inputs, y (and residual_out), parameters, per-row floats, dgamma/dbeta, and the
  // copy ceiling's source and destination
  m.device = (inputs + 1 + t.residual_out) * x + params * pc * ds + stats * row_floats +
             (t.dgamma + t.dbeta) * pc * 4.0 + 2.0 * copy_bytes;
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
  return std::string(c.op.name()) + " " + dtype_name(c.dtype) + " cols=" + std::to_string(c.cols);
}

// The bytes a case moves, counted as onorm run counts them (ops.hpp).
double case_bytes_moved(const ToolOp& op, onorm_dtype d, int64_t rows, int64_t cols) {
  return moved_bytes(op, rows, cols, d, y_dtype(op, d), d);
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  const std::vector<OptionSpec> specs = {{"help", false}, {"backend", true}, {"ops", true},  {"dtypes", true},
                                         {"widths", true}, {"mb", true},      {"iters", true}, {"seed", true},
                                         {"json", true},  {"png", true}};
  std::map<std::string, std::string> o;
  BackendSpec spec;
  std::vector<ToolOp> ops = list_ops();
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
        ops.push_back(parse_op_or_usage(s, kBenchUsage));
        // Its buffers are reshaped across ops and widths; the row ops' (targets, k) are not yet.
        if (ops.back().row != RowOp::none)
          usage_error(s + " is not benchmarked by bench yet: use onorm run --op " + s, kBenchUsage);
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
    for (const ToolOp& op : ops)
      for (int64_t w : widths) {
        // Bytes of the per-column tensors (the norm ops' gamma, dgamma, ...), then of each row.
        const int64_t fixed = std::llround(case_bytes_moved(op, d, 0, w));
        const int64_t per_row = std::llround(case_bytes_moved(op, d, 1, w)) - fixed;
        const int64_t rows = std::max<int64_t>(1, (case_bytes - fixed) / per_row);
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
  auto group_of = [&](onorm_dtype d) {
    Group g;
    g.d = d;
    for (const BenchCase& c : cases) {
      if (c.dtype != d || !c.skipped.empty()) continue;
      const Tensors t = tensors_of(c.op);
      g.elems = std::max(g.elems, c.rows * c.cols);
      g.cols = std::max(g.cols, c.cols);
      if (t.gamma) g.param_cols = std::max(g.param_cols, c.cols);
      if (t.mean || t.rstd || t.y_scale) g.stat_rows = std::max(g.stat_rows, c.rows);
      g.tensors |= t;
      g.reads_statistics |= !writes_statistics(c.op);
    }
    return g;
  };
  if (host_avail >= 0) {
    for (onorm_dtype d : dtypes) {
      for (;;) {
        const Group g = group_of(d);
        if (g.elems == 0) break;
        const MemoryNeed need = bench_memory(gpu, g, static_cast<double>(copy_bytes));
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
    // case; gamma/beta (as wide as the widest norm row) and per-row floats only when a norm runs;
    // a second input (dy, a residual) only when a two-input op runs; the other tensors of the
    // norm ops (residual_out, dgamma, dbeta) only when one of them runs.
    Problem base;
    base.in = base.out = base.param = d;
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
      if (g.tensors.gamma) {  // as wide as the widest norm row, which may be narrower than x's
        Problem params;
        params.op = ToolOp{g.tensors.beta ? Op::layer_norm : Op::rms_norm, nullptr};
        params.in = params.out = params.param = d;
        params.cols = g.param_cols;
        generate_params(params, seed);
        base.gamma = std::move(params.gamma);
        base.beta = std::move(params.beta);
      }
      if (g.tensors.second) {
        Problem second;
        second.op = ToolOp{Op::softmax_backward, nullptr};  // any two-input op: only its second input is generated
        second.rows = base.rows;
        second.cols = base.cols;
        second.in = second.out = d;
        generate_second_input(second, Dist::normal, seed, &g_interrupted);
        base.second = std::move(second.second);
      }
      if (g.reads_statistics) {  // the norms' backward: the statistics of N(0,1) rows, which x has
        if (g.tensors.mean) base.mean.assign(static_cast<size_t>(g.stat_rows), 0.0f);
        base.rstd.assign(static_cast<size_t>(g.stat_rows), 1.0f);
      }
      if (g_interrupted) break;
      dev.reset(new DeviceRun(spec, base, g.stat_rows, g.tensors));
      std::vector<unsigned char>().swap(base.x);  // on the device now; DeviceRun does not read it again
      std::vector<unsigned char>().swap(base.second);
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
      c.gbps = case_bytes_moved(c.op, d, c.rows, c.cols) / c.t.median_s / 1e9;
      c.done = true;
      ++done;
      const double el = elapsed();
      const double left = measuring_s / static_cast<double>(done) * static_cast<double>(runnable - done);
      char line[256];
      std::snprintf(line, sizeof line, "[%3zu/%zu] %-11s %-4s cols=%-8lld %9.2f GB/s (%5.1f%% of copy)  elapsed %s, ~%s left",
                    done, runnable, c.op.name(), dtype_name(d), static_cast<long long>(c.cols), c.gbps,
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
    table.push_back({c.op.name(), dtype_name(c.dtype), std::to_string(c.cols), std::to_string(c.rows),
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
    j.key("op").value(c.op.name());
    j.key("dtype").value(dtype_name(c.dtype));
    j.key("out_dtype").value(dtype_name(y_dtype(c.op, c.dtype)));
    j.key("cols").value(c.cols);
    j.key("rows").value(c.rows);
    j.key("bytes_moved").value(static_cast<int64_t>(std::llround(case_bytes_moved(c.op, c.dtype, c.rows, c.cols))));
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
    j.key("op").value(c.op.name());
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

}  // namespace onorm_tool
