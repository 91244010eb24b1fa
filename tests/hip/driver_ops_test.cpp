// The GPU kernels of API v2 part 2 (backends/gpu: cross_entropy.hpp, softmax_topk.hpp,
// partial_rows.hpp, partial_state.hpp) run on the host SIMT emulator with warps of 32 and of 64
// lanes, against float64 references: cross-entropy (ignored rows, targets out of range, NaN
// rows, label smoothing, z-loss, in place), softmax top-k (ties, all -inf and NaN rows,
// renormalize), and partial row states (stats of column slices, their merge, each slice's
// finish, against the whole row's reference).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "reference.hpp"
#include "simt_device.hpp"
// After the emulator's names: the device templates (through the sim shim).
#include "gpu/cross_entropy_plan.hpp"
#include "gpu/partial_rows.hpp"
#include "gpu/partial_state.hpp"
#include "gpu/softmax_topk_plan.hpp"
#include "sim_kernels.hpp"

namespace {

namespace gpu = onorm::gpu;
namespace ops = onorm::core::ops;

// The launcher's calls these kernels use, on the emulator (host memory).
class DriverLauncher : public onorm_sim_test::SimKernels {
 public:
  static constexpr bool kClusters = false;
  explicit DriverLauncher(int warp) : SimKernels(warp, int64_t(1) << 18) {}
  template <typename R, int W, int ITEMS, int BLOCK, int MODE>
  onorm_status split(unsigned gx, unsigned gy, const gpu::RowArgs& a, const gpu::SplitArgs& s) {
    return run(gx, gy, BLOCK, [a, s] { gpu::split_chunk_kernel<R, W, ITEMS, BLOCK, MODE>(a, s); });
  }
  template <typename S, int W, int BLOCK>
  onorm_status merge(unsigned gx, unsigned gy, const void* in, void* out, int64_t count) {
    return run(gx, gy, BLOCK, [in, out, count] { gpu::merge_states_kernel<S, W, BLOCK>(in, out, count); });
  }
  template <typename R, int W, int BLOCK>
  onorm_status state_out(unsigned gx, const gpu::RowArgs& a, const gpu::SplitArgs& s, void* states) {
    return run(gx, 1, BLOCK, [a, s, states] { gpu::state_out_kernel<R, W, BLOCK>(a, s, states); });
  }
  template <typename R>
  onorm_status state_coefs(int64_t n, const gpu::RowArgs& a, const gpu::SplitArgs& s, const void* states) {
    const unsigned grid = static_cast<unsigned>((n + gpu::kStateBlock - 1) / gpu::kStateBlock);
    return run(grid, 1, gpu::kStateBlock, [a, s, states, n] { gpu::state_coefs_kernel<R>(a, s, states, n); });
  }
  template <typename S>
  onorm_status merge_parts(int64_t rows, int64_t parts, const void* in, void* out) {
    return run(gpu::merge_parts_grid(rows), 1, gpu::kStateBlock,
               [in, out, parts, rows] { gpu::merge_parts_kernel<S>(in, out, parts, rows); });
  }
  template <typename In, int W>
  onorm_status cross_entropy(unsigned grid, const gpu::CrossEntropyArgs& a) {
    return run(grid, 1, gpu::kCrossEntropyBlock, [a] { gpu::cross_entropy_kernel<In, W, gpu::kCrossEntropyBlock>(a); });
  }
  template <typename In, int W, int ITEMS, int BLOCK>
  onorm_status cross_entropy_rows(unsigned grid, const gpu::CrossEntropyArgs& a) {
    return run(grid, 1, BLOCK, [a] { gpu::ce_rows_kernel<In, W, ITEMS, BLOCK>(a); });
  }
  template <typename In, int W>
  onorm_status softmax_topk(unsigned grid, const gpu::TopkArgs& a) {
    return run(grid, 1, gpu::kTopkBlock, [a] { gpu::softmax_topk_kernel<In, W, gpu::kTopkBlock>(a); });
  }
  template <typename In, int W>
  onorm_status softmax_topk_warp(unsigned grid, const gpu::TopkArgs& a) {
    if (a.slices > 1)
      return run(grid, 1, gpu::kTopkWarpBlock, [a] { gpu::softmax_topk_warp_kernel<In, W, gpu::kTopkWarpBlock, true>(a); });
    return run(grid, 1, gpu::kTopkWarpBlock, [a] { gpu::softmax_topk_warp_kernel<In, W, gpu::kTopkWarpBlock, false>(a); });
  }
  std::string errors() const {
    std::string s;
    for (const auto& e : errors_) s += "\n  " + e;
    return s;
  }
};

size_t esize(onorm_dtype d) { return d == ONORM_F32 ? 4 : 2; }
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// Rows of dtype t in a buffer 16-byte aligned (offset: elements past it).
struct Rows {
  std::vector<unsigned char> buf;
  onorm_rows r{};
  Rows(onorm_dtype t, int64_t rows, int64_t cols, int64_t stride, int64_t offset = 0) {
    buf.assign(size_t(rows * stride + offset) * esize(t) + 64, 0);
    unsigned char* p = buf.data() + (16 - reinterpret_cast<uintptr_t>(buf.data()) % 16) % 16;
    r = onorm_rows{p + offset * esize(t), t, rows, cols, stride};
  }
  double get(int64_t i, int64_t j) const { return onorm_ref::decode(r.data, r.dtype, i * r.row_stride + j); }
  void set(int64_t i, int64_t j, double v) { onorm_ref::encode(v, r.data, r.dtype, i * r.row_stride + j); }
};

// ------------------------------------------------------------------ cross-entropy
struct CeCase {
  onorm_dtype x, dx;
  int64_t cols;
  double ls, z, gs;
  bool in_place;
  double offset = 0.0, scale = 3.0;  // logits offset + scale N(0, 1)
};

template <int W>
void run_ce(const CeCase& c, std::mt19937_64& rng) {
  SCOPED_TRACE("W" + std::to_string(W) + " cols " + std::to_string(c.cols) + " ls " + std::to_string(c.ls) + " z " +
               std::to_string(c.z) + (c.in_place ? " in place" : ""));
  const int64_t rows = 7, stride = c.cols + 3;
  Rows x(c.x, rows, c.cols, stride, 1);
  std::normal_distribution<double> n01(0.0, 1.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < c.cols; ++j) x.set(i, j, c.offset + c.scale * n01(rng));
  // row 3: NaN (target valid): NaN loss and gradient. Past 8192 columns at 4976: a step of its
  // thread before the last, where the thread holds only padding (-inf), which must not move the
  // NaN's pivot.
  if (c.cols > 2) x.set(3, c.cols > 8192 ? 4976 : 1, kNaN);
  x.set(5, 0, kNaN);                  // row 5: NaN, ignored: zeros
  std::vector<int64_t> t(rows);
  for (int64_t i = 0; i < rows; ++i) t[i] = int64_t(rng() % uint64_t(c.cols));
  t[2] = -100;         // ignored
  t[4] = c.cols + 2;   // out of range: NaN
  t[5] = -100;
  t[6] = c.cols - 1;
  std::vector<double> xv(rows * c.cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < c.cols; ++j) xv[i * c.cols + j] = x.get(i, j);
  Rows dx_own(c.dx, rows, c.cols, stride + 2);
  onorm_rows dx = c.in_place ? x.r : dx_own.r;
  if (c.in_place) dx.dtype = c.dx;
  std::vector<float> loss(rows, -7.0f), lse(rows, -7.0f);
  onorm_request q{};
  q.op = ONORM_OP_CROSS_ENTROPY;
  q.inputs = 1;
  q.outputs = 1;
  q.in[0] = x.r;
  q.out[0] = dx;
  q.targets = t.data();
  q.ignore_index = -100;
  q.param[0] = c.ls;
  q.param[1] = c.z;
  q.param[2] = c.gs;
  q.row_out[0] = loss.data();
  q.row_out[1] = lse.data();
  DriverLauncher l(W);
  ASSERT_EQ(gpu::run_cross_entropy<W>(l, q), ONORM_OK) << l.errors();
  ASSERT_TRUE(l.errors().empty()) << l.errors();
  for (int64_t i = 0; i < rows; ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    const double* r = &xv[i * c.cols];
    double m = -kInf, sx = 0;
    bool nan = false;
    for (int64_t j = 0; j < c.cols; ++j) {
      nan = nan || std::isnan(r[j]);
      m = std::max(m, r[j]);
      sx += r[j];
    }
    double d = 0;
    for (int64_t j = 0; j < c.cols; ++j) d += std::exp(r[j] - m);
    const double lse_ref = nan ? kNaN : m + std::log(d);
    const bool ignored = t[i] == -100, bad = !ignored && (t[i] < 0 || t[i] >= c.cols);
    if (nan) { EXPECT_TRUE(std::isnan(lse[i])); }
    else EXPECT_NEAR(lse[i], lse_ref, 1e-6 * (std::fabs(lse_ref) + 1) + 1e-6);
    double loss_ref = 0;
    if (!ignored && !bad)
      loss_ref = lse_ref - (1 - c.ls) * r[t[i]] - c.ls * sx / double(c.cols) + c.z * lse_ref * lse_ref;
    if (ignored) { EXPECT_EQ(loss[i], 0.0f); }
    else if (bad || nan) { EXPECT_TRUE(std::isnan(loss[i])); }
    else EXPECT_NEAR(loss[i], loss_ref, 1e-6 * (std::fabs(lse_ref) + 1) + 1e-6 * std::fabs(loss_ref) + 1e-6);
    const double a = 1 + 2 * c.z * lse_ref;
    int64_t bad_elems = 0;
    for (int64_t j = 0; j < c.cols; ++j) {
      const double got = onorm_ref::decode(dx.data, dx.dtype, i * dx.row_stride + j);
      if (ignored) {
        bad_elems += got != 0.0 || std::signbit(got);
        continue;
      }
      if (bad || nan) {
        bad_elems += !std::isnan(got);
        continue;
      }
      const double p = std::exp(r[j] - lse_ref);
      const double qj = (j == t[i] ? 1 - c.ls : 0) + c.ls / double(c.cols);
      const double want = c.gs * (a * p - qj);
      const double b = std::fabs(c.gs) * (1e-5 * a * p + 1e-6) + 1e-6 * std::fabs(c.gs) + onorm_ref::ulp(want, dx.dtype);
      bad_elems += !(std::fabs(got - want) <= b);
      if (!(std::fabs(got - want) <= b) && bad_elems == 1)
        ADD_FAILURE() << "dlogits[" << i << "][" << j << "] = " << got << ", want " << want;
    }
    EXPECT_EQ(bad_elems, 0);
  }
}

TEST(DriverOps, CrossEntropy) {
  std::mt19937_64 rng(7);
  const CeCase cases[] = {
      {ONORM_F32, ONORM_F32, 1, 0.0, 0.0, 1.0, false},      {ONORM_F32, ONORM_F32, 37, 0.1, 1e-3, 0.5, false},
      {ONORM_BF16, ONORM_F32, 5000, 0.0, 0.0, 1.0, false},  {ONORM_F16, ONORM_BF16, 4097, 0.2, 0.0, -2.0, false},
      {ONORM_F32, ONORM_F32, 9000, 0.1, 1e-4, 1.0, true},   {ONORM_BF16, ONORM_BF16, 333, 0.0, 0.0, 1.0, true},
      {ONORM_F16, ONORM_BF16, 1000, 0.1, 0.0, 1.0, true},   {ONORM_BF16, ONORM_F32, 3000, 0.1, 0.0, 1.0, false},
      {ONORM_F16, ONORM_F16, 2100, 0.0, 1e-4, 1.0, true},
      // logits about 1e6: the long rows' sum of exp in one-FMA terms, whose unit is 2^rq away
      // from exp's (pivot_sum.hpp)
      {ONORM_F32, ONORM_F32, 20000, 0.0, 0.0, 1.0, false, 1e6, 3.0},
  };
  for (const CeCase& c : cases) {
    run_ce<32>(c, rng);
    run_ce<64>(c, rng);
  }
}

// A vocabulary of 2^24 + 3 columns: the bound holds at that length (the steps' states merged
// pairwise, not summed one by one), with lse near 0, where the bound is tightest.
TEST(DriverOps, CrossEntropyLongRow) {
  std::mt19937_64 rng(3);
  const int64_t cols = (int64_t(1) << 24) + 3;
  run_ce<32>(CeCase{ONORM_F32, ONORM_BF16, cols, 0.1, 1e-4, 1.0, false, -std::log(double(cols)) - 0.125, 0.5}, rng);
}

// ------------------------------------------------------------------ softmax top-k
// Runs top-k of x on the emulator (values into v, columns into idx: rows * k, poisoned).
// block_kernel: the block kernel whatever the planner would take (its paths for small k).
template <int W>
void call_topk(const Rows& x, int64_t k, bool renormalize, const Rows& v, std::vector<int64_t>& idx,
               bool block_kernel = false) {
  idx.assign(size_t(x.r.rows * k), -1);
  onorm_request q{};
  q.op = ONORM_OP_SOFTMAX_TOPK;
  q.inputs = q.outputs = 1;
  q.in[0] = x.r;
  q.out[0] = v.r;
  q.k = k;
  q.renormalize = renormalize;
  q.indices = idx.data();
  DriverLauncher l(W);
  if (block_kernel) {
    const unsigned grid = static_cast<unsigned>(x.r.rows);
    const gpu::TopkArgs a = gpu::topk_args(q);
    const onorm_status st = x.r.dtype == ONORM_F32   ? l.softmax_topk<float, W>(grid, a)
                            : x.r.dtype == ONORM_F16 ? l.softmax_topk<onorm::core::f16_bits, W>(grid, a)
                                                     : l.softmax_topk<onorm::core::bf16_bits, W>(grid, a);
    ASSERT_EQ(st, ONORM_OK) << l.errors();
  } else {
    ASSERT_EQ(gpu::run_softmax_topk<W>(l, q), ONORM_OK) << l.errors();
  }
  ASSERT_TRUE(l.errors().empty()) << l.errors();
}

template <int W>
void run_topk(onorm_dtype t, int64_t cols, int64_t k, bool renormalize, std::mt19937_64& rng) {
  SCOPED_TRACE("W" + std::to_string(W) + " cols " + std::to_string(cols) + " k " + std::to_string(k) +
               (renormalize ? " renormalized" : ""));
  const int64_t rows = 5;
  Rows x(t, rows, cols, cols + 1, 1);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const int bucket = int(rng() % 23);  // many ties
      x.set(i, j, i == 1 ? (bucket - 11) * 0.5 : 0.001 * double(int64_t(rng() % 200000)) - 100.0);
    }
  for (int64_t j = 0; j < cols; ++j) x.set(2, j, -kInf);  // row 2: all -inf
  x.set(3, cols / 2, kNaN);                                 // row 3: NaN
  if (cols > 5) {  // row 4: -0 and +0 tie
    x.set(4, 3, -0.0);
    x.set(4, 5, 0.0);
  }
  Rows v(ONORM_F32, rows, k, k + 2);
  std::vector<int64_t> idx;
  call_topk<W>(x, k, renormalize, v, idx);
  if (::testing::Test::HasFatalFailure()) return;
  for (int64_t i = 0; i < rows; ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    std::vector<int64_t> order(cols);
    for (int64_t j = 0; j < cols; ++j) order[j] = j;
    auto key = [&](int64_t j) { return ops::SoftmaxTopk::key(static_cast<float>(x.get(i, j))); };
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ops::SoftmaxTopk::before(key(a), a, key(b), b); });
    if (i == 3) {  // NaN: NaN values, k distinct columns in range
      std::set<int64_t> seen(idx.begin() + i * k, idx.begin() + (i + 1) * k);
      EXPECT_EQ(int64_t(seen.size()), k);
      EXPECT_GE(*seen.begin(), 0);
      EXPECT_LT(*seen.rbegin(), cols);
      for (int64_t s = 0; s < k; ++s) EXPECT_TRUE(std::isnan(v.get(i, s)));
      continue;
    }
    double m = -kInf, d = 0;
    const int64_t n = renormalize ? k : cols;
    for (int64_t s = 0; s < n; ++s) m = std::max(m, x.get(i, order[s]));
    for (int64_t s = 0; s < n; ++s) d += m == -kInf ? 0.0 : std::exp(x.get(i, order[s]) - m);
    for (int64_t s = 0; s < k; ++s) {
      ASSERT_EQ(idx[i * k + s], order[s]) << "slot " << s;
      const double want = m == -kInf ? 0.0 : std::exp(x.get(i, order[s]) - m) / d;
      EXPECT_NEAR(v.get(i, s), want, 1e-5 * want + 1e-30) << "slot " << s;
    }
  }
}

TEST(DriverOps, SoftmaxTopk) {
  std::mt19937_64 rng(11);
  for (bool renormalize : {false, true}) {
    run_topk<32>(ONORM_F32, 10, 1, renormalize, rng);
    run_topk<64>(ONORM_F32, 10, 10, renormalize, rng);
    run_topk<32>(ONORM_BF16, 300, 7, renormalize, rng);
    run_topk<64>(ONORM_F16, 3000, 64, renormalize, rng);
    run_topk<32>(ONORM_F32, 2000, 1024, renormalize, rng);
  }
}

// Rows that drive the candidate buffer's paths (topk_candidates.hpp): widths past the buffer
// (2048) and past a tile, ties at the k-th beyond what the buffer holds (constant, all -inf,
// half -inf, few distinct bf16 values), rising rows (every tile floods the buffer, which
// overflows during the appends), outliers, NaN; rows where the filter's bounds are tight:
// `spread` puts the top k in the first tile, j = ceil(k / warps) in each warp's first lanes (one
// a thread, distinct values), so that the first tile's bound (the lowest of the warps' j-th
// thread maxima) is the k-th itself; `late_kth` puts k - 1 large values in the row's first half
// and the k-th last, tied with a later column, so that a filter above the k-th of what came
// before drops it; `flood` is normal but for its second tile, falling from 100: the buffer, its
// top sorted, overflows in that tile and is compacted to elements of it alone. Checked as
// run_topk checks, on both warp widths.
// `warp_spread` does for the warp kernel what `spread` does for the block's: the top k in the
// first tile, m = ceil(k / W) in each of the first ceil(k / m) lanes (distinct values), so that
// the tile's bound (the ceil(k / m)-th largest of the lanes' m-th largest) is the k-th itself.
// `pos_inf` holds +inf at cols / 3 (and cols / 2): the softmax over the row is NaN (inf - inf),
// the +inf columns come first. `offset` is normal about 1e6, where the sum's one-FMA terms carry
// a unit of 2^rq up to 2^(1/16) away from exp's (pivot_sum.hpp: taken back at the end);
// `straddle` rises by 48 over the row about gpu::kPivotScaledMax, so that a lane's pivot moves
// from those terms to fast_exp's in mid row (f32 rows: 16-bit ones round them to few values).
enum class TopkRow {
  normal, constant, half_inf, all_inf, few_values, rising, outliers, nan, spread, late_kth, flood, warp_spread, pos_inf,
  offset, straddle
};

template <int W>
void run_topk_rows(onorm_dtype t, int64_t cols, int64_t k, bool renormalize, const std::vector<TopkRow>& kinds,
                   std::mt19937_64& rng, int64_t offset = 1, bool block_kernel = false) {
  SCOPED_TRACE("W" + std::to_string(W) + " dtype " + std::to_string(int(t)) + " cols " + std::to_string(cols) +
               " k " + std::to_string(k) + (renormalize ? " renormalized" : "") + " offset " + std::to_string(offset) +
               (block_kernel ? " block kernel" : ""));
  const int64_t rows = static_cast<int64_t>(kinds.size());
  // offset 0: every row 16-byte aligned (the vector loads); else unaligned rows.
  Rows x(t, rows, cols, offset == 0 ? (cols + 7) / 8 * 8 + 8 : cols + 3, offset);
  std::normal_distribution<double> n01(0.0, 1.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      double v = 2.0 * n01(rng);
      switch (kinds[i]) {
        case TopkRow::normal: break;
        case TopkRow::constant: v = 1.5; break;
        case TopkRow::half_inf: v = j % 2 ? -kInf : 0.25 * double(rng() % 3); break;
        case TopkRow::all_inf: v = -kInf; break;
        case TopkRow::few_values: v = double(int(rng() % 5)) - 2.0; break;
        case TopkRow::rising: v = double(j) * 1e-3; break;
        case TopkRow::outliers: v = rng() % 1000 == 0 ? 50.0 + n01(rng) : n01(rng); break;
        case TopkRow::nan: if (j == cols / 3) v = kNaN; break;
        case TopkRow::pos_inf: if (j == cols / 3 || j == cols / 2) v = kInf; break;
        case TopkRow::offset: v += 1e6; break;
        case TopkRow::straddle: v = double(gpu::kPivotScaledMax) + 48.0 * (double(j) / double(cols) - 0.5) + 0.25 * v; break;
        case TopkRow::spread: {
          const int64_t vec = t == ONORM_F32 ? 4 : 8, warps = gpu::kTopkBlock / W, per_warp = (k + warps - 1) / warps;
          const int64_t thread = j / vec, warp = thread / W, lane = thread % W;
          if (j % vec == 0 && thread < gpu::kTopkBlock && lane < per_warp)  // 2^(warp + 4) (1 + lane / 128)
            v = std::ldexp(1.0 + double(lane) / 128.0, int(warp) + 4);
          break;
        }
        case TopkRow::late_kth:
          if (j < cols / 2 && j % (cols / 2 / k) == 0 && j / (cols / 2 / k) < k - 1) v = 40.0;
          if (j == cols - 5 || j == cols - 3) v = 30.0;
          if (j == cols - 4000) v = 29.0;
          break;
        case TopkRow::flood:
          if (j >= 4096 && j < 8192) v = 100.0 - double(j - 4096) * 1e-3;
          break;
        case TopkRow::warp_spread: {
          const int64_t vec = t == ONORM_F32 ? 4 : 8, m = (k + W - 1) / W, lanes = (k + m - 1) / m;
          const int64_t item = j / vec, lane = item % W;
          if (item < W && lane < lanes && j % vec < m)  // the lane's first m elements
            v = 16.0 + double(lane) + 0.5 * double(j % vec);  // exact in every dtype
          break;
        }
      }
      x.set(i, j, v);
    }
  Rows v(ONORM_F32, rows, k, k + 1);
  std::vector<int64_t> idx;
  call_topk<W>(x, k, renormalize, v, idx, block_kernel);
  if (::testing::Test::HasFatalFailure()) return;
  for (int64_t i = 0; i < rows; ++i) {
    SCOPED_TRACE("row " + std::to_string(i) + " kind " + std::to_string(int(kinds[i])));
    if (kinds[i] == TopkRow::pos_inf) {  // NaN values, renormalized too; the +inf columns first
      EXPECT_EQ(idx[i * k], std::min(cols / 3, cols / 2));
      if (k > 1 && cols / 3 != cols / 2) { EXPECT_EQ(idx[i * k + 1], std::max(cols / 3, cols / 2)); }
      for (int64_t s = 0; s < k; ++s) EXPECT_TRUE(std::isnan(v.get(i, s))) << "slot " << s;
      continue;
    }
    if (kinds[i] == TopkRow::nan) {
      std::set<int64_t> seen(idx.begin() + i * k, idx.begin() + (i + 1) * k);
      EXPECT_EQ(int64_t(seen.size()), k);
      EXPECT_GE(*seen.begin(), 0);
      EXPECT_LT(*seen.rbegin(), cols);
      EXPECT_TRUE(seen.count(cols / 3)) << "the NaN is the first key";
      for (int64_t s = 0; s < k; ++s) EXPECT_TRUE(std::isnan(v.get(i, s)));
      continue;
    }
    std::vector<int64_t> order(cols);
    for (int64_t j = 0; j < cols; ++j) order[j] = j;
    auto key = [&](int64_t j) { return ops::SoftmaxTopk::key(static_cast<float>(x.get(i, j))); };
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return key(a) > key(b); });
    double m = -kInf, d = 0;
    const int64_t n = renormalize ? k : cols;
    for (int64_t s = 0; s < n; ++s) m = std::max(m, x.get(i, order[s]));
    for (int64_t s = 0; s < n; ++s) d += m == -kInf ? 0.0 : std::exp(x.get(i, order[s]) - m);
    int bad = 0;
    for (int64_t s = 0; s < k && bad < 3; ++s) {
      if (idx[i * k + s] != order[s]) {
        ADD_FAILURE() << "slot " << s << ": column " << idx[i * k + s] << ", want " << order[s];
        ++bad;
        continue;
      }
      const double want = m == -kInf ? 0.0 : std::exp(x.get(i, order[s]) - m) / d;
      if (!(std::fabs(v.get(i, s) - want) <= 1e-5 * want + 1e-30)) {
        ADD_FAILURE() << "slot " << s << ": value " << v.get(i, s) << ", want " << want;
        ++bad;
      }
    }
  }
}

TEST(DriverOps, SoftmaxTopkCandidates) {
  std::mt19937_64 rng(12);
  using R = TopkRow;
  const std::vector<R> all{R::normal, R::constant, R::half_inf, R::all_inf, R::few_values, R::rising, R::outliers, R::nan};
  for (int64_t cols : {1, 3, 127, 1025}) {
    for (int64_t k : {1, 8, 64, 1024}) {
      if (k > cols) continue;
      run_topk_rows<32>(ONORM_F32, cols, k, false, all, rng);
      run_topk_rows<64>(ONORM_BF16, cols, k, k == 8, all, rng, 0);
    }
  }
  // Past the buffer and past a tile: the first tile's bound (k <= 256), compactions, ties
  // resolved by column over several digits.
  for (int64_t k : {1, 8, 64, 256, 257, 1024}) {
    run_topk_rows<32>(ONORM_F32, 5000, k, false, all, rng);
    run_topk_rows<64>(ONORM_BF16, 9000, k, k == 64, all, rng);
  }
  run_topk_rows<32>(ONORM_F16, 4096 * 4 + 7, 64, false, all, rng, 3);
}

TEST(DriverOps, SoftmaxTopkWide) {
  std::mt19937_64 rng(13);
  using R = TopkRow;
  run_topk_rows<32>(ONORM_BF16, 65537, 8, false, {R::normal, R::few_values, R::rising, R::outliers, R::half_inf}, rng);
  run_topk_rows<64>(ONORM_F32, 65537, 1024, true, {R::normal, R::constant, R::rising, R::nan}, rng, 0);
  run_topk_rows<32>(ONORM_F32, 65537, 64, false, {R::all_inf, R::few_values}, rng, 2);
  // Aligned rows (the pipelined whole tiles), and a long one: each thread's float sum over 256
  // tiles, its pivot moved up a rising row every 16 (kTopkRebase).
  run_topk_rows<32>(ONORM_BF16, 65537, 64, false, {R::normal, R::few_values, R::rising, R::nan, R::all_inf}, rng, 0);
  run_topk_rows<32>(ONORM_F32, (int64_t(1) << 20) + 3, 8, false, {R::normal, R::rising, R::outliers}, rng, 0);
}

// Bounds at their tightest (spread, late_kth), the buffer flooded during appends (rising, few
// values), aligned (the pipelined tiles) and not, k from 1 to the largest, both warp widths.
TEST(DriverOps, SoftmaxTopkTightBounds) {
  std::mt19937_64 rng(15);
  using R = TopkRow;
  const std::vector<R> kinds{R::spread, R::late_kth, R::flood, R::rising, R::few_values, R::normal};
  for (int64_t k : {1, 8, 64, 256}) {
    run_topk_rows<32>(ONORM_BF16, 3 * 4096 + 100, k, false, kinds, rng, 0);
    run_topk_rows<64>(ONORM_BF16, 3 * 4096 + 100, k, k == 8, kinds, rng, 0);
    run_topk_rows<32>(ONORM_F32, 20000, k, false, kinds, rng, 1);
    run_topk_rows<64>(ONORM_F16, 20000, k, false, kinds, rng, 0);
  }
  run_topk_rows<32>(ONORM_F32, 5 * 4096, 1024, false, {R::late_kth, R::flood, R::rising, R::normal}, rng, 0);
  run_topk_rows<64>(ONORM_BF16, 5 * 4096 + 3, 1024, true, {R::late_kth, R::few_values}, rng, 1);
  // The block kernel's paths for small k, which the planner gives the warp kernel at these widths.
  for (int64_t k : {1, 8, 64}) {
    run_topk_rows<32>(ONORM_BF16, 3 * 4096 + 100, k, false, kinds, rng, 0, true);
    run_topk_rows<64>(ONORM_F32, 20000, k, k == 8, kinds, rng, 1, true);
  }
}

// The warp kernel (softmax_topk_warp.hpp): widths around its tile (W x 16) and up to the
// planner's largest, k around the warp width and up to its largest, aligned rows (the pipelined
// tiles) and not; its tile bound at its tightest (warp_spread), tiles of many candidates (rising,
// flood, few values, constant), NaN and all -inf rows.
TEST(DriverOps, SoftmaxTopkWarpRows) {
  std::mt19937_64 rng(16);
  using R = TopkRow;
  const std::vector<R> all{R::normal, R::constant, R::half_inf, R::all_inf, R::few_values,
                           R::rising, R::outliers, R::nan, R::warp_spread, R::pos_inf};
  for (int64_t cols : {1, 2, 31, 64, 511, 512, 513, 1025, 4097}) {
    for (int64_t k : {1, 2, 8, 31, 32, 33, 63, 64}) {
      if (k > cols) continue;
      run_topk_rows<32>(ONORM_F32, cols, k, k == 33, all, rng, cols % 2);
      run_topk_rows<64>(ONORM_BF16, cols, k, k == 2, all, rng, 0);
      run_topk_rows<32>(ONORM_F16, cols, k, false, all, rng, 0);
    }
  }
  const std::vector<R> wide{R::normal, R::late_kth, R::flood, R::rising, R::few_values, R::warp_spread, R::nan};
  for (int64_t k : {1, 8, 64}) {
    run_topk_rows<32>(ONORM_BF16, gpu::kTopkWarpMaxCols, k, false, wide, rng, 0);
    run_topk_rows<64>(ONORM_F32, gpu::kTopkWarpMaxCols - 3, k, k == 8, wide, rng, 1);
  }
  for (int64_t cols : {3000, 20000}) {
    run_topk_rows<32>(ONORM_F32, cols, 8, false, {R::straddle, R::offset, R::normal}, rng, 0);
    run_topk_rows<64>(ONORM_F32, cols, 8, false, {R::straddle, R::offset, R::normal}, rng, 1);
  }
}

// Rows past kTopkWarpMaxCols in slices, a warp each (two and four a row; eight on 32-lane warps):
// the shared filter, the first warp's merge of the lists and sums; slices' last tiles partial.
TEST(DriverOps, SoftmaxTopkSlicedRows) {
  std::mt19937_64 rng(17);
  using R = TopkRow;
  const std::vector<R> wide{R::normal, R::late_kth, R::flood, R::rising, R::warp_spread, R::nan, R::outliers};
  for (int64_t k : {1, 8, 64}) {
    run_topk_rows<32>(ONORM_BF16, gpu::kTopkWarpMaxCols + 1, k, k == 8, wide, rng, 0);
    run_topk_rows<64>(ONORM_F32, 3 * gpu::kTopkWarpMaxCols + 5, k, false, wide, rng, 1);
  }
  run_topk_rows<32>(ONORM_F32, 2 * gpu::kTopkWarpMaxCols + 3, 8, false, {R::straddle, R::offset}, rng, 1);
  run_topk_rows<32>(ONORM_F16, 7 * gpu::kTopkWarpMaxCols + 9, 8, false, {R::normal, R::late_kth, R::rising}, rng, 0);
}

// 2^24 + 3 columns: 4096 tiles a thread, summed in float (softmax_topk.hpp, TopkSum) within
// the bound.
TEST(DriverOps, SoftmaxTopkLongRow) {
  std::mt19937_64 rng(14);
  run_topk_rows<32>(ONORM_F32, (int64_t(1) << 24) + 3, 8, false, {TopkRow::normal}, rng, 0);
}

// ------------------------------------------------------------------ partial row states
// The rows cut into column slices: each slice's stats, the merge, each slice's finish; y and
// mean / rstd against the whole row's reference. Slices in the register placement's reach take
// it (stage_rows_kernel), the others, or all with `two_read`, the two-read schedule.
// eps == 0: row 0 holds values near 1e-30 (their squares underflow a float).
template <int W, typename Op>
void run_partial(onorm_ref::Op rop, onorm_dtype t, int64_t cols, int parts, std::mt19937_64& rng, double eps = 1e-5,
                 bool two_read = false) {
  SCOPED_TRACE("W" + std::to_string(W) + " " + onorm_ref::op_name(rop) + " cols " + std::to_string(cols) + " parts " +
               std::to_string(parts) + (two_read ? " two-read" : ""));
  using S = gpu::partial_state_t<Op>;
  using StatsOp = typename std::conditional<std::is_same<Op, ops::RmsNorm>::value, ops::LayerNorm,
                                            typename std::conditional<std::is_same<Op, ops::LogSoftmax>::value,
                                                                      ops::Softmax, Op>::type>::type;
  ASSERT_EQ(t, ONORM_F32) << "the kernels below are instantiated for f32 rows";
  const int64_t rows = 3;
  const bool norm = rop == onorm_ref::Op::layer_norm || rop == onorm_ref::Op::rms_norm;
  Rows x(t, rows, cols, cols + 5, 0);
  std::normal_distribution<double> n01(0.0, 1.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      x.set(i, j, (norm && i == 0 && eps == 0 ? 1e-30 : 1.0) * ((norm && i == 1 ? 1e4 : 0.0) + 2.0 * n01(rng)));
  for (int64_t j = 0; j < cols; ++j) x.set(2, j, norm ? 0.25 : -kInf);  // constant (norms), all -inf
  Rows gamma(t, 1, cols, cols), beta(t, 1, cols, cols);
  for (int64_t j = 0; j < cols; ++j) {
    gamma.set(0, j, 1.0 + 0.3 * n01(rng));
    beta.set(0, j, n01(rng));
  }
  Rows y(ONORM_F32, rows, cols, cols);
  std::vector<float> mean(rows, -7.0f), rstd(rows, -7.0f);
  std::vector<S> states(size_t(parts) * rows);
  std::vector<int64_t> cut(parts + 1);
  for (int p = 0; p <= parts; ++p) cut[p] = cols * p / parts;
  DriverLauncher l(W);
  if (two_read) l.caps().reg_max_cols_f32 = 0;
  const bool registers = !two_read && cols / parts + 1 <= l.caps().reg_max_cols_f32;
  for (int p = 0; p < parts; ++p) {
    onorm_request q{};
    q.op = ONORM_OP_SOFTMAX;
    q.inputs = 1;
    q.in[0] = x.r;
    q.in[0].data = static_cast<char*>(x.r.data) + cut[p] * esize(t);
    q.in[0].cols = cut[p + 1] - cut[p];
    ASSERT_EQ((gpu::place_stats<gpu::Row<StatsOp, float>, W>(gpu::row_args(q), l, &states[size_t(p) * rows])), ONORM_OK);
  }
  ASSERT_TRUE(l.errors().empty()) << l.errors();
  ASSERT_EQ(l.template merge_parts<S>(rows, parts, states.data(), states.data()), ONORM_OK);  // out == in
  for (int p = 0; p < parts; ++p) {
    onorm_request q{};
    q.op = ONORM_OP_LAYER_NORM;
    q.inputs = q.outputs = 1;
    q.in[0] = x.r;
    q.in[0].data = static_cast<char*>(x.r.data) + cut[p] * esize(t);
    q.in[0].cols = cut[p + 1] - cut[p];
    q.out[0] = y.r;
    q.out[0].data = static_cast<float*>(y.r.data) + cut[p];
    q.out[0].cols = q.in[0].cols;
    if (norm) {
      q.col[0] = static_cast<char*>(gamma.r.data) + cut[p] * esize(t);
      if (rop == onorm_ref::Op::layer_norm) q.col[1] = static_cast<char*>(beta.r.data) + cut[p] * esize(t);
      q.col_dtype = t;
      q.param[0] = eps;
      q.row_out[0] = rop == onorm_ref::Op::layer_norm ? mean.data() : rstd.data();
      q.row_out[1] = rop == onorm_ref::Op::layer_norm ? rstd.data() : nullptr;
    }
    ASSERT_EQ((gpu::place_finish<gpu::Row<Op, float>, W>(gpu::row_args(q), l, states.data())),
              ONORM_OK);
  }
  ASSERT_TRUE(l.errors().empty()) << l.errors();
  EXPECT_EQ(l.stage_rows_launches(), registers ? 2 * parts : 0);
  const onorm_ref::Result ref =
      onorm_ref::compute(rop, x.r, norm ? gamma.r.data : nullptr, rop == onorm_ref::Op::layer_norm ? beta.r.data : nullptr, eps);
  const onorm_ref::Report rep = onorm_ref::check(rop, ref, y.r, norm ? gamma.r.data : nullptr, t,
                                                 rop == onorm_ref::Op::layer_norm ? mean.data() : nullptr,
                                                 norm ? rstd.data() : nullptr);
  EXPECT_TRUE(rep.ok()) << rep.describe();
}

TEST(DriverOps, PartialStates) {
  std::mt19937_64 rng(5);
  run_partial<32, ops::Softmax>(onorm_ref::Op::softmax, ONORM_F32, 40000, 3, rng);
  run_partial<64, ops::LogSoftmax>(onorm_ref::Op::log_softmax, ONORM_F32, 999, 4, rng);
  run_partial<32, ops::LayerNorm>(onorm_ref::Op::layer_norm, ONORM_F32, 20000, 2, rng);
  run_partial<64, ops::RmsNorm>(onorm_ref::Op::rms_norm, ONORM_F32, 3000, 3, rng);
  run_partial<64, ops::LayerNorm>(onorm_ref::Op::layer_norm, ONORM_F32, 777, 2, rng, 0.0);
  run_partial<32, ops::RmsNorm>(onorm_ref::Op::rms_norm, ONORM_F32, 777, 2, rng, 0.0);
  run_partial<32, ops::Softmax>(onorm_ref::Op::softmax, ONORM_F32, 40000, 2, rng);  // slices past the registers
  run_partial<32, ops::LogSoftmax>(onorm_ref::Op::log_softmax, ONORM_F32, 5000, 3, rng, 1e-5, true);
  run_partial<64, ops::LayerNorm>(onorm_ref::Op::layer_norm, ONORM_F32, 20000, 2, rng, 1e-5, true);
  run_partial<32, ops::RmsNorm>(onorm_ref::Op::rms_norm, ONORM_F32, 777, 2, rng, 0.0, true);
}

TEST(DriverOps, StatsOfNoColumnsAndMergeOfNoParts) {
  DriverLauncher l(32);
  std::vector<onorm::core::Welford<double>> w(5, onorm::core::Welford<double>{9, 1.0, 2.0});
  onorm_request q{};
  q.op = ONORM_OP_LAYER_NORM;
  q.inputs = 1;
  q.in[0] = onorm_rows{nullptr, ONORM_F32, 5, 0, 0};
  ASSERT_EQ((gpu::place_stats<gpu::Row<ops::LayerNorm, float>, 32>(gpu::row_args(q), l, w.data())), ONORM_OK);
  for (const auto& s : w) EXPECT_TRUE(s.n == 0 && s.mean == 0.0 && s.m2 == 0.0);
  std::vector<onorm::core::MaxSum<float>> m(3, onorm::core::MaxSum<float>{1.0f, 1.0f});
  ASSERT_EQ(l.template merge_parts<onorm::core::MaxSum<float>>(3, 0, nullptr, m.data()), ONORM_OK);
  for (const auto& s : m) EXPECT_TRUE(s.is_identity() && s.d == 0.0f);
  ASSERT_TRUE(l.errors().empty()) << l.errors();
}

}  // namespace
