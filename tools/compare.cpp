#include "compare.hpp"

#include <stdexcept>
#include <utility>

#include "options.hpp"
#include "output.hpp"

#ifndef ONORM_TOOL_VERSION
#define ONORM_TOOL_VERSION "unknown"
#endif

namespace onorm_tool {

CompareRequest compare_request(const std::map<std::string, std::string>& o, const char* usage,
                               std::optional<NpyArray> input_array) {
  CompareRequest r;
  r.options = o;
  r.input_array = std::move(input_array);
  if (r.input_array && !r.has_input()) throw std::logic_error("compare_request: an input array needs options[\"input\"]");
  const bool from_file = r.has_input();
  try {
    if (from_file && o.count("dist")) usage_error("--dist and --input exclude each other", usage);
    r.problem = problem_from_options(o, usage, !from_file);
    if (o.count("iters")) r.iters = static_cast<int>(parse_int("iters", o.at("iters"), 1, 100000));
    if (o.count("backends")) {
      for (const std::string& b : split_list(o.at("backends"))) r.backends.push_back(backend_option(b, usage));
    }
    if (o.count("perturb-ulps")) {  // hidden: N or N@LABEL (default: the first backend)
      std::string v = o.at("perturb-ulps");
      const size_t at = v.find('@');
      if (at != std::string::npos) {
        r.perturb_target = v.substr(at + 1);
        v = v.substr(0, at);
      }
      r.perturb_ulps = parse_int("perturb-ulps", v, -1000000, 1000000);
    }
  } catch (const UsageError& e) {
    const std::string m = e.what();
    if (m.find("usage:") != std::string::npos) throw;
    usage_error(m, usage);
  }
  r.dist = dist_option(o, usage);
  r.seed = seed_option(o);
  if (r.backends.empty()) {
    for (onorm_backend b : {ONORM_BACKEND_CPU, ONORM_BACKEND_CUDA, ONORM_BACKEND_HIP})
      if (onorm_backend_device_count(b) > 0) r.backends.push_back(BackendSpec{b, 0});
  }
  for (const BackendSpec& b : r.backends) require_available(b);

  for (size_t i = 0; i < r.backends.size(); ++i) {
    const std::string label = r.backends[i].label();
    int dup = 1;
    for (size_t j = 0; j < i; ++j)
      if (r.backends[j].label() == label) ++dup;
    r.labels.push_back(dup > 1 ? label + "#" + std::to_string(dup) : label);
  }
  if (!r.perturb_target.empty()) {
    bool found = false;
    for (const std::string& l : r.labels) found |= l == r.perturb_target;
    if (!found) usage_error("--perturb-ulps: no backend labelled '" + r.perturb_target + "'", usage);
  }
  return r;
}

CompareResult run_compare(CompareRequest request) {
  CompareResult res;
  res.request = std::move(request);
  CompareRequest& rq = res.request;
  Problem& p = rq.problem;
  const bool from_input = rq.has_input();
  if (rq.input_array) {
    load_input_array(p, std::move(*rq.input_array), rq.options.at("input"), rq.options);
    rq.input_array->data.clear();  // moved into p.x; the optional stays, saying where x came from
  } else if (from_input) {
    load_input(p, rq.options);
  } else {
    generate_input(p, rq.dist, rq.seed);
  }
  generate_second_input(p, from_input ? Dist::normal : rq.dist, rq.seed);
  generate_params(p, rq.seed);
  generate_statistics(p);
  generate_targets(p, rq.seed);

  std::vector<Outcome>& outs = res.outcomes;
  outs.resize(rq.backends.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    outs[i].label = rq.labels[i];
    try {
      DeviceRun dev(rq.backends[i], p);
      outs[i].device = dev.device_name();
      dev.run_once();
      dev.fetch(outs[i]);
      outs[i].timing = dev.time(rq.iters);
      outs[i].gbps = p.moved_bytes() / outs[i].timing.median_s / 1e9;
    } catch (const ToolError& e) {  // reported with the results; the other backends still run
      outs[i].error = e.what();
      outs[i].y.clear();
      res.errors = true;
    }
  }
  const Reference ref(p);
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].error.empty()) continue;
    if (rq.perturb_ulps && (rq.perturb_target.empty() ? i == 0 : outs[i].label == rq.perturb_target))
      perturb(p, ref, outs[i].y, rq.perturb_ulps);
    outs[i].report = ref.check(outs[i]);
    res.bound_ok &= outs[i].report.ok();
  }
  res.bound_ok &= !res.errors;
  res.diff.assign(outs.size(), std::vector<int64_t>(outs.size(), 0));
  for (size_t i = 0; i < outs.size(); ++i)
    for (size_t j = 0; j < outs.size(); ++j)
      res.diff[i][j] = i == j || !outs[i].error.empty() || !outs[j].error.empty()
                           ? -1
                           : outputs_differing(p, outs[i], outs[j]);
  return res;
}

std::string compare_json(const CompareResult& res) {
  const CompareRequest& rq = res.request;
  const Problem& p = rq.problem;
  const std::vector<Outcome>& outs = res.outcomes;
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
  if (p.op.row == RowOp::softmax_topk) j.key("k").value(p.k);
  if (p.op.row == RowOp::cross_entropy) {
    j.key("label_smoothing").value(p.label_smoothing);
    j.key("z_loss").value(p.z_loss);
  }
  j.key("input").begin_object();
  if (rq.input_array) {
    j.key("source").value("array");
  } else if (rq.has_input()) {
    j.key("source").value("file");
    j.key("path").value(rq.options.at("input"));
  } else {
    j.key("source").value("generated");
    j.key("dist").value(dist_name(rq.dist));
  }
  j.key("seed").value(static_cast<int64_t>(rq.seed));
  j.end_object();
  j.key("backends").begin_array();
  for (size_t i = 0; i < outs.size(); ++i) {
    const Outcome& oc = outs[i];
    j.begin_object();
    j.key("label").value(oc.label);
    j.key("backend").value(backend_kind_name(rq.backends[i].kind));
    j.key("device_index").value(rq.backends[i].device);
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
        if (res.diff[i][k] < 0) j.null();
        else j.value(res.diff[i][k]);
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
      if (res.diff[a][b] < 0) j.null();
      else j.value(res.diff[a][b]);
      j.end_object();
    }
  j.end_array();
  j.key("bound_ok").value(res.bound_ok);
  j.key("errors").value(res.errors);
  j.end_object();
  return j.str();
}

}  // namespace onorm_tool
