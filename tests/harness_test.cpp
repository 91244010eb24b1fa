// The harness itself can fail: guard zones, stride padding, unwritten elements and
// out-of-bound values are each caught (so a passing suite means something).
#include "common/op_case.hpp"

namespace onorm_test {
namespace {

TEST(Harness, PoisonGuardsAndPaddingAreChecked) {
  ONORM_OPEN_OR_SKIP(ctx, ONORM_BACKEND_CPU);
  Tensor t(ctx, ONORM_BF16, 3, 5, 8, 2);  // 3 rows of 5, stride 8, 2 bytes off
  t.fill([](int64_t r, int64_t c) { return r + 0.5 * c; });
  t.download();
  EXPECT_TRUE(t.outside_untouched("t"));
  EXPECT_TRUE(t.all_written("t"));

  auto write_byte = [&](long long rel, unsigned char v) {
    std::vector<unsigned char> img = t.image();
    img[static_cast<size_t>(static_cast<long long>(kGuard) + 2 + rel)] = v;
    onorm_memcpy(ctx, static_cast<char*>(t.dev()) - kGuard - 2, img.data(), img.size(), ONORM_COPY_HOST_TO_DEVICE);
    t.download();
  };
  write_byte(-1, 0);  // just before element (0,0)
  EXPECT_FALSE(t.outside_untouched("t"));
  write_byte(-1, kPoison);
  EXPECT_TRUE(t.outside_untouched("t"));
  write_byte(5 * 2, 0);  // first padding byte of row 0
  EXPECT_FALSE(t.outside_untouched("t"));
  write_byte(5 * 2, kPoison);
  write_byte((2 * 8 + 5) * 2, 0);  // just after the last element
  EXPECT_FALSE(t.outside_untouched("t"));
  write_byte((2 * 8 + 5) * 2, kPoison);
  EXPECT_TRUE(t.outside_untouched("t"));
  write_byte((1 * 8 + 3) * 2, kPoison);  // element (1,3) back to poison
  write_byte((1 * 8 + 3) * 2 + 1, kPoison);
  EXPECT_FALSE(t.all_written("t"));
}

TEST(Harness, ReferenceCheckCatchesSmallErrors) {
  const int64_t rows = 2, cols = 100;
  std::vector<float> x(rows * cols), dy(rows * cols), y(rows * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 3);
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(std::cos(0.11 * static_cast<double>(i)) * 2);
  const onorm_rows xr[2] = {{x.data(), ONORM_F32, rows, cols, cols}, {dy.data(), ONORM_F32, rows, cols, cols}};
  for (Op op : all_ops()) {
    const onorm_ref::Result ref = onorm_ref::compute(op, xr, op_inputs(op), nullptr, nullptr, 1e-5);
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(ref.y[i]);
    const onorm_rows yr{y.data(), ONORM_F32, rows, cols, cols};
    EXPECT_TRUE(onorm_ref::check(op, ref, yr, nullptr, ONORM_F32, nullptr, nullptr).ok()) << onorm_ref::op_name(op);
    const float saved = y[57];
    const double want = ref.y[57];
    const double b = onorm_ref::bound(op, ONORM_F32, want, ref.mean.empty() ? 0 : ref.mean[0],
                                      ref.rstd.empty() ? 0 : ref.rstd[0], 1.0, ref.scale.empty() ? 0 : ref.scale[57]);
    y[57] = static_cast<float>(want + 2 * b);  // twice the bound off
    EXPECT_FALSE(onorm_ref::check(op, ref, yr, nullptr, ONORM_F32, nullptr, nullptr).ok()) << onorm_ref::op_name(op);
    y[57] = static_cast<float>(want + 0.5 * b);  // half the bound off: fine
    EXPECT_TRUE(onorm_ref::check(op, ref, yr, nullptr, ONORM_F32, nullptr, nullptr).ok()) << onorm_ref::op_name(op);
    y[58] = static_cast<float>(ref.y[58]) + 1.0f;  // a gross error elsewhere
    EXPECT_FALSE(onorm_ref::check(op, ref, yr, nullptr, ONORM_F32, nullptr, nullptr).ok()) << onorm_ref::op_name(op);
    y[57] = std::nanf("");
    EXPECT_FALSE(onorm_ref::check(op, ref, yr, nullptr, ONORM_F32, nullptr, nullptr).ok()) << onorm_ref::op_name(op);
    y[57] = saved;
    y[58] = static_cast<float>(ref.y[58]);
  }
}

// The reference's softmax backward against values worked by hand: y = (0.25, 0.75),
// dy = (1, 3): s = 2.5, dx = (-0.375, 0.375), bound scales (0.875, 4.125); a NaN in dy makes
// its row NaN; a 16-bit dx equal to the reference rounded is accepted, one ulp more is not
// (where the bound is below an ulp).
TEST(Harness, ReferenceSoftmaxBackwardByHand) {
  const float y[] = {0.25f, 0.75f, 0.5f, 0.5f}, dy[] = {1.0f, 3.0f, std::nanf(""), 2.0f};
  const onorm_rows in[2] = {{const_cast<float*>(y), ONORM_F32, 2, 2, 2}, {const_cast<float*>(dy), ONORM_F32, 2, 2, 2}};
  const onorm_ref::Result ref = onorm_ref::compute(Op::softmax_backward, in, 2, nullptr, nullptr, 0.0);
  ASSERT_EQ(ref.y.size(), 4u);
  EXPECT_EQ(ref.y[0], -0.375);
  EXPECT_EQ(ref.y[1], 0.375);
  EXPECT_TRUE(std::isnan(ref.y[2]) && std::isnan(ref.y[3]));
  EXPECT_EQ(ref.scale[0], 0.875);
  EXPECT_EQ(ref.scale[1], 4.125);
  EXPECT_EQ(onorm_ref::bound(Op::softmax_backward, ONORM_F32, ref.y[0], 0, 0, 1, ref.scale[0]), 1e-5 * 0.875 + 1e-30);
  EXPECT_THROW(onorm_ref::compute(Op::softmax_backward, in, 1, nullptr, nullptr, 0.0), std::invalid_argument);
  EXPECT_THROW(onorm_ref::compute(Op::softmax_backward, in[0], nullptr, nullptr, 0.0), std::invalid_argument);

  // 1/3-ish values whose bf16 rounding is off by more than the f32 bound: accepted as rounded.
  const float y3[] = {1.0f / 3, 2.0f / 3}, dy3[] = {0.1f, 0.7f};
  const onorm_rows in3[2] = {{const_cast<float*>(y3), ONORM_F32, 1, 2, 2}, {const_cast<float*>(dy3), ONORM_F32, 1, 2, 2}};
  const onorm_ref::Result r3 = onorm_ref::compute(Op::softmax_backward, in3, 2, nullptr, nullptr, 0.0);
  uint16_t dx[2];
  for (int j = 0; j < 2; ++j) onorm_ref::encode(r3.y[j], dx, ONORM_BF16, j);
  const onorm_rows dxr{dx, ONORM_BF16, 1, 2, 2};
  EXPECT_TRUE(onorm_ref::check(Op::softmax_backward, r3, dxr, nullptr, ONORM_F32, nullptr, nullptr).ok());
  dx[0] = static_cast<uint16_t>(dx[0] + 2);  // two bf16 ulps off: beyond the bound's one
  EXPECT_FALSE(onorm_ref::check(Op::softmax_backward, r3, dxr, nullptr, ONORM_F32, nullptr, nullptr).ok());
}

// An f16 output next to the overflow threshold (65520 rounds to infinity): a reference of
// -65519.99 with an F32 bound of 0.7 may come back as -65504 or as -inf (the rounding of
// -65520.5, within the bound); a reference of -65500, whose bound stays clear of the threshold,
// may not come back as -inf, nor as a finite value two ulps off.
TEST(Harness, RoundingWithinTheBoundAtTheOverflowThreshold) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(onorm_ref::rounds_from_within(-inf, -65519.99, 0.7, ONORM_F16));
  EXPECT_TRUE(onorm_ref::rounds_from_within(-65504.0, -65519.99, 0.7, ONORM_F16));
  EXPECT_FALSE(onorm_ref::rounds_from_within(-inf, -65519.99, 0.001, ONORM_F16));
  EXPECT_FALSE(onorm_ref::rounds_from_within(-inf, -65500.0, 0.7, ONORM_F16));
  EXPECT_FALSE(onorm_ref::rounds_from_within(inf, -65519.99, 0.7, ONORM_F16));
  EXPECT_FALSE(onorm_ref::rounds_from_within(-65440.0, -65500.0, 0.7, ONORM_F16));
  EXPECT_FALSE(onorm_ref::rounds_from_within(std::nan(""), -65500.0, 0.7, ONORM_F16));
  EXPECT_TRUE(onorm_ref::rounds_from_within(1.0, 1.0 + 1e-9, 1e-9, ONORM_BF16));

  // Through the checker, log-softmax backward rows y = (-inf, 0, -inf) with dy = (-d, 0, d):
  // dx = dy, bound 1e-5 d. Column 0 comes back as -inf: right for d = 65519.99, not for 65500.
  const double y[] = {-inf, 0.0, -inf, -inf, 0.0, -inf};
  const double dy[] = {-65519.99, 0.0, 65519.99, -65500.0, 0.0, 65500.0};
  const onorm_rows in[2] = {{const_cast<double*>(y), ONORM_F64, 2, 3, 3}, {const_cast<double*>(dy), ONORM_F64, 2, 3, 3}};
  const onorm_ref::Result ref = onorm_ref::compute(Op::log_softmax_backward, in, 2, nullptr, nullptr, 0.0);
  ASSERT_EQ(ref.y.size(), 6u);
  EXPECT_EQ(ref.y[0], -65519.99);
  uint16_t dx[6];
  for (int k = 0; k < 6; ++k) onorm_ref::encode(k % 3 == 0 ? -inf : ref.y[k], dx, ONORM_F16, k);
  const onorm_rows dxr{dx, ONORM_F16, 2, 3, 3};
  const onorm_ref::Report rep = onorm_ref::check(Op::log_softmax_backward, ref, dxr, nullptr, ONORM_F32, nullptr, nullptr);
  EXPECT_EQ(rep.violations, 1);
  EXPECT_EQ(rep.first_row, 1);
  EXPECT_EQ(rep.first_col, 0);
}

// The reference's log-softmax backward by hand: y = (0, log 0.5 = -ln 2), dy = (1, 3): s = 4,
// dx = (1 - 4, 3 - 2) = (-3, 1), bound scales (1 + 4, 3 + 2); a NaN in y makes its row NaN (a
// -inf beside it does not hide it); y above 0 (1, 2) is taken as given.
TEST(Harness, ReferenceLogSoftmaxBackwardByHand) {
  const double inf = std::numeric_limits<double>::infinity();
  const double y[] = {0.0, -std::log(2.0), -inf, std::nan(""), 1.0, 2.0}, dy[] = {1.0, 3.0, 5.0, 1.0, 1.0, 1.0};
  const onorm_rows in[2] = {{const_cast<double*>(y), ONORM_F64, 3, 2, 2}, {const_cast<double*>(dy), ONORM_F64, 3, 2, 2}};
  const onorm_ref::Result ref = onorm_ref::compute(Op::log_softmax_backward, in, 2, nullptr, nullptr, 0.0);
  ASSERT_EQ(ref.y.size(), 6u);
  EXPECT_EQ(ref.y[0], -3.0);
  EXPECT_NEAR(ref.y[1], 1.0, 1e-15);
  EXPECT_EQ(ref.scale[0], 5.0);
  EXPECT_NEAR(ref.scale[1], 5.0, 1e-15);
  EXPECT_TRUE(std::isnan(ref.y[2]) && std::isnan(ref.y[3]));
  EXPECT_EQ(onorm_ref::bound(Op::log_softmax_backward, ONORM_F32, ref.y[0], 0, 0, 1, ref.scale[0]), 1e-5 * 5.0 + 1e-30);
  EXPECT_NEAR(ref.y[4], 1.0 - std::exp(1.0) * 2.0, 1e-15);
  EXPECT_THROW(onorm_ref::compute(Op::log_softmax_backward, in, 1, nullptr, nullptr, 0.0), std::invalid_argument);
}

}  // namespace
}  // namespace onorm_test
