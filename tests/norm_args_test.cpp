// onorm_norm (API.md, "norms with options") on every backend: the defaults are the version-1
// functions bit for bit; the residual add, residual_out, weight_offset, param_dtype and the
// quantized outputs (dynamic and static scales) against the float64 reference, in random
// combinations of dtypes, widths, strides and offsets, with NaN and zero rows; the allowed
// aliases in place; every bad argument refused with nothing written. Every option runs on
// every backend (F64 on the CPU only; a GPU refuses an f32 tensor off its 4-byte alignment).
#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <sstream>

#include "common/test_util.hpp"

namespace onorm_test {
namespace {

class NormArgs : public ::testing::TestWithParam<onorm_backend> {};

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// One onorm_norm problem: the tensors in the context's memory, the args pointing at them.
struct Problem {
  bool layer = true;
  int64_t rows = 1, cols = 1;
  onorm_dtype xt = ONORM_F32, yt = ONORM_F32, pt = ONORM_F32;
  int residual = -1, residual_out = -1;  // dtype, or -1: none
  bool gamma = true, beta = true, stats = true, dynamic = true;
  double offset = 0, static_scale = 0.5;
  int64_t pad = 0;
  size_t shift = 0;     // bytes past 16-byte alignment (x, y)
  size_t ro_shift = 2;  // the same for residual_out
  int64_t res_pad = 3;  // the residual's row stride past x's (3: its rows off 16 bytes)
  double far = 0;       // nonzero: the ordinary rows are far + 0.05 N(0,1)
};

bool quantized(onorm_dtype t) { return t == ONORM_I8 || t == ONORM_F8_E4M3; }

struct NormCall {
  Tensor x, r, ro, y, g, b, mean, rstd, scale;
  onorm_norm_args args{};
  onorm_ref::NormSpec spec;
  NormCall(onorm_context ctx, const Problem& p, std::mt19937_64& rng) {
    const int64_t s = p.cols + p.pad;
    x = Tensor(ctx, p.xt, p.rows, p.cols, s, p.shift);
    y = Tensor(ctx, p.yt, p.rows, p.cols, s + 1, p.shift);
    g = Tensor(ctx, p.pt, 1, p.cols);
    b = Tensor(ctx, p.pt, 1, p.cols);
    mean = Tensor(ctx, ONORM_F32, 1, p.rows);
    rstd = Tensor(ctx, ONORM_F32, 1, p.rows);
    scale = Tensor(ctx, ONORM_F32, 1, p.rows);
    // Rows: ordinary ones at an offset; row 1 all zero; row 2 with a NaN (from 3 rows up); row 3
    // with an inf; row 4 at 1e4 + N(0,1) with outliers at every 256-column chunk start.
    const double centre = std::uniform_real_distribution<double>(-50, 50)(rng);
    auto gen = [&](int64_t row, int64_t c) {
      if (p.rows >= 3 && row == 1) return 0.0;
      if (p.rows >= 3 && row == 2 && c == p.cols / 2) return kNaN;
      if (p.rows >= 4 && row == 3 && c == p.cols / 3) return std::numeric_limits<double>::infinity();
      if (p.rows >= 5 && row == 4) return c % 256 == 0 ? 3e4 : cheap_normal(rng, 1e4, 1.0);
      return p.far != 0 ? cheap_normal(rng, p.far, 0.05) : cheap_normal(rng, centre, 3.0);
    };
    x.fill(gen);
    if (p.residual >= 0) {
      r = Tensor(ctx, static_cast<onorm_dtype>(p.residual), p.rows, p.cols, s + p.res_pad);
      r.fill([&](int64_t row, int64_t) { return p.rows >= 3 && row == 1 ? 0.0 : cheap_normal(rng, -centre, 1.0); });
    }
    if (p.residual_out >= 0) ro = Tensor(ctx, static_cast<onorm_dtype>(p.residual_out), p.rows, p.cols, s, p.ro_shift);
    g.fill([&](int64_t, int64_t) { return cheap_normal(rng, 0.0, 1.0); });
    b.fill([&](int64_t, int64_t) { return cheap_normal(rng, 0.0, 1.0); });
    onorm_norm_args_init(&args, p.layer ? ONORM_LAYER_NORM : ONORM_RMS_NORM);
    args.gamma = p.gamma ? g.dev() : nullptr;
    args.beta = p.layer && p.beta ? b.dev() : nullptr;
    args.param_dtype = p.pt;
    args.eps = 1e-5;
    args.weight_offset = p.offset;
    args.mean = p.layer && p.stats ? mean.dev_f32() : nullptr;
    args.rstd = p.stats ? rstd.dev_f32() : nullptr;
    if (quantized(p.yt)) {
      if (p.dynamic) args.y_scale = scale.dev_f32();
      else args.y_static_scale = p.static_scale;
    }
    spec.layer = p.layer;
    spec.x = x.host_rows();
    spec.gamma = p.gamma ? g.host() : nullptr;
    spec.beta = p.layer && p.beta ? b.host() : nullptr;
    spec.param_dtype = p.pt;
    spec.eps = args.eps;
    spec.weight_offset = p.offset;
    spec.h_dtype = p.residual_out >= 0 ? static_cast<onorm_dtype>(p.residual_out) : p.xt;
  }
  // The residual's rows, set after any move of this NormCall (the args hold pointers to them).
  onorm_rows r_rows, ro_rows;
  onorm_status call(onorm_context ctx, const Problem& p) {
    r_rows = r.dev_rows();
    ro_rows = ro.dev_rows();
    args.residual = p.residual >= 0 ? &r_rows : nullptr;
    args.residual_out = p.residual_out >= 0 ? &ro_rows : nullptr;
    const onorm_rows xr = x.dev_rows(), yr = y.dev_rows();
    const onorm_status st = onorm_norm(ctx, &xr, &args, &yr);
    if (st == ONORM_OK) {
      EXPECT_EQ(onorm_synchronize(ctx), ONORM_OK);
    }
    for (Tensor* t : {&y, &ro, &mean, &rstd, &scale}) t->download();
    return st;
  }
  void check(onorm_context ctx, const Problem& p) {
    const onorm_rows rh = r.host_rows();
    spec.residual = p.residual >= 0 ? &rh : nullptr;
    const onorm_ref::NormResult ref = onorm_ref::compute_norm(spec);
    const onorm_rows roh = ro.host_rows();
    const onorm_ref::Report rep = onorm_ref::check_norm(
        spec, ref, y.host_rows(), args.y_scale ? scale.host_f32() : nullptr, args.y_static_scale,
        args.mean ? mean.host_f32() : nullptr, args.rstd ? rstd.host_f32() : nullptr,
        p.residual_out >= 0 ? &roh : nullptr);
    EXPECT_TRUE(rep.ok()) << rep.describe();
    EXPECT_TRUE(y.outside_untouched("y"));
    if (!quantized(p.yt)) {
      EXPECT_TRUE(y.all_written("y"));
    } else {
      // Every byte value is a quantized value (i8), or the poison is one (-NaN in E4M3): run
      // again over zeros; an element left unwritten differs between the runs.
      const std::vector<unsigned char> first = y.image();
      for (int64_t i = 0; i < p.rows; ++i) std::memset(static_cast<char*>(y.host()) + i * y.stride(), 0, p.cols);
      y.upload();
      ASSERT_EQ(call(ctx, p), ONORM_OK) << onorm_last_error();
      EXPECT_TRUE(y.same_image(first, "y over zeros against y over the poison"));
    }
    if (p.residual_out >= 0) {
      EXPECT_TRUE(ro.outside_untouched("residual_out"));
      EXPECT_TRUE(ro.all_written("residual_out"));
    }
    for (Tensor* t : {&mean, &rstd, &scale}) EXPECT_TRUE(t->outside_untouched("row output"));
  }
  // Nothing written: every output still holds the poison.
  void expect_untouched() {
    for (Tensor* t : {&y, &ro, &mean, &rstd, &scale}) EXPECT_TRUE(t->all_poison("an output of a refused call"));
  }
};

// A problem in words, for the failure messages.
std::string describe(const Problem& p) {
  std::ostringstream s;
  s << (p.layer ? "layer_norm" : "rms_norm") << " x " << dtype_name(p.xt) << " y " << dtype_name(p.yt) << " param "
    << dtype_name(p.pt) << " " << p.rows << "x" << p.cols << " pad " << p.pad << " shift " << p.shift << "/" << p.ro_shift << " residual "
    << (p.residual >= 0 ? dtype_name(static_cast<onorm_dtype>(p.residual)) : "-") << " residual_out "
    << (p.residual_out >= 0 ? dtype_name(static_cast<onorm_dtype>(p.residual_out)) : "-") << " offset " << p.offset
    << " gamma " << p.gamma << " beta " << p.beta << " far " << p.far << (quantized(p.yt) ? (p.dynamic ? " dynamic" : " static") : "");
  return s.str();
}

// Runs problem p and checks every output against the reference.
void run_and_check(onorm_context ctx, const Problem& p, std::mt19937_64& rng) {
  SCOPED_TRACE(describe(p));
  NormCall run(ctx, p, rng);
  ASSERT_EQ(run.call(ctx, p), ONORM_OK) << onorm_last_error();
  run.check(ctx, p);
}

TEST_P(NormArgs, DefaultsAreTheVersion1Functions) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  for (onorm_dtype dt : float_dtypes()) {
    if (!contract_supports(GetParam(), dt)) continue;
    for (bool layer : {true, false})
      for (int64_t cols : {1, 3, 127, 1025, 9000}) {
        Problem p;
        p.layer = layer;
        p.rows = 5;
        p.cols = cols;
        p.xt = p.yt = p.pt = dt;
        SCOPED_TRACE(describe(p));
        NormCall a(ctx, p, rng);
        ASSERT_EQ(a.call(ctx, p), ONORM_OK) << onorm_last_error();
        Tensor y1(ctx, dt, p.rows, p.cols, p.cols + 1), m1(ctx, ONORM_F32, 1, p.rows), r1(ctx, ONORM_F32, 1, p.rows);
        const onorm_rows xr = a.x.dev_rows(), yr = y1.dev_rows();
        const onorm_status st = layer ? onorm_layer_norm(ctx, &xr, a.g.dev(), a.b.dev(), 1e-5, &yr, m1.dev_f32(), r1.dev_f32())
                                      : onorm_rms_norm(ctx, &xr, a.g.dev(), 1e-5, &yr, r1.dev_f32());
        ASSERT_EQ(st, ONORM_OK) << onorm_last_error();
        ASSERT_EQ(onorm_synchronize(ctx), ONORM_OK);
        y1.download();
        m1.download();
        r1.download();
        EXPECT_TRUE(a.y.same_image(y1.image(), "y of onorm_norm against the version-1 function"));
        EXPECT_EQ(std::memcmp(a.rstd.host(), r1.host(), static_cast<size_t>(p.rows) * 4), 0);
        if (layer) {
          EXPECT_EQ(std::memcmp(a.mean.host(), m1.host(), static_cast<size_t>(p.rows) * 4), 0);
        }
      }
  }
}

TEST_P(NormArgs, OptionsAgainstTheReference) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  const onorm_backend be = GetParam();
  std::vector<onorm_dtype> floats;
  for (onorm_dtype d : float_dtypes())
    if (contract_supports(be, d)) floats.push_back(d);
  auto pick = [&](const std::vector<onorm_dtype>& v) { return v[rng() % v.size()]; };
  const int64_t widths[] = {1, 3, 127, 1025, 4097, 65537};
  const double offsets[] = {0.0, 1.0, 0.5, -0.25, 0.1};  // 0.1: no float holds it (the GPUs fold it)
  for (int k = 0; k < 80; ++k) {
    Problem p;
    p.layer = rng() % 2;
    p.cols = widths[rng() % 6];
    p.rows = p.cols > 5000 ? 3 : 1 + static_cast<int64_t>(rng() % 6);
    p.xt = pick(floats);
    p.pt = pick(floats);
    const int yk = static_cast<int>(rng() % 6);
    p.yt = yk < 2 ? ONORM_I8 : yk < 4 ? ONORM_F8_E4M3 : pick(floats);
    p.dynamic = rng() % 3 != 0;
    p.static_scale = std::ldexp(1.0, -static_cast<int>(rng() % 6));
    p.residual = rng() % 3 ? static_cast<int>(pick(floats)) : -1;
    p.residual_out = p.residual >= 0 && rng() % 2 ? static_cast<int>(pick(floats)) : -1;
    p.offset = offsets[rng() % std::size(offsets)];
    p.gamma = rng() % 4 != 0;
    p.beta = rng() % 3 != 0;
    p.stats = rng() % 2;
    p.pad = rng() % 2 ? 0 : 5;
    p.shift = rng() % 2 ? 0 : 4;
    SCOPED_TRACE(describe(p));
    NormCall run(ctx, p, rng);
    const onorm_status st = run.call(ctx, p);
    // residual_out lies 2 bytes past alignment: an f32 one is beyond a GPU's reach.
    if (is_gpu(be) && p.residual_out == ONORM_F32) {
      EXPECT_EQ(st, ONORM_ERROR_UNSUPPORTED) << onorm_last_error();
      run.expect_untouched();
      continue;
    }
    ASSERT_EQ(st, ONORM_OK) << onorm_last_error();
    run.check(ctx, p);
  }
}

// Tensors larger than a GPU's staging memory (the residual's h and the quantizer's floats go
// through it in batches of 128 such rows): 130 rows of 65536 f32 columns with a bf16 residual
// (another dtype than x's: around the row plan) and no residual_out, quantized with dynamic
// and with static scales. The CPU has no staging.
TEST_P(NormArgs, ManyRowsInBatches) {
  if (!is_gpu(GetParam())) GTEST_SKIP() << "staging batches are the GPUs'";
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  for (onorm_dtype yt : {ONORM_I8, ONORM_F8_E4M3}) {
    Problem p;
    p.layer = yt == ONORM_I8;
    p.rows = 130;
    p.cols = 65536;
    p.yt = yt;
    p.residual = ONORM_BF16;
    p.dynamic = yt == ONORM_F8_E4M3;
    run_and_check(ctx, p, rng);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// The options where the GPUs carry them inside the row kernels (residual and residual_out of
// x's dtype; gamma and beta of x's dtype, f32 beside 16-bit x, or of another dtype or with a
// weight_offset, which the GPUs fold into f32 first): every register width and cluster size,
// each output dtype, the quantized ones with both scales, with and without residual_out, the
// residual's rows on 16 bytes or off them; the zero, NaN, inf (the float64 fallback, which
// reads x and the residual again) and offset rows.
TEST_P(NormArgs, OptionsInsideTheRows) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  const int64_t widths[] = {1, 3, 64, 127, 1000, 1025, 4096, 4097, 8192, 8193, 16384, 16385, 40000, 65537, 131072, 262144};
  for (int64_t cols : widths) {
    for (onorm_dtype xt : {ONORM_F32, ONORM_BF16, ONORM_F16}) {
      Problem p;
      p.layer = rng() % 2;
      p.cols = cols;
      p.rows = cols > 20000 ? 5 : 6;
      p.xt = p.pt = xt;
      const int ck = static_cast<int>(rng() % 4);  // x's columns, Gemma's, f32 (16-bit x), another dtype
      if (ck == 1) p.offset = 1.0;
      if (ck == 2) p.pt = ONORM_F32;
      if (ck == 3) p.pt = xt == ONORM_F32 ? ONORM_BF16 : xt == ONORM_BF16 ? ONORM_F16 : ONORM_BF16;
      if (ck == 3) p.offset = 0.1;  // no float holds it: the GPUs fold it
      const int yk = static_cast<int>(rng() % 4);
      p.yt = yk == 0 ? ONORM_I8 : yk == 1 ? ONORM_F8_E4M3 : yk == 2 ? xt : ONORM_F32;
      p.dynamic = rng() % 4 != 0;
      p.static_scale = std::ldexp(1.0, -static_cast<int>(rng() % 6));
      p.residual = quantized(p.yt) && rng() % 3 == 0 ? -1 : static_cast<int>(xt);
      p.residual_out = p.residual >= 0 && rng() % 3 != 0 ? static_cast<int>(xt) : -1;
      p.gamma = rng() % 4 != 0;
      p.beta = rng() % 3 != 0;
      p.stats = rng() % 2;
      p.pad = rng() % 2 ? 0 : 8;
      p.shift = rng() % 3 ? 0 : 4;
      p.ro_shift = rng() % 3 ? 0 : 4;
      p.res_pad = rng() % 2 ? 3 : 0;
      run_and_check(ctx, p, rng);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// gamma and beta given or not (every combination), of x's dtype and of another with a
// weight_offset, at widths whose threads hold whole items (the GPUs load the column vectors a
// window of items at a time there) and widths that cut them.
TEST_P(NormArgs, EveryCombinationOfColumnVectors) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  for (int64_t cols : {64, 1000, 1024, 4096, 6144, 16384, 16385, 40000})
    for (onorm_dtype xt : {ONORM_F32, ONORM_BF16, ONORM_F16}) {
      if (!contract_supports(GetParam(), xt)) continue;
      for (int given = 0; given < 6; ++given)
        for (bool other_params : {false, true}) {
          Problem p;
          p.layer = given < 4;
          p.gamma = given % 2 == 0;
          p.beta = p.layer && given < 2;
          p.cols = cols;
          p.rows = 5;
          p.xt = p.yt = xt;
          p.pt = other_params ? (xt == ONORM_F32 ? ONORM_BF16 : ONORM_F32) : xt;
          p.offset = other_params ? 1.0 : 0.0;
          run_and_check(ctx, p, rng);
          if (::testing::Test::HasFatalFailure()) return;
        }
    }
}

// Quantized LayerNorm of rows far from zero (|mean| rstd up to 10^6): the codes are the
// reference's or a neighbour only if the finish keeps the mean's digits beyond float's
// (core/norm_stats.hpp); every placement (register rows, clusters, around the plan: an f32 y
// scale with a param dtype other than x's).
TEST_P(NormArgs, QuantizedLayerNormFarFromZero) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  for (int64_t cols : {64, 1000, 4096, 9000, 40000})
    for (onorm_dtype xt : {ONORM_F32, ONORM_BF16, ONORM_F16})
      for (double far : {100.0, -3000.0, 30000.0}) {
        Problem p;
        p.cols = cols;
        p.rows = 6;
        p.xt = p.pt = xt;
        p.pt = rng() % 4 ? xt : ONORM_F32;
        p.yt = rng() % 2 ? ONORM_F8_E4M3 : ONORM_I8;
        p.far = far;
        p.gamma = rng() % 3 != 0;
        p.beta = rng() % 2 != 0;
        run_and_check(ctx, p, rng);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

// Many short rows: the CPU runs the options a cache-sized block of rows at a time (several
// blocks per thread here), the GPUs many rows per block; every row against the reference.
TEST_P(NormArgs, ManyShortRows) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  for (onorm_dtype xt : {ONORM_F32, ONORM_BF16}) {
    for (bool quantized : {true, false}) {
      Problem p;
      p.layer = !quantized;
      p.rows = 3001;
      p.cols = 96;
      p.xt = p.pt = xt;
      p.yt = quantized ? ONORM_F8_E4M3 : xt;
      p.residual = static_cast<int>(xt);
      p.residual_out = quantized ? -1 : static_cast<int>(xt);
      p.ro_shift = 0;
      run_and_check(ctx, p, rng);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// Batch invariance (API.md): every row's outputs (y, residual_out, y_scale, mean, rstd) are the
// same bits alone as in the batch.
TEST_P(NormArgs, RowsAloneEqualRowsInTheBatch) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  for (onorm_dtype yt : {ONORM_BF16, ONORM_F8_E4M3}) {
    Problem p;
    p.layer = yt == ONORM_BF16;
    p.rows = 7;
    p.cols = 3000;
    p.xt = p.pt = ONORM_BF16;
    p.yt = yt;
    p.residual = ONORM_F32;
    p.residual_out = ONORM_BF16;
    p.offset = 1.0;
    SCOPED_TRACE(describe(p));
    NormCall batch(ctx, p, rng);
    const onorm_status st = batch.call(ctx, p);
    ASSERT_EQ(st, ONORM_OK) << onorm_last_error();
    const size_t ys = onorm_dtype_size(p.yt), hs = onorm_dtype_size(ONORM_BF16);
    for (int64_t r = 0; r < p.rows; ++r) {
      // Row r alone: views of row r of the batch's inputs, fresh outputs.
      Tensor y(ctx, p.yt, 1, p.cols), h(ctx, ONORM_BF16, 1, p.cols), m(ctx, ONORM_F32, 1, 1), sd(ctx, ONORM_F32, 1, 1),
          sc(ctx, ONORM_F32, 1, 1);
      onorm_rows x1 = batch.x.dev_rows(), r1 = batch.r.dev_rows(), y1 = y.dev_rows(), h1 = h.dev_rows();
      x1.data = static_cast<char*>(x1.data) + r * x1.row_stride * 2;
      r1.data = static_cast<char*>(r1.data) + r * r1.row_stride * 4;
      x1.rows = r1.rows = 1;
      onorm_norm_args a = batch.args;
      a.residual = &r1;
      a.residual_out = &h1;
      a.mean = a.mean ? m.dev_f32() : nullptr;
      a.rstd = sd.dev_f32();
      a.y_scale = a.y_scale ? sc.dev_f32() : nullptr;
      ASSERT_EQ(onorm_norm(ctx, &x1, &a, &y1), ONORM_OK) << onorm_last_error();
      ASSERT_EQ(onorm_synchronize(ctx), ONORM_OK);
      for (Tensor* t : {&y, &h, &m, &sd, &sc}) t->download();
      EXPECT_EQ(std::memcmp(y.host(), static_cast<const char*>(batch.y.host()) + r * batch.y.stride() * ys, p.cols * ys), 0)
          << "y of row " << r;
      EXPECT_EQ(std::memcmp(h.host(), static_cast<const char*>(batch.ro.host()) + r * batch.ro.stride() * hs, p.cols * hs), 0)
          << "residual_out of row " << r;
      EXPECT_EQ(std::memcmp(sd.host(), batch.rstd.host_f32() + r, 4), 0) << "rstd of row " << r;
      if (a.mean) {
        EXPECT_EQ(std::memcmp(m.host(), batch.mean.host_f32() + r, 4), 0) << "mean of row " << r;
      }
      if (a.y_scale) {
        EXPECT_EQ(std::memcmp(sc.host(), batch.scale.host_f32() + r, 4), 0) << "y_scale of row " << r;
      }
    }
  }
}

// residual_out in place of the residual or of x, y in place of x: the same bits as out of place.
TEST_P(NormArgs, AllowedAliasesInPlace) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  for (int mode = 0; mode < 3; ++mode) {
    Problem p;
    p.rows = 4;
    p.cols = 1000;
    p.xt = p.yt = p.pt = ONORM_BF16;
    p.residual = ONORM_BF16;
    p.residual_out = ONORM_BF16;
    p.offset = 1.0;
    SCOPED_TRACE("mode " + std::to_string(mode));
    NormCall ref(ctx, p, rng);
    const onorm_status st = ref.call(ctx, p);
    ASSERT_EQ(st, ONORM_OK) << onorm_last_error();
    // The same inputs, with the outputs on top of them.
    Tensor x(ctx, p.xt, p.rows, p.cols), r(ctx, p.xt, p.rows, p.cols);
    for (int64_t i = 0; i < p.rows; ++i)
      for (int64_t c = 0; c < p.cols; ++c) {
        x.set(i, c, ref.x.get(i, c));
        r.set(i, c, ref.r.get(i, c));
      }
    x.upload();
    r.upload();
    Tensor y(ctx, p.yt, p.rows, p.cols), ro(ctx, p.xt, p.rows, p.cols);
    onorm_norm_args a = ref.args;
    const onorm_rows xr = x.dev_rows(), rr = r.dev_rows();
    onorm_rows yr = y.dev_rows(), ror = ro.dev_rows();
    if (mode == 0) ror = rr;                 // residual_out on the residual
    if (mode == 1) ror = xr;                 // residual_out on x
    if (mode == 2) { yr = xr; ror = rr; }    // y on x, residual_out on the residual
    a.residual = &rr;
    a.residual_out = &ror;
    ASSERT_EQ(onorm_norm(ctx, &xr, &a, &yr), ONORM_OK) << onorm_last_error();
    ASSERT_EQ(onorm_synchronize(ctx), ONORM_OK);
    Tensor& ygot = mode == 2 ? x : y;
    Tensor& rgot = mode == 1 ? x : mode == 0 || mode == 2 ? r : ro;
    ygot.download();
    rgot.download();
    for (int64_t i = 0; i < p.rows; ++i)
      for (int64_t c = 0; c < p.cols; ++c) {
        ASSERT_EQ(std::memcmp(static_cast<const char*>(ygot.host()) + ygot.index(i, c) * 2,
                              static_cast<const char*>(ref.y.host()) + ref.y.index(i, c) * 2, 2), 0)
            << "y[" << i << "][" << c << "]";
        ASSERT_EQ(std::memcmp(static_cast<const char*>(rgot.host()) + rgot.index(i, c) * 2,
                              static_cast<const char*>(ref.ro.host()) + ref.ro.index(i, c) * 2, 2), 0)
            << "residual_out[" << i << "][" << c << "]";
      }
  }
}

// Every bad argument: INVALID_ARGUMENT (or UNSUPPORTED for a valid dtype not taken) with a
// message, and nothing written.
TEST_P(NormArgs, BadArgumentsWriteNothing) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  Problem base;
  base.rows = 3;
  base.cols = 64;
  base.residual = ONORM_F32;
  base.residual_out = ONORM_F32;
  struct Case {
    const char* name;
    onorm_status want;
    std::function<void(NormCall&, onorm_rows& x, onorm_rows& y)> edit;
  };
  const std::vector<Case> cases = {
      {"args NULL", ONORM_ERROR_INVALID_ARGUMENT, nullptr},
      {"struct_size too small", ONORM_ERROR_INVALID_ARGUMENT, [](NormCall& r, onorm_rows&, onorm_rows&) { r.args.struct_size = 8; }},
      {"kind not an onorm_norm_kind", ONORM_ERROR_INVALID_ARGUMENT,
       [](NormCall& r, onorm_rows&, onorm_rows&) { r.args.kind = static_cast<onorm_norm_kind>(7); }},
      {"RMSNorm with beta", ONORM_ERROR_INVALID_ARGUMENT,
       [](NormCall& r, onorm_rows&, onorm_rows&) { r.args.kind = ONORM_RMS_NORM; r.args.mean = nullptr; }},
      {"RMSNorm with mean", ONORM_ERROR_INVALID_ARGUMENT,
       [](NormCall& r, onorm_rows&, onorm_rows&) { r.args.kind = ONORM_RMS_NORM; r.args.beta = nullptr; }},
      {"residual_out without residual", ONORM_ERROR_INVALID_ARGUMENT,
       [](NormCall& r, onorm_rows&, onorm_rows&) { r.args.residual = nullptr; }},
      {"eps NaN", ONORM_ERROR_INVALID_ARGUMENT, [](NormCall& r, onorm_rows&, onorm_rows&) { r.args.eps = kNaN; }},
      {"weight_offset NaN", ONORM_ERROR_INVALID_ARGUMENT,
       [](NormCall& r, onorm_rows&, onorm_rows&) { r.args.weight_offset = kNaN; }},
      {"param_dtype not an onorm_dtype", ONORM_ERROR_INVALID_ARGUMENT,
       [](NormCall& r, onorm_rows&, onorm_rows&) { r.args.param_dtype = static_cast<onorm_dtype>(42); }},
      {"param_dtype f8", ONORM_ERROR_UNSUPPORTED,
       [](NormCall& r, onorm_rows&, onorm_rows&) { r.args.param_dtype = ONORM_F8_E4M3; }},
      {"residual of another shape", ONORM_ERROR_INVALID_ARGUMENT,
       [](NormCall& r, onorm_rows&, onorm_rows&) { r.r_rows.cols -= 1; }},
      {"residual i8", ONORM_ERROR_UNSUPPORTED, [](NormCall& r, onorm_rows&, onorm_rows&) { r.r_rows.dtype = ONORM_I8; }},
      {"y on the residual", ONORM_ERROR_INVALID_ARGUMENT, [](NormCall& r, onorm_rows&, onorm_rows& y) { y = r.r_rows; }},
      {"residual_out on y", ONORM_ERROR_INVALID_ARGUMENT, [](NormCall& r, onorm_rows&, onorm_rows& y) { r.ro_rows = y; }},
      {"i8 y without a scale", ONORM_ERROR_INVALID_ARGUMENT, [](NormCall&, onorm_rows&, onorm_rows& y) { y.dtype = ONORM_I8; }},
      {"i8 y with both scales", ONORM_ERROR_INVALID_ARGUMENT,
       [](NormCall& r, onorm_rows&, onorm_rows& y) {
         y.dtype = ONORM_I8;
         r.args.y_scale = r.scale.dev_f32();
         r.args.y_static_scale = 1;
       }},
      {"static scale 0 < s fails: negative", ONORM_ERROR_INVALID_ARGUMENT,
       [](NormCall&r, onorm_rows&, onorm_rows& y) { y.dtype = ONORM_F8_E4M3; r.args.y_static_scale = -1; }},
      {"static scale infinite", ONORM_ERROR_INVALID_ARGUMENT,
       [](NormCall& r, onorm_rows&, onorm_rows& y) {
         y.dtype = ONORM_F8_E4M3;
         r.args.y_static_scale = std::numeric_limits<double>::infinity();
       }},
      {"y_scale with a float y", ONORM_ERROR_INVALID_ARGUMENT,
       [](NormCall& r, onorm_rows&, onorm_rows&) { r.args.y_scale = r.scale.dev_f32(); }},
      {"y_scale on rstd", ONORM_ERROR_INVALID_ARGUMENT,
       [](NormCall& r, onorm_rows&, onorm_rows& y) {
         y.dtype = ONORM_I8;
         r.args.y_scale = r.rstd.dev_f32();
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    NormCall run(ctx, base, rng);
    run.r_rows = run.r.dev_rows();
    run.ro_rows = run.ro.dev_rows();
    run.args.residual = &run.r_rows;
    run.args.residual_out = &run.ro_rows;
    for (Tensor* t : {&run.y, &run.ro, &run.mean, &run.rstd, &run.scale}) t->poison();
    onorm_rows xr = run.x.dev_rows(), yr = run.y.dev_rows();
    if (c.edit) c.edit(run, xr, yr);
    const onorm_status st = onorm_norm(ctx, &xr, c.edit ? &run.args : nullptr, &yr);
    EXPECT_EQ(st, c.want) << onorm_last_error();
    EXPECT_NE(std::string(onorm_last_error()), "");
    for (Tensor* t : {&run.y, &run.ro, &run.mean, &run.rstd, &run.scale}) t->download();
    run.expect_untouched();
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, NormArgs, ::testing::ValuesIn(all_backends()), BackendName());

}  // namespace
}  // namespace onorm_test
