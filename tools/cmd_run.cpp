// onorm run: one operator on one backend: time, bandwidth, error against float64.
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "checking.hpp"
#include "commands.hpp"
#include "options.hpp"
#include "output.hpp"

namespace onorm_tool {

const char* const kRunUsage =
    "usage: onorm run --op OP --rows R --cols C [options]\n"
    "\n"
    ONORM_TOOL_OP_USAGE
    "  --rows R --cols C  the problem's shape\n"
    "  --dtype T          input dtype: f32 | f16 | bf16 | f64 (CPU only)   [f32]\n"
    "  --out-dtype T      output dtype (not for the quantized ops)        [same as --dtype]\n"
    "  --backend B        cpu | cuda[:N] | hip[:N]                        [best available]\n"
    "  --iters N          timed samples, median reported                 [20]\n"
    "  --seed S           input generator seed                           [1]\n"
    "  --dist D           normal | uniform | large-offset | special      [normal]\n"
    "  --eps E            LayerNorm/RMSNorm epsilon                      [1e-5]\n"
    ONORM_TOOL_NORM_OPTIONS_USAGE
    ONORM_TOOL_ROW_OPTIONS_USAGE
    "\n"
    "Times the operator (warm-up, then samples ending in onorm_synchronize), prints the median,\n"
    "the effective bandwidth (x read + y written once; the norm ops: every tensor once) and the\n"
    "error against a float64 reference with the contract's bound. Exit 3 when the bound is violated.\n"
    "softmax_backward and log_softmax_backward read y (generated as x is) and dy (generated\n"
    "the same way from another stream of the seed) and write dx.\n"
    ONORM_TOOL_NORM_OPS_HELP
    ONORM_TOOL_ROW_OPS_HELP;

int cmd_run(int argc, char** argv) {
  const std::vector<OptionSpec> specs = {
      {"help", false}, {"op", true}, {"rows", true}, {"cols", true}, {"dtype", true}, {"out-dtype", true},
      {"backend", true}, {"iters", true}, {"seed", true}, {"dist", true}, {"eps", true},
      {"weight-offset", true}, {"param-dtype", true}, {"k", true}, {"label-smoothing", true}, {"z-loss", true},
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
  generate_second_input(p, dist, seed);
  generate_params(p, seed);
  generate_statistics(p);
  generate_targets(p, seed);

  Outcome out;
  {
    DeviceRun dev(spec, p);
    out.device = dev.device_name();
    dev.run_once();
    dev.fetch(out);
    out.timing = dev.time(iters);
  }
  const Reference ref(p);
  if (perturb_ulps) perturb(p, ref, out.y, perturb_ulps);
  out.report = ref.check(out);
  const double gbps = p.moved_bytes() / out.timing.median_s / 1e9;
  std::printf("%s on %s (%s), input %s seed %llu%s\n", shape_text(p).c_str(), spec.label().c_str(),
              out.device.c_str(), dist_name(dist), static_cast<unsigned long long>(seed), options_text(p).c_str());
  std::printf("time       %.6g ms (median of %d samples, %d call%s each)\n", out.timing.median_s * 1e3,
              out.timing.samples, out.timing.batch, out.timing.batch == 1 ? "" : "s");
  std::printf("bandwidth  %.6g GB/s (%s: %.3f MB)\n", gbps, moved_text(p.op).c_str(), p.moved_bytes() / 1e6);
  std::printf("max error  abs %s  rel %s  ulp(%s) %s\n", fmt_sci(out.report.max_abs).c_str(),
              fmt_sci(out.report.max_rel).c_str(), dtype_name(p.out), fmt_fixed(out.report.max_ulp, 2).c_str());
  std::printf("bound      %s: %s\n", out.report.ok() ? "holds" : "VIOLATED", out.report.describe().c_str());
  return out.report.ok() ? kExitOk : kExitBound;
}

}  // namespace onorm_tool
