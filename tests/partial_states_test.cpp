// Partial row states (API.md, "partial row states") on every backend: rows split into 1..5
// column slices of uneven and empty sizes; stats per slice -> merge (parts-major) -> finish per
// slice against the float64 reference of the whole row with the single call's bound (softmax,
// log-softmax, LayerNorm, RMSNorm with gamma/beta slices, weight_offset, param_dtype, static I8/F8
// quantization, mean/rstd); the merged states against the whole row's (1e6 + N(0,1) rows keep
// their variance); identity states for cols == 0; merge of one part is the identity map; out ==
// in; batch invariance of the states; bad arguments of every function refused with nothing written.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

#include "common/op_case.hpp"

namespace onorm_test {
namespace {

class PartialStates : public ::testing::TestWithParam<onorm_backend> {};

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

static_assert(sizeof(onorm_softmax_state) == 8, "one softmax state per f64 element of a Tensor");
static_assert(sizeof(onorm_moments_state) == 24, "one moments state per three f64 elements");

// Column cut points 0 = b_0 <= b_1 <= ... <= b_parts = cols, uneven, some slices empty.
std::vector<int64_t> random_cuts(int64_t cols, int parts, std::mt19937_64& rng) {
  std::vector<int64_t> b(1, 0);
  for (int p = 1; p < parts; ++p) {
    // A quarter of the cuts repeat the previous one (an empty slice).
    b.push_back(rng() % 4 == 0 && p > 1 ? b.back() : static_cast<int64_t>(rng() % static_cast<uint64_t>(cols + 1)));
  }
  b.push_back(cols);
  std::sort(b.begin(), b.end());
  return b;
}

std::string cuts_text(const std::vector<int64_t>& b) {
  std::ostringstream s;
  s << "cuts";
  for (int64_t v : b) s << " " << v;
  return s.str();
}

// The view of columns [b, e) of a tensor's rows.
onorm_rows slice(const Tensor& t, int64_t b, int64_t e) {
  onorm_rows r = t.dev_rows();
  r.data = static_cast<char*>(r.data) + b * static_cast<int64_t>(esize(t.dtype()));
  r.cols = e - b;
  return r;
}

// Rows by r % 5 (hard): 0 plain; 1 offset big + N(0,1) (1e6; f16, whose largest value is 65504:
// 1e4); 2 a NaN in the last slice's column;
// 3 outliers of 300 every 97 columns; 4 plain, wide.
Generator rows_gen(std::mt19937_64& rng, bool hard, double centre, double sd, onorm_dtype dt = ONORM_F32) {
  const double big = dt == ONORM_F16 ? 1e4 : 1e6;
  auto eng = std::make_shared<std::mt19937_64>(rng());
  return [eng, hard, centre, sd, big](int64_t r, int64_t c) {
    switch (hard ? r % 5 : 0) {
      case 1: return cheap_normal(*eng, big, 1.0);
      case 2: return c == 0 ? kNaN : cheap_normal(*eng, centre, sd);
      case 3: return c % 97 == 0 ? 300.0 : cheap_normal(*eng, centre, sd);
      case 4: return cheap_normal(*eng, centre, 4 * sd);
      default: return cheap_normal(*eng, centre, sd);
    }
  };
}

const onorm_softmax_state* sm_states(const Tensor& t) { return static_cast<const onorm_softmax_state*>(t.host()); }
const onorm_moments_state* mo_states(const Tensor& t) { return static_cast<const onorm_moments_state*>(t.host()); }

// Softmax or log-softmax through the states, checked against the whole row's reference.
TEST_P(PartialStates, SoftmaxComposedEqualsTheSingleCall) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  const std::vector<onorm_dtype> dts = {ONORM_F32, ONORM_F16, ONORM_BF16};
  const int64_t widths[] = {1, 5, 127, 1025, 4099, 20000};
  for (int n = 0; n < 40; ++n) {
    const int64_t cols = widths[rng() % 6], rows = 1 + static_cast<int64_t>(rng() % 10);
    const int parts = 1 + static_cast<int>(rng() % 5);
    const bool log = rng() % 2, hard = rng() % 3 != 0, in_place_merge = rng() % 2;
    const onorm_dtype xt = dts[rng() % 3], yt = dts[rng() % 3];
    const std::vector<int64_t> b = random_cuts(cols, parts, rng);
    std::ostringstream what;
    what << (log ? "log_softmax" : "softmax") << " " << dtype_name(xt) << "->" << dtype_name(yt) << " " << rows << "x"
         << cols << " parts " << parts << " " << cuts_text(b) << (hard ? " hard" : "") << (in_place_merge ? " out==in" : "");
    SCOPED_TRACE(what.str());
    Tensor x(ctx, xt, rows, cols, cols + 3, esize(xt)), y(ctx, yt, rows, cols, cols + 1);
    Tensor st(ctx, ONORM_F64, 1, parts * rows), merged(ctx, ONORM_F64, 1, rows);
    x.fill(rows_gen(rng, hard, std::uniform_real_distribution<double>(-4, 4)(rng), 2.0, xt));
    const std::vector<unsigned char> xb = x.image();
    auto* st_dev = static_cast<onorm_softmax_state*>(st.dev());
    for (int p = 0; p < parts; ++p) {
      const onorm_rows xs = slice(x, b[p], b[p + 1]);
      ASSERT_EQ(onorm_softmax_stats(ctx, &xs, st_dev + p * rows), ONORM_OK) << "part " << p << ": " << onorm_last_error();
    }
    auto* m_dev = in_place_merge ? st_dev : static_cast<onorm_softmax_state*>(merged.dev());
    ASSERT_EQ(onorm_softmax_merge(ctx, parts, rows, st_dev, m_dev), ONORM_OK) << onorm_last_error();
    for (int p = 0; p < parts; ++p) {
      const onorm_rows xs = slice(x, b[p], b[p + 1]), ys = slice(y, b[p], b[p + 1]);
      ASSERT_EQ(onorm_softmax_finish(ctx, &xs, m_dev, log ? 1 : 0, &ys), ONORM_OK) << "part " << p << ": " << onorm_last_error();
    }
    ASSERT_EQ(onorm_synchronize(ctx), ONORM_OK);
    for (Tensor* t : {&x, &y, &st, &merged}) t->download();
    EXPECT_TRUE(x.same_image(xb, "x"));
    EXPECT_TRUE(y.all_written("y"));
    EXPECT_TRUE(y.outside_untouched("y"));
    EXPECT_TRUE(st.all_written("states"));
    EXPECT_TRUE(st.outside_untouched("states"));
    if (!in_place_merge) {
      EXPECT_TRUE(merged.outside_untouched("merged states"));
    }
    const onorm_ref::Result ref = onorm_ref::compute(log ? Op::log_softmax : Op::softmax, x.host_rows(), nullptr, nullptr, 0);
    const onorm_ref::Report rep =
        onorm_ref::check(log ? Op::log_softmax : Op::softmax, ref, y.host_rows(), nullptr, xt, nullptr, nullptr);
    EXPECT_TRUE(rep.ok()) << rep.describe();
    // The merged state itself: the row's max exactly (it is one of its elements), and its sum of
    // exp(x - max) well within softmax's bound (the finish divides by it).
    const onorm_softmax_state* ms = sm_states(in_place_merge ? st : merged);
    for (int64_t r = 0; r < rows; ++r) {
      const onorm_ref::RowSoftmaxState want = onorm_ref::softmax_state_of(x.host_rows(), r);
      if (want.nan || want.max == -kInf) continue;
      EXPECT_EQ(ms[r].max, static_cast<float>(want.max)) << "merged max of row " << r;
      EXPECT_NEAR(ms[r].sum_exp, want.sum_exp, 1e-5 * want.sum_exp) << "merged sum_exp of row " << r;
    }
    if (HasFailure()) return;
  }
}

struct NormCase {
  bool layer = true;
  onorm_dtype xt = ONORM_F32, yt = ONORM_F32, pt = ONORM_F32;
  bool gamma = true, beta = true, mean = true, rstd = true;
  double offset = 0, eps = 1e-5, static_scale = 0;
  std::string str() const {
    std::ostringstream s;
    s << (layer ? "layer_norm" : "rms_norm") << " " << dtype_name(xt) << "->" << dtype_name(yt) << " param "
      << dtype_name(pt) << (gamma ? " gamma" : "") << (beta ? " beta" : "") << (mean ? " mean" : "") << (rstd ? " rstd" : "")
      << " offset " << offset << " eps " << eps << " static_scale " << static_scale;
    return s.str();
  }
};

// LayerNorm and RMSNorm through the moments, against the whole row's reference; the merged
// moments against the whole row's two-pass mean and M2.
TEST_P(PartialStates, NormComposedEqualsTheSingleCall) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  std::vector<onorm_dtype> dts = {ONORM_F32, ONORM_F16, ONORM_BF16};
  if (GetParam() == ONORM_BACKEND_CPU) dts.push_back(ONORM_F64);
  const int64_t widths[] = {1, 5, 127, 1025, 4099, 20000};
  for (int n = 0; n < 50; ++n) {
    const int64_t cols = widths[rng() % 6], rows = 1 + static_cast<int64_t>(rng() % 10);
    const int parts = 1 + static_cast<int>(rng() % 5);
    const bool hard = rng() % 3 != 0, in_place_merge = rng() % 2;
    NormCase nc;
    nc.layer = rng() % 2;
    nc.xt = dts[rng() % dts.size()];
    nc.yt = dts[rng() % dts.size()];
    nc.pt = dts[rng() % dts.size()];
    nc.gamma = rng() % 4 != 0;
    nc.beta = nc.layer && rng() % 2;
    nc.mean = nc.layer && rng() % 2;
    nc.rstd = rng() % 2;
    const double offsets[] = {0.0, 1.0, -0.5};
    nc.offset = offsets[rng() % 3];
    if (rng() % 5 == 0) {  // static quantization
      nc.yt = rng() % 2 ? ONORM_I8 : ONORM_F8_E4M3;
      nc.static_scale = std::uniform_real_distribution<double>(0.005, 0.05)(rng);
    }
    const std::vector<int64_t> b = random_cuts(cols, parts, rng);
    std::ostringstream what;
    what << nc.str() << " " << rows << "x" << cols << " parts " << parts << " " << cuts_text(b) << (hard ? " hard" : "")
         << (in_place_merge ? " out==in" : "");
    SCOPED_TRACE(what.str());
    Tensor x(ctx, nc.xt, rows, cols, cols + 2), y(ctx, nc.yt, rows, cols, cols + 5, esize(nc.yt));
    Tensor g(ctx, nc.pt, 1, cols), be(ctx, nc.pt, 1, cols), mean(ctx, ONORM_F32, 1, rows), rstd(ctx, ONORM_F32, 1, rows);
    Tensor st(ctx, ONORM_F64, 1, 3 * parts * rows), merged(ctx, ONORM_F64, 1, 3 * rows);
    x.fill(rows_gen(rng, hard, std::uniform_real_distribution<double>(-10, 10)(rng), 2.0, nc.xt));
    g.fill([&](int64_t, int64_t) { return cheap_normal(rng, 0.5, 0.5); });
    be.fill([&](int64_t, int64_t) { return cheap_normal(rng, 0.0, 1.0); });
    const std::vector<unsigned char> xb = x.image();
    auto* st_dev = static_cast<onorm_moments_state*>(st.dev());
    for (int p = 0; p < parts; ++p) {
      const onorm_rows xs = slice(x, b[p], b[p + 1]);
      ASSERT_EQ(onorm_moments_stats(ctx, &xs, st_dev + p * rows), ONORM_OK) << "part " << p << ": " << onorm_last_error();
    }
    auto* m_dev = in_place_merge ? st_dev : static_cast<onorm_moments_state*>(merged.dev());
    ASSERT_EQ(onorm_moments_merge(ctx, parts, rows, st_dev, m_dev), ONORM_OK) << onorm_last_error();
    for (int p = 0; p < parts; ++p) {
      const onorm_rows xs = slice(x, b[p], b[p + 1]), ys = slice(y, b[p], b[p + 1]);
      onorm_norm_args a;
      onorm_norm_args_init(&a, nc.layer ? ONORM_LAYER_NORM : ONORM_RMS_NORM);
      const size_t ps = esize(nc.pt);
      a.gamma = nc.gamma ? static_cast<char*>(g.dev()) + b[p] * ps : nullptr;
      a.beta = nc.beta ? static_cast<char*>(be.dev()) + b[p] * ps : nullptr;
      a.param_dtype = nc.pt;
      a.eps = nc.eps;
      a.weight_offset = nc.offset;
      a.mean = nc.mean ? mean.dev_f32() : nullptr;
      a.rstd = nc.rstd ? rstd.dev_f32() : nullptr;
      a.y_static_scale = nc.static_scale;
      ASSERT_EQ(onorm_norm_finish(ctx, &xs, m_dev, &a, &ys), ONORM_OK) << "part " << p << ": " << onorm_last_error();
    }
    ASSERT_EQ(onorm_synchronize(ctx), ONORM_OK);
    for (Tensor* t : {&x, &y, &st, &merged, &mean, &rstd}) t->download();
    EXPECT_TRUE(x.same_image(xb, "x"));
    // The poison byte is a valid quantized value (I8 -1, E4M3 NaN): there the values check it.
    if (nc.static_scale == 0) {
      EXPECT_TRUE(y.all_written("y"));
    }
    EXPECT_TRUE(y.outside_untouched("y"));
    // Statistics are written when some slice is finished (a slice may be empty: then by another).
    const bool any_cols = cols > 0;
    for (Tensor* t : {&mean, &rstd}) {
      const bool given = t == &mean ? nc.mean : nc.rstd;
      if (given && any_cols) {
        EXPECT_TRUE(t->all_written(t == &mean ? "mean" : "rstd"));
      }
      EXPECT_TRUE(t->outside_untouched("statistics"));
      if (!given) {
        EXPECT_TRUE(t->all_poison("statistics not asked for"));
      }
    }
    onorm_ref::NormSpec sp;
    sp.layer = nc.layer;
    sp.x = x.host_rows();
    sp.gamma = nc.gamma ? g.host() : nullptr;
    sp.beta = nc.beta ? be.host() : nullptr;
    sp.param_dtype = nc.pt;
    sp.eps = nc.eps;
    sp.weight_offset = nc.offset;
    const onorm_ref::NormResult ref = onorm_ref::compute_norm(sp);
    const onorm_ref::Report rep = onorm_ref::check_norm(sp, ref, y.host_rows(), nullptr, nc.static_scale,
                                                        nc.mean ? mean.host_f32() : nullptr,
                                                        nc.rstd ? rstd.host_f32() : nullptr, nullptr);
    EXPECT_TRUE(rep.ok()) << rep.describe();
    // The merged moments: count exactly; mean within 1e-6 (|mean| + sd) and M2 within 2e-5
    // relative (the contract's mean and rstd bounds, rstd = (M2 / n)^-1/2 to first order).
    const onorm_moments_state* ms = mo_states(in_place_merge ? st : merged);
    for (int64_t r = 0; r < rows; ++r) {
      const onorm_ref::RowMoments want = onorm_ref::moments_of(x.host_rows(), r);
      EXPECT_EQ(ms[r].count, want.count) << "row " << r;
      if (std::isnan(want.mean)) {
        EXPECT_TRUE(std::isnan(ms[r].mean) || std::isnan(ms[r].m2)) << "NaN row " << r;
        continue;
      }
      const double sd = std::sqrt(want.m2 / static_cast<double>(want.count));
      EXPECT_NEAR(ms[r].mean, want.mean, 1e-6 * (std::fabs(want.mean) + sd)) << "merged mean of row " << r;
      EXPECT_NEAR(ms[r].m2, want.m2, 2e-5 * want.m2) << "merged M2 of row " << r;
    }
    if (HasFailure()) return;
  }
}

// cols == 0: a stats call writes the identity state of each row (the one exception to "empty
// writes nothing"), and merging it into a row's state is that row's state.
TEST_P(PartialStates, EmptySlicesGiveTheIdentity) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  const int64_t rows = 5;
  for (onorm_dtype dt : {ONORM_F32, ONORM_BF16}) {
    Tensor x(ctx, dt, rows, 0, 4), s(ctx, ONORM_F64, 1, rows), m(ctx, ONORM_F64, 1, 3 * rows);
    const onorm_rows xr = x.dev_rows();
    ASSERT_EQ(onorm_softmax_stats(ctx, &xr, static_cast<onorm_softmax_state*>(s.dev())), ONORM_OK) << onorm_last_error();
    ASSERT_EQ(onorm_moments_stats(ctx, &xr, static_cast<onorm_moments_state*>(m.dev())), ONORM_OK) << onorm_last_error();
    ASSERT_EQ(onorm_synchronize(ctx), ONORM_OK);
    s.download();
    m.download();
    EXPECT_TRUE(s.outside_untouched("softmax states"));
    EXPECT_TRUE(m.outside_untouched("moments states"));
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(sm_states(s)[r].max, -std::numeric_limits<float>::infinity()) << "row " << r;
      EXPECT_EQ(sm_states(s)[r].sum_exp, 0.0f) << "row " << r;
      EXPECT_EQ(mo_states(m)[r].count, 0) << "row " << r;
      EXPECT_EQ(mo_states(m)[r].mean, 0.0) << "row " << r;
      EXPECT_EQ(mo_states(m)[r].m2, 0.0) << "row " << r;
    }
    // rows == 0: nothing written.
    Tensor x0(ctx, dt, 0, 7), s0(ctx, ONORM_F64, 1, 2);
    const onorm_rows x0r = x0.dev_rows();
    ASSERT_EQ(onorm_softmax_stats(ctx, &x0r, static_cast<onorm_softmax_state*>(s0.dev())), ONORM_OK);
    s0.download();
    EXPECT_TRUE(s0.all_poison("states of rows == 0"));
  }
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// A finish of a slice with no columns still writes the rows' mean and rstd (their rows are not
// empty), and every slice's finish writes the same bits: the empty slice, a short one, a long
// one (different placements), y quantized or not. Rows: plain, offset, a NaN, all -inf.
TEST_P(PartialStates, EverySliceFinishWritesTheSameStatistics) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  const int64_t rows = 6, cols = 3000;
  for (onorm_dtype dt : {ONORM_F32, ONORM_BF16}) {
    for (int layer = 0; layer < 2; ++layer) {
      for (onorm_dtype yt : {dt, ONORM_I8}) {
        SCOPED_TRACE(std::string(layer ? "layer_norm " : "rms_norm ") + dtype_name(dt) + "->" + dtype_name(yt));
        Tensor x(ctx, dt, rows, cols), y(ctx, yt, rows, cols);
        auto eng = std::make_shared<std::mt19937_64>(rng());
        x.fill([&](int64_t r, int64_t c) {
          switch (r) {
            case 1: return cheap_normal(*eng, 1e4, 1.0);
            case 2: return c == 1234 ? kNaN : cheap_normal(*eng, 0.0, 1.0);
            case 3: return -kInf;
            default: return cheap_normal(*eng, 0.5, 2.0);
          }
        });
        Tensor st(ctx, ONORM_F64, 1, 3 * 2 * rows), merged(ctx, ONORM_F64, 1, 3 * rows);
        auto* st_dev = static_cast<onorm_moments_state*>(st.dev());
        const int64_t cut = 1100;
        for (int p = 0; p < 2; ++p) {
          const onorm_rows xs = slice(x, p ? cut : 0, p ? cols : cut);
          ASSERT_EQ(onorm_moments_stats(ctx, &xs, st_dev + p * rows), ONORM_OK) << onorm_last_error();
        }
        auto* m_dev = static_cast<onorm_moments_state*>(merged.dev());
        ASSERT_EQ(onorm_moments_merge(ctx, 2, rows, st_dev, m_dev), ONORM_OK) << onorm_last_error();
        // Slices [0, 0), [0, 3), [3, cols): each finish into statistics of its own.
        const int64_t b[] = {0, 0, 3, cols};
        std::vector<Tensor> mean, rstd;
        mean.reserve(3);
        rstd.reserve(3);
        for (int k = 0; k < 3; ++k) {
          mean.emplace_back(ctx, ONORM_F32, 1, rows);
          rstd.emplace_back(ctx, ONORM_F32, 1, rows);
          const onorm_rows xs = slice(x, b[k], b[k + 1]), ys = slice(y, b[k], b[k + 1]);
          onorm_norm_args a;
          onorm_norm_args_init(&a, layer ? ONORM_LAYER_NORM : ONORM_RMS_NORM);
          a.mean = layer ? mean[k].dev_f32() : nullptr;
          a.rstd = rstd[k].dev_f32();
          a.eps = 1e-5;
          if (yt == ONORM_I8) a.y_static_scale = 0.05;
          ASSERT_EQ(onorm_norm_finish(ctx, &xs, m_dev, &a, &ys), ONORM_OK) << "slice " << k << ": " << onorm_last_error();
        }
        ASSERT_EQ(onorm_synchronize(ctx), ONORM_OK);
        for (int k = 0; k < 3; ++k) {
          mean[k].download();
          rstd[k].download();
        }
        for (int k = 0; k < 3; ++k) {
          EXPECT_TRUE(rstd[k].all_written("rstd")) << "slice " << k;
          EXPECT_TRUE(rstd[k].outside_untouched("rstd")) << "slice " << k;
          for (int64_t r = 0; r < rows; ++r)
            EXPECT_EQ(bits_of(rstd[k].host_f32()[r]), bits_of(rstd[2].host_f32()[r]))
                << "rstd of row " << r << ", slice " << k << ": " << rstd[k].host_f32()[r] << " vs " << rstd[2].host_f32()[r];
          if (layer) {
            EXPECT_TRUE(mean[k].all_written("mean")) << "slice " << k;
            for (int64_t r = 0; r < rows; ++r)
              EXPECT_EQ(bits_of(mean[k].host_f32()[r]), bits_of(mean[2].host_f32()[r]))
                  << "mean of row " << r << ", slice " << k << ": " << mean[k].host_f32()[r] << " vs " << mean[2].host_f32()[r];
          } else {
            EXPECT_TRUE(mean[k].all_poison("mean (RMSNorm has none)")) << "slice " << k;
          }
        }
        // The statistics themselves, where finite, against the whole row's reference.
        for (int64_t r = 0; r < rows; ++r) {
          const onorm_ref::RowMoments want = onorm_ref::moments_of(x.host_rows(), r);
          if (!std::isfinite(want.mean)) continue;
          const double n = static_cast<double>(want.count);
          const double ms = layer ? want.m2 / n : want.m2 / n + want.mean * want.mean;
          const double rs = 1.0 / std::sqrt(ms + 1e-5);
          EXPECT_NEAR(rstd[0].host_f32()[r], rs, 1e-5 * rs) << "rstd of row " << r;
          if (layer) {
            EXPECT_NEAR(mean[0].host_f32()[r], want.mean, 1e-6 * (std::fabs(want.mean) + 1 / rs)) << "mean of row " << r;
          }
        }
        if (HasFailure()) return;
      }
    }
  }
}

// parts == 1 copies the states bit for bit (out of place and out == in); a rows of states merged
// with parts > 1 out == in equals out of place bitwise.
TEST_P(PartialStates, MergeOfOnePartIsTheIdentityMap) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  const int64_t rows = 17, cols = 333;
  Tensor x(ctx, ONORM_F32, rows, cols);
  x.fill(rows_gen(rng, true, 1.0, 3.0));
  Tensor s(ctx, ONORM_F64, 1, 3 * rows), m(ctx, ONORM_F64, 1, 3 * 3 * rows);
  Tensor s_out(ctx, ONORM_F64, 1, rows), m_out(ctx, ONORM_F64, 1, 3 * rows);
  auto* sd = static_cast<onorm_softmax_state*>(s.dev());
  auto* md = static_cast<onorm_moments_state*>(m.dev());
  for (int p = 0; p < 3; ++p) {
    const onorm_rows xs = slice(x, p * 111, p * 111 + 111);
    ASSERT_EQ(onorm_softmax_stats(ctx, &xs, sd + p * rows), ONORM_OK) << onorm_last_error();
    ASSERT_EQ(onorm_moments_stats(ctx, &xs, md + p * rows), ONORM_OK) << onorm_last_error();
  }
  ASSERT_EQ(onorm_softmax_merge(ctx, 1, rows, sd, static_cast<onorm_softmax_state*>(s_out.dev())), ONORM_OK);
  ASSERT_EQ(onorm_moments_merge(ctx, 1, rows, md, static_cast<onorm_moments_state*>(m_out.dev())), ONORM_OK);
  ASSERT_EQ(onorm_synchronize(ctx), ONORM_OK);
  for (Tensor* t : {&s, &m, &s_out, &m_out}) t->download();
  EXPECT_EQ(std::memcmp(s_out.host(), s.host(), rows * 8), 0) << "softmax merge of one part";
  EXPECT_EQ(std::memcmp(m_out.host(), m.host(), rows * 24), 0) << "moments merge of one part";
  // Three parts out of place, then out == in: the same bits.
  ASSERT_EQ(onorm_softmax_merge(ctx, 3, rows, sd, static_cast<onorm_softmax_state*>(s_out.dev())), ONORM_OK);
  ASSERT_EQ(onorm_moments_merge(ctx, 3, rows, md, static_cast<onorm_moments_state*>(m_out.dev())), ONORM_OK);
  ASSERT_EQ(onorm_softmax_merge(ctx, 3, rows, sd, sd), ONORM_OK) << onorm_last_error();
  ASSERT_EQ(onorm_moments_merge(ctx, 3, rows, md, md), ONORM_OK) << onorm_last_error();
  ASSERT_EQ(onorm_synchronize(ctx), ONORM_OK);
  for (Tensor* t : {&s, &m, &s_out, &m_out}) t->download();
  EXPECT_EQ(std::memcmp(s_out.host(), s.host(), rows * 8), 0) << "softmax merge out == in";
  EXPECT_EQ(std::memcmp(m_out.host(), m.host(), rows * 24), 0) << "moments merge out == in";
}

// A row's states alone equal its states in the batch (same address), bit for bit.
TEST_P(PartialStates, StatesOfARowAloneEqualTheBatch) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  const int64_t rows = 9, cols = 5000;
  Tensor x(ctx, ONORM_BF16, rows, cols, cols + 3, 2);
  x.fill(rows_gen(rng, true, 0.0, 2.0, ONORM_BF16));
  Tensor s(ctx, ONORM_F64, 1, rows), m(ctx, ONORM_F64, 1, 3 * rows), s1(ctx, ONORM_F64, 1, 1), m1(ctx, ONORM_F64, 1, 3);
  const onorm_rows xr = x.dev_rows();
  ASSERT_EQ(onorm_softmax_stats(ctx, &xr, static_cast<onorm_softmax_state*>(s.dev())), ONORM_OK);
  ASSERT_EQ(onorm_moments_stats(ctx, &xr, static_cast<onorm_moments_state*>(m.dev())), ONORM_OK);
  ASSERT_EQ(onorm_synchronize(ctx), ONORM_OK);
  s.download();
  m.download();
  for (int64_t r = 0; r < rows; ++r) {
    onorm_rows x1 = xr;
    x1.data = static_cast<char*>(x1.data) + x.index(r, 0) * 2;
    x1.rows = 1;
    ASSERT_EQ(onorm_softmax_stats(ctx, &x1, static_cast<onorm_softmax_state*>(s1.dev())), ONORM_OK);
    ASSERT_EQ(onorm_moments_stats(ctx, &x1, static_cast<onorm_moments_state*>(m1.dev())), ONORM_OK);
    ASSERT_EQ(onorm_synchronize(ctx), ONORM_OK);
    s1.download();
    m1.download();
    EXPECT_EQ(std::memcmp(s1.host(), sm_states(s) + r, 8), 0) << "softmax state of row " << r;
    EXPECT_EQ(std::memcmp(m1.host(), mo_states(m) + r, 24), 0) << "moments state of row " << r;
  }
}

// Bad arguments of every function: the status, a message, and nothing written.
TEST_P(PartialStates, BadArgumentsWriteNothing) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  const int64_t rows = 4, cols = 40;
  const onorm_status kInvalid = ONORM_ERROR_INVALID_ARGUMENT, kUnsup = ONORM_ERROR_UNSUPPORTED;
  // Everything one call could touch; the state buffers hold valid states (of x) for the finishes.
  struct Bufs {
    Tensor x, y, s, m, out, mean, rstd, yscale;
    std::vector<unsigned char> x0, s0, m0;
  };
  auto make = [&]() {
    auto b = std::make_unique<Bufs>();
    b->x = Tensor(ctx, ONORM_F32, rows, cols);
    b->x.fill([&](int64_t, int64_t) { return cheap_normal(rng, 0.0, 1.0); });
    b->y = Tensor(ctx, ONORM_F32, rows, cols);
    b->s = Tensor(ctx, ONORM_F64, 1, 2 * rows);
    b->m = Tensor(ctx, ONORM_F64, 1, 3 * 2 * rows);
    b->out = Tensor(ctx, ONORM_F64, 1, 3 * rows);
    b->mean = Tensor(ctx, ONORM_F32, 1, rows);
    b->rstd = Tensor(ctx, ONORM_F32, 1, rows);
    b->yscale = Tensor(ctx, ONORM_F32, 1, rows);
    const onorm_rows xr = b->x.dev_rows();
    for (int p = 0; p < 2; ++p) {
      EXPECT_EQ(onorm_softmax_stats(ctx, &xr, static_cast<onorm_softmax_state*>(b->s.dev()) + p * rows), ONORM_OK);
      EXPECT_EQ(onorm_moments_stats(ctx, &xr, static_cast<onorm_moments_state*>(b->m.dev()) + p * rows), ONORM_OK);
    }
    EXPECT_EQ(onorm_synchronize(ctx), ONORM_OK);
    for (Tensor* t : {&b->x, &b->s, &b->m}) t->download();
    b->x0 = b->x.image();
    b->s0 = b->s.image();
    b->m0 = b->m.image();
    return b;
  };
  using SS = onorm_softmax_state;
  using MS = onorm_moments_state;
  struct Case {
    const char* name;
    onorm_status want;
    std::function<onorm_status(Bufs&)> call;
  };
  auto rows_of = [](const Tensor& t) { return t.dev_rows(); };
  auto norm_args = [](Bufs& b, onorm_norm_kind kind) {
    onorm_norm_args a;
    onorm_norm_args_init(&a, kind);
    a.mean = kind == ONORM_LAYER_NORM ? b.mean.dev_f32() : nullptr;
    a.rstd = b.rstd.dev_f32();
    return a;
  };
  auto finish = [&](Bufs& b, const onorm_norm_args* a, onorm_rows y) {
    const onorm_rows xr = b.x.dev_rows();
    return onorm_norm_finish(ctx, &xr, static_cast<const MS*>(b.m.dev()), a, &y);
  };
  const std::vector<Case> cases = {
      // stats
      {"softmax_stats x NULL", kInvalid, [&](Bufs& b) { return onorm_softmax_stats(ctx, nullptr, static_cast<SS*>(b.out.dev())); }},
      {"softmax_stats states NULL", kInvalid, [&](Bufs& b) { auto x = rows_of(b.x); return onorm_softmax_stats(ctx, &x, nullptr); }},
      {"moments_stats states NULL", kInvalid, [&](Bufs& b) { auto x = rows_of(b.x); return onorm_moments_stats(ctx, &x, nullptr); }},
      {"moments_stats x data NULL", kInvalid,
       [&](Bufs& b) { auto x = rows_of(b.x); x.data = nullptr; return onorm_moments_stats(ctx, &x, static_cast<MS*>(b.out.dev())); }},
      {"softmax_stats rows < 0", kInvalid,
       [&](Bufs& b) { auto x = rows_of(b.x); x.rows = -2; return onorm_softmax_stats(ctx, &x, static_cast<SS*>(b.out.dev())); }},
      {"softmax_stats states on x", kInvalid,
       [&](Bufs& b) { auto x = rows_of(b.x); return onorm_softmax_stats(ctx, &x, static_cast<SS*>(b.x.dev()) + 3); }},
      {"moments_stats x i8", kUnsup,
       [&](Bufs& b) { auto x = rows_of(b.x); x.dtype = ONORM_I8; return onorm_moments_stats(ctx, &x, static_cast<MS*>(b.out.dev())); }},
      // merges
      {"softmax_merge parts < 0", kInvalid,
       [&](Bufs& b) { return onorm_softmax_merge(ctx, -1, rows, static_cast<SS*>(b.s.dev()), static_cast<SS*>(b.out.dev())); }},
      {"moments_merge rows < 0", kInvalid,
       [&](Bufs& b) { return onorm_moments_merge(ctx, 2, -1, static_cast<MS*>(b.m.dev()), static_cast<MS*>(b.out.dev())); }},
      {"softmax_merge in NULL", kInvalid,
       [&](Bufs& b) { return onorm_softmax_merge(ctx, 2, rows, nullptr, static_cast<SS*>(b.out.dev())); }},
      {"moments_merge out NULL", kInvalid,
       [&](Bufs& b) { return onorm_moments_merge(ctx, 2, rows, static_cast<MS*>(b.m.dev()), nullptr); }},
      {"softmax_merge out inside in (not equal)", kInvalid,
       [&](Bufs& b) { return onorm_softmax_merge(ctx, 2, rows, static_cast<SS*>(b.s.dev()), static_cast<SS*>(b.s.dev()) + 1); }},
      {"moments_merge out overlapping in", kInvalid,
       [&](Bufs& b) { return onorm_moments_merge(ctx, 2, rows, static_cast<MS*>(b.m.dev()) + 1, static_cast<MS*>(b.m.dev())); }},
      // softmax finish
      {"softmax_finish states NULL", kInvalid,
       [&](Bufs& b) { auto x = rows_of(b.x), y = rows_of(b.y); return onorm_softmax_finish(ctx, &x, nullptr, 0, &y); }},
      {"softmax_finish y of another shape", kInvalid,
       [&](Bufs& b) {
         auto x = rows_of(b.x), y = rows_of(b.y);
         y.cols -= 1;
         return onorm_softmax_finish(ctx, &x, static_cast<SS*>(b.s.dev()), 1, &y);
       }},
      {"softmax_finish y on states", kInvalid,
       [&](Bufs& b) {
         auto x = rows_of(b.x), y = rows_of(b.y);
         y.data = b.s.dev();
         y.rows = 1;
         return onorm_softmax_finish(ctx, &x, static_cast<SS*>(b.s.dev()), 0, &y);
       }},
      {"softmax_finish y i8", kUnsup,
       [&](Bufs& b) {
         auto x = rows_of(b.x), y = rows_of(b.y);
         y.dtype = ONORM_I8;
         return onorm_softmax_finish(ctx, &x, static_cast<SS*>(b.s.dev()), 0, &y);
       }},
      // norm finish
      {"norm_finish args NULL", kInvalid, [&](Bufs& b) { return finish(b, nullptr, rows_of(b.y)); }},
      {"norm_finish struct_size too small", kInvalid,
       [&](Bufs& b) { auto a = norm_args(b, ONORM_LAYER_NORM); a.struct_size = 16; return finish(b, &a, rows_of(b.y)); }},
      {"norm_finish residual", kInvalid,
       [&](Bufs& b) {
         auto a = norm_args(b, ONORM_LAYER_NORM);
         const onorm_rows res = rows_of(b.x);
         a.residual = &res;
         return finish(b, &a, rows_of(b.y));
       }},
      {"norm_finish y_scale (dynamic quantization)", kUnsup,
       [&](Bufs& b) {
         auto a = norm_args(b, ONORM_RMS_NORM);
         a.y_scale = b.yscale.dev_f32();
         auto y = rows_of(b.y);
         y.dtype = ONORM_I8;
         return finish(b, &a, y);
       }},
      {"norm_finish states NULL", kInvalid,
       [&](Bufs& b) {
         auto a = norm_args(b, ONORM_LAYER_NORM);
         const onorm_rows xr = b.x.dev_rows(), yr = b.y.dev_rows();
         return onorm_norm_finish(ctx, &xr, nullptr, &a, &yr);
       }},
      {"norm_finish RMSNorm with beta", kInvalid,
       [&](Bufs& b) { auto a = norm_args(b, ONORM_RMS_NORM); a.beta = b.x.dev(); return finish(b, &a, rows_of(b.y)); }},
      {"norm_finish eps negative", kInvalid,
       [&](Bufs& b) { auto a = norm_args(b, ONORM_LAYER_NORM); a.eps = -1; return finish(b, &a, rows_of(b.y)); }},
      {"norm_finish i8 without a scale", kInvalid,
       [&](Bufs& b) { auto a = norm_args(b, ONORM_LAYER_NORM); auto y = rows_of(b.y); y.dtype = ONORM_I8; return finish(b, &a, y); }},
      {"norm_finish rstd on states", kInvalid,
       [&](Bufs& b) { auto a = norm_args(b, ONORM_RMS_NORM); a.rstd = static_cast<float*>(b.m.dev()); return finish(b, &a, rows_of(b.y)); }},
      {"norm_finish y on states", kInvalid,
       [&](Bufs& b) {
         auto a = norm_args(b, ONORM_LAYER_NORM);
         auto y = rows_of(b.y);
         y.data = b.m.dev();
         y.rows = 1;
         return finish(b, &a, y);
       }},
      {"norm_finish kind not an onorm_norm_kind", kInvalid,
       [&](Bufs& b) { auto a = norm_args(b, ONORM_LAYER_NORM); a.kind = static_cast<onorm_norm_kind>(5); return finish(b, &a, rows_of(b.y)); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto b = make();
    EXPECT_EQ(c.call(*b), c.want) << onorm_last_error();
    EXPECT_NE(std::string(onorm_last_error()), "");
    for (Tensor* t : {&b->x, &b->y, &b->s, &b->m, &b->out, &b->mean, &b->rstd, &b->yscale}) t->download();
    EXPECT_TRUE(b->x.same_image(b->x0, "x"));
    EXPECT_TRUE(b->s.same_image(b->s0, "softmax states"));
    EXPECT_TRUE(b->m.same_image(b->m0, "moments states"));
    for (Tensor* t : {&b->y, &b->out, &b->mean, &b->rstd, &b->yscale}) EXPECT_TRUE(t->all_poison("an output"));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, PartialStates, ::testing::ValuesIn(all_backends()), BackendName());

}  // namespace
}  // namespace onorm_test
