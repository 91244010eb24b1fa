// onorm compare: one operator on every backend over the same input, against the float64
// reference: one table (and JSON). The work is compare.cpp's; this file has the command line,
// the table and the exit status.
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "compare.hpp"
#include "options.hpp"
#include "output.hpp"

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
    ONORM_TOOL_ROW_OPTIONS_USAGE
    "  --json FILE        also write the results as JSON (schema in tools/README.md)\n"
    "\n"
    "Runs the operator on each backend over the same input, computes the float64 reference and\n"
    "prints one table: time, bandwidth, max abs/rel/ULP error, bitwise-differing elements\n"
    "between each pair of backends, and whether the contract's bound holds. Exit 3 when a\n"
    "bound is violated.\n"
    ONORM_TOOL_NORM_OPS_HELP
    ONORM_TOOL_ROW_OPS_HELP;

int cmd_compare(int argc, char** argv) {
  const std::vector<OptionSpec> specs = {
      {"help", false}, {"op", true}, {"rows", true}, {"cols", true}, {"dtype", true}, {"out-dtype", true},
      {"backends", true}, {"dist", true}, {"seed", true}, {"input", true}, {"json", true}, {"iters", true},
      {"eps", true}, {"weight-offset", true}, {"param-dtype", true}, {"k", true}, {"label-smoothing", true}, {"z-loss", true},
      {"perturb-ulps", true, true}};
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
  CompareRequest request = compare_request(o, kCompareUsage);
  std::unique_ptr<OutputFile> json_out;  // opened now: an unwritable path is found before the runs
  if (o.count("json")) json_out.reset(new OutputFile(o.at("json")));
  const CompareResult res = run_compare(std::move(request));
  const Problem& p = res.request.problem;
  const std::vector<Outcome>& outs = res.outcomes;

  std::string input_text = o.count("input") ? "input " + o.at("input")
                                            : std::string("input ") + dist_name(res.request.dist) + " seed " +
                                                  std::to_string(res.request.seed);
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
    for (size_t j = 0; j < outs.size(); ++j) r.push_back(res.diff[i][j] < 0 ? "-" : std::to_string(res.diff[i][j]));
    table.push_back(r);
  }
  print_table(table);
  for (const Outcome& oc : outs) {
    if (!oc.error.empty()) std::printf("%s: ERROR: %s\n", oc.label.c_str(), oc.error.c_str());
    else if (!oc.report.ok()) std::printf("%s: bound VIOLATED: %s\n", oc.label.c_str(), oc.report.describe().c_str());
  }
  if (json_out) json_out->write(compare_json(res));
  if (res.errors) return kExitError;
  return res.bound_ok ? kExitOk : kExitBound;
}

}  // namespace onorm_tool
