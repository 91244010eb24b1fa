// onorm compare: one operator on every backend over the same input, against the float64
// reference: one table (and JSON).
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checking.hpp"
#include "commands.hpp"
#include "options.hpp"
#include "output.hpp"

#ifndef ONORM_TOOL_VERSION
#define ONORM_TOOL_VERSION "unknown"
#endif

namespace onorm_tool {

const char* const kCompareUsage =
    "usage: onorm compare --op OP (--rows R --cols C | --input FILE.npy) [options]\n"
    "\n"
    ONORM_TOOL_OP_USAGE
    "  --rows R --cols C  the problem's shape (taken from --input when given)\n"
    "  --dtype T          input dtype: f32 | f16 | bf16 | f64 (CPU only)   [f32, or the file's]\n"
    "  --out-dtype T      output dtype (not for the quantized ops)        [same as --dtype]\n"
    "  --backends LIST    comma-separated cpu,cuda[:N],hip[:N]; a backend may be repeated\n"
    "                     (a determinism check)                          [every available one]\n"
    "  --dist D           normal | uniform | large-offset | special      [normal]\n"
    "  --seed S           input generator seed                           [1]\n"
    "  --input FILE.npy   2-D C-order little-endian float32/float16/float64 array, or uint16\n"
    "                     holding bf16 bits with --dtype bf16; float64 with --dtype f32/f16/bf16\n"
    "                     is rounded to that dtype; softmax_backward and\n"
    "                     log_softmax_backward read it as y, the others as x; dy and\n"
    "                     the residual are generated (--dist normal, --seed)\n"
    "  --iters N          timed samples per backend                      [10]\n"
    "  --eps E            LayerNorm/RMSNorm epsilon                      [1e-5]\n"
    ONORM_TOOL_NORM_OPTIONS_USAGE
    "  --json FILE        also write the results as JSON (schema in tools/README.md)\n"
    "\n"
    "Runs the operator on each backend over the same input, computes the float64 reference and\n"
    "prints one table: time, bandwidth, max abs/rel/ULP error, bitwise-differing elements\n"
    "between each pair of backends, and whether the contract's bound holds. Exit 3 when a\n"
    "bound is violated.\n"
    ONORM_TOOL_NORM_OPS_HELP;

int cmd_compare(int argc, char** argv) {
  const std::vector<OptionSpec> specs = {
      {"help", false}, {"op", true}, {"rows", true}, {"cols", true}, {"dtype", true}, {"out-dtype", true},
      {"backends", true}, {"dist", true}, {"seed", true}, {"input", true}, {"json", true}, {"iters", true},
      {"eps", true}, {"weight-offset", true}, {"param-dtype", true}, {"perturb-ulps", true, true}};
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

  if (from_file) load_input(p, o);
  else generate_input(p, dist, seed);
  generate_second_input(p, from_file ? Dist::normal : dist, seed);
  generate_params(p, seed);
  generate_statistics(p);

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
      dev.fetch(outs[i]);
      outs[i].timing = dev.time(iters);
      outs[i].gbps = p.moved_bytes() / outs[i].timing.median_s / 1e9;
    } catch (const ToolError& e) {  // reported in the table; the other backends still run
      outs[i].error = e.what();
      outs[i].y.clear();
      any_error = true;
    }
  }
  const Reference ref(p);
  bool all_ok = true;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].error.empty()) continue;
    if (perturb_ulps && (perturb_target.empty() ? i == 0 : outs[i].label == perturb_target))
      perturb(p, ref, outs[i].y, perturb_ulps);
    outs[i].report = ref.check(outs[i]);
    all_ok &= outs[i].report.ok();
  }
  std::vector<std::vector<int64_t>> diff(outs.size(), std::vector<int64_t>(outs.size(), 0));
  for (size_t i = 0; i < outs.size(); ++i)
    for (size_t j = 0; j < outs.size(); ++j)
      diff[i][j] = i == j || !outs[i].error.empty() || !outs[j].error.empty() ? -1
                                                                            : outputs_differing(p, outs[i], outs[j]);

  std::string input_text = from_file ? "input " + o.at("input")
                                     : std::string("input ") + dist_name(dist) + " seed " + std::to_string(seed);
  std::printf("%s, %s, eps %g%s; error against float64, %s\n", shape_text(p).c_str(), input_text.c_str(), p.eps,
              options_text(p).c_str(), error_text(p).c_str());
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
    j.key("op").value(p.op.name());
    j.key("rows").value(p.rows);
    j.key("cols").value(p.cols);
    j.key("dtype").value(dtype_name(p.in));
    j.key("out_dtype").value(dtype_name(p.out));
    j.key("eps").value(p.eps);
    if (p.op.norm) {  // the norm ops' options
      j.key("param_dtype").value(dtype_name(p.param));
      j.key("weight_offset").value(p.weight_offset);
    }
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
      j.key("bytes_moved").value(static_cast<int64_t>(p.moved_bytes()));
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

}  // namespace onorm_tool
