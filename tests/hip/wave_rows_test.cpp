// The HIP backend's row plan (backends/hip/row_plan.hpp: its shapes for 32- and 64-lane warps)
// with the shared device templates (backends/gpu), run on the host SIMT emulator with warps of
// 32 and of 64 lanes, against the float64 reference and the contract's bounds. This is where
// the wave64 (CDNA) paths, which no machine here can run, execute: every regime (row groups
// of up to 64 lanes, a block per row, split rows merged through the algebra), every op, the
// three dtypes, strides, unaligned rows, gamma/beta and the statistics outputs. The emulator
// also reports any shuffle that names a lane which is not there (see simt.hpp).
//
// ONORM_SIM_WIDTH_MISMATCH (a build option of the test, for checking that this test can fail):
// runs the W = 64 plan on a 32-lane emulated warp and vice versa.
#include <gtest/gtest.h>

#include <cstdio>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "hard_rows.hpp"
#include "reference.hpp"
#include "simt_device.hpp"
// After the emulator's names: the device templates (through the sim shim) and the plan.
#include "gpu/row_plan.hpp"
#include "sim_launcher.hpp"

namespace {

// The norms' statistics outputs by their request slots (the op must be set first).
void set_mean(onorm_request& q, float* p) {
  if (q.op == ONORM_OP_LAYER_NORM) q.row_out[0] = p;
}
void set_rstd(onorm_request& q, float* p) { q.row_out[q.op == ONORM_OP_LAYER_NORM ? 1 : 0] = p; }
float* mean_of(const onorm_request& q) { return q.op == ONORM_OP_LAYER_NORM ? q.row_out[0] : nullptr; }
float* rstd_of(const onorm_request& q) {
  return q.op == ONORM_OP_LAYER_NORM ? q.row_out[1] : q.op == ONORM_OP_RMS_NORM ? q.row_out[0] : nullptr;
}

using onorm_ref::Op;

namespace gpu = onorm::gpu;
namespace ops = onorm::core::ops;

using onorm_sim_test::SimLauncher;

size_t esize(onorm_dtype d) { return d == ONORM_F32 ? 4 : 2; }
const char* dname(onorm_dtype d) { return d == ONORM_F32 ? "f32" : d == ONORM_F16 ? "f16" : "bf16"; }
onorm_op to_op(Op op) {
  switch (op) {
    case Op::softmax: return ONORM_OP_SOFTMAX;
    case Op::log_softmax: return ONORM_OP_LOG_SOFTMAX;
    case Op::layer_norm: return ONORM_OP_LAYER_NORM;
    case Op::softmax_backward: return ONORM_OP_SOFTMAX_BACKWARD;
    case Op::log_softmax_backward: return ONORM_OP_LOG_SOFTMAX_BACKWARD;
    default: return ONORM_OP_RMS_NORM;
  }
}

struct Case {
  int width;  // template and emulated warp width
  Op op;
  onorm_dtype in, out;
  int64_t rows, cols;
  bool padded;  // strides > cols, rows one element off alignment, gamma/beta/mean/rstd on
};

std::string describe(const Case& c) {
  char b[160];
  std::snprintf(b, sizeof b, "W%d %s %s->%s %lldx%lld%s", c.width, onorm_ref::op_name(c.op), dname(c.in),
                dname(c.out), static_cast<long long>(c.rows), static_cast<long long>(c.cols),
                c.padded ? " padded" : "");
  return b;
}

// Runs one case through plan_any<W> on the emulator and checks it.
template <int W>
void run_case(const Case& c, std::mt19937_64& rng) {
  SCOPED_TRACE(describe(c));
  const int64_t xs = c.cols + (c.padded ? 3 : 0), ys = c.cols + (c.padded ? 5 : 0);
  const size_t xoff = c.padded ? 1 : 0, yoff = c.padded ? 1 : 0;
  // 64-byte aligned buffers, offset by whole elements.
  std::vector<unsigned char> xbuf((c.rows * xs + xoff) * esize(c.in) + 64), ybuf((c.rows * ys + yoff) * esize(c.out) + 64);
  auto align64 = [](std::vector<unsigned char>& v) {
    return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
  };
  void* x = align64(xbuf) + xoff * esize(c.in);
  void* y = align64(ybuf) + yoff * esize(c.out);
  std::memset(align64(ybuf), 0xff, c.rows * ys * esize(c.out));  // NaN poison: unwritten shows
  std::normal_distribution<double> n01(0.0, 1.0);
  const double center = c.op == Op::layer_norm ? 3.0 : 0.0, scale = c.op == Op::softmax ? 4.0 : 1.5;
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t k = 0; k < c.cols; ++k) onorm_ref::encode(center + scale * n01(rng), x, c.in, r * xs + k);
  std::vector<unsigned char> gbuf(c.cols * esize(c.in) + 64), bbuf(c.cols * esize(c.in) + 64);
  void* gamma = nullptr;
  void* beta = nullptr;
  std::vector<float> mean, rstd;
  if (c.padded) {
    gamma = align64(gbuf) + esize(c.in);  // off alignment too
    beta = align64(bbuf);
    for (int64_t k = 0; k < c.cols; ++k) {
      onorm_ref::encode(1.0 + 0.5 * n01(rng), gamma, c.in, k);
      onorm_ref::encode(n01(rng), beta, c.in, k);
    }
    mean.assign(c.rows, -7.0f);
    rstd.assign(c.rows, -7.0f);
  }
  onorm_request q{};
  q.op = to_op(c.op);
  q.in[0] = onorm_rows{x, c.in, c.rows, c.cols, xs};
  q.out[0] = onorm_rows{y, c.out, c.rows, c.cols, ys};
  const bool norm = c.op == Op::layer_norm || c.op == Op::rms_norm;
  q.col[0] = norm ? gamma : nullptr;
  q.col[1] = c.op == Op::layer_norm ? beta : nullptr;
  q.col_dtype = c.in;
  q.param[0] = 1e-5;
  set_mean(q, c.op == Op::layer_norm && !mean.empty() ? mean.data() : nullptr);
  set_rstd(q, norm && !rstd.empty() ? rstd.data() : nullptr);

#if defined(ONORM_SIM_WIDTH_MISMATCH)
  SimLauncher launcher(W == 64 ? 32 : 64);
#else
  SimLauncher launcher(W);
#endif
  char err[256] = {0};
  const onorm_status s = onorm::gpu::plan_any<W>(q, launcher, err, sizeof err);
  std::string errors;
  for (const auto& e : launcher.errors()) errors += "\n  " + e;
  ASSERT_TRUE(launcher.errors().empty()) << "emulator: " << launcher.shapes() << errors;
  ASSERT_EQ(s, ONORM_OK) << err;

  const onorm_ref::Result ref = onorm_ref::compute(c.op, q.in[0], q.col[0], q.col[1], q.param[0]);
  const onorm_ref::Report rep = onorm_ref::check(c.op, ref, q.out[0], q.col[0], c.in, mean_of(q), rstd_of(q));
  EXPECT_TRUE(rep.ok()) << launcher.shapes() << ": " << rep.describe();
}

// The column vectors of another dtype than x (param_dtype) with an offset (weight_offset) through
// plan_any<W> on the emulator: every placement's column load (load_col_with), against the
// reference of onorm_norm.
template <int W>
void run_columns_case(Op op, onorm_dtype xt, onorm_dtype pt, double offset, int64_t rows, int64_t cols,
                      std::mt19937_64& rng) {
  SCOPED_TRACE("W" + std::to_string(W) + " " + onorm_ref::op_name(op) + " x " + dname(xt) + " param " + dname(pt) +
               " offset " + std::to_string(offset) + " " + std::to_string(rows) + "x" + std::to_string(cols));
  auto align64 = [](std::vector<unsigned char>& v) {
    return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
  };
  std::vector<unsigned char> xbuf(rows * cols * esize(xt) + 64), ybuf(rows * cols * 4 + 64, 0xff),
      gbuf(cols * esize(pt) + 64), bbuf(cols * esize(pt) + 64);
  void* x = align64(xbuf);
  void* y = align64(ybuf);
  void* gamma = align64(gbuf);
  void* beta = align64(bbuf);
  std::normal_distribution<double> n01(0.0, 1.0);
  for (int64_t k = 0; k < rows * cols; ++k) onorm_ref::encode(2.0 + 1.5 * n01(rng), x, xt, k);
  for (int64_t k = 0; k < cols; ++k) {
    onorm_ref::encode(0.3 * n01(rng), gamma, pt, k);
    onorm_ref::encode(n01(rng), beta, pt, k);
  }
  std::vector<float> mean(rows, -7.0f), rstd(rows, -7.0f);
  onorm_request q{};
  q.op = to_op(op);
  q.inputs = q.outputs = 1;
  q.in[0] = onorm_rows{x, xt, rows, cols, cols};
  q.out[0] = onorm_rows{y, ONORM_F32, rows, cols, cols};
  q.col[0] = gamma;
  q.col[1] = op == Op::layer_norm ? beta : nullptr;
  q.col_dtype = pt;
  q.col_offset[0] = offset;
  q.param[0] = 1e-5;
  set_mean(q, op == Op::layer_norm ? mean.data() : nullptr);
  set_rstd(q, rstd.data());
  SimLauncher launcher(W);
  char err[256] = {0};
  const onorm_status s = onorm::gpu::plan_any<W>(q, launcher, err, sizeof err);
  ASSERT_TRUE(launcher.errors().empty()) << "emulator: " << launcher.shapes() << launcher.errors()[0];
  ASSERT_EQ(s, ONORM_OK) << err;
  onorm_ref::NormSpec spec;
  spec.layer = op == Op::layer_norm;
  spec.x = q.in[0];
  spec.gamma = gamma;
  spec.beta = q.col[1];
  spec.param_dtype = pt;
  spec.eps = 1e-5;
  spec.weight_offset = offset;
  const onorm_ref::Report rep = onorm_ref::check_norm(spec, onorm_ref::compute_norm(spec), q.out[0], nullptr, 0,
                                                      mean_of(q), rstd_of(q), nullptr);
  EXPECT_TRUE(rep.ok()) << launcher.shapes() << ": " << rep.describe();
}

TEST(WaveRowsColumns, ParamDtypeAndOffset) {
  std::mt19937_64 rng(7);
  const onorm_dtype dts[] = {ONORM_F32, ONORM_F16, ONORM_BF16};
  for (int64_t cols : {3, 777, 4095, 16385, 40000})
    for (onorm_dtype xt : dts)
      for (onorm_dtype pt : dts) {
        const int64_t rows = cols > 10000 ? 2 : 5;
        const double offset = pt == xt ? 1.0 : 0.0;  // the offset alone, and the dtype alone
        run_columns_case<32>(Op::layer_norm, xt, pt, offset, rows, cols, rng);
        run_columns_case<64>(Op::rms_norm, xt, pt, pt == ONORM_F32 ? 1.0 : offset, rows, cols, rng);
        run_columns_case<32>(Op::rms_norm, xt, pt, 0.1, rows, cols, rng);  // no float holds it: folded
        if (HasFatalFailure()) return;
      }
}

using Param = std::tuple<int, Op, std::pair<onorm_dtype, onorm_dtype>>;
class WaveRows : public ::testing::TestWithParam<Param> {};

// Row lengths at and around every shape boundary of both tables, and split rows (K = 2, 3).
const std::vector<int64_t>& widths() {
  static const std::vector<int64_t> w = {1, 3, 31, 33, 64, 129, 255, 257, 511, 777, 1024, 1500, 2048, 2049,
                                         4095, 8200, 16384, 16385, 40000};
  return w;
}

TEST_P(WaveRows, MatchesReference) {
  const auto [width, op, dt] = GetParam();
  std::mt19937_64 rng(1234 + width);
  int index = 0;
  for (int64_t cols : widths()) {
    // Short rows: more rows than one block holds, and a partial last block.
    const int64_t rows = cols <= 256 ? 70 : cols <= 4096 ? 3 : 2;
    const Case c{width, op, dt.first, dt.second, rows, cols, (index++ % 2) == 1};
    if (width == 64) run_case<64>(c, rng);
    else run_case<32>(c, rng);
    if (HasFatalFailure()) return;
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& i) {
  const auto [w, op, dt] = i.param;
  return "W" + std::to_string(w) + "_" + onorm_ref::op_name(op) + "_" + dname(dt.first) + "_" + dname(dt.second);
}

INSTANTIATE_TEST_SUITE_P(
    HipPlan, WaveRows,
    ::testing::Combine(::testing::Values(32, 64),
                       ::testing::Values(Op::softmax, Op::log_softmax, Op::layer_norm, Op::rms_norm),
                       ::testing::Values(std::make_pair(ONORM_F32, ONORM_F32), std::make_pair(ONORM_BF16, ONORM_BF16),
                                         std::make_pair(ONORM_F16, ONORM_F32))),
    param_name);

// Special rows through the 64-lane shapes: all -inf, a NaN, +inf.
TEST(WaveRowsSpecial, MaskedAndNaNRows) {
  for (int W : {32, 64}) {
    for (int64_t cols : {17, 300, 3000, 20000}) {
      std::vector<float> x(3 * cols, 0.5f), y(3 * cols, 7.0f);
      for (int64_t k = 0; k < cols; ++k) x[k] = -HUGE_VALF;  // row 0: masked
      x[cols + cols / 2] = NAN;                              // row 1: NaN
      onorm_request q{};
      q.op = ONORM_OP_SOFTMAX;
      q.in[0] = onorm_rows{x.data(), ONORM_F32, 3, cols, cols};
      q.out[0] = onorm_rows{y.data(), ONORM_F32, 3, cols, cols};
      SimLauncher launcher(W);
      char err[256] = {0};
      const onorm_status s = W == 64 ? onorm::gpu::plan_any<64>(q, launcher, err, sizeof err)
                                     : onorm::gpu::plan_any<32>(q, launcher, err, sizeof err);
      ASSERT_TRUE(launcher.errors().empty()) << launcher.errors()[0];
      ASSERT_EQ(s, ONORM_OK) << err;
      for (int64_t k = 0; k < cols; ++k) {
        ASSERT_EQ(y[k], 0.0f) << "W" << W << " cols " << cols << " masked row col " << k;
        ASSERT_TRUE(std::isnan(y[cols + k])) << "W" << W << " cols " << cols << " NaN row col " << k;
        ASSERT_NEAR(y[2 * cols + k], 1.0 / cols, 1e-5 / cols) << "W" << W << " cols " << cols;
      }
    }
  }
}

// Norm rows whose finite values overflow the float sums (API.md: finite inputs never overflow
// inside): 1e19 * N(0,1) (the sum of squares overflows), 1e30 + 1e29 * N(0,1), and values near
// 1.5e38 (the plain sum overflows too), mixed with ordinary rows, a row holding +inf and one
// holding a NaN. The kernels recompute such rows' statistics in double (gpu/f64_fallback.hpp). Every
// width of the plan: row groups of several rows per warp (where one row overflows and its
// neighbours in the warp do not), a block per row, split rows; gamma/beta and the mean/rstd
// outputs on. Then the same call with the special rows replaced by ordinary ones: the ordinary
// rows must come out bitwise the same (the fallback leaves rows that did not overflow alone).
double huge_value(int kind, double ordinary, std::mt19937_64& rng) {
  std::normal_distribution<double> n01(0.0, 1.0);
  switch (kind) {
    case 0: return 1e19 * n01(rng);
    case 1: return 1e30 + 1e29 * n01(rng);
    case 3: return 1e38 * std::min(3.0, std::max(0.5, 1.5 + 0.25 * n01(rng)));
    default: return ordinary;
  }
}
// Row r's kind: 0, 1, 3 huge; 6 +inf at one column; 7 NaN at one column; others ordinary.
int row_kind(int64_t r) { return static_cast<int>(r % 9); }
bool special_row(int64_t r) { const int k = row_kind(r); return k == 0 || k == 1 || k == 3 || k == 6 || k == 7; }

template <int W>
void run_huge(Op op, onorm_dtype dt, int64_t cols, bool padded, std::mt19937_64& rng) {
  const int64_t rows = cols <= 256 ? 70 : 9;
  char what[160];
  std::snprintf(what, sizeof what, "W%d %s %s %lldx%lld%s", W, onorm_ref::op_name(op), dname(dt),
                static_cast<long long>(rows), static_cast<long long>(cols), padded ? " padded" : "");
  SCOPED_TRACE(what);
  const int64_t xs = cols + (padded ? 3 : 0), ys = cols + (padded ? 5 : 0);
  const size_t off = padded ? 1 : 0, es = esize(dt);
  auto align64 = [](std::vector<unsigned char>& v) {
    return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
  };
  std::vector<unsigned char> xbuf((rows * xs + off) * es + 64), gbuf(cols * es + 64), bbuf(cols * es + 64);
  void* x = align64(xbuf) + off * es;
  void* gamma = align64(gbuf) + off * es;
  void* beta = align64(bbuf);
  std::normal_distribution<double> n01(0.0, 1.0);
  const double center = op == Op::layer_norm ? 3.0 : 0.0;
  for (int64_t k = 0; k < cols; ++k) {
    onorm_ref::encode(1.0 + 0.5 * n01(rng), gamma, dt, k);
    onorm_ref::encode(n01(rng), beta, dt, k);
  }
  std::vector<double> ordinary(rows * cols);
  for (auto& o : ordinary) o = center + 1.5 * n01(rng);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) {
      double v = huge_value(row_kind(r), ordinary[r * cols + k], rng);
      if (row_kind(r) == 6 && k == cols / 2) v = HUGE_VAL;
      if (row_kind(r) == 7 && k == cols / 3) v = NAN;
      onorm_ref::encode(v, x, dt, r * xs + k);
    }
  }
  struct Out {
    std::vector<unsigned char> ybuf;
    void* y;
    std::vector<float> mean, rstd;
  };
  auto call = [&](void* xin, Out& o) {
    o.ybuf.assign((rows * ys + off) * es + 64, 0xff);  // NaN poison: unwritten shows
    o.y = align64(o.ybuf) + off * es;
    o.mean.assign(rows, -7.0f);
    o.rstd.assign(rows, -7.0f);
    onorm_request q{};
    q.op = to_op(op);
    q.in[0] = onorm_rows{xin, dt, rows, cols, xs};
    q.out[0] = onorm_rows{o.y, dt, rows, cols, ys};
    q.col[0] = gamma;
    q.col[1] = op == Op::layer_norm ? beta : nullptr;
    q.col_dtype = dt;
    q.param[0] = 1e-5;
    set_mean(q, op == Op::layer_norm ? o.mean.data() : nullptr);
    set_rstd(q, o.rstd.data());
    SimLauncher launcher(W);
    char err[256] = {0};
    const onorm_status s = onorm::gpu::plan_any<W>(q, launcher, err, sizeof err);
    std::string errors;
    for (const auto& e : launcher.errors()) errors += "\n  " + e;
    EXPECT_TRUE(launcher.errors().empty()) << "emulator: " << launcher.shapes() << errors;
    EXPECT_EQ(s, ONORM_OK) << err;
    return std::make_tuple(q, launcher.shapes(), launcher.errors().empty() && s == ONORM_OK);
  };
  Out got;
  const auto [q, shapes, ran] = call(x, got);
  if (!ran) return;
  const onorm_ref::Result ref = onorm_ref::compute(op, q.in[0], q.col[0], q.col[1], q.param[0]);
  const onorm_ref::Report rep = onorm_ref::check(op, ref, q.out[0], q.col[0], dt, mean_of(q), rstd_of(q));
  EXPECT_TRUE(rep.ok()) << shapes << ": " << rep.describe();
  // The special rows' statistics were exercised: finite where the exact ones are.
  for (int64_t r = 0; r < rows; ++r) {
    if (row_kind(r) == 0 || row_kind(r) == 1 || row_kind(r) == 3) {
      const bool good = std::isfinite(got.rstd[r]) && got.rstd[r] > 0 &&
                        (op != Op::layer_norm || std::isfinite(got.mean[r]));
      ASSERT_TRUE(good) << shapes << ": row " << r << " mean " << got.mean[r] << " rstd " << got.rstd[r];
    }
  }
  // In place (y == x) gives the same bits: the fallback reads the row again, which a split
  // row must do before any of its blocks writes (the two-read schedule's norm_stats_kernel).
  {
    std::vector<unsigned char> ibuf(xbuf.size());
    void* xi = align64(ibuf) + off * es;
    std::memcpy(xi, x, size_t(rows * xs) * es);
    std::vector<float> imean(rows, -7.0f), irstd(rows, -7.0f);
    onorm_request qi = q;
    qi.in[0].data = xi;
    qi.out[0] = onorm_rows{xi, dt, rows, cols, xs};
    set_mean(qi, op == Op::layer_norm ? imean.data() : nullptr);
    set_rstd(qi, irstd.data());
    SimLauncher li(W);
    char err[256] = {0};
    ASSERT_EQ(onorm::gpu::plan_any<W>(qi, li, err, sizeof err), ONORM_OK) << err;
    ASSERT_TRUE(li.errors().empty()) << li.shapes();
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(0, std::memcmp(static_cast<unsigned char*>(xi) + r * xs * es,
                               static_cast<unsigned char*>(got.y) + r * ys * es, cols * es))
          << shapes << ": in place, row " << r << " differs from out of place";
      ASSERT_EQ(0, std::memcmp(&irstd[r], &got.rstd[r], sizeof(float))) << "in place, row " << r;
      if (op == Op::layer_norm) {
        ASSERT_EQ(0, std::memcmp(&imean[r], &got.mean[r], sizeof(float))) << "in place, row " << r;
      }
    }
  }
  // The same call with the special rows made ordinary: the ordinary rows are bitwise unchanged.
  std::vector<unsigned char> x2buf(xbuf.size());
  void* x2 = align64(x2buf) + off * es;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) onorm_ref::encode(ordinary[r * cols + k], x2, dt, r * xs + k);
  Out plain;
  if (!std::get<2>(call(x2, plain))) return;
  for (int64_t r = 0; r < rows; ++r) {
    if (special_row(r)) continue;
    ASSERT_EQ(0, std::memcmp(static_cast<unsigned char*>(got.y) + r * ys * es,
                             static_cast<unsigned char*>(plain.y) + r * ys * es, cols * es))
        << "ordinary row " << r << " changed by its special neighbours";
    ASSERT_EQ(0, std::memcmp(&got.rstd[r], &plain.rstd[r], sizeof(float))) << "row " << r;
    if (op == Op::layer_norm) {
      ASSERT_EQ(0, std::memcmp(&got.mean[r], &plain.mean[r], sizeof(float))) << "row " << r;
    }
  }
}

using HugeParam = std::tuple<int, Op, onorm_dtype>;
class WaveRowsHuge : public ::testing::TestWithParam<HugeParam> {};

TEST_P(WaveRowsHuge, NormsOfHugeFiniteValues) {
  const auto [width, op, dt] = GetParam();
  std::mt19937_64 rng(77 + width);
  int index = 0;
  for (int64_t cols : widths()) {
    const bool padded = (index++ % 2) == 1;
    if (width == 64) run_huge<64>(op, dt, cols, padded, rng);
    else run_huge<32>(op, dt, cols, padded, rng);
    if (::testing::Test::HasFailure()) return;
  }
}

std::string huge_param_name(const ::testing::TestParamInfo<HugeParam>& i) {
  const auto [w, op, dt] = i.param;
  return "W" + std::to_string(w) + "_" + onorm_ref::op_name(op) + "_" + dname(dt);
}

INSTANTIATE_TEST_SUITE_P(
    HipPlan, WaveRowsHuge,
    ::testing::Combine(::testing::Values(32, 64), ::testing::Values(Op::layer_norm, Op::rms_norm),
                       ::testing::Values(ONORM_F32, ONORM_BF16)),
    huge_param_name);

// The staged path (gpu/staged_kernel.hpp; the CUDA backend's medium/long rows) with
// K == 1, a block per row in a persistent grid, the only staged schedule the emulator can run
// (K > 1 waits on other blocks' flags): the same huge rows, through staged_output's check.
template <int W, typename OpT, typename In>
void run_staged_huge(onorm_dtype dt, int64_t cols, std::mt19937_64& rng) {
  constexpr int kBlock = 256;
  const int64_t rows = 9;
  SCOPED_TRACE("staged_kernel W" + std::to_string(W) + " " + dname(dt) + " cols " + std::to_string(cols));
  const Op op = std::is_same<OpT, ops::LayerNorm>::value ? Op::layer_norm : Op::rms_norm;
  const size_t es = esize(dt);
  std::vector<unsigned char> xv(rows * cols * es + 64), yv(rows * cols * es + 64, 0xff), gv(cols * es + 64),
      bv(cols * es + 64);
  auto align64 = [](std::vector<unsigned char>& v) {
    return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
  };
  void* x = align64(xv);
  void* y = align64(yv);
  void* gamma = align64(gv);
  void* beta = align64(bv);
  std::normal_distribution<double> n01(0.0, 1.0);
  for (int64_t k = 0; k < cols; ++k) {
    onorm_ref::encode(1.0 + 0.5 * n01(rng), gamma, dt, k);
    onorm_ref::encode(n01(rng), beta, dt, k);
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) {
      double v = huge_value(row_kind(r), 3.0 + 1.5 * n01(rng), rng);
      if (row_kind(r) == 6 && k == cols / 2) v = HUGE_VAL;
      if (row_kind(r) == 7 && k == cols / 3) v = NAN;
      onorm_ref::encode(v, x, dt, r * cols + k);
    }
  std::vector<float> mean(rows, -7.0f), rstd(rows, -7.0f);
  onorm_request q{};
  q.op = to_op(op);
  q.in[0] = onorm_rows{x, dt, rows, cols, cols};
  q.out[0] = onorm_rows{y, dt, rows, cols, cols};
  q.col[0] = gamma;
  q.col[1] = op == Op::layer_norm ? beta : nullptr;
  q.col_dtype = dt;
  q.param[0] = 1e-5;
  set_mean(q, op == Op::layer_norm ? mean.data() : nullptr);
  set_rstd(q, rstd.data());
  const onorm::gpu::RowArgs a = onorm::gpu::row_args(q);
  onorm::gpu::SplitArgs s{};
  s.chunk = cols;
  s.chunks = 1;
  s.groups = 4;  // the persistent grid: block b serves rows b, b + 4, ...
  s.chunk_alloc = (cols + 7) / 8 * 8;
  s.epoch = 1;
  const auto errors = onorm_sim::launch(W, dim3(4), dim3(kBlock), size_t(2 * s.chunk_alloc) * sizeof(In),
                                        [a, s] { onorm::gpu::staged_kernel<gpu::Row<OpT, In>, W, kBlock>(a, s); });
  ASSERT_TRUE(errors.empty()) << "emulator: " << errors[0];
  const onorm_ref::Result ref = onorm_ref::compute(op, q.in[0], q.col[0], q.col[1], q.param[0]);
  const onorm_ref::Report rep = onorm_ref::check(op, ref, q.out[0], q.col[0], dt, mean_of(q), rstd_of(q));
  EXPECT_TRUE(rep.ok()) << rep.describe();
}

TEST(WaveRowsHugeStaged, OneBlockPerRow) {
  std::mt19937_64 rng(99);
  for (int64_t cols : {300, 3001, 20000}) {
    run_staged_huge<32, ops::LayerNorm, float>(ONORM_F32, cols, rng);
    run_staged_huge<64, ops::LayerNorm, float>(ONORM_F32, cols, rng);
    run_staged_huge<32, ops::RmsNorm, float>(ONORM_F32, cols, rng);
    run_staged_huge<64, ops::RmsNorm, float>(ONORM_F32, cols, rng);
    run_staged_huge<32, ops::LayerNorm, onorm::core::bf16_bits>(ONORM_BF16, cols, rng);
    run_staged_huge<64, ops::LayerNorm, onorm::core::bf16_bits>(ONORM_BF16, cols, rng);
    run_staged_huge<32, ops::RmsNorm, onorm::core::bf16_bits>(ONORM_BF16, cols, rng);
    run_staged_huge<64, ops::RmsNorm, onorm::core::bf16_bits>(ONORM_BF16, cols, rng);
    if (HasFatalFailure()) return;
  }
}

// ------------------------------------------------------------------ hard data
// Norm rows whose statistics need more than a float two-pass around a float mean (API.md,
// accuracy: every value distribution): outliers at column 0 and at every chunk boundary
// (multiples of 512 and the column before them: the split schedule's 16384-column chunks
// included), offsets 1e3 / 1e5 / 1e6 + N(0,1), the constant row 1e6 + 0.125 (rstd exactly
// 1/sqrt(eps)), 1e6 + N(0,1) with outliers, rows of +-3e38 ({3e38, -3e38, -3e38, -3e38}: the
// finish must not form x - mean in float), tiny rows 1e-30 * N(0,1) with eps = 0 (squares
// underflow) and eps = 1e39 (beyond FLT_MAX). Every regime of the plan on warps of 32 and 64
// (row groups, a block per row, split rows), and the staged kernel (K == 1); y, mean and rstd
// against the float64 reference, the statistics also against API.md's own bounds; in place
// bitwise equal to out of place; each row bitwise equal to the same row computed alone.
using onorm_ref::hard_eps;
using onorm_ref::hard_set_name;
using onorm_ref::hard_value;
using onorm_ref::kHardHugeEps;
using onorm_ref::kHardKinds;
using onorm_ref::kHardMixed;
using onorm_ref::kHardTiny;

// One norm request on W-lane warps, through the HIP plan or (staged) staged_kernel with K == 1.
template <int W>
onorm_status run_norm(const onorm_request& q, bool staged, std::string& shapes, std::string& errors) {
  if (!staged) {
    SimLauncher launcher(W);
    char err[256] = {0};
    const onorm_status s = onorm::gpu::plan_any<W>(q, launcher, err, sizeof err);
    shapes = launcher.shapes();
    for (const auto& e : launcher.errors()) errors += "\n  " + e;
    return s;
  }
  constexpr int kBlock = 256;
  const onorm::gpu::RowArgs a = onorm::gpu::row_args(q);
  onorm::gpu::SplitArgs s{};
  s.chunk = q.in[0].cols;
  s.chunks = 1;
  s.groups = 4;  // the persistent grid: block b serves rows b, b + 4, ...
  s.chunk_alloc = (q.in[0].cols + 7) / 8 * 8;
  s.epoch = 1;
  shapes = "staged_kernel<W" + std::to_string(W) + " K1>";
  const size_t smem = size_t(2 * s.chunk_alloc) * esize(q.in[0].dtype);
  const bool ln = q.op == ONORM_OP_LAYER_NORM, f32 = q.in[0].dtype == ONORM_F32;
  using onorm::core::bf16_bits;
  std::vector<std::string> e;
  if (ln && f32) e = onorm_sim::launch(W, dim3(4), dim3(kBlock), smem, [a, s] { gpu::staged_kernel<gpu::Row<ops::LayerNorm, float>, W, kBlock>(a, s); });
  else if (ln) e = onorm_sim::launch(W, dim3(4), dim3(kBlock), smem, [a, s] { gpu::staged_kernel<gpu::Row<ops::LayerNorm, bf16_bits>, W, kBlock>(a, s); });
  else if (f32) e = onorm_sim::launch(W, dim3(4), dim3(kBlock), smem, [a, s] { gpu::staged_kernel<gpu::Row<ops::RmsNorm, float>, W, kBlock>(a, s); });
  else e = onorm_sim::launch(W, dim3(4), dim3(kBlock), smem, [a, s] { gpu::staged_kernel<gpu::Row<ops::RmsNorm, bf16_bits>, W, kBlock>(a, s); });
  for (const auto& x : e) errors += "\n  " + x;
  return e.empty() ? ONORM_OK : ONORM_ERROR_DEVICE;
}

template <int W>
void run_hard(Op op, onorm_dtype dt, int64_t cols, int set, bool staged, std::mt19937_64& rng) {
  const int64_t rows = cols <= 256 && !staged ? 70 : kHardKinds;
  char what[200];
  std::snprintf(what, sizeof what, "W%d %s %s %lldx%lld %s%s", W, onorm_ref::op_name(op), dname(dt),
                static_cast<long long>(rows), static_cast<long long>(cols), hard_set_name(set),
                staged ? " (staged_kernel K = 1)" : "");
  SCOPED_TRACE(what);
  const bool ln = op == Op::layer_norm;
  const size_t es = esize(dt);
  const int64_t xs = cols;
  auto align64 = [](std::vector<unsigned char>& v) {
    return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
  };
  std::vector<unsigned char> xbuf(rows * xs * es + 64), gbuf(cols * es + 64), bbuf(cols * es + 64);
  void* x = align64(xbuf);
  void* gamma = align64(gbuf);
  void* beta = align64(bbuf);
  std::normal_distribution<double> n01(0.0, 1.0);
  for (int64_t k = 0; k < cols; ++k) {
    onorm_ref::encode(1.0 + 0.5 * n01(rng), gamma, dt, k);
    onorm_ref::encode(n01(rng), beta, dt, k);
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) onorm_ref::encode(hard_value(set, r, k, cols, rng), x, dt, r * xs + k);
  onorm_request q{};
  q.op = to_op(op);
  q.col[0] = gamma;
  q.col[1] = ln ? beta : nullptr;
  q.col_dtype = dt;
  q.param[0] = hard_eps(set);
  struct Out {
    std::vector<unsigned char> ybuf;
    std::vector<float> mean, rstd;
  };
  // Rows [r0, r0 + n) of x, out of place into o (or in place into a copy of x: o.ybuf).
  auto call = [&](int64_t r0, int64_t n, bool in_place, Out& o) {
    o.ybuf.assign(rows * xs * es + 64, 0xff);  // NaN poison: unwritten shows
    unsigned char* y = align64(o.ybuf);
    if (in_place) std::memcpy(y, x, size_t(rows * xs) * es);
    o.mean.assign(rows, -7.0f);
    o.rstd.assign(rows, -7.0f);
    onorm_request c = q;
    const unsigned char* xin = in_place ? y : static_cast<unsigned char*>(x);
    c.in[0] = onorm_rows{const_cast<unsigned char*>(xin) + r0 * xs * es, dt, n, cols, xs};
    c.out[0] = onorm_rows{y + r0 * xs * es, dt, n, cols, xs};
    set_mean(c, ln ? o.mean.data() + r0 : nullptr);
    set_rstd(c, o.rstd.data() + r0);
    std::string shapes, errors;
    const onorm_status s = run_norm<W>(c, staged, shapes, errors);
    EXPECT_TRUE(errors.empty()) << "emulator: " << shapes << errors;
    EXPECT_EQ(s, ONORM_OK);
    return shapes;
  };
  Out got;
  const std::string shapes = call(0, rows, false, got);
  if (::testing::Test::HasFailure()) return;
  const onorm_rows xr{x, dt, rows, cols, xs};
  const onorm_rows yr{align64(got.ybuf), dt, rows, cols, xs};
  const onorm_ref::Result ref = onorm_ref::compute(op, xr, gamma, q.col[1], q.param[0]);
  const onorm_ref::Report rep = onorm_ref::check(op, ref, yr, gamma, dt, ln ? got.mean.data() : nullptr, got.rstd.data());
  EXPECT_TRUE(rep.ok()) << shapes << ": " << rep.describe();
  for (int64_t r = 0; r < rows; ++r) {
    // API.md's bounds on the statistics themselves (the reference's check is looser on mean).
    const double rs = ref.rstd[r];
    EXPECT_LE(std::fabs(got.rstd[r] - rs), 1e-5 * rs) << shapes << ": rstd of row " << r << " got " << got.rstd[r]
                                                      << " want " << rs;
    if (ln) {
      const double m = ref.mean[r];
      EXPECT_LE(std::fabs(got.mean[r] - m), 1e-6 * (std::fabs(m) + 1.0 / rs))
          << shapes << ": mean of row " << r << " got " << got.mean[r] << " want " << m;
    }
    for (int64_t k = 0; k < cols; ++k) {
      const double v = onorm_ref::decode(yr.data, dt, r * xs + k);
      if (!std::isfinite(v)) {
        ADD_FAILURE() << shapes << ": y[" << r << "][" << k << "] = " << v << " (finite input)";
        break;
      }
    }
    if (::testing::Test::HasFailure()) return;
  }
  // In place: bitwise the out-of-place result (the double path reads the row again).
  Out inpl;
  call(0, rows, true, inpl);
  if (::testing::Test::HasFailure()) return;
  ASSERT_EQ(0, std::memcmp(align64(inpl.ybuf), align64(got.ybuf), size_t(rows * xs) * es)) << shapes << ": in place";
  ASSERT_EQ(0, std::memcmp(inpl.rstd.data(), got.rstd.data(), rows * sizeof(float))) << shapes << ": in place rstd";
  if (ln) {
    ASSERT_EQ(0, std::memcmp(inpl.mean.data(), got.mean.data(), rows * sizeof(float))) << shapes << ": in place mean";
  }
  // Batch invariance: each row (at the same address) alone gives the same bits.
  for (int64_t r = 0; r < rows; r += rows > kHardKinds ? 7 : 1) {
    Out one;
    call(r, 1, false, one);
    if (::testing::Test::HasFailure()) return;
    ASSERT_EQ(0, std::memcmp(align64(one.ybuf) + r * xs * es, align64(got.ybuf) + r * xs * es, size_t(cols) * es))
        << shapes << ": row " << r << " alone differs from the batch";
    ASSERT_EQ(0, std::memcmp(&one.rstd[r], &got.rstd[r], sizeof(float))) << "row " << r << " alone: rstd";
    if (ln) {
      ASSERT_EQ(0, std::memcmp(&one.mean[r], &got.mean[r], sizeof(float))) << "row " << r << " alone: mean";
    }
  }
}

using HardParam = std::tuple<int, Op, onorm_dtype>;
class WaveRowsHard : public ::testing::TestWithParam<HardParam> {};

// Widths in every regime of both plans: row groups (4, 37, 300 columns), a group of a warp or
// more (1000, 3000), the widest register row (16384), split rows of 2 and 3 chunks.
TEST_P(WaveRowsHard, NormsOfHardData) {
  const auto [width, op, dt] = GetParam();
  std::mt19937_64 rng(4242 + width);
  for (int set : {kHardMixed, kHardTiny, kHardHugeEps}) {
    for (int64_t cols : {4, 37, 300, 1000, 3000, 16384, 16385, 40000}) {
      if (width == 64) run_hard<64>(op, dt, cols, set, false, rng);
      else run_hard<32>(op, dt, cols, set, false, rng);
      if (::testing::Test::HasFailure()) return;
    }
    for (int64_t cols : {300, 3001, 20000}) {
      if (width == 64) run_hard<64>(op, dt, cols, set, true, rng);
      else run_hard<32>(op, dt, cols, set, true, rng);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    HipPlan, WaveRowsHard,
    ::testing::Combine(::testing::Values(32, 64), ::testing::Values(Op::layer_norm, Op::rms_norm),
                       ::testing::Values(ONORM_F32, ONORM_BF16)),
    huge_param_name);

// The merges of LayerNorm's double states that only schedules the emulator cannot run use (the
// CUDA cluster kernel: group_merge; the cooperative staged schedule: block_merge): one state per
// lane / thread (empty ones, a NaN), against the statistics of all the elements in long double,
// and every lane with the same bits.
template <int W>
void run_merge_check(std::mt19937_64& rng, bool with_nan) {
  constexpr int kBlock = 256;
  using Wd = onorm::core::Welford<double>;
  std::normal_distribution<double> n01(0.0, 1.0);
  std::vector<Wd> states(kBlock);
  long double sum = 0, n_all = 0;
  std::vector<std::vector<double>> chunks(kBlock);
  for (int t = 0; t < kBlock; ++t) {
    const int n = t % 7 == 3 ? 0 : 50 + static_cast<int>(rng() % 200);  // some empty lanes
    const double offset = 1e6 + 100.0 * (t % 5);  // slice means apart: Chan's between term
    for (int i = 0; i < n; ++i) chunks[t].push_back(offset + n01(rng));
    double m = 0, m2 = 0;
    for (double v : chunks[t]) m += v;
    m = n ? m / n : 0.0;
    for (double v : chunks[t]) m2 += (v - m) * (v - m);
    states[t] = Wd{n, m, m2};
    for (double v : chunks[t]) sum += v, n_all += 1;
  }
  if (with_nan) states[18].mean = NAN;  // a lane with elements (lane 17 is empty)
  const long double mean = sum / n_all;
  long double m2 = 0;
  for (const auto& c : chunks)
    for (double v : c) m2 += (v - mean) * (v - mean);
  std::vector<Wd> group(kBlock), block(kBlock);
  const Wd* in = states.data();
  Wd* g = group.data();
  Wd* b = block.data();
  const auto errors = onorm_sim::launch(W, dim3(1), dim3(kBlock), 0, [in, g, b] {
    __shared__ double scratch[kBlock / W];
    __shared__ Wd states[kBlock / W];
    const int t = static_cast<int>(threadIdx.x);
    g[t] = onorm::gpu::group_merge<W>(in[t], t % W);
    b[t] = onorm::gpu::block_merge<W, kBlock>(in[t], states, scratch);
  });
  ASSERT_TRUE(errors.empty()) << errors[0];
  for (int t = 0; t < kBlock; ++t) {
    ASSERT_EQ(0, std::memcmp(&block[t], &block[0], sizeof(Wd))) << "W" << W << " block_merge, thread " << t;
    ASSERT_EQ(0, std::memcmp(&group[t], &group[t - t % W], sizeof(Wd))) << "W" << W << " group_merge, lane " << t;
  }
  if (with_nan) {
    EXPECT_TRUE(std::isnan(block[0].mean)) << "W" << W;
    return;
  }
  EXPECT_EQ(block[0].n, static_cast<int64_t>(n_all));
  EXPECT_NEAR(block[0].mean, static_cast<double>(mean), 1e-9) << "W" << W;
  EXPECT_NEAR(block[0].m2, static_cast<double>(m2), 1e-9 * static_cast<double>(m2)) << "W" << W;
  // Each group against its own lanes' elements.
  for (int g0 = 0; g0 < kBlock; g0 += W) {
    long double gs = 0, gn = 0, gm2 = 0;
    for (int t = g0; t < g0 + W; ++t)
      for (double v : chunks[t]) gs += v, gn += 1;
    const long double gm = gs / gn;
    for (int t = g0; t < g0 + W; ++t)
      for (double v : chunks[t]) gm2 += (v - gm) * (v - gm);
    EXPECT_EQ(group[g0].n, static_cast<int64_t>(gn));
    EXPECT_NEAR(group[g0].mean, static_cast<double>(gm), 1e-9) << "W" << W << " group " << g0;
    EXPECT_NEAR(group[g0].m2, static_cast<double>(gm2), 1e-9 * static_cast<double>(gm2)) << "W" << W << " group " << g0;
  }
}

TEST(WaveRowsMerge, DoubleStatesOfOffsetSlices) {
  std::mt19937_64 rng(5);
  for (bool nan : {false, true}) {
    run_merge_check<32>(rng, nan);
    run_merge_check<64>(rng, nan);
  }
}

// ------------------------------------------------------------------ the backward passes
// Softmax backward (y probabilities) and log-softmax backward (y their logarithms) through the
// plan on warps of 32 and 64 lanes: every register shape and split rows, y / dy / dx of
// independent dtypes (a second input of another vector width than the first), strides and
// unaligned rows, dx aliasing dy; a NaN in dy makes its row NaN. Checked against the float64
// reference with API.md's bound (onorm_ref: 16-bit dx plus one unit in the last place).
template <int W>
void run_backward(onorm_ref::Op op, onorm_dtype ydt, onorm_dtype dydt, onorm_dtype dxdt, int64_t rows, int64_t cols,
                  bool padded, bool in_place, std::mt19937_64& rng) {
  char what[200];
  std::snprintf(what, sizeof what, "W%d %s y %s dy %s dx %s %lldx%lld%s%s", W, onorm_ref::op_name(op), dname(ydt), dname(dydt),
                dname(dxdt), static_cast<long long>(rows), static_cast<long long>(cols), padded ? " padded" : "",
                in_place ? " in place" : "");
  SCOPED_TRACE(what);
  if (in_place) dxdt = dydt;
  const int64_t ys = cols + (padded ? 3 : 0), dys = cols + (padded ? 1 : 0);
  const int64_t dxs = in_place ? dys : cols + (padded ? 5 : 0);
  const size_t off = padded ? 1 : 0;
  auto align64 = [](std::vector<unsigned char>& v) {
    return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
  };
  std::vector<unsigned char> ybuf((rows * ys + off) * esize(ydt) + 64), dybuf((rows * dys + off) * esize(dydt) + 64),
      dxbuf((rows * dxs + off) * esize(dxdt) + 64, 0xff);  // NaN poison: unwritten shows
  void* y = align64(ybuf) + off * esize(ydt);
  void* dy = align64(dybuf) + (padded ? 0 : off) * esize(dydt);  // padded: dy aligned, y not
  void* dx = in_place ? dy : align64(dxbuf) + off * esize(dxdt);
  std::normal_distribution<double> n01(0.0, 1.0);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> e(cols);
    double sum = 0;
    for (auto& v : e) sum += (v = std::exp(2.0 * n01(rng)));
    for (int64_t k = 0; k < cols; ++k) {
      const double p = e[k] / sum;
      onorm_ref::encode(op == onorm_ref::Op::log_softmax_backward ? std::log(p) : p, y, ydt, r * ys + k);
      onorm_ref::encode(r == 1 && k == cols / 2 ? NAN : n01(rng), dy, dydt, r * dys + k);
    }
  }
  // The rounded inputs, before an in-place call overwrites dy.
  std::vector<double> yd(rows * cols), dyd(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) {
      yd[r * cols + k] = onorm_ref::decode(y, ydt, r * ys + k);
      dyd[r * cols + k] = onorm_ref::decode(dy, dydt, r * dys + k);
    }
  onorm_request q{};
  q.op = to_op(op);
  q.in[0] = onorm_rows{y, ydt, rows, cols, ys};
  q.in[1] = onorm_rows{dy, dydt, rows, cols, dys};
  q.out[0] = onorm_rows{dx, dxdt, rows, cols, dxs};
  SimLauncher launcher(W);
  char err[256] = {0};
  const onorm_status st = onorm::gpu::plan_any<W>(q, launcher, err, sizeof err);
  std::string errors;
  for (const auto& e : launcher.errors()) errors += "\n  " + e;
  ASSERT_TRUE(launcher.errors().empty()) << "emulator: " << launcher.shapes() << errors;
  ASSERT_EQ(st, ONORM_OK) << err;
  const onorm_rows in[2] = {{yd.data(), ONORM_F64, rows, cols, cols}, {dyd.data(), ONORM_F64, rows, cols, cols}};
  const onorm_ref::Result ref = onorm_ref::compute(op, in, 2, nullptr, nullptr, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) {
      const double got = onorm_ref::decode(dx, dxdt, r * dxs + k);
      if (r == 1) {
        ASSERT_TRUE(std::isnan(got)) << launcher.shapes() << ": NaN row, col " << k << " got " << got;
        continue;
      }
      const double want = ref.y[r * cols + k];
      const double bound = onorm_ref::bound(op, dxdt, want, 0, 0, 0, ref.scale[r * cols + k]);
      ASSERT_LE(std::fabs(got - want), bound) << launcher.shapes() << ": row " << r << " col " << k << " got " << got
                                              << " want " << want;
    }
  }
}

void backward_through_plan(onorm_ref::Op op) {
  std::mt19937_64 rng(31);
  const std::tuple<onorm_dtype, onorm_dtype, onorm_dtype> dts[] = {
      {ONORM_F32, ONORM_F32, ONORM_F32}, {ONORM_BF16, ONORM_BF16, ONORM_BF16}, {ONORM_F16, ONORM_F32, ONORM_BF16},
      {ONORM_F32, ONORM_BF16, ONORM_F16}, {ONORM_BF16, ONORM_F16, ONORM_F32}};
  for (int W : {32, 64}) {
    int index = 0;
    for (const auto& [ydt, dydt, dxdt] : dts) {
      for (int64_t cols : widths()) {
        const int64_t rows = cols <= 256 ? 70 : 3;
        const bool padded = (index % 2) == 1, in_place = (index % 3) == 2;
        ++index;
        if (W == 64) run_backward<64>(op, ydt, dydt, dxdt, rows, cols, padded, in_place, rng);
        else run_backward<32>(op, ydt, dydt, dxdt, rows, cols, padded, in_place, rng);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// The norms' options inside the register rows (gpu::RowOptions) on the emulator, through
// place_with_options<Row<..., kOptions>, W>: the residual add, residual_out (or none), and y as
// E4M3 with the dynamic scale, I8 with a static scale, or float; against the reference of
// onorm_norm. The wave64 paths of the fused rows run nowhere else here. far != 0: x is
// far + 0.05 N(0,1) and the residual 0.01 N(0,1) (core/norm_stats.hpp's rows far from zero).
template <int W, typename OpT, typename In>
void run_options_case(onorm_dtype xt, onorm_dtype yt, bool residual_out, int64_t rows, int64_t cols,
                      std::mt19937_64& rng, double far = 0) {
  constexpr bool layer = std::is_same<OpT, ops::LayerNorm>::value;
  SCOPED_TRACE("W" + std::to_string(W) + (layer ? " layer_norm" : " rms_norm") + " x " + dname(xt) + " y " +
               std::to_string(yt) + (residual_out ? " residual_out " : " ") + std::to_string(rows) + "x" +
               std::to_string(cols) + " far " + std::to_string(far));
  const size_t es = esize(xt), ys = yt == ONORM_F32 ? 4 : yt == ONORM_F8_E4M3 || yt == ONORM_I8 ? 1 : 2;
  std::vector<unsigned char> xb(rows * cols * es + 64), rb(rows * cols * es + 64), hb(rows * cols * es + 64, 0xff),
      yb(rows * cols * ys + 64, 0xff), gb(cols * es + 64), bb(cols * es + 64);
  auto align64 = [](std::vector<unsigned char>& v) {
    return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
  };
  void *x = align64(xb), *r = align64(rb), *h = align64(hb), *y = align64(yb), *gamma = align64(gb), *beta = align64(bb);
  std::normal_distribution<double> n01(0.0, 1.0);
  for (int64_t k = 0; k < rows * cols; ++k) {
    onorm_ref::encode(far != 0 ? far + 0.05 * n01(rng) : 2.0 + 1.5 * n01(rng), x, xt, k);
    onorm_ref::encode(far != 0 ? 0.01 * n01(rng) : n01(rng), r, xt, k);
  }
  for (int64_t k = 0; k < cols; ++k) {
    onorm_ref::encode(1.0 + 0.3 * n01(rng), gamma, xt, k);
    onorm_ref::encode(n01(rng), beta, xt, k);
  }
  std::vector<float> mean(rows, -7.0f), rstd(rows, -7.0f), scale(rows, -7.0f);
  onorm_request q{};
  q.op = layer ? ONORM_OP_LAYER_NORM : ONORM_OP_RMS_NORM;
  q.inputs = 2;
  q.outputs = residual_out ? 2 : 1;
  q.in[0] = onorm_rows{x, xt, rows, cols, cols};
  q.in[1] = onorm_rows{r, xt, rows, cols, cols};
  q.out[0] = onorm_rows{y, yt, rows, cols, cols};
  if (residual_out) q.out[1] = onorm_rows{h, xt, rows, cols, cols};
  q.col[0] = gamma;
  q.col[1] = layer ? beta : nullptr;
  q.col_dtype = xt;
  q.param[0] = 1e-5;
  set_mean(q, mean.data());
  set_rstd(q, rstd.data());
  if (yt == ONORM_F8_E4M3) q.y_scale = scale.data();
  if (yt == ONORM_I8) q.y_static_scale = 0.03125;
  SimLauncher launcher(W);
  onorm_status st = ONORM_OK;
  const bool placed = gpu::place_with_options<gpu::Row<OpT, In, In, true>, W>(gpu::row_args(q), launcher, st);
  ASSERT_TRUE(placed);
  ASSERT_TRUE(launcher.errors().empty()) << "emulator: " << launcher.shapes() << launcher.errors()[0];
  ASSERT_EQ(st, ONORM_OK);
  onorm_ref::NormSpec spec;
  spec.layer = layer;
  spec.x = q.in[0];
  spec.residual = &q.in[1];
  spec.h_dtype = xt;
  spec.gamma = gamma;
  spec.beta = q.col[1];
  spec.param_dtype = xt;
  spec.eps = 1e-5;
  const onorm_ref::Report rep =
      onorm_ref::check_norm(spec, onorm_ref::compute_norm(spec), q.out[0], q.y_scale, q.y_static_scale, mean_of(q),
                            rstd_of(q), residual_out ? &q.out[1] : nullptr);
  EXPECT_TRUE(rep.ok()) << launcher.shapes() << ": " << rep.describe();
}

template <int W>
void options_case(bool layer, onorm_dtype xt, onorm_dtype yt, bool residual_out, int64_t rows, int64_t cols,
                  std::mt19937_64& rng, double far = 0) {
  if (layer && xt == ONORM_F32) run_options_case<W, ops::LayerNorm, float>(xt, yt, residual_out, rows, cols, rng, far);
  else if (layer) run_options_case<W, ops::LayerNorm, onorm::core::bf16_bits>(xt, yt, residual_out, rows, cols, rng, far);
  else if (xt == ONORM_F32) run_options_case<W, ops::RmsNorm, float>(xt, yt, residual_out, rows, cols, rng, far);
  else run_options_case<W, ops::RmsNorm, onorm::core::bf16_bits>(xt, yt, residual_out, rows, cols, rng, far);
}

TEST(WaveRowsOptions, ResidualAndQuantizedOutputInRegisters) {
  std::mt19937_64 rng(11);
  const onorm_dtype ys[] = {ONORM_F8_E4M3, ONORM_I8, ONORM_F32, ONORM_BF16};
  int index = 0;
  for (int W : {32, 64})
    for (bool layer : {false, true})
      for (onorm_dtype xt : {ONORM_F32, ONORM_BF16})
        for (int64_t cols : {int64_t(1), int64_t(3), int64_t(100), int64_t(1000), int64_t(5000)}) {
          const onorm_dtype yt = ys[index % 4];
          const bool residual_out = index % 3 != 2;
          ++index;
          if (W == 64) options_case<64>(layer, xt, yt, residual_out, cols <= 100 ? 9 : 3, cols, rng);
          else options_case<32>(layer, xt, yt, residual_out, cols <= 100 ? 9 : 3, cols, rng);
          if (::testing::Test::HasFatalFailure()) return;
        }
}

// Quantized LayerNorm of rows far from zero (|mean| rstd from 2000 to 6e5): a float mean
// misses the codes by grid steps there; the rows take the double statistics.
TEST(WaveRowsOptions, QuantizedLayerNormFarFromZero) {
  std::mt19937_64 rng(12);
  for (int W : {32, 64})
    for (onorm_dtype xt : {ONORM_F32, ONORM_BF16})
      for (onorm_dtype yt : {ONORM_F8_E4M3, ONORM_I8})
        for (double far : {100.0, -3000.0, 30000.0}) {
          if (W == 64) options_case<64>(true, xt, yt, true, 4, 1000, rng, far);
          else options_case<32>(true, xt, yt, false, 4, 1000, rng, far);
          if (::testing::Test::HasFatalFailure()) return;
        }
}

TEST(WaveRowsBackward, SoftmaxBackward) { backward_through_plan(onorm_ref::Op::softmax_backward); }
TEST(WaveRowsBackward, LogSoftmaxBackward) { backward_through_plan(onorm_ref::Op::log_softmax_backward); }

}  // namespace
