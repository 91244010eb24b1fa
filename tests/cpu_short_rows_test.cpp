// Short rows on the CPU, which runs some of them in groups of four (16-bit rows and f32
// LayerNorm rows up to 1024 columns: backends/cpu/row_drivers-inl.h, RowGroup): row counts that
// are and are not a multiple of four, strided and element-misaligned rows, gamma/beta and the
// statistics outputs, special rows (NaN, +inf, all -inf, a large offset, values near the
// format's largest) among ordinary ones. Every batch is checked against the float64
// reference, and every row against the same row alone at the same address alignment,
// bitwise (a group must not change a row's arithmetic).
#include <cmath>
#include <cstring>
#include <limits>

#include "common/op_case.hpp"

namespace onorm_test {
namespace {

using Param = std::tuple<Op, onorm_dtype>;
class CpuShortRows : public ::testing::TestWithParam<Param> {};

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Row r's values: every fifth row from 2 on is special (the kind cycles with r), the others
// N(center_r, 2); a fixed table, so that a row alone holds the same values as in its batch.
std::vector<double> row_table(Op op, onorm_dtype dt, int64_t rows, int64_t cols, std::mt19937_64& rng) {
  const double big = dt == ONORM_F32 ? 3e38 : dt == ONORM_BF16 ? 3e38 : 6e4;
  std::normal_distribution<double> nd(0, 2);
  std::vector<double> v(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const double center = op == Op::layer_norm ? 3.0 * static_cast<double>(r % 3) : 0.5 * static_cast<double>(r % 4);
    const int kind = r % 5 == 2 ? static_cast<int>(r / 5 % 5) : -1;
    for (int64_t c = 0; c < cols; ++c) {
      double x = center + nd(rng);
      if (kind == 0 && c == cols / 2) x = kNaN;
      if (kind == 1 && c == cols - 1) x = kInf;
      if (kind == 2) x = -kInf;
      if (kind == 3) x = 1e4 + nd(rng) / 2;
      if (kind == 4) x = c % 2 ? big : -big * 0.75;
      v[static_cast<size_t>(r * cols + c)] = x;
    }
  }
  return v;
}

TEST_P(CpuShortRows, GroupedRowsMatchReferenceAndTheRowAlone) {
  const auto [op, dt] = GetParam();
  ONORM_OPEN_OR_SKIP(ctx, ONORM_BACKEND_CPU);
  if (!contract_supports(ONORM_BACKEND_CPU, dt)) GTEST_SKIP();
  ONORM_SEEDED_RNG(rng);
  const size_t es = esize(dt);
  for (int64_t cols : {1, 3, 17, 128, 129, 512, 513, 1000, 1024, 1025}) {
    for (int64_t rows : {1, 3, 4, 5, 7, 8, 9, 13}) {
      Layout L;
      L.x_pad = 3;
      L.y_pad = 5;
      L.x_offset = 1;
      L.y_offset = rows % 2;
      L.gamma = L.beta = L.mean = L.rstd = rows % 3 != 0;
      const std::vector<double> table = row_table(op, dt, rows, cols, rng);
      const Generator batch_values = [&](int64_t r, int64_t c) { return table[static_cast<size_t>(r * cols + c)]; };
      // gamma and beta come from the rng after the inputs: the same draws for the batch and
      // for every row alone.
      const std::mt19937_64 params_rng = rng;
      std::mt19937_64 r0 = params_rng;
      CaseOutput batch;
      ASSERT_TRUE(run_checked(ctx, op, dt, dt, rows, cols, L, r0, batch_values, &batch));
      for (int64_t r = 0; r < rows; ++r) {
        // The row alone, at the address (mod 16) it had in the batch.
        Layout A = L;
        A.x_offset = L.x_offset + static_cast<size_t>(r * (cols + L.x_pad));
        A.y_offset = L.y_offset + static_cast<size_t>(r * (cols + L.y_pad));
        std::mt19937_64 ra = params_rng;
        CaseOutput alone;
        const Generator row_values = [&](int64_t, int64_t c) { return batch_values(r, c); };
        ASSERT_TRUE(run_checked(ctx, op, dt, dt, 1, cols, A, ra, row_values, &alone));
        // The row lies at the same byte of both y images (A's offset is the row's in the batch).
        const size_t at = kGuard + A.y_offset * es, bytes = static_cast<size_t>(cols) * es;
        ASSERT_GE(alone.y_image.size(), at + bytes);
        EXPECT_EQ(std::memcmp(batch.y_image.data() + at, alone.y_image.data() + at, bytes), 0)
            << "y of row " << r << " of " << rows << " x " << cols << " differs from the row alone";
        const size_t stat = kGuard + static_cast<size_t>(r) * 4;
        if (has_mean(op) && L.mean) {
          EXPECT_EQ(std::memcmp(batch.mean_image.data() + stat, alone.mean_image.data() + kGuard, 4), 0) << "mean, row " << r;
        }
        if (has_rstd(op) && L.rstd) {
          EXPECT_EQ(std::memcmp(batch.rstd_image.data() + stat, alone.rstd_image.data() + kGuard, 4), 0) << "rstd, row " << r;
        }
        if (HasFailure()) return;
      }
    }
  }
}

std::string name(const ::testing::TestParamInfo<Param>& info) {
  const auto [op, dt] = info.param;
  return std::string(onorm_ref::op_name(op)) + "_" + dtype_name(dt);
}
INSTANTIATE_TEST_SUITE_P(All, CpuShortRows,
                         ::testing::Combine(::testing::Values(Op::softmax, Op::log_softmax, Op::layer_norm, Op::rms_norm),
                                            ::testing::Values(ONORM_F32, ONORM_BF16, ONORM_F16)),
                         name);

}  // namespace
}  // namespace onorm_test
