// onorm_softmax_topk (API.md, "softmax top-k") on every backend: values (softmax over the whole
// row, or over the k selected with renormalize) and indices exactly the float64 reference's, over
// k = 1, 64, 1024, cols and random k; ties by the lower column (rows of few distinct values, -0
// and +0); all -inf rows (values 0, columns 0..k-1); NaN rows (NaN values, k distinct columns);
// f32/f16/bf16 in and out, strides and unaligned rows; batch invariance; bad arguments refused
// with nothing written.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

#include "common/test_util.hpp"

namespace onorm_test {
namespace {

class SoftmaxTopk : public ::testing::TestWithParam<onorm_backend> {};

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

struct Problem {
  int64_t rows = 1, cols = 1, k = 1;
  onorm_dtype xt = ONORM_F32, vt = ONORM_F32;
  bool renormalize = false;
  int64_t pad = 0;
  size_t shift = 0;  // elements past the 16-byte alignment
};

std::string describe(const Problem& p) {
  std::ostringstream s;
  s << "softmax_topk " << dtype_name(p.xt) << " -> " << dtype_name(p.vt) << " " << p.rows << "x" << p.cols << " k "
    << p.k << (p.renormalize ? " renormalize" : "") << " pad " << p.pad << " shift " << p.shift;
  return s.str();
}

using Gen = std::function<double(int64_t r, int64_t c)>;

struct Call {
  Problem p;
  Tensor x, v, ix;  // ix: rows * k int64 in an 8-byte tensor
  Call(onorm_context ctx, const Problem& pr, const Gen& gen) : p(pr) {
    x = Tensor(ctx, p.xt, p.rows, p.cols, p.cols + p.pad, p.shift * esize(p.xt));
    v = Tensor(ctx, p.vt, p.rows, p.k, p.k + (p.pad ? 1 : 0), p.shift * esize(p.vt));
    ix = Tensor(ctx, ONORM_F64, 1, p.rows * p.k);
    x.fill(gen);
  }
  const int64_t* indices() const { return static_cast<const int64_t*>(ix.host()); }
  // Returns the status; on OK checks everything against the reference.
  onorm_status run(onorm_context ctx, bool gpu) {
    const std::vector<unsigned char> xb = x.image();
    const onorm_ref::TopkResult ref = onorm_ref::compute_topk(x.host_rows(), p.k, p.renormalize);
    const onorm_rows xr = x.dev_rows(), vr = v.dev_rows();
    const onorm_status st =
        onorm_softmax_topk(ctx, &xr, p.k, p.renormalize ? 1 : 0, &vr, static_cast<int64_t*>(ix.dev()));
    if (st != ONORM_OK) {
      for (Tensor* t : {&x, &v, &ix}) t->download();
      EXPECT_TRUE(v.all_poison("values of a refused call"));
      EXPECT_TRUE(ix.all_poison("indices of a refused call"));
      // Only GPUs may refuse k above 1024, and only as UNSUPPORTED.
      EXPECT_TRUE(gpu && p.k > 1024 && st == ONORM_ERROR_UNSUPPORTED)
          << "status " << onorm_status_string(st) << ": " << onorm_last_error();
      return st;
    }
    EXPECT_EQ(onorm_synchronize(ctx), ONORM_OK);
    for (Tensor* t : {&x, &v, &ix}) t->download();
    EXPECT_TRUE(x.same_image(xb, "x"));
    EXPECT_TRUE(v.all_written("values"));
    EXPECT_TRUE(v.outside_untouched("values"));
    EXPECT_TRUE(ix.all_written("indices"));
    EXPECT_TRUE(ix.outside_untouched("indices"));
    const onorm_ref::Report rep = onorm_ref::check_topk(ref, p.cols, v.host_rows(), indices());
    EXPECT_TRUE(rep.ok()) << rep.describe();
    return st;
  }
};

const std::vector<onorm_dtype>& io_dtypes() {
  static const std::vector<onorm_dtype> d = {ONORM_F32, ONORM_F16, ONORM_BF16};
  return d;
}

// Rows by r % 6: 0 plain N(c, s); 1 few distinct values (integers 0..3, ties everywhere); 2 +-0
// and a few negatives; 3 all -inf; 4 a NaN; 5 -inf in most columns, plain in the rest.
Gen mixed_rows(std::mt19937_64& rng, bool hard) {
  auto eng = std::make_shared<std::mt19937_64>(rng());
  const double centre = std::uniform_real_distribution<double>(-4, 4)(rng);
  const double sd = std::uniform_real_distribution<double>(0.5, 4)(rng);
  return [eng, centre, sd, hard](int64_t r, int64_t c) {
    const int kind = hard ? static_cast<int>(r % 6) : 0;
    switch (kind) {
      case 1: return static_cast<double>((*eng)() % 4);
      case 2: {
        const uint64_t u = (*eng)() % 4;
        return u == 0 ? 0.0 : u == 1 ? -0.0 : u == 2 ? -1.0 : -3.5;
      }
      case 3: return -kInf;
      case 4: return c == 7 ? kNaN : cheap_normal(*eng, centre, sd);
      case 5: return c % 5 == 1 ? cheap_normal(*eng, centre, sd) : -kInf;
      default: return cheap_normal(*eng, centre, sd);
    }
  };
}

TEST_P(SoftmaxTopk, AgainstTheReference) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  const bool gpu = is_gpu(GetParam());
  const int64_t widths[] = {1, 3, 127, 1025, 4099, 64, 2000};
  for (int n = 0; n < 60; ++n) {
    Problem p;
    p.cols = widths[rng() % 7];
    p.rows = 1 + static_cast<int64_t>(rng() % 13);
    const int64_t ks[] = {1, p.cols, std::min<int64_t>(64, p.cols), std::min<int64_t>(1024, p.cols),
                          1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(p.cols))};
    p.k = ks[rng() % 5];
    p.xt = io_dtypes()[rng() % 3];
    p.vt = io_dtypes()[rng() % 3];
    p.renormalize = rng() % 2;
    p.pad = rng() % 2 ? 0 : 3;
    p.shift = rng() % 2 ? 0 : 1;
    const bool hard = rng() % 3 != 0;
    SCOPED_TRACE(describe(p) + (hard ? " hard rows" : ""));
    Call c(ctx, p, mixed_rows(rng, hard));
    c.run(ctx, gpu);
    if (HasFailure()) return;
  }
}

// Entries late in a row, once the scan holds a bar (the k-th best so far) and passes over the
// columns that cannot enter a vector at a time (the CPU's find_beating): a NaN, a +inf, a large
// value, at every lane of a 16-lane vector after column 1000 and in the row's last columns
// (4097: one past a whole number of vectors); rows where every column enters (ascending); and
// columns equal to the bar (the k first are earlier columns: they must not enter).
TEST_P(SoftmaxTopk, LateEntriesAtEveryLane) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  const bool gpu = is_gpu(GetParam());
  std::vector<int64_t> lates;
  for (int64_t c = 1000; c < 1024; ++c) lates.push_back(c);
  for (int64_t c = 4080; c < 4097; ++c) lates.push_back(c);
  for (const onorm_dtype dt : io_dtypes()) {
    for (const int64_t k : {int64_t{1}, int64_t{8}, int64_t{64}}) {
      for (size_t i = 0; i < lates.size(); ++i) {
        const int64_t late = lates[i];
        Problem p;
        p.rows = 5;
        p.cols = 4097;
        p.k = k;
        p.xt = p.vt = dt;
        p.shift = i % 2;
        SCOPED_TRACE(describe(p) + " late column " + std::to_string(late));
        auto eng = std::make_shared<std::mt19937_64>(rng());
        Call c(ctx, p, [eng, late](int64_t r, int64_t col) {
          if (r == 3) return col * 0.25;                           // ascending: every column enters
          if (r == 4) return col < 500 ? double((*eng)() % 4) : 3.0;  // ties with the bar after 500
          if (col == late) return r == 0 ? kNaN : r == 1 ? kInf : 100.0;
          return cheap_normal(*eng, 0.0, 1.0);
        });
        c.run(ctx, gpu);
        if (HasFailure()) return;
      }
    }
  }
}

// Short rows, which the CPU selects from candidates (the columns whose key reaches the k-th
// largest of its lanes' maxima: simd_topk_candidates): every k from 1 to 17 (the lane counts 8
// and 16 and one past), widths around them and past, every dtype; rows of the mixed kinds, rows
// whose largest values all sit in one lane (the other lanes' maxima low), rows of two values
// (ties at the threshold), and a NaN or -0 in one lane.
TEST_P(SoftmaxTopk, ShortRowsEveryK) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  const bool gpu = is_gpu(GetParam());
  for (const int64_t cols : {int64_t{1}, int64_t{5}, int64_t{16}, int64_t{17}, int64_t{33}, int64_t{100}, int64_t{256}})
    for (int64_t k = 1; k <= std::min<int64_t>(17, cols); ++k) {
      Problem p;
      p.rows = 10;
      p.cols = cols;
      p.k = k;
      p.xt = io_dtypes()[rng() % 3];
      p.vt = io_dtypes()[rng() % 3];
      p.renormalize = rng() % 4 == 0;
      SCOPED_TRACE(describe(p));
      const Gen mixed = mixed_rows(rng, true);
      auto eng = std::make_shared<std::mt19937_64>(rng());
      const int64_t lane = static_cast<int64_t>(rng() % 16);
      Call c(ctx, p, [mixed, eng, lane](int64_t r, int64_t col) {
        if (r < 6) return mixed(r, col);
        if (r == 6) return col % 16 == lane ? 10.0 + double(col) : cheap_normal(*eng, 0.0, 1.0);
        if (r == 7) return (*eng)() % 8 == 0 ? 1.0 : 0.0;
        if (r == 8) return col % 16 == lane ? kNaN : cheap_normal(*eng, 0.0, 1.0);
        return col % 16 == lane ? -0.0 : col % 3 == 0 ? 0.0 : -1.0;
      });
      c.run(ctx, gpu);
      if (HasFailure()) return;
    }
}

// The fixed k of the contract on one width: 1, 64, 1024, cols (above 1024: UNSUPPORTED allowed on
// GPUs only), renormalized or not, every dtype pair.
TEST_P(SoftmaxTopk, NamedK) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  const bool gpu = is_gpu(GetParam());
  for (int64_t k : {int64_t(1), int64_t(64), int64_t(1024), int64_t(3000)})
    for (onorm_dtype xt : io_dtypes())
      for (onorm_dtype vt : io_dtypes())
        for (bool renorm : {false, true}) {
          Problem p;
          p.rows = 7;
          p.cols = 3000;
          p.k = k;
          p.xt = xt;
          p.vt = vt;
          p.renormalize = renorm;
          SCOPED_TRACE(describe(p));
          Call c(ctx, p, mixed_rows(rng, true));
          c.run(ctx, gpu);
          if (HasFailure()) return;
        }
}

// GPUs only (the CPU's time in CI): rows past the tile and up to the warp kernel's largest (the
// planner's warp per row, softmax_topk_plan.hpp) and just past it (the block kernel), more rows
// than the grid's warps (the grid-stride loop), every input dtype.
TEST_P(SoftmaxTopk, WarpAndBlockRowsOnGpus) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  if (!is_gpu(GetParam())) GTEST_SKIP() << "GPU placements";
  ONORM_SEEDED_RNG(rng);
  struct Shape {
    int64_t rows, cols, k;
  };
  // Past 65536 columns the warp kernel's sliced rows (2, 4, 8 warps a row), then the block kernel.
  const Shape shapes[] = {{40000, 256, 8},   {3000, 4096, 64}, {300, 32768, 8},  {200, 65536, 64},
                          {100, 65537, 8},   {50, 131072, 64}, {30, 262143, 8},  {12, 524288, 64},
                          {5, 524289, 8}};
  for (const Shape& sh : shapes)
    for (onorm_dtype xt : io_dtypes()) {
      Problem p;
      p.rows = sh.rows;
      p.cols = sh.cols;
      p.k = sh.k;
      p.xt = xt;
      p.vt = ONORM_F32;
      p.renormalize = rng() % 2;
      p.shift = rng() % 2;
      SCOPED_TRACE(describe(p));
      Call c(ctx, p, mixed_rows(rng, true));
      c.run(ctx, true);
      if (HasFailure()) return;
    }
}

// Special rows spelled out: an all -inf row gives values 0 and columns 0..k-1; a NaN row NaN
// values; a row of equal values the first k columns.
TEST_P(SoftmaxTopk, SpecialRows) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  const bool gpu = is_gpu(GetParam());
  for (bool renorm : {false, true}) {
    Problem p;
    p.rows = 3;
    p.cols = 100;
    p.k = 10;
    p.renormalize = renorm;
    SCOPED_TRACE(describe(p));
    Call c(ctx, p, [](int64_t r, int64_t col) {
      if (r == 0) return -kInf;
      if (r == 1) return col == 50 ? kNaN : 1.0;
      return col % 2 ? 2.0 : -0.0;  // odd columns tie at 2: the first 10 of them
    });
    ASSERT_EQ(c.run(ctx, gpu), ONORM_OK);
    for (int64_t j = 0; j < p.k; ++j) {
      EXPECT_EQ(c.v.get(0, j), 0.0) << "all -inf row: value " << j;
      EXPECT_EQ(c.indices()[j], j) << "all -inf row: index " << j;
      EXPECT_TRUE(std::isnan(c.v.get(1, j))) << "NaN row: value " << j;
      EXPECT_EQ(c.indices()[2 * p.k + j], 2 * j + 1) << "tied row: index " << j;
    }
  }
}

// A row's values and indices alone equal those it got in a batch, and a rerun gives the same bits.
TEST_P(SoftmaxTopk, RowsAloneAndRerunsGiveTheSameBits) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  const bool gpu = is_gpu(GetParam());
  Problem p;
  p.rows = 12;
  p.cols = 2500;
  p.k = 40;
  p.xt = ONORM_BF16;
  p.vt = ONORM_F32;
  SCOPED_TRACE(describe(p));
  Call c(ctx, p, mixed_rows(rng, true));
  ASSERT_EQ(c.run(ctx, gpu), ONORM_OK);
  const std::vector<unsigned char> v1 = c.v.image(), i1 = c.ix.image();
  c.v.poison();
  c.ix.poison();
  const onorm_rows xr = c.x.dev_rows(), vr = c.v.dev_rows();
  ASSERT_EQ(onorm_softmax_topk(ctx, &xr, p.k, 0, &vr, static_cast<int64_t*>(c.ix.dev())), ONORM_OK);
  ASSERT_EQ(onorm_synchronize(ctx), ONORM_OK);
  c.v.download();
  c.ix.download();
  EXPECT_TRUE(c.v.same_image(v1, "values, second run"));
  EXPECT_TRUE(c.ix.same_image(i1, "indices, second run"));
  for (int64_t r = 0; r < p.rows; ++r) {
    Tensor v(ctx, ONORM_F32, 1, p.k), ix(ctx, ONORM_F64, 1, p.k);
    onorm_rows x1 = xr, v1r = v.dev_rows();
    x1.data = static_cast<char*>(x1.data) + c.x.index(r, 0) * 2;
    x1.rows = 1;
    ASSERT_EQ(onorm_softmax_topk(ctx, &x1, p.k, 0, &v1r, static_cast<int64_t*>(ix.dev())), ONORM_OK);
    ASSERT_EQ(onorm_synchronize(ctx), ONORM_OK);
    v.download();
    ix.download();
    EXPECT_EQ(std::memcmp(v.host(), static_cast<const char*>(c.v.host()) + c.v.index(r, 0) * 4, p.k * 4), 0)
        << "values of row " << r << " alone";
    EXPECT_EQ(std::memcmp(ix.host(), c.indices() + r * p.k, p.k * 8), 0) << "indices of row " << r << " alone";
  }
}

TEST_P(SoftmaxTopk, BadArgumentsWriteNothing) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  Problem base;
  base.rows = 4;
  base.cols = 50;
  base.k = 5;
  const onorm_status kInvalid = ONORM_ERROR_INVALID_ARGUMENT;
  struct Case {
    const char* name;
    onorm_status want;
    std::function<void(Call&, onorm_rows& x, int64_t& k, onorm_rows& v, int64_t*& ix)> edit;
  };
  using R = onorm_rows;
  const std::vector<Case> cases = {
      {"k 0", kInvalid, [](Call&, R&, int64_t& k, R& v, int64_t*&) { k = 0, v.cols = 0; }},
      {"k -1", kInvalid, [](Call&, R&, int64_t& k, R&, int64_t*&) { k = -1; }},
      {"k > cols", kInvalid, [](Call&, R& x, int64_t& k, R& v, int64_t*&) { x.cols = 4, k = 5, v.cols = 5; }},
      {"values cols != k", kInvalid, [](Call&, R&, int64_t&, R& v, int64_t*&) { v.cols = 4; }},
      {"values rows != rows", kInvalid, [](Call&, R&, int64_t&, R& v, int64_t*&) { v.rows = 3; }},
      {"indices NULL", kInvalid, [](Call&, R&, int64_t&, R&, int64_t*& ix) { ix = nullptr; }},
      {"x NULL data", kInvalid, [](Call&, R& x, int64_t&, R&, int64_t*&) { x.data = nullptr; }},
      {"values NULL data", kInvalid, [](Call&, R&, int64_t&, R& v, int64_t*&) { v.data = nullptr; }},
      {"x row_stride < cols", kInvalid, [](Call&, R& x, int64_t&, R&, int64_t*&) { x.row_stride = 10; }},
      {"values on x", kInvalid, [](Call&, R& x, int64_t&, R& v, int64_t*&) { v.data = x.data; }},
      {"indices on x", kInvalid, [](Call&, R& x, int64_t&, R&, int64_t*& ix) { ix = static_cast<int64_t*>(x.data) + 2; }},
      {"indices on values", kInvalid, [](Call&, R&, int64_t&, R& v, int64_t*& ix) { ix = static_cast<int64_t*>(v.data); }},
      {"x i8", ONORM_ERROR_UNSUPPORTED, [](Call&, R& x, int64_t&, R&, int64_t*&) { x.dtype = ONORM_I8; }},
      {"values f8", ONORM_ERROR_UNSUPPORTED, [](Call&, R&, int64_t&, R& v, int64_t*&) { v.dtype = ONORM_F8_E4M3; }},
      {"values dtype not an onorm_dtype", kInvalid,
       [](Call&, R&, int64_t&, R& v, int64_t*&) { v.dtype = static_cast<onorm_dtype>(-3); }},
  };
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.name);
    Call c(ctx, base, mixed_rows(rng, false));
    const std::vector<unsigned char> xb = c.x.image();
    onorm_rows xr = c.x.dev_rows(), vr = c.v.dev_rows();
    int64_t k = base.k;
    int64_t* ix = static_cast<int64_t*>(c.ix.dev());
    cs.edit(c, xr, k, vr, ix);
    EXPECT_EQ(onorm_softmax_topk(ctx, &xr, k, 0, &vr, ix), cs.want) << onorm_last_error();
    EXPECT_NE(std::string(onorm_last_error()), "");
    for (Tensor* t : {&c.x, &c.v, &c.ix}) t->download();
    EXPECT_TRUE(c.v.all_poison("values"));
    EXPECT_TRUE(c.ix.all_poison("indices"));
    EXPECT_TRUE(c.x.same_image(xb, "x"));
  }
  // rows == 0: OK, nothing written.
  Call c(ctx, base, mixed_rows(rng, false));
  onorm_rows xr = c.x.dev_rows(), vr = c.v.dev_rows();
  xr.rows = vr.rows = 0;
  EXPECT_EQ(onorm_softmax_topk(ctx, &xr, base.k, 1, &vr, static_cast<int64_t*>(c.ix.dev())), ONORM_OK);
  c.v.download();
  c.ix.download();
  EXPECT_TRUE(c.v.all_poison("values (rows 0)"));
  EXPECT_TRUE(c.ix.all_poison("indices (rows 0)"));
}

INSTANTIATE_TEST_SUITE_P(Backends, SoftmaxTopk, ::testing::ValuesIn(all_backends()), BackendName());

}  // namespace
}  // namespace onorm_test
