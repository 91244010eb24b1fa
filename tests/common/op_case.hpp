// One fully checked run of an operator on a backend: poisoned, guarded buffers in the
// backend's memory, random (or given) inputs, the float64 reference with the contract's
// bounds, and checks that every output element was written and nothing else was.
// Ops of two inputs (softmax backward: y, dy) get the second one generated like the first.
#pragma once

#include <functional>

#include "test_util.hpp"

namespace onorm_test {

using Generator = std::function<double(int64_t r, int64_t c)>;

struct Layout {
  int64_t x_pad = 0, y_pad = 0;            // row_stride = cols + pad (the second input: x_pad + 2)
  size_t x_offset = 0, y_offset = 0;       // in elements of the buffer's dtype
  bool in_place = false;                   // y->data == the aliased input's data, same stride
  int alias = 0;                           // which input in_place aliases (1: softmax backward's dy)
  int dy_dtype = -1;                       // the second input's dtype; -1: the first input's
  bool gamma = false, beta = false;        // LayerNorm/RMSNorm affine parameters
  Generator gamma_at, beta_at;             // their values (row 0, column c); empty: N(1, 0.5), N(0, 1)
  size_t col_offset = 0;                   // gamma/beta start this many elements into their buffers
  bool mean = false, rstd = false;         // statistics outputs
  double eps = 1e-5;
  std::string str() const {
    std::ostringstream s;
    s << "x_pad " << x_pad << " y_pad " << y_pad << " x_off " << x_offset << " y_off " << y_offset
      << (in_place ? (alias ? " in-place(dy)" : " in-place") : "") << (gamma ? " gamma" : "") << (beta ? " beta" : "")
      << (col_offset ? " col_off " + std::to_string(col_offset) : "") << (mean ? " mean" : "") << (rstd ? " rstd" : "") << " eps " << eps;
    if (dy_dtype >= 0) s << " dy " << dtype_name(static_cast<onorm_dtype>(dy_dtype));
    return s.str();
  }
};

// Random inputs typical for op, one distribution per row. input 1 is the backward passes' dy;
// their input 0 (y) holds probabilities exp(N(0, s)) * 1e-3, s per row (softmax backward), or
// their logarithms (log-softmax backward; a few above 0 where s is wide).
inline Generator random_inputs(Op op, int64_t rows, std::mt19937_64& rng, int input = 0) {
  auto dists = std::make_shared<std::vector<InputDist>>();
  for (int64_t r = 0; r < rows; ++r) dists->push_back(input_dist(op, rng));
  auto eng = std::make_shared<std::mt19937_64>(rng());
  if (op_inputs(op) == 2 && input == 0) {
    const bool log_sm = op == Op::log_softmax_backward;
    return [dists, eng, log_sm](int64_t r, int64_t) {
      const InputDist& d = (*dists)[static_cast<size_t>(r)];
      const double log_p = cheap_normal(*eng, 0.0, d.scale) + std::log(1e-3);
      return log_sm ? log_p : std::exp(log_p);
    };
  }
  return [dists, eng](int64_t r, int64_t) {
    const InputDist& d = (*dists)[static_cast<size_t>(r)];
    return cheap_normal(*eng, d.center, d.scale);
  };
}

struct CaseOutput {
  std::vector<unsigned char> y_image;  // the downloaded y buffer (whole image) for bitwise comparisons
  std::vector<unsigned char> mean_image, rstd_image;
  onorm_ref::Report report;
  onorm_ref::Result ref;  // the float64 reference the run was judged against
};

// Runs op once and checks it. gen == nullptr: random inputs (gen_dy likewise, for the second
// input of two-input ops). out (optional) receives the images.
inline ::testing::AssertionResult run_checked(onorm_context ctx, Op op, onorm_dtype in, onorm_dtype out, int64_t rows,
                                              int64_t cols, const Layout& L, std::mt19937_64& rng,
                                              Generator gen = nullptr, CaseOutput* result = nullptr,
                                              Generator gen_dy = nullptr) {
  const int inputs = op_inputs(op);
  const onorm_dtype in_dt[2] = {in, L.dy_dtype >= 0 ? static_cast<onorm_dtype>(L.dy_dtype) : in};
  std::string what = describe(onorm_context_backend(ctx), op, in, out, rows, cols) + " [" + L.str() + "]";
  if (inputs == 2 && L.dy_dtype < 0) what += " (dy " + std::string(dtype_name(in)) + ")";
  auto fail = [&](const std::string& why) { return ::testing::AssertionFailure() << what << ": " << why; };
  const int alias = L.in_place ? L.alias : -1;
  if (alias >= inputs) return fail("test bug: in place with an input the op does not read");
  if (L.in_place && esize(in_dt[alias]) != esize(out)) return fail("test bug: in place needs equal dtype sizes");

  Tensor xs[2];
  for (int k = 0; k < inputs; ++k) {
    xs[k] = Tensor(ctx, in_dt[k], rows, cols, cols + L.x_pad + 2 * k, (L.x_offset + static_cast<size_t>(k)) * esize(in_dt[k]));
    if (!xs[k].ok()) return fail("allocation failed");
    Generator g = k == 0 ? gen : gen_dy;
    if (!g) g = random_inputs(op, rows, rng, k);
    xs[k].fill(g);
  }
  Tensor& x = xs[0];
  Tensor y;
  if (!L.in_place) {
    y = Tensor(ctx, out, rows, cols, cols + L.y_pad, L.y_offset * esize(out));
    if (!y.ok()) return fail("allocation failed");
  }
  Tensor gamma, beta, mean, rstd;
  std::normal_distribution<double> gdist(1.0, 0.5), bdist(0.0, 1.0);
  if (L.gamma && has_gamma(op)) {
    gamma = Tensor(ctx, in, 1, cols, -1, L.col_offset * esize(in));
    gamma.fill(L.gamma_at ? L.gamma_at : Generator([&](int64_t, int64_t) { return gdist(rng); }));
  }
  if (L.beta && has_beta(op)) {
    beta = Tensor(ctx, in, 1, cols, -1, L.col_offset * esize(in));
    beta.fill(L.beta_at ? L.beta_at : Generator([&](int64_t, int64_t) { return bdist(rng); }));
  }
  if (L.mean && has_mean(op)) mean = Tensor(ctx, ONORM_F32, 1, rows);
  if (L.rstd && has_rstd(op)) rstd = Tensor(ctx, ONORM_F32, 1, rows);

  const onorm_rows in_host[2] = {xs[0].host_rows(), inputs > 1 ? xs[1].host_rows() : onorm_rows{}};
  const onorm_ref::Result ref = onorm_ref::compute(op, in_host, inputs, gamma.ok() ? gamma.host() : nullptr,
                                                   beta.ok() ? beta.host() : nullptr, L.eps);
  std::vector<unsigned char> in_before[2];
  for (int k = 0; k < inputs; ++k) in_before[k] = xs[k].image();
  const std::vector<unsigned char> gamma_before = gamma.image(), beta_before = beta.image();

  const onorm_rows xr = x.dev_rows();
  const onorm_rows dyr = inputs > 1 ? xs[1].dev_rows() : onorm_rows{};
  const onorm_rows yr = L.in_place ? onorm_rows{xs[alias].dev(), out, rows, cols, xs[alias].stride()} : y.dev_rows();
  OpArgs args;
  args.dy = inputs > 1 ? &dyr : nullptr;
  args.gamma = gamma.ok() ? gamma.dev() : nullptr;
  args.beta = beta.ok() ? beta.dev() : nullptr;
  args.eps = L.eps;
  args.mean = mean.ok() ? mean.dev_f32() : nullptr;
  args.rstd = rstd.ok() ? rstd.dev_f32() : nullptr;
  const onorm_status st = run_op(ctx, op, xr, yr, args);
  if (st != ONORM_OK) return fail(std::string("status ") + onorm_status_string(st) + ": " + onorm_last_error());
  if (onorm_synchronize(ctx) != ONORM_OK) return fail(std::string("synchronize: ") + onorm_last_error());

  for (int k = 0; k < inputs; ++k) xs[k].download();
  if (y.ok()) y.download();
  if (gamma.ok()) gamma.download();
  if (beta.ok()) beta.download();
  if (mean.ok()) mean.download();
  if (rstd.ok()) rstd.download();

  const char* in_names[2] = {inputs > 1 ? "y (input)" : "x", "dy"};
  for (int k = 0; k < inputs; ++k) {
    if (k == alias) {
      if (auto r = xs[k].outside_untouched("y (in place)"); !r) return fail(r.message());
    } else if (auto r = xs[k].same_image(in_before[k], in_names[k]); !r) {
      return fail(r.message());
    }
  }
  if (!L.in_place) {
    if (auto r = y.outside_untouched("y"); !r) return fail(r.message());
    if (auto r = y.all_written("y"); !r) return fail(r.message());
  }
  if (gamma.ok())
    if (auto r = gamma.same_image(gamma_before, "gamma"); !r) return fail(r.message());
  if (beta.ok())
    if (auto r = beta.same_image(beta_before, "beta"); !r) return fail(r.message());
  for (Tensor* t : {&mean, &rstd}) {
    if (!t->ok()) continue;
    if (auto r = t->outside_untouched(t == &mean ? "mean" : "rstd"); !r) return fail(r.message());
    if (auto r = t->all_written(t == &mean ? "mean" : "rstd"); !r) return fail(r.message());
  }

  const onorm_rows y_host =
      L.in_place ? onorm_rows{xs[alias].host(), out, rows, cols, xs[alias].stride()} : y.host_rows();
  onorm_ref::Report rep = onorm_ref::check(op, ref, y_host, gamma.ok() ? gamma.host() : nullptr, in,
                                           mean.ok() ? mean.host_f32() : nullptr, rstd.ok() ? rstd.host_f32() : nullptr);
  if (result) {
    result->y_image = L.in_place ? xs[alias].image() : y.image();
    result->mean_image = mean.image();
    result->rstd_image = rstd.image();
    result->report = rep;
    result->ref = ref;
  }
  if (!rep.ok()) return fail(rep.describe());
  return ::testing::AssertionSuccess() << what << ": " << rep.describe();
}

}  // namespace onorm_test
