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
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "reference.hpp"
#include "simt_device.hpp"
// After the emulator's names: the device templates (through the sim shim) and the plan.
#include "row_plan.hpp"

namespace {

using onorm_ref::Op;

// Launches the plan's kernels on the emulator; memory is host memory.
class SimLauncher {
 public:
  explicit SimLauncher(int hardware_warp) : warp_(hardware_warp) {}

  template <int FAM, typename In, int W, int TPR, int ITEMS, int BLOCK, int RPG>
  onorm_status rows(unsigned grid, const onorm::gpu::RowArgs& a) {
    shapes_.push_back("rows_kernel<W" + std::to_string(W) + " TPR" + std::to_string(TPR) + " ITEMS" +
                      std::to_string(ITEMS) + " BLOCK" + std::to_string(BLOCK) + " RPG" + std::to_string(RPG) + ">");
    return run(grid, 1, BLOCK, [a] { onorm::gpu::rows_kernel<FAM, In, W, TPR, ITEMS, BLOCK, RPG>(a); });
  }
  template <int OP, typename In, int W, int ITEMS, int BLOCK, int MODE>
  onorm_status split(unsigned gx, unsigned gy, const onorm::gpu::RowArgs& a, const onorm::gpu::SplitArgs& s) {
    shapes_.push_back("split_chunk_kernel<W" + std::to_string(W) + " K" + std::to_string(gx) + ">");
    return run(gx, gy, BLOCK, [a, s] { onorm::gpu::split_chunk_kernel<OP, In, W, ITEMS, BLOCK, MODE>(a, s); });
  }
  template <int OP, int W, int BLOCK>
  onorm_status merge(unsigned gx, unsigned gy, const void* in, void* out, int64_t count) {
    return run(gx, gy, BLOCK, [in, out, count] { onorm::gpu::merge_states_kernel<OP, W, BLOCK>(in, out, count); });
  }
  void* workspace(size_t bytes, onorm_status& status) {
    workspace_.assign(bytes, 0xa5);  // poisoned: a state read before it is written shows
    status = ONORM_OK;
    return workspace_.data();
  }
  int64_t l2_bytes() const { return int64_t(1) << 20; }  // small: several row batches

  const std::vector<std::string>& errors() const { return errors_; }
  std::string shapes() const {
    std::string s;
    for (const auto& x : shapes_) s += (s.empty() ? "" : ", ") + x;
    return s;
  }

 private:
  template <typename F>
  onorm_status run(unsigned gx, unsigned gy, int block, F kernel) {
    const auto e = onorm_sim::launch(warp_, dim3(gx, gy), dim3(static_cast<unsigned>(block)), 0, kernel);
    errors_.insert(errors_.end(), e.begin(), e.end());
    return e.empty() ? ONORM_OK : ONORM_ERROR_DEVICE;
  }
  int warp_;
  std::vector<std::string> errors_;
  std::vector<std::string> shapes_;
  std::vector<unsigned char> workspace_;
};

size_t esize(onorm_dtype d) { return d == ONORM_F32 ? 4 : 2; }
const char* dname(onorm_dtype d) { return d == ONORM_F32 ? "f32" : d == ONORM_F16 ? "f16" : "bf16"; }
onorm_op to_op(Op op) {
  switch (op) {
    case Op::softmax: return ONORM_OP_SOFTMAX;
    case Op::log_softmax: return ONORM_OP_LOG_SOFTMAX;
    case Op::layer_norm: return ONORM_OP_LAYER_NORM;
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
  q.x = onorm_rows{x, c.in, c.rows, c.cols, xs};
  q.y = onorm_rows{y, c.out, c.rows, c.cols, ys};
  const bool norm = c.op == Op::layer_norm || c.op == Op::rms_norm;
  q.gamma = norm ? gamma : nullptr;
  q.beta = c.op == Op::layer_norm ? beta : nullptr;
  q.eps = 1e-5;
  q.mean = c.op == Op::layer_norm && !mean.empty() ? mean.data() : nullptr;
  q.rstd = norm && !rstd.empty() ? rstd.data() : nullptr;

#if defined(ONORM_SIM_WIDTH_MISMATCH)
  SimLauncher launcher(W == 64 ? 32 : 64);
#else
  SimLauncher launcher(W);
#endif
  char err[256] = {0};
  const onorm_status s = onorm::hip::plan_any<W>(q, launcher, err, sizeof err);
  std::string errors;
  for (const auto& e : launcher.errors()) errors += "\n  " + e;
  ASSERT_TRUE(launcher.errors().empty()) << "emulator: " << launcher.shapes() << errors;
  ASSERT_EQ(s, ONORM_OK) << err;

  const onorm_ref::Result ref = onorm_ref::compute(c.op, q.x, q.gamma, q.beta, q.eps);
  const onorm_ref::Report rep = onorm_ref::check(c.op, ref, q.y, q.gamma, c.in, q.mean, q.rstd);
  EXPECT_TRUE(rep.ok()) << launcher.shapes() << ": " << rep.describe();
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
      q.x = onorm_rows{x.data(), ONORM_F32, 3, cols, cols};
      q.y = onorm_rows{y.data(), ONORM_F32, 3, cols, cols};
      SimLauncher launcher(W);
      char err[256] = {0};
      const onorm_status s = W == 64 ? onorm::hip::plan_any<64>(q, launcher, err, sizeof err)
                                     : onorm::hip::plan_any<32>(q, launcher, err, sizeof err);
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

}  // namespace
