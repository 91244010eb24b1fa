// Every op x input dtype x output dtype on every backend, over awkward widths, strides,
// unaligned pointers, in-place runs, gamma/beta NULL and not, with the statistics outputs,
// against the float64 reference and the contract's bounds. A dtype a backend may refuse
// (F64 on a GPU) must be refused with UNSUPPORTED and nothing written. Softmax backward's dy
// takes every dtype too, independently of y and dx, and dx runs in place over y and over dy.
#include <tuple>

#include "common/op_case.hpp"

namespace onorm_test {
namespace {

using Param = std::tuple<onorm_backend, Op, onorm_dtype, onorm_dtype>;

class OpsTest : public ::testing::TestWithParam<Param> {};

// Layout variants, cycled over widths so that each width sees several of them.
std::vector<Layout> layouts(Op op, onorm_dtype in, onorm_dtype out, int dy = -1) {
  std::vector<Layout> v;
  Layout dense;  // stride == cols, aligned, no gamma/beta, no statistics
  v.push_back(dense);
  Layout padded;  // stride > cols, pointers one element off alignment, everything optional on
  padded.x_pad = 3;
  padded.y_pad = 5;
  padded.x_offset = 1;
  padded.y_offset = 1;
  padded.gamma = padded.beta = padded.mean = padded.rstd = true;
  v.push_back(padded);
  Layout odd;  // odd offsets of several elements, gamma without beta, rstd only
  odd.x_pad = 1;
  odd.y_pad = 0;
  odd.x_offset = 3;
  odd.y_offset = 7;
  odd.gamma = true;
  odd.rstd = true;
  odd.eps = 0.25;
  v.push_back(odd);
  if (esize(in) == esize(out)) {
    Layout inplace;
    inplace.in_place = true;
    inplace.x_pad = 2;
    inplace.x_offset = 1;
    inplace.beta = true;  // beta without gamma
    inplace.mean = true;
    v.push_back(inplace);
    Layout inplace_dense;
    inplace_dense.in_place = true;
    inplace_dense.gamma = inplace_dense.beta = inplace_dense.mean = inplace_dense.rstd = true;
    v.push_back(inplace_dense);
  }
  if (op_inputs(op) > 1 && dy >= 0 && esize(static_cast<onorm_dtype>(dy)) == esize(out)) {
    Layout over_dy;  // dx == dy
    over_dy.in_place = true;
    over_dy.alias = 1;
    over_dy.x_pad = 1;
    over_dy.x_offset = 2;
    v.push_back(over_dy);
  }
  for (Layout& l : v) l.dy_dtype = dy;
  return v;
}

TEST_P(OpsTest, MatchesReference) {
  const auto [backend, op, in, out] = GetParam();
  ONORM_OPEN_OR_SKIP(ctx, backend);
  ONORM_SEEDED_RNG(rng);

  // The contract lets this backend refuse a dtype: it must say UNSUPPORTED and write nothing.
  auto expect_refused = [&](onorm_dtype dy_dt) {
    Tensor x(ctx, in, 2, 9), dy(ctx, dy_dt, 2, 9), y(ctx, out, 2, 9);
    x.fill([](int64_t r, int64_t c) { return 0.5 * r - 0.25 * c; });
    dy.fill([](int64_t r, int64_t c) { return 0.25 * r + 0.5 * c; });
    y.poison();
    const std::vector<unsigned char> x_before = x.image(), dy_before = dy.image(), y_before = y.image();
    const onorm_rows dyr = dy.dev_rows();
    OpArgs a;
    a.dy = &dyr;
    EXPECT_EQ(run_op(ctx, op, x.dev_rows(), y.dev_rows(), a), ONORM_ERROR_UNSUPPORTED);
    EXPECT_STRNE(onorm_last_error(), "");
    onorm_synchronize(ctx);
    x.download();
    dy.download();
    y.download();
    EXPECT_TRUE(x.same_image(x_before, "x"));
    EXPECT_TRUE(dy.same_image(dy_before, "dy"));
    EXPECT_TRUE(y.same_image(y_before, "y"));
  };
  if (!contract_supports(backend, in) || !contract_supports(backend, out)) return expect_refused(in);

  struct Width {
    int64_t cols, rows;
  };
  const Width widths[] = {{1, 7}, {3, 5}, {127, 4}, {1025, 3}, {65537, 2}};
  // Softmax backward: dy in every dtype at the short widths, one per width beyond.
  std::vector<int> dys = {-1};
  if (op_inputs(op) > 1) {
    dys.clear();
    for (onorm_dtype d : float_dtypes()) dys.push_back(d);
  }
  for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; ++wi) {
    const Width& w = widths[wi];
    for (size_t di = 0; di < dys.size(); ++di) {
      if (w.cols > 200 && di != wi % dys.size()) continue;
      if (dys[di] >= 0 && !contract_supports(backend, static_cast<onorm_dtype>(dys[di]))) {
        expect_refused(static_cast<onorm_dtype>(dys[di]));
        continue;
      }
      const std::vector<Layout> ls = layouts(op, in, out, dys[di]);
      for (size_t li = 0; li < ls.size(); ++li) {
        const Layout& L = ls[li];
        // long rows: padded/unaligned and in place (over y, over dy) only
        if (w.cols > 10000 && li != 1 && li != 3 && !(L.in_place && L.alias == 1)) continue;
        EXPECT_TRUE(run_checked(ctx, op, in, out, w.rows, w.cols, L, rng));
        if (HasFailure()) return;  // one clear failure, not hundreds
      }
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto [b, op, in, out] = info.param;
  return std::string(backend_name(b)) + "_" + onorm_ref::op_name(op) + "_" + dtype_name(in) + "_" + dtype_name(out);
}

// A handful of extra shapes around powers of two and vector widths, for same-dtype runs and
// bf16 -> f32 (the mixed pairs run in OpsTest).
using WidthParam = std::tuple<onorm_backend, Op, std::pair<onorm_dtype, onorm_dtype>>;
class WidthsTest : public ::testing::TestWithParam<WidthParam> {};

TEST_P(WidthsTest, AroundPowersOfTwo) {
  const auto [backend, op, dts] = GetParam();
  ONORM_OPEN_OR_SKIP(ctx, backend);
  ONORM_SEEDED_RNG(rng);
  // 767-769, 1535-1537 and 3071-3073: the edges of the 16-bit shapes of three times a power of two;
  // 5121, 6144 and 7169: LayerNorm f32's shapes of 32 floats a thread (GPU register rows).
  for (int64_t cols : {2, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 255, 256, 257, 767, 768, 769, 1023, 1024,
                       1535, 1536, 1537, 2047, 2048, 2049, 3071, 3072, 3073, 4095, 4096, 4097, 5121, 6144, 7169, 8191,
                       8193, 16384, 32769}) {
    Layout L;
    // Odd widths, and the shapes of three items a thread whole (768, 1536, 3072: gamma and beta
    // loaded a window of items at a time), with every optional argument.
    L.gamma = L.beta = L.mean = L.rstd = (cols % 2) == 1 || cols % 768 == 0;
    L.y_pad = cols % 3;
    EXPECT_TRUE(run_checked(ctx, op, dts.first, dts.second, 3, cols, L, rng));
    if (HasFailure()) return;
  }
}

std::string width_param_name(const ::testing::TestParamInfo<WidthParam>& info) {
  const auto [b, op, dts] = info.param;
  return std::string(backend_name(b)) + "_" + onorm_ref::op_name(op) + "_" + dtype_name(dts.first) + "_" +
         dtype_name(dts.second);
}

INSTANTIATE_TEST_SUITE_P(All, WidthsTest,
                         ::testing::Combine(::testing::ValuesIn(all_backends()), ::testing::ValuesIn(all_ops()),
                                            ::testing::Values(std::make_pair(ONORM_F32, ONORM_F32),
                                                              std::make_pair(ONORM_F16, ONORM_F16),
                                                              std::make_pair(ONORM_BF16, ONORM_BF16),
                                                              std::make_pair(ONORM_BF16, ONORM_F32))),
                         width_param_name);

INSTANTIATE_TEST_SUITE_P(All, OpsTest,
                         ::testing::Combine(::testing::ValuesIn(all_backends()), ::testing::ValuesIn(all_ops()),
                                            ::testing::ValuesIn(float_dtypes()), ::testing::ValuesIn(float_dtypes())),
                         param_name);

// Rows longer than 2^24: statistics count in 64 bits and merge pairwise, so the bound holds.
// One row only (the sanitizer build runs this too).
class LongRowTest : public ::testing::TestWithParam<onorm_backend> {};

TEST_P(LongRowTest, BeyondTwoToTheTwentyFour) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  const int64_t cols = (int64_t{1} << 24) + 77;
  struct Case {
    Op op;
    onorm_dtype dt;
  };
  const Case cases[] = {{Op::softmax, ONORM_F32}, {Op::layer_norm, ONORM_F32}, {Op::rms_norm, ONORM_BF16},
                        {Op::log_softmax, ONORM_BF16}, {Op::softmax_backward, ONORM_F32},
                        {Op::log_softmax_backward, ONORM_F32}};
  for (const Case& c : cases) {
    Layout L;
    L.mean = L.rstd = true;
    // An offset mean makes a single running f32 sum drift visibly; values stay representable.
    const double center = c.op == Op::layer_norm ? 3.0 : 0.0;
    // The backward passes: y of probabilities (about 1 / cols each) or their logarithms, dy N(0,1).
    const Generator gen =
        c.op == Op::softmax_backward       ? Generator([&](int64_t, int64_t) { return std::exp(cheap_normal(rng, 0.0, 1.0)) / cols; })
        : c.op == Op::log_softmax_backward ? Generator([&](int64_t, int64_t) { return cheap_normal(rng, 0.0, 1.0) - std::log(double(cols)); })
                                           : Generator([&](int64_t, int64_t) { return cheap_normal(rng, center, 1.0); });
    EXPECT_TRUE(run_checked(ctx, c.op, c.dt, c.dt, 1, cols, L, rng, gen, nullptr,
                            [&](int64_t, int64_t) { return cheap_normal(rng, 0.0, 1.0); }));
  }
}

// Softmax rows on both sides of the CPU's kept-lift limit (backends/cpu/kernels.hpp,
// kScratchCols = 2^18 columns): up to it the write pass finishes from the exp(x - m_chunk) kept
// in pass 2, beyond it the exp is taken again from x. Both within the bound, f32 and bf16.
TEST_P(LongRowTest, SoftmaxAroundTheKeptLiftLimit) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  for (const int64_t cols : {int64_t{1} << 18, (int64_t{1} << 18) + 1}) {
    for (const onorm_dtype dt : {ONORM_F32, ONORM_BF16}) {
      EXPECT_TRUE(run_checked(ctx, Op::softmax, dt, dt, 2, cols, Layout{}, rng));
    }
  }
}

// Rows that the GPUs stream through resident clusters (16-bit from 4 slices of 8192 columns,
// f32 softmax from 8 and RMSNorm from 16 slices), more rows than an H200 keeps clusters
// resident so that some walk two or more; gamma and beta on a 16-byte boundary and one element
// past it (RMSNorm's stream copies its column slices into shared memory once, by vectors or by
// elements; 16-bit LayerNorm's reads them item by item in its finish from the second stage; f32
// LayerNorm takes a cluster a row). Softmax (no column vectors) once a shape. The CPU (no
// clusters) runs two rows a shape: its column vectors off alignment, rows split over threads.
TEST_P(LongRowTest, StreamedRowsWithColumnVectorsOnAndOffAlignment) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  const bool cpu = GetParam() == ONORM_BACKEND_CPU;
  ONORM_SEEDED_RNG(rng);
  struct Shape {
    onorm_dtype dt;
    int64_t rows, cols;
  };
  struct Case {
    Op op;
    size_t col_offset;
  };
  // 300 rows of 32768 bf16: three rows or more a resident cluster (each of a stream's two
  // stages takes a row twice).
  const Shape shapes[] = {{ONORM_BF16, 300, 32768}, {ONORM_BF16, 40, 131072}, {ONORM_F32, 20, 262144}};
  const Case cases[] = {{Op::rms_norm, 0}, {Op::rms_norm, 1}, {Op::layer_norm, 0}, {Op::layer_norm, 1}, {Op::softmax, 0}};
  for (const Shape& sh : shapes) {
    for (const Case& c : cases) {
      Layout L;
      L.gamma = L.beta = L.mean = L.rstd = true;
      L.col_offset = c.col_offset;
      const int64_t rows = cpu ? 2 : sh.rows;
      EXPECT_TRUE(run_checked(ctx, c.op, sh.dt, sh.dt, rows, sh.cols, L, rng)) << rows << " x " << sh.cols;
      if (HasFailure()) return;
    }
  }
}

// Long rows off a 16-byte boundary (an odd row length in 16-bit, a stride of cols + 3 with x
// one element past the boundary, in place), more rows than an H200 keeps clusters resident:
// the GPUs' cluster rows load them shifted (16-bit) or through a warp's buffer (f32), the
// cluster stream writes 16-bit rows through that buffer as words (both word parities), and
// their first and last slices end off a boundary; 16-bit LayerNorm's and RMSNorm's column
// vectors one element off alignment with a last slice of an odd length. The CPU: two rows a
// case.
TEST_P(LongRowTest, RowsOffABoundary) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  const bool cpu = GetParam() == ONORM_BACKEND_CPU;
  ONORM_SEEDED_RNG(rng);
  struct Case {
    Op op;
    onorm_dtype dt;
    int64_t rows, cols;
    int layout;  // 0: dense, 1: x and y one element past a boundary, padded rows, 2: in place
  };
  const Case cases[] = {{Op::softmax, ONORM_BF16, 300, 32001, 0},      {Op::log_softmax, ONORM_BF16, 300, 32001, 1},
                        {Op::rms_norm, ONORM_BF16, 300, 32001, 1},     {Op::layer_norm, ONORM_BF16, 300, 32001, 0},
                        {Op::layer_norm, ONORM_F16, 120, 50257, 1},    {Op::softmax, ONORM_F16, 120, 50257, 2},
                        {Op::rms_norm, ONORM_F16, 120, 50257, 0},      {Op::softmax, ONORM_F32, 60, 65537, 1},
                        {Op::log_softmax, ONORM_F32, 60, 65537, 2},    {Op::rms_norm, ONORM_F32, 40, 131073, 1}};
  for (const Case& c : cases) {
    Layout L;
    if (c.layout == 1) {
      L.x_pad = 3;
      L.y_pad = 1;
      L.x_offset = L.y_offset = 1;
      L.gamma = L.beta = L.mean = L.rstd = true;
      L.col_offset = 1;
    } else if (c.layout == 2) {
      L.in_place = true;
      L.x_pad = 2;
      L.x_offset = 1;
    } else {
      L.gamma = L.rstd = true;
    }
    const int64_t rows = cpu ? 2 : c.rows;
    EXPECT_TRUE(run_checked(ctx, c.op, c.dt, c.dt, rows, c.cols, L, rng))
        << onorm_ref::op_name(c.op) << " " << dtype_name(c.dt) << " " << rows << " x " << c.cols << " layout " << c.layout;
    if (HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(All, LongRowTest, ::testing::ValuesIn(all_backends()), BackendName());

}  // namespace
}  // namespace onorm_test
