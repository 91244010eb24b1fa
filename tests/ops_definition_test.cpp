// The op definitions of core/ops on their own, through ScalarMath: a small scalar driver runs
// an op as every placement does (chunks: pass 1, pivot, pass 2, state; a left-to-right merge;
// coefs, the float64 fallback where asked, chunk_coefs, finish) and the results are compared
// with values worked by hand: each op's special-value rules (NaN rows, all -inf rows, +inf),
// empty chunks as the identity, and softmax's per-chunk coefficients.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "onlinenorm/core/ops/dispatch.hpp"
#include "reference.hpp"

namespace {

namespace ops = onorm::core::ops;
using onorm::core::MaxSum;

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// The scalar type of a state (MaxSum<T>, Welford<T>, SumSq<T>, Sum<T>).
template <template <typename> class S, typename T>
T scalar_of(const S<T>&);

template <typename Op>
struct RowRun {
  std::vector<float> y;
  bool fell_back = false;  // coefs asked for the float64 statistics
  std::vector<float> row_out = std::vector<float>(2, -1.0f);
};

// One chunk [b, e) of the row, passes in F: returns the state in T and keeps pass 2's values.
template <typename Op, typename T, typename F>
typename Op::template State<T> chunk_state(const std::vector<std::vector<float>>& in, int64_t b, int64_t e,
                                           std::vector<F>& kept) {
  const ops::ScalarMath<F> m;
  const int64_t n = e - b;
  F r1 = Op::kPass1 == ops::Pass1::kMax ? onorm::core::neg_infinity<F>() : F(0);
  for (int64_t j = b; j < e; ++j) {
    const F v = static_cast<F>(in[0][static_cast<size_t>(j)]);
    if (Op::kPass1 == ops::Pass1::kMax) r1 = onorm::core::nan_max(r1, v);
    if (Op::kPass1 == ops::Pass1::kSum) r1 += v;
  }
  const F p = Op::pivot(r1, n);
  F acc[Op::kSums > 0 ? Op::kSums : 1] = {};
  for (int64_t j = b; j < e; ++j) {
    F xs[2];
    for (int k = 0; k < Op::kInputs; ++k) xs[k] = static_cast<F>(in[static_cast<size_t>(k)][static_cast<size_t>(j)]);
    kept[static_cast<size_t>(j)] = Op::accumulate(m, acc, p, xs);
  }
  return Op::template state<T>(n, r1, p, acc);
}

// The row in chunks of `chunk` columns, with cols[] (gamma, beta) or the op's defaults.
template <typename Op>
RowRun<Op> run(const std::vector<std::vector<float>>& in, int64_t chunk, double eps = 1e-5,
            const std::vector<std::vector<float>>& colv = {}) {
  using Merged = typename Op::Merged;
  using MT = decltype(scalar_of(std::declval<Merged>()));
  const int64_t n = static_cast<int64_t>(in[0].size());
  const double param[1] = {eps};
  const typename Op::Params params = Op::params(param);
  std::vector<float> kept(static_cast<size_t>(n));
  std::vector<typename Op::template State<MT>> chunks;
  Merged row = Merged::identity();
  for (int64_t b = 0; b < n; b += chunk) {
    const int64_t e = b + chunk < n ? b + chunk : n;
    chunks.push_back(chunk_state<Op, MT, float>(in, b, e, kept));
    row = Merged::combine(row, chunks.back());
  }
  RowRun<Op> out;
  bool ok = true;
  auto c = Op::narrow(Op::coefs(row, params, ok));
  if (!ok) {  // kF64Fallback: the same passes in double
    out.fell_back = true;
    std::vector<double> kept64(static_cast<size_t>(n));
    typename Op::template State<double> row64 = Op::template State<double>::identity();
    for (int64_t b = 0; b < n; b += chunk) {
      const int64_t e = b + chunk < n ? b + chunk : n;
      row64 = Op::template State<double>::combine(row64, chunk_state<Op, double, double>(in, b, e, kept64));
    }
    bool ok64 = true;
    c = Op::narrow(Op::coefs(row64, params, ok64));
  }
  float* row_out[2] = {&out.row_out[0], &out.row_out[1]};
  Op::write_row_outputs(c, row_out, 0);
  const ops::ScalarMath<float> m;
  for (int64_t b = 0, k = 0; b < n; b += chunk, ++k) {
    const int64_t e = b + chunk < n ? b + chunk : n;
    const auto cc = Op::chunk_coefs(c, chunks[static_cast<size_t>(k)]);
    for (int64_t j = b; j < e; ++j) {
      float xs[2], cols[2];
      for (int i = 0; i < Op::kInputs; ++i) xs[i] = in[static_cast<size_t>(i)][static_cast<size_t>(j)];
      for (int i = 0; i < 2; ++i)
        cols[i] = static_cast<size_t>(i) < colv.size() ? colv[static_cast<size_t>(i)][static_cast<size_t>(j)]
                                                       : Op::col_default(i);
      if constexpr (Op::kKeepsLift) out.y.push_back(Op::finish_kept(m, cc, kept[static_cast<size_t>(j)], cols));
      else out.y.push_back(Op::finish(m, cc, xs, cols));
    }
  }
  return out;
}

template <typename Op>
void expect_all_nan(const RowRun<Op>& r, const char* what) {
  for (size_t j = 0; j < r.y.size(); ++j) EXPECT_TRUE(std::isnan(r.y[j])) << what << ": y[" << j << "] = " << r.y[j];
}

// ---- the list ----

TEST(OpList, NamesAndSignaturesComeFromTheList) {
  EXPECT_STREQ(ops::name(ONORM_OP_SOFTMAX), "softmax");
  EXPECT_STREQ(ops::name(ONORM_OP_LOG_SOFTMAX), "log_softmax");
  EXPECT_STREQ(ops::name(ONORM_OP_LAYER_NORM), "layer_norm");
  EXPECT_STREQ(ops::name(ONORM_OP_RMS_NORM), "rms_norm");
  EXPECT_STREQ(ops::name(ONORM_OP_SOFTMAX_BACKWARD), "softmax_backward");
  EXPECT_STREQ(ops::name(ONORM_OP_LOG_SOFTMAX_BACKWARD), "log_softmax_backward");
  EXPECT_EQ(ONORM_OP_COUNT, 6);
  EXPECT_EQ(ops::signature(ONORM_OP_LOG_SOFTMAX_BACKWARD).inputs, 2);
  EXPECT_FALSE(ops::valid_op(-1));
  EXPECT_FALSE(ops::is_row_op(ONORM_OP_COUNT));
  // The column ops follow the row ops.
  EXPECT_EQ(static_cast<int>(ONORM_OP_LAYER_NORM_BACKWARD), ONORM_OP_COUNT);
  EXPECT_TRUE(ops::is_column_op(ONORM_OP_RMS_NORM_BACKWARD));
  EXPECT_FALSE(ops::is_column_op(ONORM_OP_LAYER_NORM));
  EXPECT_FALSE(ops::valid_op(ONORM_OP_ALL_COUNT));
  EXPECT_STREQ(ops::name(ONORM_OP_RMS_NORM_BACKWARD), "rms_norm_backward");
  const ops::Signature& lb = ops::signature(ONORM_OP_LAYER_NORM_BACKWARD);
  EXPECT_STREQ(lb.input[2], "dresidual");
  EXPECT_STREQ(lb.row_in[1], "rstd");
  EXPECT_EQ(lb.col_outs, 2);
  EXPECT_EQ(ops::signature(ONORM_OP_RMS_NORM_BACKWARD).row_ins, 1);
  const ops::Signature& sb = ops::signature(ONORM_OP_SOFTMAX_BACKWARD);
  EXPECT_EQ(sb.inputs, 2);
  EXPECT_STREQ(sb.input[0], "y");
  EXPECT_STREQ(sb.input[1], "dy");
  EXPECT_STREQ(sb.output[0], "dx");
  EXPECT_EQ(ops::signature(ONORM_OP_LAYER_NORM).row_outs, 2);
  EXPECT_EQ(ops::signature(ONORM_OP_RMS_NORM).cols, 1);
  for (int op = 0; op < ONORM_OP_COUNT; ++op) {
    const ops::Signature& s = ops::signature(static_cast<onorm_op>(op));
    const int inputs = ops::visit(static_cast<onorm_op>(op), [](auto o) { return decltype(o)::kInputs; });
    const int cols = ops::visit(static_cast<onorm_op>(op), [](auto o) { return decltype(o)::kCols; });
    EXPECT_EQ(s.inputs, inputs) << ops::name(static_cast<onorm_op>(op));
    EXPECT_EQ(s.cols, cols) << ops::name(static_cast<onorm_op>(op));
  }
}

// The reference's ops are the list's, with the same names and inputs (it keeps its own math).
TEST(OpList, ReferenceFollowsTheList) {
  ASSERT_EQ(static_cast<int>(onorm_ref::all_ops().size()), ONORM_OP_COUNT);
  for (int i = 0; i < ONORM_OP_COUNT; ++i) {
    const onorm_ref::Op op = onorm_ref::all_ops()[static_cast<size_t>(i)];
    EXPECT_EQ(onorm_ref::to_onorm_op(op), static_cast<onorm_op>(i));
    EXPECT_STREQ(onorm_ref::op_name(op), ops::name(static_cast<onorm_op>(i)));
    EXPECT_EQ(onorm_ref::op_inputs(op), ops::signature(static_cast<onorm_op>(i)).inputs) << onorm_ref::op_name(op);
    onorm_ref::Op parsed;
    EXPECT_TRUE(onorm_ref::parse_op(ops::name(static_cast<onorm_op>(i)), parsed));
    EXPECT_EQ(parsed, op);
  }
  onorm_ref::Op unused;
  EXPECT_FALSE(onorm_ref::parse_op("softmaxx", unused));
}

// ---- softmax ----

TEST(SoftmaxOp, HandValuesAcrossChunks) {
  // x = (0, ln 3) in chunks of 1: y = (1/4, 3/4); each chunk finishes from its own max.
  const float l3 = std::log(3.0f);
  for (int64_t chunk : {1, 2}) {
    const RowRun<ops::Softmax> r = run<ops::Softmax>({{0.0f, l3}}, chunk);
    ASSERT_EQ(r.y.size(), 2u);
    EXPECT_NEAR(r.y[0], 0.25f, 1e-7f);
    EXPECT_NEAR(r.y[1], 0.75f, 1e-7f);
    EXPECT_FALSE(r.fell_back);
  }
}

TEST(SoftmaxOp, SpecialValues) {
  // All -inf: zeros (in one chunk and across chunks).
  for (int64_t chunk : {1, 2, 4}) {
    const RowRun<ops::Softmax> r = run<ops::Softmax>({{-kInf, -kInf, -kInf, -kInf}}, chunk);
    for (float v : r.y) EXPECT_EQ(v, 0.0f);
  }
  // A NaN anywhere (in any chunk) or a +inf: the row is NaN.
  for (int64_t chunk : {1, 2, 4}) {
    expect_all_nan(run<ops::Softmax>({{1.0f, kNaN, -kInf, 2.0f}}, chunk), "NaN");
    expect_all_nan(run<ops::Softmax>({{1.0f, 2.0f, -kInf, kNaN}}, chunk), "NaN last");
    expect_all_nan(run<ops::Softmax>({{1.0f, kInf, 0.0f, 2.0f}}, chunk), "+inf");
    expect_all_nan(run<ops::Softmax>({{kInf, kInf, kInf, kInf}}, chunk), "all +inf");
  }
  // -inf elements are exactly 0; an all -inf chunk beside a finite one gives 0 there.
  const RowRun<ops::Softmax> r = run<ops::Softmax>({{-kInf, -kInf, 0.0f, 0.0f}}, 2);
  EXPECT_EQ(r.y[0], 0.0f);
  EXPECT_EQ(r.y[1], 0.0f);
  EXPECT_FLOAT_EQ(r.y[2], 0.5f);
  EXPECT_FLOAT_EQ(r.y[3], 0.5f);
}

TEST(SoftmaxOp, EmptyChunkIsTheIdentityAndChunkCoefs) {
  using S = MaxSum<float>;
  // An all -inf chunk's state is the identity: merging it changes nothing, bit for bit.
  std::vector<float> kept(2);
  const S empty = chunk_state<ops::Softmax, float, float>({{-kInf, -kInf}}, 0, 2, kept);
  EXPECT_TRUE(empty.is_identity());
  const S a = S::of(2.0f, 1.5f);
  const S l = S::combine(empty, a), rr = S::combine(a, empty);
  EXPECT_EQ(l.m, a.m);
  EXPECT_EQ(l.d, a.d);
  EXPECT_EQ(rr.m, a.m);
  EXPECT_EQ(rr.d, a.d);
  // chunk_coefs: a chunk at the row max keeps the row's coefficients; a lower one is scaled by
  // exp(m_c - M); an all -inf one gives 0 (NaN in a NaN row).
  bool ok = false;
  const auto c = ops::Softmax::coefs(S::of(1.0f, 4.0f), ops::Softmax::Params{}, ok);
  EXPECT_TRUE(ok);
  EXPECT_EQ(c.pivot, 1.0f);
  EXPECT_EQ(c.scale, 0.25f);
  const auto same = ops::Softmax::chunk_coefs(c, S::of(1.0f, 2.0f));
  EXPECT_EQ(same.pivot, 1.0f);
  EXPECT_EQ(same.scale, 0.25f);
  const auto lower = ops::Softmax::chunk_coefs(c, S::of(0.0f, 2.0f));
  EXPECT_EQ(lower.pivot, 0.0f);
  EXPECT_FLOAT_EQ(lower.scale, std::exp(-1.0f) * 0.25f);
  const auto masked = ops::Softmax::chunk_coefs(c, S::identity());
  EXPECT_EQ(masked.scale, 0.0f);
  const auto nan_row = ops::Softmax::coefs(S::of(kNaN, 1.0f), ops::Softmax::Params{}, ok);
  EXPECT_TRUE(std::isnan(ops::Softmax::chunk_coefs(nan_row, S::identity()).scale));
}

// ---- log-softmax ----

TEST(LogSoftmaxOp, HandValuesAndSpecialValues) {
  const float l3 = std::log(3.0f);
  const RowRun<ops::LogSoftmax> r = run<ops::LogSoftmax>({{0.0f, l3}}, 1);
  EXPECT_NEAR(r.y[0], std::log(0.25f), 1e-6f);
  EXPECT_NEAR(r.y[1], std::log(0.75f), 1e-6f);
  for (int64_t chunk : {1, 3}) {
    // All -inf: -inf everywhere.
    for (float v : run<ops::LogSoftmax>({{-kInf, -kInf, -kInf}}, chunk).y) EXPECT_EQ(v, -kInf);
    // -inf elements stay -inf among finite ones.
    const RowRun<ops::LogSoftmax> p = run<ops::LogSoftmax>({{-kInf, 0.0f, 0.0f}}, chunk);
    EXPECT_EQ(p.y[0], -kInf);
    EXPECT_NEAR(p.y[1], -std::log(2.0f), 1e-6f);
    expect_all_nan(run<ops::LogSoftmax>({{0.0f, kNaN, 1.0f}}, chunk), "NaN");
    expect_all_nan(run<ops::LogSoftmax>({{0.0f, 1.0f, kInf}}, chunk), "+inf");
  }
}

// ---- LayerNorm ----

TEST(LayerNormOp, HandValues) {
  // x = (1, 2, 3, 4): mean 2.5, var 1.25, eps 0: rstd = 1/sqrt(1.25); gamma 2, beta 1.
  for (int64_t chunk : {1, 2, 3, 4}) {
    const RowRun<ops::LayerNorm> r =
        run<ops::LayerNorm>({{1.0f, 2.0f, 3.0f, 4.0f}}, chunk, 0.0, {{2.0f, 2.0f, 2.0f, 2.0f}, {1.0f, 1.0f, 1.0f, 1.0f}});
    const double rstd = 1.0 / std::sqrt(1.25);
    EXPECT_FLOAT_EQ(r.row_out[0], 2.5f);
    EXPECT_FLOAT_EQ(r.row_out[1], static_cast<float>(rstd));
    for (int j = 0; j < 4; ++j) EXPECT_NEAR(r.y[static_cast<size_t>(j)], (j + 1 - 2.5) * rstd * 2 + 1, 4e-6) << j;
    EXPECT_FALSE(r.fell_back);
  }
  // Defaults: gamma 1, beta 0; a constant row gives 0 (var 0, eps 1e-5).
  for (float v : run<ops::LayerNorm>({{3.0f, 3.0f, 3.0f}}, 2).y) EXPECT_EQ(v, 0.0f);
}

TEST(LayerNormOp, SpecialValuesAndFallback) {
  for (int64_t chunk : {1, 2, 4}) {
    expect_all_nan(run<ops::LayerNorm>({{1.0f, kNaN, 2.0f, 3.0f}}, chunk), "NaN");
    expect_all_nan(run<ops::LayerNorm>({{1.0f, kInf, 2.0f, 3.0f}}, chunk), "+inf");
    expect_all_nan(run<ops::LayerNorm>({{1.0f, -kInf, 2.0f, 3.0f}}, chunk), "-inf");
  }
  // Values whose squares overflow float: the double statistics are asked for, and the outputs
  // are finite and right: (3e38, -3e38) -> (1, -1).
  const RowRun<ops::LayerNorm> big = run<ops::LayerNorm>({{3e38f, -3e38f}}, 2, 0.0);
  EXPECT_TRUE(big.fell_back);
  EXPECT_NEAR(big.y[0], 1.0f, 1e-6f);
  EXPECT_NEAR(big.y[1], -1.0f, 1e-6f);
}

// ---- RMSNorm ----

TEST(RmsNormOp, HandValuesSpecialValuesAndFallback) {
  // x = (3, 4): mean square 12.5, eps 0: rstd = 1/sqrt(12.5); gamma (1, 2).
  for (int64_t chunk : {1, 2}) {
    const RowRun<ops::RmsNorm> r = run<ops::RmsNorm>({{3.0f, 4.0f}}, chunk, 0.0, {{1.0f, 2.0f}});
    const double rstd = 1.0 / std::sqrt(12.5);
    EXPECT_FLOAT_EQ(r.row_out[0], static_cast<float>(rstd));
    EXPECT_NEAR(r.y[0], 3 * rstd, 1e-6);
    EXPECT_NEAR(r.y[1], 8 * rstd, 1e-6);
  }
  for (int64_t chunk : {1, 2}) {
    expect_all_nan(run<ops::RmsNorm>({{1.0f, kNaN}}, chunk), "NaN");
    // An infinity makes rstd 0: finite elements give 0, the infinite one 0 * inf = NaN (as the
    // float64 reference has it; API.md makes only NaN, and +inf in softmax rows, whole-row NaN).
    const RowRun<ops::RmsNorm> inf = run<ops::RmsNorm>({{1.0f, kInf}}, chunk);
    EXPECT_EQ(inf.y[0], 0.0f);
    EXPECT_TRUE(std::isnan(inf.y[1]));
    EXPECT_EQ(inf.row_out[0], 0.0f);
  }
  // Tiny values with eps 0: squares underflow float; the double statistics keep the scale.
  const RowRun<ops::RmsNorm> tiny = run<ops::RmsNorm>({{3e-30f, 4e-30f}}, 1, 0.0);
  EXPECT_TRUE(tiny.fell_back);
  EXPECT_NEAR(tiny.y[0], 3 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(tiny.y[1], 4 / std::sqrt(12.5), 1e-6);
}

// ---- softmax backward ----

TEST(SoftmaxBackwardOp, HandValues) {
  // y = (0.25, 0.75), dy = (1, 3): s = 2.5, dx = (-0.375, 0.375), in one chunk or two.
  for (int64_t chunk : {1, 2}) {
    const RowRun<ops::SoftmaxBackward> r = run<ops::SoftmaxBackward>({{0.25f, 0.75f}, {1.0f, 3.0f}}, chunk);
    EXPECT_EQ(r.y[0], -0.375f);
    EXPECT_EQ(r.y[1], 0.375f);
    EXPECT_FALSE(r.fell_back);
  }
  // A constant dy gives dx = y * dy * (1 - sum y) = 0 for a y summing to 1.
  for (float v : run<ops::SoftmaxBackward>({{0.5f, 0.25f, 0.25f}, {2.0f, 2.0f, 2.0f}}, 2).y) EXPECT_EQ(v, 0.0f);
}

TEST(SoftmaxBackwardOp, SpecialValuesAndEmptyChunk) {
  for (int64_t chunk : {1, 2, 4}) {
    expect_all_nan(run<ops::SoftmaxBackward>({{0.25f, kNaN, 0.25f, 0.5f}, {1.0f, 2.0f, 3.0f, 4.0f}}, chunk), "NaN in y");
    expect_all_nan(run<ops::SoftmaxBackward>({{0.25f, 0.0f, 0.25f, 0.5f}, {1.0f, 2.0f, 3.0f, kNaN}}, chunk),
                   "NaN in dy");
  }
  // The state's identity is the empty sum; a chunk of zeros in y is the identity too.
  using S = onorm::core::Sum<float>;
  std::vector<float> kept(2);
  const S zeros = chunk_state<ops::SoftmaxBackward, float, float>({{0.0f, 0.0f}, {5.0f, -7.0f}}, 0, 2, kept);
  EXPECT_EQ(zeros.s, S::identity().s);
  EXPECT_EQ(S::combine(S::identity(), S::of(1.5f)).s, 1.5f);
  // chunk_coefs is the row's coefficient in every chunk.
  bool ok = false;
  const auto c = ops::SoftmaxBackward::coefs(S::of(2.5f), ops::SoftmaxBackward::Params{}, ok);
  EXPECT_TRUE(ok);
  EXPECT_EQ(ops::SoftmaxBackward::chunk_coefs(c, S::of(-1.0f)).s, 2.5f);
}

// ---- log-softmax backward ----

TEST(LogSoftmaxBackwardOp, HandValues) {
  // y = (0, -inf), dy = (1, 3): s = 4, dx = (1 - 4, 3 - 0) = (-3, 3), in one chunk or two.
  for (int64_t chunk : {1, 2}) {
    const RowRun<ops::LogSoftmaxBackward> r = run<ops::LogSoftmaxBackward>({{0.0f, -kInf}, {1.0f, 3.0f}}, chunk);
    EXPECT_EQ(r.y[0], -3.0f);
    EXPECT_EQ(r.y[1], 3.0f);
    EXPECT_FALSE(r.fell_back);
  }
  // A masked row (y all -inf) passes dy through; y above 0 is exp's whole range (ScalarMath).
  const RowRun<ops::LogSoftmaxBackward> masked = run<ops::LogSoftmaxBackward>({{-kInf, -kInf}, {2.0f, -5.0f}}, 1);
  EXPECT_EQ(masked.y[0], 2.0f);
  EXPECT_EQ(masked.y[1], -5.0f);
  EXPECT_NEAR(run<ops::LogSoftmaxBackward>({{1.0f, 0.0f}, {1.0f, 1.0f}}, 2).y[0], 1.0f - 2.0f * std::exp(1.0f), 1e-5f);
}

TEST(LogSoftmaxBackwardOp, SpecialValues) {
  for (int64_t chunk : {1, 2, 4}) {
    expect_all_nan(run<ops::LogSoftmaxBackward>({{-1.0f, kNaN, -kInf, -2.0f}, {1.0f, 2.0f, 3.0f, 4.0f}}, chunk),
                   "NaN in y");
    expect_all_nan(run<ops::LogSoftmaxBackward>({{-1.0f, -kInf, -1.0f, -2.0f}, {1.0f, 2.0f, 3.0f, kNaN}}, chunk),
                   "NaN in dy");
  }
}

}  // namespace
