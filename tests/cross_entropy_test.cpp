// onorm_cross_entropy (API.md, "cross-entropy") on every backend: loss, lse and dlogits against
// the float64 reference in random combinations of dtypes, widths, strides, unaligned pointers,
// label smoothing, z_loss and grad_scale, with ignored rows (a NaN in them included), targets out
// of range and NaN rows; -inf logits off the target; vocabularies of 2^18 and 2^24 + 3; dlogits in
// place; batch invariance and determinism (bitwise); empty calls; every bad argument refused with
// nothing written.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

#include "common/test_util.hpp"

namespace onorm_test {
namespace {

class CrossEntropy : public ::testing::TestWithParam<onorm_backend> {};

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

struct Problem {
  int64_t rows = 1, cols = 1;
  onorm_dtype xt = ONORM_F32;
  int gt = ONORM_F32;  // dlogits dtype, -1: no dlogits
  double ls = 0, z = 0, gs = 1;
  int64_t ignore_index = -100;
  int64_t pad = 0;
  size_t shift = 0;  // elements past the allocation's 16-byte alignment
  bool lse = true;
  bool in_place = false;  // dlogits over logits (same stride, gt of the same size)
};

std::string describe(const Problem& p) {
  std::ostringstream s;
  s << "cross_entropy " << dtype_name(p.xt) << " -> " << (p.gt >= 0 ? dtype_name(static_cast<onorm_dtype>(p.gt)) : "-")
    << " " << p.rows << "x" << p.cols << " ls " << p.ls << " z " << p.z << " gs " << p.gs << " ignore "
    << p.ignore_index << " pad " << p.pad << " shift " << p.shift << (p.lse ? " lse" : "") << (p.in_place ? " in-place" : "");
  return s.str();
}

// Per element value of the logits, and each row's target.
using Gen = std::function<double(int64_t r, int64_t c)>;

// One problem in the context's memory: logits, targets (int64, in an 8-byte Tensor), loss, lse
// and dlogits, all poisoned around.
struct Call {
  Problem p;
  Tensor x, dl, tg, loss, lse;
  std::vector<int64_t> targets;
  onorm_cross_entropy_args args{};
  onorm_rows dl_rows{};
  onorm_ref::CrossEntropyResult ref;

  Call(onorm_context ctx, const Problem& pr, const Gen& gen, const std::vector<int64_t>& t) : p(pr), targets(t) {
    const int64_t s = p.cols + p.pad;
    x = Tensor(ctx, p.xt, p.rows, p.cols, s, p.shift * esize(p.xt));
    if (p.gt >= 0 && !p.in_place) dl = Tensor(ctx, static_cast<onorm_dtype>(p.gt), p.rows, p.cols, s + 1, (p.shift ? p.shift + 1 : 0) * esize(static_cast<onorm_dtype>(p.gt)));
    tg = Tensor(ctx, ONORM_F64, 1, p.rows);
    loss = Tensor(ctx, ONORM_F32, 1, p.rows);
    lse = Tensor(ctx, ONORM_F32, 1, p.rows, -1, 4);
    x.fill(gen);
    for (int64_t r = 0; r < p.rows; ++r) std::memcpy(static_cast<char*>(tg.host()) + 8 * r, &targets[r], 8);
    tg.upload();
    onorm_cross_entropy_args_init(&args);
    args.targets = static_cast<const int64_t*>(tg.dev());
    args.ignore_index = p.ignore_index;
    args.label_smoothing = p.ls;
    args.z_loss = p.z;
    args.grad_scale = p.gs;
    args.loss = loss.dev_f32();
    args.lse = p.lse ? lse.dev_f32() : nullptr;
    if (p.gt >= 0)
      dl_rows = p.in_place ? onorm_rows{x.dev(), static_cast<onorm_dtype>(p.gt), p.rows, p.cols, x.stride()} : dl.dev_rows();
    args.dlogits = p.gt >= 0 ? &dl_rows : nullptr;
    onorm_ref::CrossEntropySpec sp;
    sp.logits = x.host_rows();
    sp.targets = targets.data();
    sp.ignore_index = p.ignore_index;
    sp.label_smoothing = p.ls;
    sp.z_loss = p.z;
    sp.grad_scale = p.gs;
    ref = onorm_ref::compute_cross_entropy(sp);
  }
  onorm_status call(onorm_context ctx) {
    const onorm_rows xr = x.dev_rows();
    const onorm_status st = onorm_cross_entropy(ctx, &xr, &args);
    if (st == ONORM_OK) {
      EXPECT_EQ(onorm_synchronize(ctx), ONORM_OK);
    }
    for (Tensor* t : {&x, &dl, &tg, &loss, &lse})
      if (t->ok()) t->download();
    return st;
  }
  // The dlogits as a host view (in place: x's image).
  onorm_rows dl_host() const {
    return p.in_place ? onorm_rows{const_cast<void*>(x.host()), static_cast<onorm_dtype>(p.gt), p.rows, p.cols, x.stride()}
                      : dl.host_rows();
  }
  void check(const std::vector<unsigned char>& x_before, const std::vector<unsigned char>& tg_before) {
    const onorm_rows dh = dl_host();
    const onorm_ref::Report rep = onorm_ref::check_cross_entropy(ref, loss.host_f32(), p.lse ? lse.host_f32() : nullptr,
                                                                 p.gt >= 0 ? &dh : nullptr);
    EXPECT_TRUE(rep.ok()) << rep.describe();
    EXPECT_TRUE(loss.all_written("loss"));
    EXPECT_TRUE(loss.outside_untouched("loss"));
    if (p.lse) {
      EXPECT_TRUE(lse.all_written("lse"));
      EXPECT_TRUE(lse.outside_untouched("lse"));
    } else {
      EXPECT_TRUE(lse.all_poison("lse (not given)"));
    }
    if (p.in_place) {
      EXPECT_TRUE(x.outside_untouched("dlogits (in place)"));
    } else {
      EXPECT_TRUE(x.same_image(x_before, "logits"));
    }
    if (dl.ok()) {
      EXPECT_TRUE(dl.all_written("dlogits"));
      EXPECT_TRUE(dl.outside_untouched("dlogits"));
    }
    EXPECT_TRUE(tg.same_image(tg_before, "targets"));
  }
  // Runs and checks.
  void run_and_check(onorm_context ctx) {
    const std::vector<unsigned char> xb = x.image(), tb = tg.image();
    ASSERT_EQ(call(ctx), ONORM_OK) << onorm_last_error();
    check(xb, tb);
  }
};

std::vector<onorm_dtype> io_dtypes() { return {ONORM_F32, ONORM_F16, ONORM_BF16}; }

// Random logits N(centre, sd) per row, with hard rows by r % 8 when hard is set: 1 ignored, 2 a NaN
// (not ignored), 3 a target out of range, 4 offset 100 + N(0,1), 5 a NaN in an ignored row,
// 6 -inf logits off the target.
struct RowPlan {
  std::vector<double> centre, sd;
  std::vector<int64_t> targets;
  std::vector<int> kind;
};

RowPlan plan_rows(const Problem& p, std::mt19937_64& rng, bool hard) {
  RowPlan rp;
  std::uniform_real_distribution<double> u(0, 1);
  for (int64_t r = 0; r < p.rows; ++r) {
    rp.centre.push_back(u(rng) * 8 - 4);
    rp.sd.push_back(0.5 + 3 * u(rng));
    int kind = hard ? static_cast<int>(r % 8) : 0;
    int64_t t = static_cast<int64_t>(rng() % static_cast<uint64_t>(p.cols));
    if (kind == 1 || kind == 5) t = p.ignore_index;
    if (kind == 3) t = rng() % 2 ? p.cols + static_cast<int64_t>(rng() % 3) : -1 - static_cast<int64_t>(rng() % 3);
    if (kind == 3 && t == p.ignore_index) t = p.cols;
    rp.targets.push_back(t);
    rp.kind.push_back(kind);
  }
  return rp;
}

Gen row_gen(const Problem& p, std::shared_ptr<RowPlan> rp, std::mt19937_64& rng) {
  auto eng = std::make_shared<std::mt19937_64>(rng());
  const int64_t cols = p.cols;
  return [rp, eng, cols](int64_t r, int64_t c) {
    const int kind = rp->kind[static_cast<size_t>(r)];
    const int64_t t = rp->targets[static_cast<size_t>(r)];
    if ((kind == 2 || kind == 5) && c == cols / 2) return kNaN;
    if (kind == 4) return cheap_normal(*eng, 100.0, 1.0);
    if (kind == 6 && c != t && c % 3 == 0) return -kInf;
    return cheap_normal(*eng, rp->centre[static_cast<size_t>(r)], rp->sd[static_cast<size_t>(r)]);
  };
}

TEST_P(CrossEntropy, AgainstTheReference) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  const std::vector<onorm_dtype> dts = io_dtypes();
  const int64_t widths[] = {1, 3, 127, 1025, 65537, 64, 4096, 2};
  const double smoothing[] = {0.0, 0.1, 1.0};
  const double zs[] = {0.0, 1e-4, 0.01};
  for (int k = 0; k < 60; ++k) {
    Problem p;
    p.cols = widths[rng() % 8];
    p.rows = p.cols > 5000 ? 2 + static_cast<int64_t>(rng() % 7) : 1 + static_cast<int64_t>(rng() % 9);
    p.xt = dts[rng() % dts.size()];
    p.gt = rng() % 5 == 0 ? -1 : static_cast<int>(dts[rng() % dts.size()]);
    p.ls = smoothing[rng() % 3];
    p.z = zs[rng() % 3];
    const double gss[] = {1.0, 1.0 / static_cast<double>(p.rows), -2.5, 0.0};
    p.gs = gss[rng() % 4];
    // Sometimes an ignore_index that is a column: rows aiming at that column are ignored.
    if (rng() % 4 == 0) p.ignore_index = static_cast<int64_t>(rng() % static_cast<uint64_t>(p.cols));
    p.pad = rng() % 2 ? 0 : 3;
    p.shift = rng() % 2 ? 0 : 2;
    p.lse = rng() % 4 != 0;
    // -inf logits off the target need no smoothing for a finite loss; with smoothing the loss is
    // +inf by the definition, which the reference gives too.
    const bool hard = rng() % 3 != 0;
    SCOPED_TRACE(describe(p) + (hard ? " hard rows" : ""));
    auto rp = std::make_shared<RowPlan>(plan_rows(p, rng, hard));
    Call run(ctx, p, row_gen(p, rp, rng), rp->targets);
    run.run_and_check(ctx);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// The special rows one by one, on every dtype: each row's loss, lse and gradient as the contract
// fixes them.
TEST_P(CrossEntropy, SpecialRows) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  for (onorm_dtype dt : io_dtypes())
    for (double ls : {0.0, 0.1, 1.0}) {
      Problem p;
      p.rows = 8;
      p.cols = 300;
      p.xt = dt;
      p.gt = dt;
      p.ls = ls;
      p.z = 1e-4;
      p.gs = 0.5;
      SCOPED_TRACE(describe(p));
      auto rp = std::make_shared<RowPlan>(plan_rows(p, rng, true));
      Call run(ctx, p, row_gen(p, rp, rng), rp->targets);
      run.run_and_check(ctx);
      if (::testing::Test::HasFatalFailure()) return;
      // What the contract fixes by name (the reference agrees; these say it once more plainly).
      for (int64_t r = 0; r < p.rows; ++r) {
        const float loss = run.loss.host_f32()[r], lse = run.lse.host_f32()[r];
        const int kind = rp->kind[static_cast<size_t>(r)];
        if (kind == 1) {
          EXPECT_EQ(loss, 0.0f) << "ignored row " << r;
        }
        if (kind == 1) {
          EXPECT_TRUE(std::isfinite(lse)) << "ignored row " << r << ": lse is still written";
        }
        if (kind == 5) {
          EXPECT_EQ(loss, 0.0f) << "ignored row " << r << " holding a NaN";
        }
        if (kind == 5) {
          EXPECT_TRUE(std::isnan(lse)) << "ignored row " << r << " holding a NaN: lse";
        }
        if (kind == 2 || kind == 3) {
          EXPECT_TRUE(std::isnan(loss)) << "row " << r;
        }
        if (kind == 6 && ls == 0) {
          EXPECT_TRUE(std::isfinite(loss)) << "-inf off the target, no smoothing: row " << r;
        }
        if (kind == 6 && ls > 0) {
          EXPECT_EQ(loss, std::numeric_limits<float>::infinity()) << "row " << r;
        }
        for (int64_t c = 0; c < p.cols; ++c) {
          const double g = run.dl.get(r, c);
          if (kind == 1 || kind == 5) {
            ASSERT_EQ(g, 0.0) << "ignored row " << r << " col " << c;
          }
          if (kind == 2 || kind == 3) {
            ASSERT_TRUE(std::isnan(g)) << "row " << r << " col " << c;
          }
          if (kind == 6) {
            ASSERT_TRUE(std::isfinite(g)) << "row " << r << " col " << c;
          }
        }
      }
    }
}

// Vocabularies of 2^18 and beyond: a few rows of 2^18 + 5 (bf16, dlogits f32), and one row of
// 2^24 + 3 (bf16, gradient in place) where float32 counts and running sums lose accuracy.
TEST_P(CrossEntropy, LargeVocabularies) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  for (int64_t cols : {(int64_t(1) << 18) + 5, (int64_t(1) << 24) + 3}) {
    Problem p;
    p.cols = cols;
    p.rows = cols > (int64_t(1) << 20) ? 1 : 3;
    p.xt = ONORM_BF16;
    p.gt = cols > (int64_t(1) << 20) ? ONORM_BF16 : ONORM_F32;
    p.in_place = cols > (int64_t(1) << 20);
    p.ls = 0.1;
    p.z = 1e-4;
    p.gs = 1.0 / 3;
    SCOPED_TRACE(describe(p));
    auto rp = std::make_shared<RowPlan>(plan_rows(p, rng, false));
    Call run(ctx, p, row_gen(p, rp, rng), rp->targets);
    run.run_and_check(ctx);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Rows at every placement's edge (one block of 1024..8192 columns, clusters of 2..16 slices of
// 8192 or 16384 columns, clusters reading their slices twice past 262144, and a block per row
// where there are no clusters), with the hard values where a split can cut them: the target
// and outliers (+30 over the row, a large offset, values near FLT_MAX in f32) at the first and
// last column of every even split into 2..16 slices aligned to 4 or 8 elements. The widest rows
// on GPUs only (the CPU's are the same code at every width, and the reference's time).
TEST_P(CrossEntropy, EveryPlacementAndSliceEdge) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  std::vector<int64_t> widths = {1024, 1025, 2049, 4096, 4097, 8192, 8193, 16384, 16385, 40000, 131072, 131073, 262144, 262145};
  if (is_gpu(GetParam())) widths.insert(widths.end(), {262152, 300001, int64_t(1) << 20, (int64_t(1) << 20) + 3});
  for (int64_t cols : widths) {
    std::vector<int64_t> edges;
    for (int64_t vec : {4, 8})
      for (int64_t k = 2; k <= 16; ++k) {
        const int64_t chunk = ((cols + k - 1) / k + vec - 1) / vec * vec;
        for (int64_t r = 1; r < k && r * chunk < cols; ++r)
          for (int64_t c : {r * chunk - 1, r * chunk}) edges.push_back(c);
      }
    std::sort(edges.begin(), edges.end());
    edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
    for (onorm_dtype dt : {ONORM_F32, ONORM_BF16}) {
      Problem p;
      p.cols = cols;
      p.rows = 6;
      p.xt = dt;
      p.gt = rng() % 2 ? ONORM_F32 : static_cast<int>(dt);
      p.in_place = p.gt == static_cast<int>(dt) && rng() % 2;
      p.ls = rng() % 2 ? 0.1 : 0.0;
      p.z = 0.0;  // z lse^2 of rows near FLT_MAX is beyond a float
      p.gs = 1.0 / 6;
      p.shift = rng() % 2 ? 0 : 1;
      SCOPED_TRACE(describe(p));
      // Row 0: the target at an edge; 1: outliers at every edge, the target past the first;
      // 2: offset 100 + outliers; 3: values near FLT_MAX (f32) or 1e30 (bf16) at the edges;
      // 4: a NaN at an edge; 5: an ignored row with outliers.
      std::vector<int64_t> t(6);
      for (int64_t r = 0; r < 6; ++r) t[r] = edges.empty() ? cols - 1 : edges[rng() % edges.size()];
      t[5] = p.ignore_index;
      const double big = dt == ONORM_F32 ? 3.0e38 : 1.0e30;
      auto eng = std::make_shared<std::mt19937_64>(rng());
      auto is_edge = std::make_shared<std::vector<bool>>(static_cast<size_t>(cols), false);
      for (int64_t c : edges) (*is_edge)[static_cast<size_t>(c)] = true;
      Gen gen = [eng, is_edge, t, big](int64_t r, int64_t c) {
        const bool e = (*is_edge)[static_cast<size_t>(c)];
        switch (r) {
          case 0: return cheap_normal(*eng, 0.0, 2.0) + (c == t[0] ? 8.0 : 0.0);
          case 2: return 100.0 + cheap_normal(*eng, 0.0, 1.0) + (e ? 30.0 : 0.0);
          case 3: return e ? big * (1.0 - 1e-3 * static_cast<double>(c % 7)) : cheap_normal(*eng, 0.0, 1.0);
          case 4: return e && c == t[4] ? kNaN : cheap_normal(*eng, 0.0, 1.0);
          default: return cheap_normal(*eng, 0.0, 1.0) + (e ? 30.0 : 0.0);
        }
      };
      Call run(ctx, p, gen, t);
      run.run_and_check(ctx);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// Many more rows than a device holds clusters at once: the streamed 16-bit clusters take several
// rows each (their mailboxes and stage alternate row by row); hard rows among them, in place.
TEST_P(CrossEntropy, ManyRowsPerPlacement) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  // 16-bit rows streamed over clusters (32768 columns); on GPUs also through single blocks
  // (16384), short rows a warp each, more than the grid's blocks (9000 x 1000), and rows of 300001
  // and 300000 columns over clusters reading their slices twice, in both dtypes.
  struct Shape {
    int64_t rows, cols;
    onorm_dtype dt;
  };
  std::vector<Shape> shapes = {{300, 32768, ONORM_BF16}};
  if (is_gpu(GetParam()))
    shapes.insert(shapes.end(), {{900, 16384, ONORM_BF16}, {9000, 1000, ONORM_F32}, {40, 300001, ONORM_F32},
                                 {40, 300000, ONORM_BF16}});
  for (const Shape& sh : shapes) {
    Problem p;
    p.rows = sh.rows;
    p.cols = sh.cols;
    p.xt = sh.dt;
    p.gt = sh.dt;
    p.in_place = true;
    p.ls = 0.1;
    p.gs = 1.0 / static_cast<double>(sh.rows);
    SCOPED_TRACE(describe(p));
    auto rp = std::make_shared<RowPlan>(plan_rows(p, rng, true));
    Call run(ctx, p, row_gen(p, rp, rng), rp->targets);
    run.run_and_check(ctx);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// dlogits over logits gives the same bits as out of place (every dtype, strided, unaligned).
TEST_P(CrossEntropy, InPlaceEqualsOutOfPlace) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  for (onorm_dtype dt : io_dtypes()) {
    Problem p;
    p.rows = 6;
    p.cols = 1025;
    p.xt = dt;
    p.gt = dt;
    p.ls = 0.1;
    p.z = 1e-3;
    p.pad = 5;
    p.shift = 2;
    SCOPED_TRACE(describe(p));
    auto rp = std::make_shared<RowPlan>(plan_rows(p, rng, true));
    const Gen gen = row_gen(p, rp, rng);
    Call out(ctx, p, gen, rp->targets);
    out.run_and_check(ctx);
    if (::testing::Test::HasFatalFailure()) return;
    Problem q = p;
    q.in_place = true;
    Call in(ctx, q, [&](int64_t r, int64_t c) { return out.x.get(r, c); }, rp->targets);
    in.run_and_check(ctx);
    if (::testing::Test::HasFatalFailure()) return;
    for (int64_t r = 0; r < p.rows; ++r)
      ASSERT_EQ(std::memcmp(static_cast<const char*>(in.x.host()) + in.x.index(r, 0) * esize(dt),
                            static_cast<const char*>(out.dl.host()) + out.dl.index(r, 0) * esize(dt), p.cols * esize(dt)),
                0)
          << "dlogits row " << r;
    EXPECT_EQ(std::memcmp(in.loss.host(), out.loss.host(), p.rows * 4), 0) << "loss";
    EXPECT_EQ(std::memcmp(in.lse.host(), out.lse.host(), p.rows * 4), 0) << "lse";
  }
}

// Batch invariance: each row alone (at the same address) gives the bits it got in the batch;
// determinism: a second run of the batch gives the same bits.
TEST_P(CrossEntropy, RowsAloneAndRerunsGiveTheSameBits) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  for (onorm_dtype dt : io_dtypes()) {
    Problem p;
    p.rows = 9;
    p.cols = 3001;
    p.xt = dt;
    p.gt = ONORM_F32;
    p.ls = 0.1;
    p.z = 1e-4;
    p.gs = 0.25;
    p.pad = 3;
    p.shift = 2;
    SCOPED_TRACE(describe(p));
    auto rp = std::make_shared<RowPlan>(plan_rows(p, rng, true));
    Call batch(ctx, p, row_gen(p, rp, rng), rp->targets);
    batch.run_and_check(ctx);
    if (::testing::Test::HasFatalFailure()) return;
    const std::vector<unsigned char> dl1 = batch.dl.image(), loss1 = batch.loss.image(), lse1 = batch.lse.image();
    for (Tensor* t : {&batch.dl, &batch.loss, &batch.lse}) t->poison();
    ASSERT_EQ(batch.call(ctx), ONORM_OK) << onorm_last_error();
    EXPECT_TRUE(batch.dl.same_image(dl1, "dlogits, second run"));
    EXPECT_TRUE(batch.loss.same_image(loss1, "loss, second run"));
    EXPECT_TRUE(batch.lse.same_image(lse1, "lse, second run"));
    for (int64_t r = 0; r < p.rows; ++r) {
      const size_t mis = (reinterpret_cast<uintptr_t>(batch.dl.dev()) + static_cast<uintptr_t>(batch.dl.index(r, 0) * 4)) % 16;
      Tensor dl(ctx, ONORM_F32, 1, p.cols, -1, mis);
      Tensor loss(ctx, ONORM_F32, 1, 1), lse(ctx, ONORM_F32, 1, 1);
      onorm_rows x1 = batch.x.dev_rows(), dl1r = dl.dev_rows();
      x1.data = static_cast<char*>(x1.data) + batch.x.index(r, 0) * esize(dt);
      x1.rows = 1;
      onorm_cross_entropy_args a = batch.args;
      a.targets += r;
      a.loss = loss.dev_f32();
      a.lse = lse.dev_f32();
      a.dlogits = &dl1r;
      ASSERT_EQ(onorm_cross_entropy(ctx, &x1, &a), ONORM_OK) << onorm_last_error();
      ASSERT_EQ(onorm_synchronize(ctx), ONORM_OK);
      dl.download();
      loss.download();
      lse.download();
      EXPECT_EQ(std::memcmp(dl.host(), static_cast<const char*>(batch.dl.host()) + batch.dl.index(r, 0) * 4, p.cols * 4), 0)
          << "dlogits of row " << r << " alone";
      EXPECT_EQ(std::memcmp(loss.host(), batch.loss.host_f32() + r, 4), 0) << "loss of row " << r << " alone";
      EXPECT_EQ(std::memcmp(lse.host(), batch.lse.host_f32() + r, 4), 0) << "lse of row " << r << " alone";
    }
  }
}

// rows == 0 or cols == 0: OK and nothing written.
TEST_P(CrossEntropy, EmptyWritesNothing) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  for (int64_t rows : {0, 3})
    for (int64_t cols : {0, 5}) {
      if (rows && cols) continue;
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
      Tensor x(ctx, ONORM_F32, rows, cols), dl(ctx, ONORM_F32, rows, cols), loss(ctx, ONORM_F32, 1, 3),
          lse(ctx, ONORM_F32, 1, 3), tg(ctx, ONORM_F64, 1, 3);
      for (int64_t r = 0; r < 3; ++r) std::memset(static_cast<char*>(tg.host()) + 8 * r, 0, 8);
      tg.upload();
      onorm_cross_entropy_args a;
      onorm_cross_entropy_args_init(&a);
      const onorm_rows xr = x.dev_rows(), dr = dl.dev_rows();
      a.targets = static_cast<const int64_t*>(tg.dev());
      a.loss = loss.dev_f32();
      a.lse = lse.dev_f32();
      a.dlogits = &dr;
      EXPECT_EQ(onorm_cross_entropy(ctx, &xr, &a), ONORM_OK) << onorm_last_error();
      EXPECT_EQ(onorm_synchronize(ctx), ONORM_OK);
      for (Tensor* t : {&x, &dl, &loss, &lse}) t->download();
      EXPECT_TRUE(loss.all_poison("loss"));
      EXPECT_TRUE(lse.all_poison("lse"));
      EXPECT_TRUE(dl.all_poison("dlogits"));
    }
}

// Every bad argument: INVALID_ARGUMENT (UNSUPPORTED for a quantized dtype) with a message, and
// nothing written.
TEST_P(CrossEntropy, BadArgumentsWriteNothing) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  Problem base;
  base.rows = 4;
  base.cols = 64;
  base.pad = 2;
  const onorm_status kInvalid = ONORM_ERROR_INVALID_ARGUMENT;
  const double nan = kNaN, inf = kInf;
  using A = onorm_cross_entropy_args;
  struct Case {
    const char* name;
    onorm_status want;
    std::function<void(Call&, A&, onorm_rows& x, onorm_rows& dl)> edit;
  };
  const std::vector<Case> cases = {
      {"args NULL", kInvalid, nullptr},
      {"struct_size too small", kInvalid, [](Call&, A& a, onorm_rows&, onorm_rows&) { a.struct_size = sizeof(A) - 8; }},
      {"struct_size 0", kInvalid, [](Call&, A& a, onorm_rows&, onorm_rows&) { a.struct_size = 0; }},
      {"targets NULL", kInvalid, [](Call&, A& a, onorm_rows&, onorm_rows&) { a.targets = nullptr; }},
      {"loss NULL", kInvalid, [](Call&, A& a, onorm_rows&, onorm_rows&) { a.loss = nullptr; }},
      {"logits data NULL", kInvalid, [](Call&, A&, onorm_rows& x, onorm_rows&) { x.data = nullptr; }},
      {"logits rows < 0", kInvalid, [](Call&, A&, onorm_rows& x, onorm_rows&) { x.rows = -1; }},
      {"logits row_stride < cols", kInvalid, [](Call&, A&, onorm_rows& x, onorm_rows&) { x.row_stride = x.cols - 1; }},
      {"label_smoothing -0.1", kInvalid, [](Call&, A& a, onorm_rows&, onorm_rows&) { a.label_smoothing = -0.1; }},
      {"label_smoothing 1.5", kInvalid, [](Call&, A& a, onorm_rows&, onorm_rows&) { a.label_smoothing = 1.5; }},
      {"label_smoothing NaN", kInvalid, [=](Call&, A& a, onorm_rows&, onorm_rows&) { a.label_smoothing = nan; }},
      {"z_loss negative", kInvalid, [](Call&, A& a, onorm_rows&, onorm_rows&) { a.z_loss = -1e-4; }},
      {"z_loss NaN", kInvalid, [=](Call&, A& a, onorm_rows&, onorm_rows&) { a.z_loss = nan; }},
      {"z_loss inf", kInvalid, [=](Call&, A& a, onorm_rows&, onorm_rows&) { a.z_loss = inf; }},
      {"grad_scale inf", kInvalid, [=](Call&, A& a, onorm_rows&, onorm_rows&) { a.grad_scale = -inf; }},
      {"grad_scale NaN", kInvalid, [=](Call&, A& a, onorm_rows&, onorm_rows&) { a.grad_scale = nan; }},
      {"loss on lse", kInvalid, [](Call&, A& a, onorm_rows&, onorm_rows&) { a.lse = a.loss + 1; }},
      {"loss on targets", kInvalid,
       [](Call&, A& a, onorm_rows&, onorm_rows&) { a.loss = reinterpret_cast<float*>(const_cast<int64_t*>(a.targets)); }},
      {"lse on targets", kInvalid,
       [](Call&, A& a, onorm_rows&, onorm_rows&) { a.lse = reinterpret_cast<float*>(const_cast<int64_t*>(a.targets)) + 1; }},
      {"loss on logits", kInvalid, [](Call&, A& a, onorm_rows& x, onorm_rows&) { a.loss = static_cast<float*>(x.data); }},
      {"loss on dlogits", kInvalid, [](Call&, A& a, onorm_rows&, onorm_rows& dl) { a.loss = static_cast<float*>(dl.data) + 3; }},
      {"lse on dlogits", kInvalid, [](Call&, A& a, onorm_rows&, onorm_rows& dl) { a.lse = static_cast<float*>(dl.data); }},
      {"dlogits on targets", kInvalid,
       [](Call&, A& a, onorm_rows&, onorm_rows& dl) { a.targets = static_cast<const int64_t*>(dl.data) + 1; }},
      {"dlogits on logits, shifted", kInvalid,
       [](Call&, A&, onorm_rows& x, onorm_rows& dl) {
         dl = x;
         dl.data = static_cast<char*>(x.data) + 4;
       }},
      {"dlogits on logits, another stride", kInvalid,
       [](Call&, A&, onorm_rows& x, onorm_rows& dl) {
         dl = x;
         dl.row_stride = x.row_stride + 1;
       }},
      {"dlogits fewer rows", kInvalid, [](Call&, A&, onorm_rows&, onorm_rows& dl) { dl.rows -= 1; }},
      {"dlogits other cols", kInvalid, [](Call&, A&, onorm_rows&, onorm_rows& dl) { dl.cols -= 1; }},
      {"dlogits dtype not an onorm_dtype", kInvalid,
       [](Call&, A&, onorm_rows&, onorm_rows& dl) { dl.dtype = static_cast<onorm_dtype>(77); }},
      {"logits i8", ONORM_ERROR_UNSUPPORTED, [](Call&, A&, onorm_rows& x, onorm_rows&) { x.dtype = ONORM_I8; }},
      {"logits f8", ONORM_ERROR_UNSUPPORTED, [](Call&, A&, onorm_rows& x, onorm_rows&) { x.dtype = ONORM_F8_E4M3; }},
      {"dlogits i8", ONORM_ERROR_UNSUPPORTED, [](Call&, A&, onorm_rows&, onorm_rows& dl) { dl.dtype = ONORM_I8; }},
      {"dlogits f8", ONORM_ERROR_UNSUPPORTED, [](Call&, A&, onorm_rows&, onorm_rows& dl) { dl.dtype = ONORM_F8_E4M3; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto rp = std::make_shared<RowPlan>(plan_rows(base, rng, false));
    Call run(ctx, base, row_gen(base, rp, rng), rp->targets);
    const std::vector<unsigned char> xb = run.x.image(), tb = run.tg.image();
    A a = run.args;
    onorm_rows xr = run.x.dev_rows(), dr = run.dl.dev_rows();
    a.dlogits = &dr;
    if (c.edit) c.edit(run, a, xr, dr);
    const onorm_status st = onorm_cross_entropy(ctx, &xr, c.edit ? &a : nullptr);
    EXPECT_EQ(st, c.want) << onorm_last_error();
    EXPECT_NE(std::string(onorm_last_error()), "");
    for (Tensor* t : {&run.x, &run.dl, &run.tg, &run.loss, &run.lse}) t->download();
    EXPECT_TRUE(run.dl.all_poison("dlogits"));
    EXPECT_TRUE(run.loss.all_poison("loss"));
    EXPECT_TRUE(run.lse.all_poison("lse"));
    EXPECT_TRUE(run.x.same_image(xb, "logits"));
    EXPECT_TRUE(run.tg.same_image(tb, "targets"));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, CrossEntropy, ::testing::ValuesIn(all_backends()), BackendName());

}  // namespace
}  // namespace onorm_test
