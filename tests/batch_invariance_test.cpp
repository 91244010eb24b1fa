// Batch invariance (API.md, v2): a row's outputs (y, mean, rstd) do not depend on the other
// rows of the call nor on how many there are. The same row values at the same address
// alignment modulo 16 bytes must give bitwise the same bytes alone (a batch of 1) and inside
// batches of 2, 3, 7 and 64 rows, on every backend, for every op and input dtype, at widths in
// every regime: vector tails, one and several CPU chunks (4096), the CPU split threshold
// (16384 columns, taken when rows < threads: a row alone splits, the same row in a batch does
// not) and a row beyond 2^20 columns (past the softmax scratch row). Softmax backward's y and
// dy rows both lie at the probe's alignment. The CPU runs at 2 and 4
// OpenMP threads, so batches of 1..3 rows are split at 4 and not at 2.
#include <omp.h>

#include <cstring>
#include <tuple>

#include "common/op_case.hpp"

namespace onorm_test {
namespace {

using Param = std::tuple<onorm_backend, Op, onorm_dtype>;
class BatchInvariance : public ::testing::TestWithParam<Param> {};

uintptr_t mod16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16; }

// A rows x cols tensor whose row `row` starts at want (mod 16) in the context's memory: the
// allocator's alignment is measured, then the tensor is placed with a byte offset.
Tensor placed(onorm_context ctx, onorm_dtype dt, int64_t rows, int64_t cols, int64_t row, uintptr_t want) {
  const size_t es = esize(dt);
  Tensor t(ctx, dt, rows, cols);
  const uintptr_t have = (mod16(t.dev()) + static_cast<uintptr_t>(row * cols) * es) % 16;
  if (have == want) return t;
  return Tensor(ctx, dt, rows, cols, -1, (want + 16 - have) % 16);
}

struct RowOut {
  std::vector<unsigned char> y;
  uint32_t mean = 0, rstd = 0;
};

// Runs op over a batch whose rows in `probe_rows` hold the probe values (the others random),
// with row `align_row` placed at the solo row's alignment; returns the outputs of every row
// that holds the probe and lies at that alignment.
// Two-input ops (softmax backward) read probe_dy as the probe row's dy, at the same alignment.
std::vector<std::pair<int64_t, RowOut>> run_batch(onorm_context ctx, Op op, onorm_dtype in, onorm_dtype out,
                                                  int64_t rows, const std::vector<double>& probe,
                                                  const std::vector<double>& probe_dy, int64_t align_row,
                                                  uintptr_t x_mod, uintptr_t y_mod, std::mt19937_64& rng) {
  const int64_t cols = static_cast<int64_t>(probe.size());
  Tensor x = placed(ctx, in, rows, cols, align_row, x_mod), y = placed(ctx, out, rows, cols, align_row, y_mod);
  Tensor dy;
  if (op_inputs(op) > 1) dy = placed(ctx, in, rows, cols, align_row, x_mod);
  Tensor mean(ctx, ONORM_F32, 1, rows), rstd(ctx, ONORM_F32, 1, rows);
  auto same_class = [&](int64_t r, const Tensor& t) {
    return mod16(static_cast<const char*>(t.dev()) + t.index(r, 0) * esize(t.dtype())) ==
           mod16(static_cast<const char*>(t.dev()) + t.index(align_row, 0) * esize(t.dtype()));
  };
  std::vector<bool> is_probe(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    is_probe[static_cast<size_t>(r)] = same_class(r, x) && same_class(r, y) && (!dy.ok() || same_class(r, dy));
  std::uniform_real_distribution<double> u(-3, 3);
  std::vector<double> center(static_cast<size_t>(rows));
  for (double& c : center) c = u(rng);
  x.fill([&](int64_t r, int64_t c) {
    return is_probe[static_cast<size_t>(r)] ? probe[static_cast<size_t>(c)] : cheap_normal(rng, center[static_cast<size_t>(r)], 2.0);
  });
  const onorm_rows dyr = dy.ok() ? dy.dev_rows() : onorm_rows{};
  if (dy.ok())
    dy.fill([&](int64_t r, int64_t c) {
      return is_probe[static_cast<size_t>(r)] ? probe_dy[static_cast<size_t>(c)] : cheap_normal(rng, 0.0, 1.0);
    });
  OpArgs a;
  a.dy = dy.ok() ? &dyr : nullptr;
  a.mean = has_mean(op) ? mean.dev_f32() : nullptr;
  a.rstd = has_rstd(op) ? rstd.dev_f32() : nullptr;
  std::vector<std::pair<int64_t, RowOut>> res;
  const onorm_status st = run_op(ctx, op, x.dev_rows(), y.dev_rows(), a);
  EXPECT_EQ(st, ONORM_OK) << onorm_last_error();
  if (st != ONORM_OK || onorm_synchronize(ctx) != ONORM_OK) return res;
  y.download();
  mean.download();
  rstd.download();
  EXPECT_TRUE(y.all_written("y"));
  EXPECT_TRUE(y.outside_untouched("y"));
  for (int64_t r = 0; r < rows; ++r) {
    if (!is_probe[static_cast<size_t>(r)]) continue;
    RowOut o;
    const unsigned char* p = static_cast<const unsigned char*>(y.host()) + y.index(r, 0) * esize(out);
    o.y.assign(p, p + cols * static_cast<int64_t>(esize(out)));
    std::memcpy(&o.mean, mean.host_f32() + r, 4);
    std::memcpy(&o.rstd, rstd.host_f32() + r, 4);
    res.emplace_back(r, std::move(o));
  }
  return res;
}

TEST_P(BatchInvariance, RowAloneEqualsRowInBatches) {
  const auto [backend, op, in] = GetParam();
  ONORM_OPEN_OR_SKIP(ctx, backend);
  if (!contract_supports(backend, in)) GTEST_SKIP() << dtype_name(in) << " is not taken by this backend";
  ONORM_SEEDED_RNG(rng);
  const int threads_before = omp_get_max_threads();
  std::vector<int64_t> widths = {1, 3, 127, 1025, 4096, 4097, 8193, 16385, 65537};
  if (backend == ONORM_BACKEND_CPU && in == ONORM_F32) widths.push_back((int64_t{1} << 20) + 1);
  std::vector<onorm_dtype> outs = {in};
  if (in != ONORM_F32) outs.push_back(ONORM_F32);
  const InputDist d = input_dist(op, rng);
  for (int threads : backend == ONORM_BACKEND_CPU ? std::vector<int>{2, 4} : std::vector<int>{1}) {
    if (backend == ONORM_BACKEND_CPU) omp_set_num_threads(threads);
    for (int64_t cols : widths) {
      // The probe row: op-typical values with an outlier at column 0 and at the last chunk start.
      std::vector<double> probe(static_cast<size_t>(cols));
      for (double& v : probe) v = cheap_normal(rng, d.center, d.scale);
      probe[0] += 40 * d.scale;
      probe[static_cast<size_t>((cols - 1) / 4096 * 4096)] -= 30 * d.scale;
      // Softmax backward: the probe is dy; y holds probabilities with the same outliers' places.
      std::vector<double> probe_dy;
      if (op_inputs(op) > 1) {
        probe_dy = probe;
        for (double& v : probe) v = std::exp(cheap_normal(rng, 0.0, 1.0)) / static_cast<double>(cols);
        probe[0] = 0.5;
      }
      // Fewer and smaller batches as rows grow (runtime); 3 rows split at 4 threads, 7 do not.
      const std::vector<int64_t> batches =
          cols > 70000 ? std::vector<int64_t>{2, 3} : cols > 1100 ? std::vector<int64_t>{3, 7} : std::vector<int64_t>{2, 3, 7, 64};
      for (onorm_dtype out : outs) {
        if (cols > 4097 && out != outs.front()) continue;
        SCOPED_TRACE(describe(backend, op, in, out, 1, cols) + " at " + std::to_string(threads) + " threads");
        const auto solo = run_batch(ctx, op, in, out, 1, probe, probe_dy, 0, 0, 0, rng);
        if (solo.size() != 1) return;
        const RowOut& want = solo[0].second;
        for (int64_t b : batches)
          for (int64_t align_row : {int64_t{0}, b - 1}) {
            for (const auto& [r, got] : run_batch(ctx, op, in, out, b, probe, probe_dy, align_row, 0, 0, rng)) {
              EXPECT_TRUE(got.y == want.y) << "y of row " << r << " in a batch of " << b << " differs from the row alone";
              if (has_mean(op)) {
                EXPECT_EQ(got.mean, want.mean) << "mean bits, row " << r << " of " << b;
              }
              if (has_rstd(op)) {
                EXPECT_EQ(got.rstd, want.rstd) << "rstd bits, row " << r << " of " << b;
              }
            }
            if (HasFailure()) {
              omp_set_num_threads(threads_before);
              return;
            }
          }
      }
    }
  }
  omp_set_num_threads(threads_before);
}

// Softmax rows whose sum has no dominant term and whose exp arguments lie in one narrow band
// (so that an exp's error does not average out over the row), into bf16 and f16: a row split
// over threads (on the CPU: alone, at 2 threads) against the same row in a batch of 3 (not
// split), bit for bit. A difference in the statistics of the two paths (the CPU takes a 16-bit
// output's exp in both) flips the rounding of some outputs; the outlier of the probe above
// makes the sum one term and would hide it.
TEST_P(BatchInvariance, SoftmaxBandInto16Bit) {
  const auto [backend, op, in] = GetParam();
  if (op != Op::softmax && op != Op::log_softmax) GTEST_SKIP() << "softmax and log-softmax only";
  ONORM_OPEN_OR_SKIP(ctx, backend);
  if (!contract_supports(backend, in)) GTEST_SKIP() << dtype_name(in) << " is not taken by this backend";
  ONORM_SEEDED_RNG(rng);
  const int threads_before = omp_get_max_threads();
  if (backend == ONORM_BACKEND_CPU) omp_set_num_threads(2);
  for (double band : {0.05, 0.2, 0.35, 0.5, 0.65}) {
    std::vector<double> probe(65537);
    for (size_t c = 0; c < probe.size(); ++c) probe[c] = c == 0 ? 0.0 : -(band + 0.05 * static_cast<double>(c % 4099) / 4099);
    for (onorm_dtype out : {ONORM_BF16, ONORM_F16}) {
      if (!contract_supports(backend, out)) continue;
      SCOPED_TRACE(describe(backend, op, in, out, 1, static_cast<int64_t>(probe.size())) + " band " + std::to_string(band));
      const auto solo = run_batch(ctx, op, in, out, 1, probe, {}, 0, 0, 0, rng);
      if (solo.size() != 1) break;
      for (const auto& [r, got] : run_batch(ctx, op, in, out, 3, probe, {}, 2, 0, 0, rng))
        EXPECT_TRUE(got.y == solo[0].second.y) << "y of row " << r << " in a batch of 3 differs from the row alone";
    }
  }
  omp_set_num_threads(threads_before);
}

// Batches larger than a GPU holds at once (2500 rows, several waves of blocks; at 32768 and
// 65536 columns several rows for each resident cluster that streams them): rows at the waves'
// seams and the batch's last rows equal the same rows alone, bit for bit; every element is
// written and nothing beyond (rows strided and cut inside a 16-byte vector).
TEST_P(BatchInvariance, RowAloneEqualsRowInLargeBatch) {
  const auto [backend, op, in] = GetParam();
  if (backend == ONORM_BACKEND_CPU) GTEST_SKIP() << "a GPU schedule";
  if (op_inputs(op) > 1) GTEST_SKIP() << "one input: the test fills x only";
  ONORM_OPEN_OR_SKIP(ctx, backend);
  if (!contract_supports(backend, in)) GTEST_SKIP() << dtype_name(in) << " is not taken by this backend";
  ONORM_SEEDED_RNG(rng);
  const InputDist d = input_dist(op, rng);
  struct Shape {
    int64_t rows, cols, stride;
  };
  const Shape shapes[] = {{2500, 1030, 1040},  {2500, 2048, 2048},   {2500, 4096, 4096}, {2500, 6000, 6008},
                          {2500, 16384, 16384}, {1200, 32768, 32768}, {600, 65536, 65536}};
  for (const auto& [rows, cols, stride] : shapes) {
    SCOPED_TRACE(describe(backend, op, in, in, rows, cols) + " stride " + std::to_string(stride));
    Tensor x(ctx, in, rows, cols, stride), y(ctx, in, rows, cols, stride);
    Tensor mean(ctx, ONORM_F32, 1, rows), rstd(ctx, ONORM_F32, 1, rows);
    std::uniform_real_distribution<double> u(-3, 3);
    double center = 0;
    x.fill([&](int64_t r, int64_t c) {
      if (c == 0) center = d.center + u(rng) * d.scale;
      return cheap_normal(rng, center, d.scale) + (c == (r * 131) % cols ? 40 * d.scale : 0.0);
    });
    // Runs op from x into y (and the row statistics), downloads the outputs.
    auto run = [&](const Tensor& xt, Tensor& yt, Tensor& mt, Tensor& rt) {
      OpArgs a;
      a.mean = has_mean(op) ? mt.dev_f32() : nullptr;
      a.rstd = has_rstd(op) ? rt.dev_f32() : nullptr;
      const onorm_status st = run_op(ctx, op, xt.dev_rows(), yt.dev_rows(), a);
      if (st != ONORM_OK || onorm_synchronize(ctx) != ONORM_OK) return false;
      yt.download();
      mt.download();
      rt.download();
      return true;
    };
    ASSERT_TRUE(run(x, y, mean, rstd)) << onorm_last_error();
    EXPECT_TRUE(y.all_written("y"));
    EXPECT_TRUE(y.outside_untouched("y"));
    for (int64_t r : {int64_t{0}, int64_t{1}, int64_t{263}, int64_t{264}, int64_t{1055}, int64_t{1056}, rows - 2, rows - 1}) {
      if (r >= rows) continue;
      Tensor xs(ctx, in, 1, cols), ys(ctx, in, 1, cols), ms(ctx, ONORM_F32, 1, 1), rs(ctx, ONORM_F32, 1, 1);
      std::memcpy(xs.host(), static_cast<const char*>(x.host()) + x.index(r, 0) * esize(in), cols * esize(in));
      xs.upload();
      ASSERT_TRUE(run(xs, ys, ms, rs)) << onorm_last_error();
      EXPECT_EQ(std::memcmp(ys.host(), static_cast<const char*>(y.host()) + y.index(r, 0) * esize(in), cols * esize(in)), 0)
          << "y of row " << r << " of " << rows << " differs from the row alone";
      if (has_mean(op)) {
        EXPECT_EQ(std::memcmp(ms.host_f32(), mean.host_f32() + r, 4), 0) << "mean bits, row " << r;
      }
      if (has_rstd(op)) {
        EXPECT_EQ(std::memcmp(rs.host_f32(), rstd.host_f32() + r, 4), 0) << "rstd bits, row " << r;
      }
    }
    if (HasFailure()) return;
  }
}

std::string name(const ::testing::TestParamInfo<Param>& info) {
  const auto [b, op, in] = info.param;
  return std::string(backend_name(b)) + "_" + onorm_ref::op_name(op) + "_" + dtype_name(in);
}
INSTANTIATE_TEST_SUITE_P(All, BatchInvariance,
                         ::testing::Combine(::testing::ValuesIn(all_backends()), ::testing::ValuesIn(all_ops()),
                                            ::testing::ValuesIn(float_dtypes())),
                         name);

}  // namespace
}  // namespace onorm_test
