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
  std::vector<float> x(rows * cols), y(rows * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 3);
  const onorm_rows xr{x.data(), ONORM_F32, rows, cols, cols};
  for (Op op : all_ops()) {
    const onorm_ref::Result ref = onorm_ref::compute(op, xr, nullptr, nullptr, 1e-5);
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(ref.y[i]);
    const onorm_rows yr{y.data(), ONORM_F32, rows, cols, cols};
    EXPECT_TRUE(onorm_ref::check(op, ref, yr, nullptr, ONORM_F32, nullptr, nullptr).ok()) << onorm_ref::op_name(op);
    const float saved = y[57];
    const double want = ref.y[57];
    const double b = onorm_ref::bound(op, ONORM_F32, want, ref.mean.empty() ? 0 : ref.mean[0],
                                      ref.rstd.empty() ? 0 : ref.rstd[0], 1.0);
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

}  // namespace
}  // namespace onorm_test
