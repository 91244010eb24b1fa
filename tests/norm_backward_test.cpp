// onorm_norm_backward (API.md, "backward passes") on every backend: dx, dgamma and dbeta against
// the float64 reference in random combinations of dtypes, widths, strides, offsets, parameter
// dtypes, dresidual and the optional column sums, with a NaN row and a row at 1e4 + N(0,1) with
// outliers at every 256-column chunk start; the column sums over 2^20 rows, bitwise the same
// run after run; dx of a row alone equal to dx in the batch; dx in place of x or dy; the
// wrappers equal to the args function; every bad argument refused with nothing written.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <sstream>

#include "common/test_util.hpp"

namespace onorm_test {
namespace {

class NormBackward : public ::testing::TestWithParam<onorm_backend> {};

const double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Problem {
  bool layer = true;
  int64_t rows = 1, cols = 1;
  onorm_dtype xt = ONORM_F32, dyt = ONORM_F32, dxt = ONORM_F32, pt = ONORM_F32;
  int dresidual = -1;  // dtype, or -1: none
  bool gamma = true, dgamma = true, dbeta = true;
  double offset = 0;
  int64_t pad = 0;
  size_t shift = 0;  // bytes past 16-byte alignment
  bool hard_rows = true;
  int64_t outlier_every = 256;  // row 2's outliers: at every such column (chunk and slice starts)
  bool dense = false;  // every row tensor at stride cols (the GPUs' 16-byte vector path when aligned)
};

std::string describe(const Problem& p) {
  std::ostringstream s;
  s << (p.layer ? "layer_norm_backward" : "rms_norm_backward") << " x " << dtype_name(p.xt) << " dy "
    << dtype_name(p.dyt) << " dx " << dtype_name(p.dxt) << " param " << dtype_name(p.pt) << " " << p.rows << "x"
    << p.cols << " pad " << p.pad << " shift " << p.shift << " dresidual "
    << (p.dresidual >= 0 ? dtype_name(static_cast<onorm_dtype>(p.dresidual)) : "-") << " offset " << p.offset
    << " gamma " << p.gamma << " dgamma " << p.dgamma << " dbeta " << p.dbeta << (p.dense ? " dense" : "");
  return s.str();
}

// One problem: tensors in the context's memory, the forward's mean and rstd of x (taken in
// double here, rounded to float), the args pointing at them.
struct Call {
  Tensor x, dy, dr, dx, g, mean, rstd, dgamma, dbeta;
  onorm_norm_backward_args args{};
  onorm_rows dr_rows{};
  Call(onorm_context ctx, const Problem& p, std::mt19937_64& rng) {
    const int64_t s = p.cols + p.pad, more = p.dense ? 0 : 1;
    x = Tensor(ctx, p.xt, p.rows, p.cols, s, p.shift);
    dy = Tensor(ctx, p.dyt, p.rows, p.cols, s + 2 * more);
    dx = Tensor(ctx, p.dxt, p.rows, p.cols, s + more, p.shift);
    g = Tensor(ctx, p.pt, 1, p.cols);
    mean = Tensor(ctx, ONORM_F32, 1, p.rows);
    rstd = Tensor(ctx, ONORM_F32, 1, p.rows);
    dgamma = Tensor(ctx, ONORM_F32, 1, p.cols);
    dbeta = Tensor(ctx, ONORM_F32, 1, p.cols);
    const double centre = std::uniform_real_distribution<double>(-20, 20)(rng);
    // Row 1: a NaN in dy; row 2: 1e4 + N(0,1) with outliers at every 256-column chunk start.
    x.fill([&](int64_t r, int64_t c) {
      if (p.hard_rows && p.rows >= 3 && r == 2) return c % p.outlier_every == 0 ? 3e4 : cheap_normal(rng, 1e4, 1.0);
      return cheap_normal(rng, centre, 2.0);
    });
    dy.fill([&](int64_t r, int64_t c) {
      if (p.hard_rows && p.rows >= 2 && r == 1 && c == p.cols / 2) return kNaN;
      return cheap_normal(rng, 0.0, 1.0);
    });
    if (p.dresidual >= 0) {
      dr = Tensor(ctx, static_cast<onorm_dtype>(p.dresidual), p.rows, p.cols, s + 3);
      dr.fill([&](int64_t, int64_t) { return cheap_normal(rng, 0.0, 0.5); });
    }
    g.fill([&](int64_t, int64_t) { return cheap_normal(rng, 0.0, 1.0); });
    for (int64_t r = 0; r < p.rows; ++r) {
      double m = 0, v = 0;
      for (int64_t c = 0; c < p.cols; ++c) m += x.get(r, c);
      m = p.layer ? m / static_cast<double>(p.cols) : 0.0;
      for (int64_t c = 0; c < p.cols; ++c) v += (x.get(r, c) - m) * (x.get(r, c) - m);
      mean.set(0, r, m);
      rstd.set(0, r, 1.0 / std::sqrt(v / static_cast<double>(p.cols) + 1e-5));
    }
    mean.upload();
    rstd.upload();
    onorm_norm_backward_args_init(&args, p.layer ? ONORM_LAYER_NORM : ONORM_RMS_NORM);
    args.gamma = p.gamma ? g.dev() : nullptr;
    args.param_dtype = p.pt;
    args.weight_offset = p.offset;
    args.mean = p.layer ? mean.dev_f32() : nullptr;
    args.rstd = rstd.dev_f32();
    args.dgamma = p.dgamma ? dgamma.dev_f32() : nullptr;
    args.dbeta = p.layer && p.dbeta ? dbeta.dev_f32() : nullptr;
  }
  onorm_status call(onorm_context ctx, const Problem& p) {
    dr_rows = dr.dev_rows();
    args.dresidual = p.dresidual >= 0 ? &dr_rows : nullptr;
    const onorm_rows xr = x.dev_rows(), dyr = dy.dev_rows(), dxr = dx.dev_rows();
    const onorm_status st = onorm_norm_backward(ctx, &xr, &dyr, &args, &dxr);
    if (st == ONORM_OK) {
      EXPECT_EQ(onorm_synchronize(ctx), ONORM_OK);
    }
    for (Tensor* t : {&dx, &dgamma, &dbeta}) t->download();
    return st;
  }
  onorm_ref::NormBackwardResult reference(const Problem& p) const {
    onorm_ref::NormBackwardSpec sp;
    sp.layer = p.layer;
    sp.x = x.host_rows();
    sp.dy = dy.host_rows();
    const onorm_rows drh = dr.host_rows();
    sp.dresidual = p.dresidual >= 0 ? &drh : nullptr;
    sp.gamma = p.gamma ? g.host() : nullptr;
    sp.param_dtype = p.pt;
    sp.weight_offset = p.offset;
    sp.mean = mean.host_f32();
    sp.rstd = rstd.host_f32();
    return onorm_ref::compute_norm_backward(sp);
  }
  void check(const Problem& p) {
    const onorm_ref::Report rep = onorm_ref::check_norm_backward(reference(p), dx.host_rows(),
                                                                  args.dgamma ? dgamma.host_f32() : nullptr,
                                                                  args.dbeta ? dbeta.host_f32() : nullptr);
    EXPECT_TRUE(rep.ok()) << rep.describe();
    EXPECT_TRUE(dx.all_written("dx"));
    EXPECT_TRUE(dx.outside_untouched("dx"));
    if (args.dgamma) {
      EXPECT_TRUE(dgamma.all_written("dgamma"));
    }
    if (args.dbeta) {
      EXPECT_TRUE(dbeta.all_written("dbeta"));
    }
    for (Tensor* t : {&dgamma, &dbeta}) EXPECT_TRUE(t->outside_untouched("column sums"));
  }
  void expect_untouched() {
    for (Tensor* t : {&dx, &dgamma, &dbeta}) EXPECT_TRUE(t->all_poison("an output of a refused call"));
  }
};

std::vector<onorm_dtype> floats_of(onorm_backend be) {
  std::vector<onorm_dtype> floats;
  for (onorm_dtype d : float_dtypes())
    if (contract_supports(be, d)) floats.push_back(d);
  return floats;
}

TEST_P(NormBackward, AgainstTheReference) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  const std::vector<onorm_dtype> floats = floats_of(GetParam());
  auto pick = [&]() { return floats[rng() % floats.size()]; };
  const int64_t widths[] = {1, 3, 127, 1025, 4097, 65537, 64, 1024, 8192, 24};
  const double offsets[] = {0.0, 1.0, 0.5, -0.25};
  for (int k = 0; k < 80; ++k) {
    Problem p;
    p.layer = rng() % 2;
    p.cols = widths[rng() % 10];
    p.dense = rng() % 2;
    p.rows = p.cols > 5000 ? 3 : 1 + static_cast<int64_t>(rng() % 6);
    p.xt = pick();
    p.dyt = rng() % 2 ? p.xt : pick();
    p.dxt = rng() % 2 ? p.xt : pick();
    p.pt = rng() % 2 ? p.xt : pick();
    p.dresidual = rng() % 3 ? -1 : static_cast<int>(pick());
    p.offset = offsets[rng() % 4];
    p.gamma = rng() % 4 != 0;
    p.dgamma = rng() % 4 != 0;
    p.dbeta = rng() % 3 != 0;
    p.pad = rng() % 2 ? 0 : 5;
    p.shift = rng() % 2 ? 0 : 4;
    if (p.dense) {  // aligned rows of one dtype
      p.pad = 0;
      p.shift = 0;
      p.dyt = p.dxt = p.xt;
    }
    SCOPED_TRACE(describe(p));
    Call run(ctx, p, rng);
    ASSERT_EQ(run.call(ctx, p), ONORM_OK) << onorm_last_error();
    run.check(p);
  }
}

// Rows of one dtype, aligned, of each width in every dtype, the options varied case by case:
// with and without dresidual and dbeta, gamma of another dtype, weight_offset; the NaN row and
// the row far from zero with outliers at every `outlier_every` columns. rows(cols, k): case k's.
template <typename RowsOf>
void one_dtype_rows(onorm_context ctx, std::mt19937_64& rng, const std::vector<onorm_dtype>& floats,
                    std::initializer_list<int64_t> widths, RowsOf rows, int64_t outlier_every) {
  int k = 0;
  for (int64_t cols : widths)
    for (onorm_dtype dt : floats) {
      Problem p;
      p.layer = ++k % 2;
      p.cols = cols;
      p.rows = rows(cols, k);
      p.dense = true;
      p.outlier_every = outlier_every;
      p.xt = p.dyt = p.dxt = dt;
      p.pt = k % 3 ? dt : floats[rng() % floats.size()];
      p.dresidual = k % 4 == 0 ? static_cast<int>(dt) : -1;
      p.offset = k % 5 == 0 ? 1.0 : 0.0;
      p.dbeta = k % 6 != 0;
      SCOPED_TRACE(describe(p));
      Call run(ctx, p, rng);
      ASSERT_EQ(run.call(ctx, p), ONORM_OK) << onorm_last_error();
      run.check(p);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

// The GPUs' one-read rows in registers, up to 8192 columns: every width class, rows over many
// blocks (the column sums' partial rows and their merge).
TEST_P(NormBackward, OneDtypeRowsOverManyBlocks) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  one_dtype_rows(ctx, rng, floats_of(GetParam()), {8, 64, 100, 128, 256, 512, 1000, 1024, 2048, 4000, 4096, 8192, 8200},
                 [](int64_t cols, int) { return std::min<int64_t>(3000, std::max<int64_t>(300, 600000 / cols)); }, 256);
}

// Rows longer than a block holds (CUDA sm_90+: a cluster of up to 16 blocks per row, slices of
// 2732..16384 columns; the rest on the three-read kernels): over many clusters (their partial
// rows' merge) and over one, outliers at every vector (so at every slice start).
TEST_P(NormBackward, OneDtypeRowsOverClusters) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  one_dtype_rows(ctx, rng, floats_of(GetParam()), {8196, 12288, 20000, 65536, 65544, 131072, 262144},
                 [](int64_t cols, int k) {
                   return k % 7 == 0 ? 1 : std::min<int64_t>(300, std::max<int64_t>(3, (int64_t(1) << 19) / cols));
                 },
                 4);
}

// dgamma and dbeta over 2^20 rows: within the contract's bound (a running float sum is not),
// and the same bits on a second run.
TEST_P(NormBackward, ColumnSumsOverAMillionRows) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  for (onorm_dtype dt : {ONORM_BF16, ONORM_F32}) {
    if (!contract_supports(GetParam(), dt)) continue;
    Problem p;
    p.rows = int64_t(1) << 20;
    p.cols = 24;
    p.xt = p.dyt = p.dxt = p.pt = dt;
    p.hard_rows = false;
    p.dense = dt == ONORM_BF16;
    SCOPED_TRACE(describe(p));
    Call run(ctx, p, rng);
    ASSERT_EQ(run.call(ctx, p), ONORM_OK) << onorm_last_error();
    run.check(p);
    const std::vector<unsigned char> dg = run.dgamma.image(), db = run.dbeta.image();
    run.dgamma.poison();
    run.dbeta.poison();
    run.dgamma.upload();
    run.dbeta.upload();
    ASSERT_EQ(run.call(ctx, p), ONORM_OK) << onorm_last_error();
    EXPECT_TRUE(run.dgamma.same_image(dg, "dgamma, second run"));
    EXPECT_TRUE(run.dbeta.same_image(db, "dbeta, second run"));
  }
}

// Batch invariance: dx of each row alone is the same bits as in the batch.
TEST_P(NormBackward, RowsAloneEqualRowsInTheBatch) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  for (int64_t cols : {3000, 20000})
  for (bool layer : {true, false}) {
    Problem p;
    p.layer = layer;
    p.rows = 6;
    p.cols = cols;
    p.xt = p.dyt = p.dxt = p.pt = ONORM_BF16;
    p.dresidual = ONORM_F32;
    p.offset = 1.0;
    p.dense = layer;
    SCOPED_TRACE(describe(p));
    Call batch(ctx, p, rng);
    ASSERT_EQ(batch.call(ctx, p), ONORM_OK) << onorm_last_error();
    for (int64_t r = 0; r < p.rows; ++r) {
      Tensor dx(ctx, p.dxt, 1, p.cols);
      onorm_rows x1 = batch.x.dev_rows(), dy1 = batch.dy.dev_rows(), dr1 = batch.dr.dev_rows(), dx1 = dx.dev_rows();
      x1.data = static_cast<char*>(x1.data) + r * x1.row_stride * 2;
      dy1.data = static_cast<char*>(dy1.data) + r * dy1.row_stride * 2;
      dr1.data = static_cast<char*>(dr1.data) + r * dr1.row_stride * 4;
      x1.rows = dy1.rows = dr1.rows = 1;
      onorm_norm_backward_args a = batch.args;
      a.dresidual = &dr1;
      a.mean = layer ? batch.mean.dev_f32() + r : nullptr;
      a.rstd = batch.rstd.dev_f32() + r;
      a.dgamma = a.dbeta = nullptr;
      ASSERT_EQ(onorm_norm_backward(ctx, &x1, &dy1, &a, &dx1), ONORM_OK) << onorm_last_error();
      ASSERT_EQ(onorm_synchronize(ctx), ONORM_OK);
      dx.download();
      EXPECT_EQ(std::memcmp(dx.host(), static_cast<const char*>(batch.dx.host()) + r * batch.dx.stride() * 2, p.cols * 2), 0)
          << "dx of row " << r;
    }
  }
}

// dx on x or on dy, and the wrappers: the same bits as onorm_norm_backward out of place.
TEST_P(NormBackward, InPlaceAndWrappersEqualTheArgsCall) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  for (int64_t cols : {1000, 20000})
  for (bool layer : {true, false})
    for (int mode = 0; mode < 3; ++mode) {
      Problem p;
      p.layer = layer;
      p.rows = 4;
      p.cols = cols;
      p.dense = cols > 8192;  // aligned: the CUDA clusters' rows
      p.xt = p.dyt = p.dxt = p.pt = ONORM_BF16;
      SCOPED_TRACE(describe(p) + " mode " + std::to_string(mode));
      Call ref(ctx, p, rng);
      ASSERT_EQ(ref.call(ctx, p), ONORM_OK) << onorm_last_error();
      Call run(ctx, p, rng);  // other data, overwritten with ref's
      for (Tensor* t : {&run.x, &run.dy})
        for (int64_t i = 0; i < p.rows; ++i)
          for (int64_t c = 0; c < p.cols; ++c) t->set(i, c, (t == &run.x ? ref.x : ref.dy).get(i, c));
      run.x.upload();
      run.dy.upload();
      const onorm_rows xr = run.x.dev_rows(), dyr = run.dy.dev_rows();
      onorm_rows dxr = run.dx.dev_rows();
      Tensor* got = &run.dx;
      if (mode == 0) { dxr = xr; got = &run.x; }
      if (mode == 1) { dxr = dyr; got = &run.dy; }
      const void* gamma = ref.args.gamma == ref.g.dev() ? run.g.dev() : nullptr;
      for (int64_t c = 0; c < p.cols; ++c) run.g.set(0, c, ref.g.get(0, c));
      run.g.upload();
      const onorm_status st =
          layer ? onorm_layer_norm_backward(ctx, &xr, &dyr, gamma, ref.mean.dev_f32(), ref.rstd.dev_f32(), &dxr,
                                            run.dgamma.dev_f32(), run.dbeta.dev_f32())
                : onorm_rms_norm_backward(ctx, &xr, &dyr, gamma, ref.rstd.dev_f32(), &dxr, run.dgamma.dev_f32());
      ASSERT_EQ(st, ONORM_OK) << onorm_last_error();
      ASSERT_EQ(onorm_synchronize(ctx), ONORM_OK);
      got->download();
      run.dgamma.download();
      run.dbeta.download();
      for (int64_t i = 0; i < p.rows; ++i)
        ASSERT_EQ(std::memcmp(static_cast<const char*>(got->host()) + got->index(i, 0) * 2,
                              static_cast<const char*>(ref.dx.host()) + ref.dx.index(i, 0) * 2, p.cols * 2), 0)
            << "dx row " << i;
      EXPECT_EQ(std::memcmp(run.dgamma.host(), ref.dgamma.host(), p.cols * 4), 0) << "dgamma";
      if (layer) {
        EXPECT_EQ(std::memcmp(run.dbeta.host(), ref.dbeta.host(), p.cols * 4), 0) << "dbeta";
      }
    }
}

// Every bad argument: INVALID_ARGUMENT (UNSUPPORTED for a valid dtype not taken) with a message,
// and nothing written.
TEST_P(NormBackward, BadArgumentsWriteNothing) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  Problem base;
  base.rows = 3;
  base.cols = 64;
  base.dresidual = ONORM_F32;
  using Rows = onorm_rows;
  struct Case {
    const char* name;
    onorm_status want;
    std::function<void(Call&, Rows& x, Rows& dy, Rows& dx)> edit;
  };
  const onorm_status kInvalid = ONORM_ERROR_INVALID_ARGUMENT;
  const std::vector<Case> cases = {
      {"args NULL", kInvalid, nullptr},
      {"struct_size too small", kInvalid, [](Call& r, Rows&, Rows&, Rows&) { r.args.struct_size = 8; }},
      {"kind not an onorm_norm_kind", kInvalid,
       [](Call& r, Rows&, Rows&, Rows&) { r.args.kind = static_cast<onorm_norm_kind>(7); }},
      {"RMSNorm with mean", kInvalid, [](Call& r, Rows&, Rows&, Rows&) { r.args.kind = ONORM_RMS_NORM; r.args.dbeta = nullptr; }},
      {"RMSNorm with dbeta", kInvalid, [](Call& r, Rows&, Rows&, Rows&) { r.args.kind = ONORM_RMS_NORM; r.args.mean = nullptr; }},
      {"mean NULL", kInvalid, [](Call& r, Rows&, Rows&, Rows&) { r.args.mean = nullptr; }},
      {"rstd NULL", kInvalid, [](Call& r, Rows&, Rows&, Rows&) { r.args.rstd = nullptr; }},
      {"x NULL data", kInvalid, [](Call&, Rows& x, Rows&, Rows&) { x.data = nullptr; }},
      {"dy of another shape", kInvalid, [](Call&, Rows&, Rows& dy, Rows&) { dy.cols -= 1; }},
      {"dresidual of another shape", kInvalid, [](Call& r, Rows&, Rows&, Rows&) { r.dr_rows.rows -= 1; }},
      {"dx row_stride < cols", kInvalid, [](Call&, Rows&, Rows&, Rows& dx) { dx.row_stride = dx.cols - 1; }},
      {"weight_offset inf", kInvalid,
       [](Call& r, Rows&, Rows&, Rows&) { r.args.weight_offset = std::numeric_limits<double>::infinity(); }},
      {"param_dtype not an onorm_dtype", kInvalid,
       [](Call& r, Rows&, Rows&, Rows&) { r.args.param_dtype = static_cast<onorm_dtype>(42); }},
      {"param_dtype i8", ONORM_ERROR_UNSUPPORTED, [](Call& r, Rows&, Rows&, Rows&) { r.args.param_dtype = ONORM_I8; }},
      {"dx i8", ONORM_ERROR_UNSUPPORTED, [](Call&, Rows&, Rows&, Rows& dx) { dx.dtype = ONORM_I8; }},
      {"dy f8", ONORM_ERROR_UNSUPPORTED, [](Call&, Rows&, Rows& dy, Rows&) { dy.dtype = ONORM_F8_E4M3; }},
      {"dx on dresidual", kInvalid, [](Call& r, Rows&, Rows&, Rows& dx) { dx = r.dr_rows; }},
      {"dx on x with another stride", kInvalid,
       [](Call&, Rows& x, Rows&, Rows& dx) {
         dx = x;
         dx.row_stride = x.row_stride + 1;
       }},
      {"dgamma on dbeta", kInvalid, [](Call& r, Rows&, Rows&, Rows&) { r.args.dbeta = r.args.dgamma + 1; }},
      {"dgamma on dx", kInvalid, [](Call& r, Rows&, Rows&, Rows& dx) { r.args.dgamma = static_cast<float*>(dx.data); }},
      {"dgamma on x", kInvalid, [](Call& r, Rows& x, Rows&, Rows&) { r.args.dgamma = static_cast<float*>(x.data); }},
      {"dbeta on rstd", kInvalid, [](Call& r, Rows&, Rows&, Rows&) { r.args.dbeta = r.rstd.dev_f32(); }},
      {"dx on mean", kInvalid,
       [](Call& r, Rows&, Rows&, Rows& dx) {
         dx.data = r.mean.dev();
         dx.rows = 1;
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Call run(ctx, base, rng);
    run.dr_rows = run.dr.dev_rows();
    run.args.dresidual = &run.dr_rows;
    for (Tensor* t : {&run.dx, &run.dgamma, &run.dbeta}) t->poison();
    for (Tensor* t : {&run.dx, &run.dgamma, &run.dbeta}) t->upload();
    onorm_rows xr = run.x.dev_rows(), dyr = run.dy.dev_rows(), dxr = run.dx.dev_rows();
    if (c.edit) c.edit(run, xr, dyr, dxr);
    const onorm_status st = onorm_norm_backward(ctx, &xr, &dyr, c.edit ? &run.args : nullptr, &dxr);
    EXPECT_EQ(st, c.want) << onorm_last_error();
    EXPECT_NE(std::string(onorm_last_error()), "");
    for (Tensor* t : {&run.dx, &run.dgamma, &run.dbeta}) t->download();
    run.expect_untouched();
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, NormBackward, ::testing::ValuesIn(all_backends()), BackendName());

}  // namespace
}  // namespace onorm_test
