// The C++ layer (include/onlinenorm/onlinenorm.hpp): RAII context, typed row views, Buffer,
// exceptions carrying the status and the message; and the C header compiled as C.
#include "onlinenorm/onlinenorm.hpp"

#include <cstdio>
#include <limits>
#include <type_traits>

#include "common/op_case.hpp"

extern "C" int onorm_c_abi_check(void);
extern "C" int onorm_c_out_of_range_enums(void);
extern "C" int onorm_c_softmax_backward_check(void);
extern "C" int onorm_c_log_softmax_backward_check(void);
extern "C" int onorm_c_norm_check(void);

namespace onorm_test {
namespace {

TEST(CApi, HeaderCompilesAsCAndRuns) { EXPECT_EQ(onorm_c_abi_check(), 0); }
// dtype -1 / 1000, backend 7 / -1, copy kind 9 from a C caller: INVALID_ARGUMENT, nothing written.
TEST(CApi, OutOfRangeEnumValuesFromC) { EXPECT_EQ(onorm_c_out_of_range_enums(), 0); }
TEST(CApi, SoftmaxBackwardFromC) { EXPECT_EQ(onorm_c_softmax_backward_check(), 0); }
TEST(CApi, LogSoftmaxBackwardFromC) { EXPECT_EQ(onorm_c_log_softmax_backward_check(), 0); }
TEST(CApi, NormFromC) { EXPECT_EQ(onorm_c_norm_check(), 0); }

static_assert(onorm::dtype_of<float>::value == ONORM_F32, "");
static_assert(onorm::dtype_of<double>::value == ONORM_F64, "");
static_assert(onorm::dtype_of<onorm::bf16>::value == ONORM_BF16, "");
static_assert(onorm::dtype_of<const onorm::f16>::value == ONORM_F16, "");
static_assert(sizeof(onorm::bf16) == 2 && sizeof(onorm::f16) == 2, "");
static_assert(!std::is_copy_constructible<onorm::Context>::value, "");
static_assert(std::is_nothrow_move_constructible<onorm::Context>::value, "");
static_assert(!std::is_copy_constructible<onorm::Buffer<float>>::value, "");

TEST(CppApi, RowsDeduceDtype) {
  float f[12];
  const onorm::bf16 b[12] = {};
  onorm::f16 h[12];
  double d[12];
  EXPECT_EQ(onorm::Rows(f, 3, 4).dtype(), ONORM_F32);
  EXPECT_EQ(onorm::Rows(b, 3, 4).dtype(), ONORM_BF16);
  EXPECT_EQ(onorm::Rows(h, 2, 4, 6).dtype(), ONORM_F16);
  EXPECT_EQ(onorm::Rows(d, 3, 4).dtype(), ONORM_F64);
  const onorm::Rows r(h, 2, 4, 6);
  EXPECT_EQ(r.rows(), 2);
  EXPECT_EQ(r.cols(), 4);
  EXPECT_EQ(r.row_stride(), 6);
  EXPECT_EQ(r.span(), 10);
  EXPECT_EQ(r.data(), static_cast<void*>(h));
  const onorm::Rows u(static_cast<void*>(f), ONORM_BF16, 2, 5);
  EXPECT_EQ(u.dtype(), ONORM_BF16);
  EXPECT_EQ(u.row_stride(), 5);
  EXPECT_EQ(u.get()->cols, 5);
}

TEST(CppApi, ErrorCarriesStatusAndMessage) {
  try {
    onorm::Context ctx(ONORM_BACKEND_CPU, 3);
    FAIL() << "no throw";
  } catch (const onorm::Error& e) {
    EXPECT_EQ(e.status(), ONORM_ERROR_BACKEND_UNAVAILABLE);
    EXPECT_FALSE(e.detail().empty());
    EXPECT_NE(std::string(e.what()).find(e.detail()), std::string::npos);
  }
  onorm::Context ctx(ONORM_BACKEND_CPU);
  float x[4] = {1, 2, 3, 4}, y[4];
  try {
    ctx.softmax(onorm::Rows(x, 1, 4), onorm::Rows(y, 1, 3));
    FAIL() << "no throw";
  } catch (const onorm::Error& e) {
    EXPECT_EQ(e.status(), ONORM_ERROR_INVALID_ARGUMENT);
    EXPECT_FALSE(e.detail().empty());
  }
  try {
    ctx.layer_norm(onorm::Rows(x, 1, 4), onorm::Rows(y, 1, 4), nullptr, nullptr, -1.0);
    FAIL() << "no throw";
  } catch (const onorm::Error& e) {
    EXPECT_EQ(e.status(), ONORM_ERROR_INVALID_ARGUMENT);
  }
  // The message shows the eps given, however small (not "-0.000000").
  for (double eps : {-1e-9, -1e-300, -0.1}) {
    try {
      ctx.rms_norm(onorm::Rows(x, 1, 4), onorm::Rows(y, 1, 4), nullptr, eps);
      ADD_FAILURE() << "no throw for eps " << eps;
    } catch (const onorm::Error& e) {
      char want[40];
      std::snprintf(want, sizeof want, "got %g", eps);
      EXPECT_NE(e.detail().find(want), std::string::npos) << e.detail();
    }
  }
  EXPECT_THROW(ctx.softmax(onorm::Rows(x, ONORM_F8_E4M3, 1, 4), onorm::Rows(y, 1, 4)), onorm::Error);
  EXPECT_THROW(onorm::check(ONORM_ERROR_DEVICE), onorm::Error);
  EXPECT_NO_THROW(onorm::check(ONORM_OK));
}

TEST(CppApi, ContextMoveAndRelease) {
  onorm::Context a(ONORM_BACKEND_CPU);
  onorm_context raw = a.get();
  ASSERT_NE(raw, nullptr);
  onorm::Context b(std::move(a));
  EXPECT_EQ(b.get(), raw);
  EXPECT_FALSE(static_cast<bool>(a));
  EXPECT_EQ(b.backend(), ONORM_BACKEND_CPU);
  EXPECT_EQ(b.name().rfind("cpu", 0), 0u);
  onorm::Context c(ONORM_BACKEND_CPU);
  c = std::move(b);
  EXPECT_EQ(c.get(), raw);
  onorm::Context d = onorm::Context::adopt(c.release());
  EXPECT_EQ(d.get(), raw);
  EXPECT_EQ(c.get(), nullptr);
  d.set_stream(nullptr);
  d.synchronize();
  EXPECT_FALSE(onorm::cpu_targets().empty());
  EXPECT_EQ(onorm::device_count(ONORM_BACKEND_CPU), 1);
  EXPECT_EQ(onorm::unavailable_reason(ONORM_BACKEND_CPU), "");
}

// Context::norm: the residual add into residual_out, a Gemma-style offset, a float32 gamma for
// bf16 rows and an int8 output with a dynamic scale, against the reference; a bad argument throws.
TEST(CppApi, NormWithOptions) {
  onorm::Context ctx(ONORM_BACKEND_CPU);
  const int64_t rows = 2, cols = 6;
  std::vector<onorm::bf16> x(rows * cols), r(rows * cols), h(rows * cols);
  std::vector<float> g(cols), scale(rows), rstd(rows);
  std::vector<int8_t> q(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) {
    onorm_ref::encode(0.25 * static_cast<double>(i % 7) - 0.5, &x[i], ONORM_BF16, 0);
    onorm_ref::encode(0.125 * static_cast<double>(i % 5), &r[i], ONORM_BF16, 0);
  }
  for (int64_t c = 0; c < cols; ++c) g[c] = 0.1f * static_cast<float>(c) - 0.2f;
  onorm::NormArgs a;
  a.kind = ONORM_RMS_NORM;
  a.gamma = g.data();
  a.weight_offset = 1.0;
  a.residual = onorm::Rows(r.data(), rows, cols);
  a.residual_out = onorm::Rows(h.data(), rows, cols);
  a.rstd = rstd.data();
  a.y_scale = scale.data();
  ctx.norm(onorm::Rows(x.data(), rows, cols), onorm::Rows(q.data(), rows, cols), a);

  onorm_ref::NormSpec spec;
  spec.layer = false;
  spec.x = onorm_rows{x.data(), ONORM_BF16, rows, cols, cols};
  const onorm_rows rr{r.data(), ONORM_BF16, rows, cols, cols};
  spec.residual = &rr;
  spec.h_dtype = ONORM_BF16;
  spec.gamma = g.data();
  spec.param_dtype = ONORM_F32;
  spec.weight_offset = 1.0;
  const onorm_rows qr{q.data(), ONORM_I8, rows, cols, cols}, hr{h.data(), ONORM_BF16, rows, cols, cols};
  const onorm_ref::Report rep =
      onorm_ref::check_norm(spec, onorm_ref::compute_norm(spec), qr, scale.data(), 0, nullptr, rstd.data(), &hr);
  EXPECT_TRUE(rep.ok()) << rep.describe();

  a.y_static_scale = 0.5;  // both scales
  try {
    ctx.norm(onorm::Rows(x.data(), rows, cols), onorm::Rows(q.data(), rows, cols), a);
    ADD_FAILURE() << "no exception";
  } catch (const onorm::Error& e) {
    EXPECT_EQ(e.status(), ONORM_ERROR_INVALID_ARGUMENT);
  }
}

// Context::norm_backward: NormBackwardArgs reach onorm_norm_backward (dresidual, param dtype,
// offset, column sums), checked against the reference; a missing rstd throws.
TEST(CppApi, NormBackward) {
  onorm::Context ctx(ONORM_BACKEND_CPU);
  const int64_t rows = 3, cols = 10;
  std::vector<onorm::bf16> x(rows * cols), dy(rows * cols), dx(rows * cols);
  std::vector<float> dr(rows * cols), g(cols), mean(rows), rstd(rows), dg(cols), db(cols);
  for (int64_t i = 0; i < rows * cols; ++i) {
    onorm_ref::encode(0.25 * static_cast<double>(i % 7) - 0.5, &x[i], ONORM_BF16, 0);
    onorm_ref::encode(0.5 - 0.125 * static_cast<double>(i % 5), &dy[i], ONORM_BF16, 0);
    dr[i] = 0.01f * static_cast<float>(i);
  }
  for (int64_t c = 0; c < cols; ++c) g[c] = 0.1f * static_cast<float>(c) - 0.2f;
  for (int64_t r = 0; r < rows; ++r) {
    mean[r] = 0.1f * static_cast<float>(r);
    rstd[r] = 1.5f + static_cast<float>(r);
  }
  onorm::NormBackwardArgs a;
  a.gamma = g.data();
  a.param_dtype = ONORM_F32;
  a.weight_offset = 1.0;
  a.mean = mean.data();
  a.rstd = rstd.data();
  a.dresidual = onorm::Rows(dr.data(), rows, cols);
  a.dgamma = dg.data();
  a.dbeta = db.data();
  ctx.norm_backward(onorm::Rows(x.data(), rows, cols), onorm::Rows(dy.data(), rows, cols),
                    onorm::Rows(dx.data(), rows, cols), a);

  onorm_ref::NormBackwardSpec spec;
  spec.x = onorm_rows{x.data(), ONORM_BF16, rows, cols, cols};
  spec.dy = onorm_rows{dy.data(), ONORM_BF16, rows, cols, cols};
  const onorm_rows drr{dr.data(), ONORM_F32, rows, cols, cols};
  spec.dresidual = &drr;
  spec.gamma = g.data();
  spec.param_dtype = ONORM_F32;
  spec.weight_offset = 1.0;
  spec.mean = mean.data();
  spec.rstd = rstd.data();
  const onorm_ref::Report rep = onorm_ref::check_norm_backward(
      onorm_ref::compute_norm_backward(spec), onorm_rows{dx.data(), ONORM_BF16, rows, cols, cols}, dg.data(), db.data());
  EXPECT_TRUE(rep.ok()) << rep.describe();

  a.rstd = nullptr;
  try {
    ctx.norm_backward(onorm::Rows(x.data(), rows, cols), onorm::Rows(dy.data(), rows, cols),
                      onorm::Rows(dx.data(), rows, cols), a);
    ADD_FAILURE() << "no exception";
  } catch (const onorm::Error& e) {
    EXPECT_EQ(e.status(), ONORM_ERROR_INVALID_ARGUMENT);
  }
}

// A count whose byte size wraps size_t must not allocate the wrapped (tiny) size: upload into
// such a buffer would then write far past it.
// Context::cross_entropy: CrossEntropyArgs reach onorm_cross_entropy (targets, ignore_index,
// smoothing, z_loss, grad_scale, lse, dlogits of another dtype), checked against the reference;
// a bad label_smoothing throws INVALID_ARGUMENT.
TEST(CppApi, CrossEntropy) {
  ONORM_SEEDED_RNG(rng);
  onorm::Context ctx(ONORM_BACKEND_CPU);
  const int64_t rows = 4, cols = 50;
  std::vector<onorm::bf16> x(rows * cols);
  std::vector<float> dl(rows * cols), loss(rows), lse(rows);
  for (int64_t i = 0; i < rows * cols; ++i) onorm_ref::encode(cheap_normal(rng, 0.0, 2.0), &x[i], ONORM_BF16, 0);
  std::vector<int64_t> t(rows);
  for (int64_t r = 0; r < rows; ++r) t[r] = static_cast<int64_t>(rng() % cols);
  t[2] = -100;  // ignored
  onorm::CrossEntropyArgs a;
  a.targets = t.data();
  a.label_smoothing = 0.1;
  a.z_loss = 1e-4;
  a.grad_scale = 0.25;
  a.loss = loss.data();
  a.lse = lse.data();
  a.dlogits = onorm::Rows(dl.data(), rows, cols);
  ctx.cross_entropy(onorm::Rows(x.data(), rows, cols), a);
  onorm_ref::CrossEntropySpec sp;
  sp.logits = onorm_rows{x.data(), ONORM_BF16, rows, cols, cols};
  sp.targets = t.data();
  sp.label_smoothing = 0.1;
  sp.z_loss = 1e-4;
  sp.grad_scale = 0.25;
  const onorm_rows dr{dl.data(), ONORM_F32, rows, cols, cols};
  const onorm_ref::Report rep =
      onorm_ref::check_cross_entropy(onorm_ref::compute_cross_entropy(sp), loss.data(), lse.data(), &dr);
  EXPECT_TRUE(rep.ok()) << rep.describe();
  a.label_smoothing = 2;
  try {
    ctx.cross_entropy(onorm::Rows(x.data(), rows, cols), a);
    ADD_FAILURE() << "no exception";
  } catch (const onorm::Error& e) {
    EXPECT_EQ(e.status(), ONORM_ERROR_INVALID_ARGUMENT);
  }
}

// Context::softmax_topk: values and indices against the reference, renormalized; k = 0 throws.
TEST(CppApi, SoftmaxTopk) {
  ONORM_SEEDED_RNG(rng);
  onorm::Context ctx(ONORM_BACKEND_CPU);
  const int64_t rows = 3, cols = 40, k = 5;
  std::vector<float> x(rows * cols);
  std::vector<onorm::f16> v(rows * k);
  std::vector<int64_t> ix(rows * k);
  for (float& e : x) e = static_cast<float>(rng() % 9);  // ties
  ctx.softmax_topk(onorm::Rows(x.data(), rows, cols), k, onorm::Rows(v.data(), rows, k), ix.data(), true);
  const onorm_ref::Report rep =
      onorm_ref::check_topk(onorm_ref::compute_topk(onorm_rows{x.data(), ONORM_F32, rows, cols, cols}, k, true), cols,
                            onorm_rows{v.data(), ONORM_F16, rows, k, k}, ix.data());
  EXPECT_TRUE(rep.ok()) << rep.describe();
  try {
    ctx.softmax_topk(onorm::Rows(x.data(), rows, cols), 0, onorm::Rows(v.data(), rows, 0), ix.data());
    ADD_FAILURE() << "no exception";
  } catch (const onorm::Error& e) {
    EXPECT_EQ(e.status(), ONORM_ERROR_INVALID_ARGUMENT);
  }
}

// The partial-state wrappers: two slices through stats, merge and finish equal the whole row's
// reference (log-softmax; LayerNorm with gamma slices through NormArgs); a residual throws
// INVALID_ARGUMENT, y_scale UNSUPPORTED.
TEST(CppApi, PartialStates) {
  ONORM_SEEDED_RNG(rng);
  onorm::Context ctx(ONORM_BACKEND_CPU);
  const int64_t rows = 3, cols = 30, cut = 11;
  std::vector<float> x(rows * cols), y(rows * cols), g(cols), mean(rows), rstd(rows), scale(rows);
  for (float& e : x) e = static_cast<float>(cheap_normal(rng, 5.0, 2.0));
  for (float& e : g) e = static_cast<float>(cheap_normal(rng, 1.0, 0.5));
  const onorm::Rows left(x.data(), rows, cut, cols), right(x.data() + cut, rows, cols - cut, cols);
  const onorm::Rows yl(y.data(), rows, cut, cols), yr(y.data() + cut, rows, cols - cut, cols);
  std::vector<onorm::SoftmaxState> ss(2 * rows), sm(rows);
  ctx.softmax_stats(left, ss.data());
  ctx.softmax_stats(right, ss.data() + rows);
  ctx.softmax_merge(2, rows, ss.data(), sm.data());
  ctx.softmax_finish(left, sm.data(), yl, true);
  ctx.softmax_finish(right, sm.data(), yr, true);
  const onorm_rows xw{x.data(), ONORM_F32, rows, cols, cols}, yw{y.data(), ONORM_F32, rows, cols, cols};
  onorm_ref::Report rep = onorm_ref::check(onorm_ref::Op::log_softmax,
                                           onorm_ref::compute(onorm_ref::Op::log_softmax, xw, nullptr, nullptr, 0), yw,
                                           nullptr, ONORM_F32, nullptr, nullptr);
  EXPECT_TRUE(rep.ok()) << "log-softmax: " << rep.describe();

  std::vector<onorm::MomentsState> ms(2 * rows);
  ctx.moments_stats(left, ms.data());
  ctx.moments_stats(right, ms.data() + rows);
  ctx.moments_merge(2, rows, ms.data(), ms.data());  // out == in
  onorm::NormArgs a;
  a.mean = mean.data();
  a.rstd = rstd.data();
  a.gamma = g.data();
  ctx.norm_finish(left, ms.data(), yl, a);
  a.gamma = g.data() + cut;
  ctx.norm_finish(right, ms.data(), yr, a);
  onorm_ref::NormSpec sp;
  sp.x = xw;
  sp.gamma = g.data();
  const onorm_ref::NormResult ref = onorm_ref::compute_norm(sp);
  rep = onorm_ref::check_norm(sp, ref, yw, nullptr, 0, mean.data(), rstd.data(), nullptr);
  EXPECT_TRUE(rep.ok()) << "LayerNorm: " << rep.describe();

  a.residual = left;
  try {
    ctx.norm_finish(left, ms.data(), yl, a);
    ADD_FAILURE() << "no exception (residual)";
  } catch (const onorm::Error& e) {
    EXPECT_EQ(e.status(), ONORM_ERROR_INVALID_ARGUMENT);
  }
  a.residual = onorm::Rows();
  a.y_scale = scale.data();
  std::vector<int8_t> q(rows * cols);
  try {
    ctx.norm_finish(left, ms.data(), onorm::Rows(q.data(), rows, cut, cols), a);
    ADD_FAILURE() << "no exception (y_scale)";
  } catch (const onorm::Error& e) {
    EXPECT_EQ(e.status(), ONORM_ERROR_UNSUPPORTED);
  }
}

TEST(CppApi, BufferSizeOverflowThrows) {
  onorm::Context ctx(ONORM_BACKEND_CPU);
  const std::size_t max = std::numeric_limits<std::size_t>::max();
  for (std::size_t count : {max / 4 + 2, max / 4 + 1, max}) {
    try {
      onorm::Buffer<float> b(ctx, count);
      ADD_FAILURE() << count << " floats: no throw, got a buffer of " << b.size() << " elements";
    } catch (const onorm::Error& e) {
      EXPECT_EQ(e.status(), ONORM_ERROR_INVALID_ARGUMENT) << e.what();
      EXPECT_NE(std::string(e.what()).find("overflow"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(onorm::Buffer<double>(ctx, max / 8 + 1), onorm::Error);  // wraps to exactly 0 bytes
  // Counts beyond the buffer are refused before any copy, both ways.
  onorm::Buffer<float> small(ctx, 1);
  std::vector<float> host(1024, 1.0f);
  EXPECT_THROW(small.upload(host.data(), host.size()), onorm::Error);
  EXPECT_THROW(small.download(host.data(), host.size()), onorm::Error);
  small.upload(host.data(), 1);
  EXPECT_EQ(small.download(), std::vector<float>{1.0f});
  // An empty (default) buffer takes count 0 and refuses anything more.
  onorm::Buffer<float> none;
  EXPECT_NO_THROW(none.upload(host.data(), 0));
  EXPECT_THROW(none.upload(host.data(), 1), onorm::Error);
}

class CppApiOps : public ::testing::TestWithParam<onorm_backend> {};

// Every op through the C++ layer on every backend, with device buffers, against the reference.
TEST_P(CppApiOps, OpsThroughBuffers) {
  onorm::Context ctx = [&]() -> onorm::Context {
    try {
      return onorm::Context(GetParam());
    } catch (const onorm::Error& e) {
      if (e.status() != ONORM_ERROR_BACKEND_UNAVAILABLE) throw;
      return onorm::Context::adopt(nullptr);
    }
  }();
  if (!ctx) GTEST_SKIP() << backend_name(GetParam()) << " unavailable";
  ONORM_SEEDED_RNG(rng);
  const int64_t rows = 5, cols = 300, stride = 301;
  std::normal_distribution<double> nd(0.5, 2.0);
  std::vector<onorm::bf16> hx(static_cast<size_t>(rows * stride));
  for (auto& v : hx) onorm_ref::encode(nd(rng), &v.bits, ONORM_BF16, 0);
  std::vector<onorm::bf16> hg(static_cast<size_t>(cols)), hb(static_cast<size_t>(cols));
  for (auto& v : hg) onorm_ref::encode(1 + 0.3 * nd(rng), &v.bits, ONORM_BF16, 0);
  for (auto& v : hb) onorm_ref::encode(nd(rng), &v.bits, ONORM_BF16, 0);
  // Softmax backward's dy (f16: the three tensors' dtypes differ).
  std::vector<onorm::f16> hdy(static_cast<size_t>(rows * cols));
  for (auto& v : hdy) onorm_ref::encode(nd(rng), &v.bits, ONORM_F16, 0);
  onorm::Buffer<onorm::bf16> x(ctx, hx.size()), g(ctx, hg.size()), b(ctx, hb.size());
  onorm::Buffer<onorm::f16> dy(ctx, hdy.size());
  onorm::Buffer<float> y(ctx, static_cast<size_t>(rows * cols)), mean(ctx, rows), rstd(ctx, rows);
  x.upload(hx);
  g.upload(hg);
  b.upload(hb);
  dy.upload(hdy);
  const onorm_rows xh[2] = {{hx.data(), ONORM_BF16, rows, cols, stride}, {hdy.data(), ONORM_F16, rows, cols, cols}};
  for (Op op : all_ops()) {
    SCOPED_TRACE(onorm_ref::op_name(op));
    const onorm::Rows xr = x.rows(rows, cols, stride), yr = y.rows(rows, cols);
    switch (op) {
      case Op::softmax: ctx.softmax(xr, yr); break;
      case Op::log_softmax: ctx.log_softmax(xr, yr); break;
      case Op::layer_norm: ctx.layer_norm(xr, yr, g.data(), b.data(), 1e-5, mean.data(), rstd.data()); break;
      case Op::rms_norm: ctx.rms_norm(xr, yr, g.data(), 1e-5, rstd.data()); break;
      case Op::softmax_backward: ctx.softmax_backward(xr, dy.rows(rows, cols), yr); break;
      case Op::log_softmax_backward: ctx.log_softmax_backward(xr, dy.rows(rows, cols), yr); break;
    }
    ctx.synchronize();
    const std::vector<float> hy = y.download(), hm = mean.download(), hr = rstd.download();
    const bool norm = op == Op::layer_norm || op == Op::rms_norm;
    const onorm_ref::Result ref = onorm_ref::compute(op, xh, op_inputs(op), norm ? hg.data() : nullptr,
                                                     op == Op::layer_norm ? hb.data() : nullptr, 1e-5);
    const onorm_rows yh{const_cast<float*>(hy.data()), ONORM_F32, rows, cols, cols};
    const onorm_ref::Report rep = onorm_ref::check(op, ref, yh, norm ? hg.data() : nullptr, ONORM_BF16,
                                                   op == Op::layer_norm ? hm.data() : nullptr, norm ? hr.data() : nullptr);
    EXPECT_TRUE(rep.ok()) << rep.describe();
  }
  // Buffer bounds are checked.
  std::vector<float> too_many(static_cast<size_t>(rows * cols + 1));
  EXPECT_THROW(y.upload(too_many), onorm::Error);
  // Moving a buffer moves ownership.
  onorm::Buffer<float> moved(std::move(y));
  EXPECT_EQ(y.data(), nullptr);
  EXPECT_EQ(moved.size(), static_cast<size_t>(rows * cols));
}

INSTANTIATE_TEST_SUITE_P(All, CppApiOps, ::testing::ValuesIn(all_backends()), BackendName());

}  // namespace
}  // namespace onorm_test
