// Cross-entropy's partial states (src/layer_api.h: what onlinenorm::nccl composes across ranks)
// on every backend: rows cut into 1-4 uneven column slices, one of them empty, each slice's
// stats, their merge, each slice's finish; the loss, lse and every slice's dlogits against the
// float64 reference of the whole rows (smoothing, z-loss, grad scale, ignored and out-of-range
// targets, 16-bit logits and gradients). Poisoned outputs: every element written, nothing else.
#include <random>

#include "common/test_util.hpp"
#include "layer_api.h"

namespace onorm_test {
namespace {

class CrossEntropySlices : public ::testing::TestWithParam<onorm_backend> {};

TEST_P(CrossEntropySlices, MergedSlicesGiveTheWholeRow) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  std::normal_distribution<double> n01(0.0, 1.0);
  for (int trial = 0; trial < 24; ++trial) {
    const int64_t rows = 1 + static_cast<int64_t>(rng() % 9);
    const int64_t widths[] = {1, 5, 127, 1000, 4097, 70001};
    const int64_t cols = widths[rng() % 6];
    const onorm_dtype xt = trial % 3 == 0 ? ONORM_BF16 : ONORM_F32;
    const onorm_dtype gt = trial % 2 == 0 ? xt : ONORM_F32;
    const double ls = trial % 4 == 1 ? 0.1 : 0.0, z = trial % 5 == 2 ? 1e-3 : 0.0, gs = trial % 3 == 1 ? -0.5 : 1.0;
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + std::to_string(rows) + " x " + std::to_string(cols) + " " +
                 dtype_name(xt) + " -> " + dtype_name(gt) + " ls " + std::to_string(ls) + " z " + std::to_string(z));
    Tensor x(ctx, xt, rows, cols), dl(ctx, gt, rows, cols), loss(ctx, ONORM_F32, 1, rows), lse(ctx, ONORM_F32, 1, rows);
    const double offset = trial % 7 == 3 ? 100.0 : 0.0;
    x.fill([&](int64_t, int64_t) { return offset + 3.0 * n01(rng); });
    std::vector<int64_t> t(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) t[r] = r == 1 ? -100 : r == 2 ? cols : static_cast<int64_t>(rng() % cols);
    Tensor targets(ctx, ONORM_F64, 1, rows);  // 8-byte elements: the int64 targets' bytes
    std::memcpy(targets.host(), t.data(), t.size() * 8);
    targets.upload();
    dl.poison();
    loss.poison();
    lse.poison();
    // The cuts: 1-4 slices, the second of them empty when there are three or more.
    const int parts = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> b(parts + 1, 0);
    for (int p = 1; p < parts; ++p) b[p] = p == 2 ? b[1] : cols * p / parts;
    b[parts] = cols;
    const size_t rec = ONORM_LAYER_CROSS_ENTROPY_STATE_BYTES;
    Tensor states(ctx, ONORM_F64, 1, static_cast<int64_t>((parts + 1) * rows * rec / 8));
    char* st = static_cast<char*>(states.dev());
    onorm_cross_entropy_args a;
    onorm_cross_entropy_args_init(&a);
    a.targets = static_cast<const int64_t*>(targets.dev());
    a.label_smoothing = ls;
    a.z_loss = z;
    a.grad_scale = gs;
    a.loss = loss.dev_f32();
    a.lse = lse.dev_f32();
    const size_t xs = esize(xt), gsz = esize(gt);
    for (int p = 0; p < parts; ++p) {
      const onorm_rows slice{static_cast<char*>(x.dev()) + b[p] * xs, xt, rows, b[p + 1] - b[p], cols};
      ASSERT_EQ(onorm_layer_cross_entropy_stats(ctx, &slice, b[p], &a, st + p * rows * rec), ONORM_OK) << onorm_last_error();
    }
    char* merged = st + parts * rows * rec;
    ASSERT_EQ(onorm_layer_cross_entropy_merge(ctx, parts, rows, st, merged), ONORM_OK) << onorm_last_error();
    for (int p = 0; p < parts; ++p) {
      const onorm_rows slice{static_cast<char*>(x.dev()) + b[p] * xs, xt, rows, b[p + 1] - b[p], cols};
      const onorm_rows grad{static_cast<char*>(dl.dev()) + b[p] * gsz, gt, rows, b[p + 1] - b[p], cols};
      a.dlogits = &grad;
      ASSERT_EQ(onorm_layer_cross_entropy_finish(ctx, &slice, b[p], merged, &a), ONORM_OK) << onorm_last_error();
    }
    ASSERT_EQ(onorm_synchronize(ctx), ONORM_OK);
    dl.download();
    loss.download();
    lse.download();
    onorm_ref::CrossEntropySpec spec;
    spec.logits = x.host_rows();
    spec.targets = t.data();
    spec.label_smoothing = ls;
    spec.z_loss = z;
    spec.grad_scale = gs;
    const onorm_ref::CrossEntropyResult ref = onorm_ref::compute_cross_entropy(spec);
    const onorm_rows dh = dl.host_rows();
    const onorm_ref::Report rep = onorm_ref::check_cross_entropy(ref, loss.host_f32(), lse.host_f32(), &dh);
    EXPECT_TRUE(rep.ok()) << rep.describe();
    EXPECT_TRUE(dl.all_written("dlogits"));
    EXPECT_TRUE(dl.outside_untouched("dlogits"));
    EXPECT_TRUE(loss.all_written("loss"));
  }
}

// A slice that starts before column 0 is refused before anything is written.
TEST_P(CrossEntropySlices, NegativeOffsetIsRefused) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  Tensor x(ctx, ONORM_F32, 2, 8), states(ctx, ONORM_F64, 1, 16), targets(ctx, ONORM_F64, 1, 2);
  x.fill([](int64_t r, int64_t c) { return static_cast<double>(r + c); });
  std::memset(targets.host(), 0, 16);
  targets.upload();
  states.poison();
  onorm_cross_entropy_args a;
  onorm_cross_entropy_args_init(&a);
  a.targets = static_cast<const int64_t*>(targets.dev());
  const onorm_rows xr = x.dev_rows();
  EXPECT_EQ(onorm_layer_cross_entropy_stats(ctx, &xr, -1, &a, states.dev()), ONORM_ERROR_INVALID_ARGUMENT);
  states.download();
  EXPECT_TRUE(states.all_poison("states"));
}

INSTANTIATE_TEST_SUITE_P(Backends, CrossEntropySlices, ::testing::ValuesIn(all_backends()), BackendName());

}  // namespace
}  // namespace onorm_test
