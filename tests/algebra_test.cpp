// The core algebra on the host: identities, associativity over random partitions and merge
// trees, agreement with a float64 two-pass computation, -inf / NaN / +inf, 64-bit counts,
// and the fixed tree of merge_pairwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "onlinenorm/core/algebra.hpp"
#include "onlinenorm/core/ops/log_softmax.hpp"
#include "onlinenorm/core/ops/softmax.hpp"

namespace {

using onorm::core::MaxSum;
using onorm::core::merge_pairwise;
using onorm::core::SumSq;
using onorm::core::Welford;

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// An element of softmax / log-softmax from a merged state, by the op's own rule (core/ops).
template <typename Op>
float finish_of(const MaxSum<float>& s, float x) {
  bool ok = false;
  const auto c = Op::coefs(s, typename Op::Params{}, ok);
  return Op::finish(onorm::core::ops::ScalarMath<float>{}, c, &x, nullptr);
}
float softmax_of(const MaxSum<float>& s, float x) { return finish_of<onorm::core::ops::Softmax>(s, x); }
float log_softmax_of(const MaxSum<float>& s, float x) { return finish_of<onorm::core::ops::LogSoftmax>(s, x); }

template <typename T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

uint64_t seed_now() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}
#define SEEDED(rng)                                           \
  const uint64_t rng##_seed = seed_now();                     \
  SCOPED_TRACE("seed " + std::to_string(rng##_seed));         \
  std::mt19937_64 rng(rng##_seed)

// ---- float64 two-pass, written without the algebra ----
struct Exact {
  double max = -kInf, sum_exp = 0, mean = 0, var = 0, mean_sq = 0;
};
Exact exact(const std::vector<double>& x) {
  Exact e;
  for (double v : x) e.max = v > e.max ? v : e.max;
  for (double v : x) e.sum_exp += std::exp(v - e.max);
  for (double v : x) e.mean += v;
  e.mean /= static_cast<double>(x.size());
  for (double v : x) e.var += (v - e.mean) * (v - e.mean);
  e.var /= static_cast<double>(x.size());
  for (double v : x) e.mean_sq += v * v;
  e.mean_sq /= static_cast<double>(x.size());
  return e;
}

// ---- states of blocks, merged three ways ----
template <typename State, typename T>
State push_all(const std::vector<double>& x, size_t b, size_t e) {
  State s = State::identity();
  for (size_t i = b; i < e; ++i) s.push(static_cast<T>(x[i]));
  return s;
}

// Random cut points (some blocks empty on purpose).
std::vector<size_t> random_cuts(size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> pick(0, n);
  const size_t k = 1 + rng() % 40;
  std::vector<size_t> cuts = {0, n};
  for (size_t i = 0; i < k; ++i) cuts.push_back(pick(rng));
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

// Merge adjacent neighbours chosen at random until one state is left (a random tree that
// keeps the order, as associativity without commutativity needs).
template <typename State>
State random_tree(std::vector<State> s, std::mt19937_64& rng) {
  if (s.empty()) return State::identity();
  while (s.size() > 1) {
    const size_t i = rng() % (s.size() - 1);
    s[i] = State::combine(s[i], s[i + 1]);
    s.erase(s.begin() + static_cast<long>(i) + 1);
  }
  return s[0];
}
template <typename State>
State sequential(const std::vector<State>& s) {
  State acc = State::identity();
  for (const State& x : s) acc = State::combine(acc, x);
  return acc;
}

template <typename T>
void check_partitions(double tol) {
  SEEDED(rng);
  for (int trial = 0; trial < 40; ++trial) {
    const size_t n = 1 + rng() % 5000;
    std::normal_distribution<double> nd(std::uniform_real_distribution<double>(-50, 50)(rng),
                                        std::uniform_real_distribution<double>(0.01, 10)(rng));
    std::vector<double> x(n);
    for (double& v : x) v = static_cast<double>(static_cast<T>(nd(rng)));  // the values T sees
    const Exact e = exact(x);
    const std::vector<size_t> cuts = random_cuts(n, rng);
    std::vector<MaxSum<T>> ms;
    std::vector<Welford<T>> w;
    std::vector<SumSq<T>> ss;
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      ms.push_back(push_all<MaxSum<T>, T>(x, cuts[i], cuts[i + 1]));
      w.push_back(push_all<Welford<T>, T>(x, cuts[i], cuts[i + 1]));
      ss.push_back(push_all<SumSq<T>, T>(x, cuts[i], cuts[i + 1]));
    }
    const MaxSum<T> ms_seq = sequential(ms), ms_tree = random_tree(ms, rng);
    std::vector<MaxSum<T>> ms_copy = ms;
    const MaxSum<T> ms_pair = merge_pairwise(ms_copy.data(), static_cast<int64_t>(ms_copy.size()));
    for (const MaxSum<T>& s : {ms_seq, ms_tree, ms_pair}) {
      ASSERT_EQ(static_cast<double>(s.m), e.max);  // max is exact in any order
      ASSERT_NEAR(static_cast<double>(s.d), e.sum_exp, tol * e.sum_exp) << "n " << n;
    }
    const Welford<T> w_seq = sequential(w), w_tree = random_tree(w, rng);
    std::vector<Welford<T>> w_copy = w;
    const Welford<T> w_pair = merge_pairwise(w_copy.data(), static_cast<int64_t>(w_copy.size()));
    for (const Welford<T>& s : {w_seq, w_tree, w_pair}) {
      ASSERT_EQ(s.n, static_cast<int64_t>(n));
      ASSERT_NEAR(static_cast<double>(s.mean), e.mean, tol * (std::fabs(e.mean) + std::sqrt(e.var))) << "n " << n;
      ASSERT_NEAR(static_cast<double>(s.variance()), e.var, 4 * tol * e.var + 1e-30) << "n " << n;
    }
    const SumSq<T> s_seq = sequential(ss), s_tree = random_tree(ss, rng);
    std::vector<SumSq<T>> s_copy = ss;
    const SumSq<T> s_pair = merge_pairwise(s_copy.data(), static_cast<int64_t>(s_copy.size()));
    for (const SumSq<T>& s : {s_seq, s_tree, s_pair}) {
      ASSERT_EQ(s.n, static_cast<int64_t>(n));
      ASSERT_NEAR(static_cast<double>(s.mean_square()), e.mean_sq, tol * e.mean_sq) << "n " << n;
    }
  }
}

TEST(Algebra, PartitionsAndTreesAgreeWithFloat64Double) { check_partitions<double>(1e-11); }
// Single running pushes over up to 5000 floats: a few hundred ulp at worst.
TEST(Algebra, PartitionsAndTreesAgreeWithFloat64Float) { check_partitions<float>(2e-4); }

// ---- identities ----
TEST(Algebra, MaxSumIdentity) {
  using S = MaxSum<float>;
  const S id = S::identity();
  EXPECT_TRUE(id.is_identity());
  const S ii = S::combine(id, id);  // -inf - -inf must not become NaN
  EXPECT_TRUE(ii.is_identity());
  EXPECT_FALSE(std::isnan(ii.d));
  EXPECT_EQ(ii.d, 0.0f);
  const S a = S::of(1.5f, 2.25f);
  EXPECT_TRUE(same_bits(S::combine(id, a).m, a.m));
  EXPECT_TRUE(same_bits(S::combine(id, a).d, a.d));
  EXPECT_TRUE(same_bits(S::combine(a, id).m, a.m));
  EXPECT_TRUE(same_bits(S::combine(a, id).d, a.d));
}

TEST(Algebra, WelfordAndSumSqIdentity) {
  using W = Welford<float>;
  const W id = W::identity();
  const W ii = W::combine(id, id);
  EXPECT_EQ(ii.n, 0);
  EXPECT_EQ(ii.mean, 0.0f);
  EXPECT_EQ(ii.m2, 0.0f);
  EXPECT_EQ(ii.variance(), 0.0f);
  const W a = W::of(3, 1.25f, 0.5f);
  for (const W& r : {W::combine(id, a), W::combine(a, id)}) {
    EXPECT_EQ(r.n, 3);
    EXPECT_TRUE(same_bits(r.mean, a.mean));
    EXPECT_TRUE(same_bits(r.m2, a.m2));
  }
  using Q = SumSq<float>;
  const Q q = Q::of(5, 7.5f);
  EXPECT_EQ(Q::combine(Q::identity(), Q::identity()).n, 0);
  EXPECT_EQ(Q::combine(Q::identity(), Q::identity()).mean_square(), 0.0f);
  EXPECT_TRUE(same_bits(Q::combine(Q::identity(), q).s, q.s));
  EXPECT_TRUE(same_bits(Q::combine(q, Q::identity()).s, q.s));
}

// ---- -inf, NaN, +inf ----
TEST(Algebra, AllNegativeInfinity) {
  using S = MaxSum<float>;
  std::vector<S> blocks;
  for (int b = 0; b < 5; ++b) {
    S s = S::identity();
    for (int i = 0; i < 3; ++i) s.push(-HUGE_VALF);
    EXPECT_TRUE(s.is_identity());
    EXPECT_FALSE(std::isnan(s.d));
    blocks.push_back(s);
  }
  S all = merge_pairwise(blocks.data(), 5);
  EXPECT_EQ(softmax_of(all, -HUGE_VALF), 0.0f);
  EXPECT_EQ(log_softmax_of(all, -HUGE_VALF), -HUGE_VALF);
  // A finite block merged with all -inf blocks: -inf entries get exactly 0.
  S fin = S::identity();
  fin.push(2.0f);
  fin.push(3.0f);
  for (const S& merged : {S::combine(all, fin), S::combine(fin, all)}) {
    EXPECT_EQ(merged.m, 3.0f);
    EXPECT_FLOAT_EQ(merged.d, 1.0f + std::exp(-1.0f));
    EXPECT_EQ(softmax_of(merged, -HUGE_VALF), 0.0f);
    EXPECT_EQ(log_softmax_of(merged, -HUGE_VALF), -HUGE_VALF);
  }
}

TEST(Algebra, NanPropagatesFromAnyBlockAndPosition) {
  using S = MaxSum<float>;
  SEEDED(rng);
  for (int trial = 0; trial < 200; ++trial) {
    const int nblocks = 1 + static_cast<int>(rng() % 9);
    const int nan_block = static_cast<int>(rng() % nblocks);
    std::vector<S> blocks;
    for (int b = 0; b < nblocks; ++b) {
      S s = S::identity();
      const int len = static_cast<int>(rng() % 5) + 1;
      const int nan_at = static_cast<int>(rng() % len);
      for (int i = 0; i < len; ++i) {
        if (b == nan_block && i == nan_at) s.push(NAN);
        else if (rng() % 4 == 0) s.push(-HUGE_VALF);
        else s.push(static_cast<float>(static_cast<int>(rng() % 100)) - 50.0f);
      }
      blocks.push_back(s);
    }
    std::vector<S> copy = blocks;
    const S pair = merge_pairwise(copy.data(), nblocks);
    const S tree = random_tree(blocks, rng);
    for (const S& s : {pair, tree}) {
      ASSERT_TRUE(std::isnan(softmax_of(s, 1.0f)));
      ASSERT_TRUE(std::isnan(log_softmax_of(s, 1.0f)));
    }
  }
  using W = Welford<float>;
  W w = W::identity();
  w.push(1.0f);
  w.push(NAN);
  w.push(2.0f);
  EXPECT_TRUE(std::isnan(W::combine(W::of(4, 1.0f, 2.0f), w).mean));
  EXPECT_TRUE(std::isnan(W::combine(w, W::of(4, 1.0f, 2.0f)).variance()));
  using Q = SumSq<float>;
  Q q = Q::identity();
  q.push(NAN);
  EXPECT_TRUE(std::isnan(Q::combine(Q::of(2, 1.0f), q).mean_square()));
}

TEST(Algebra, PositiveInfinityMakesSoftmaxNaN) {
  using S = MaxSum<float>;
  S a = S::identity();
  a.push(1.0f);
  a.push(HUGE_VALF);
  a.push(2.0f);
  EXPECT_TRUE(std::isnan(softmax_of(a, 1.0f)));
  EXPECT_TRUE(std::isnan(softmax_of(a, HUGE_VALF)));
  S b = S::identity();
  b.push(HUGE_VALF);
  S c = S::identity();
  c.push(3.0f);
  EXPECT_TRUE(std::isnan(softmax_of(S::combine(b, c), 3.0f)));
  EXPECT_TRUE(std::isnan(softmax_of(S::combine(c, b), 3.0f)));
  EXPECT_TRUE(std::isnan(softmax_of(S::combine(b, b), HUGE_VALF)));
  EXPECT_TRUE(std::isnan(log_softmax_of(S::combine(b, S::identity()), 0.0f)));
}

TEST(Algebra, NanMaxKeepsNaN) {
  using onorm::core::nan_max;
  EXPECT_TRUE(std::isnan(nan_max(NAN, 1.0f)));
  EXPECT_TRUE(std::isnan(nan_max(1.0f, NAN)));
  EXPECT_TRUE(std::isnan(nan_max(-HUGE_VALF, NAN)));
  EXPECT_EQ(nan_max(-HUGE_VALF, -HUGE_VALF), -HUGE_VALF);
  EXPECT_EQ(nan_max(2.0, 3.0), 3.0);
  EXPECT_EQ(nan_max(3.0f, 2.0f), 3.0f);
  EXPECT_EQ(nan_max(-HUGE_VALF, 5.0f), 5.0f);
  EXPECT_EQ(nan_max(HUGE_VALF, 5.0f), HUGE_VALF);
  EXPECT_TRUE(std::isnan(nan_max(NAN, NAN)));
  EXPECT_TRUE(std::isnan(nan_max(NAN, HUGE_VALF)));
  EXPECT_TRUE(std::isnan(nan_max(HUGE_VALF, NAN)));
  // A fold keeps a NaN met anywhere, and the largest value where there is none.
  float r = -HUGE_VALF;
  for (float v : {1.0f, NAN, 7.0f, -3.0f}) r = nan_max(r, v);
  EXPECT_TRUE(std::isnan(r));
  r = -HUGE_VALF;
  for (float v : {1.0f, 9.0f, 7.0f, -3.0f}) r = nan_max(r, v);
  EXPECT_EQ(r, 9.0f);
}

// Values near FLT_MAX: the combine rescales by exp(m_a - m) and never forms a sum of them.
TEST(Algebra, NearFltMaxDoesNotOverflow) {
  using S = MaxSum<float>;
  const float big = std::numeric_limits<float>::max();
  S s = S::identity();
  std::vector<double> xs;
  for (int i = 0; i < 64; ++i) {
    const float v = big - static_cast<float>(i) * std::ldexp(1.0f, 104);  // distinct, near FLT_MAX
    s.push(v);
    xs.push_back(v);
  }
  const Exact e = exact(xs);
  ASSERT_TRUE(std::isfinite(s.d));
  EXPECT_NEAR(s.d, e.sum_exp, 1e-5 * e.sum_exp);
  for (double v : xs) EXPECT_NEAR(softmax_of(s, static_cast<float>(v)), std::exp(v - e.max) / e.sum_exp, 1e-6);
}

// ---- 64-bit counts ----
TEST(Algebra, WelfordCountsBeyond32Bits) {
  using W = Welford<double>;
  const int64_t na = (int64_t{1} << 31) + 12345, nb = int64_t{3} << 31;
  const W a = W::of(na, 10.0, 2.0 * static_cast<double>(na));  // variance 2
  const W b = W::of(nb, 14.0, 1.0 * static_cast<double>(nb));  // variance 1
  const W c = W::combine(a, b);
  ASSERT_EQ(c.n, na + nb);
  const double fa = static_cast<double>(na), fb = static_cast<double>(nb), fn = fa + fb;
  const double mean = (10.0 * fa + 14.0 * fb) / fn;
  const double var = (2.0 * fa + 1.0 * fb + fa * (10 - mean) * (10 - mean) + fb * (14 - mean) * (14 - mean)) / fn;
  EXPECT_NEAR(c.mean, mean, 1e-12 * mean);
  EXPECT_NEAR(c.variance(), var, 1e-12 * var);
  // float states with 64-bit counts: identical blocks merged up to n = 2^40 keep mean and variance.
  using Wf = Welford<float>;
  std::vector<Wf> blocks(1 << 10, Wf::of(int64_t{1} << 30, 5.0f, static_cast<float>(3.0 * std::ldexp(1.0, 30))));
  const Wf all = merge_pairwise(blocks.data(), static_cast<int64_t>(blocks.size()));
  ASSERT_EQ(all.n, int64_t{1} << 40);
  EXPECT_FLOAT_EQ(all.mean, 5.0f);
  EXPECT_NEAR(all.variance(), 3.0f, 3e-6f);
  using Q = SumSq<float>;
  std::vector<Q> qs(1 << 10, Q::of(int64_t{1} << 31, static_cast<float>(std::ldexp(2.0, 31))));
  const Q qa = merge_pairwise(qs.data(), static_cast<int64_t>(qs.size()));
  ASSERT_EQ(qa.n, int64_t{1} << 41);
  EXPECT_FLOAT_EQ(qa.mean_square(), 2.0f);
}

// LayerNorm of 1e4 + N(0,1): blocks of two-pass states merged with Chan's formula keep the
// variance (E[x^2] - E[x]^2 in float would lose it entirely).
TEST(Algebra, WelfordKeepsVarianceAtLargeOffset) {
  SEEDED(rng);
  std::normal_distribution<double> nd(1e4, 1.0);
  const size_t n = 1 << 18;
  std::vector<double> x(n);
  for (double& v : x) v = static_cast<double>(static_cast<float>(nd(rng)));
  const Exact e = exact(x);
  std::vector<Welford<float>> blocks;
  for (size_t b = 0; b < n; b += 1024) blocks.push_back(push_all<Welford<float>, float>(x, b, b + 1024));
  const Welford<float> w = merge_pairwise(blocks.data(), static_cast<int64_t>(blocks.size()));
  EXPECT_NEAR(w.variance(), e.var, 1e-3 * e.var);
  EXPECT_NEAR(w.mean, e.mean, std::ldexp(e.mean, -20));
}

// ---- merge_pairwise: the documented fixed tree ----
struct Expr {
  std::string s;
  static Expr identity() { return {"e"}; }
  static Expr combine(const Expr& a, const Expr& b) { return {"(" + a.s + " " + b.s + ")"}; }
};

TEST(Algebra, MergePairwiseTree) {
  auto tree = [](int n) {
    std::vector<Expr> v;
    for (int i = 0; i < n; ++i) v.push_back({std::to_string(i)});
    return merge_pairwise(v.data(), n).s;
  };
  EXPECT_EQ(tree(0), "e");
  EXPECT_EQ(tree(1), "0");
  EXPECT_EQ(tree(2), "(0 1)");
  EXPECT_EQ(tree(3), "((0 1) 2)");
  EXPECT_EQ(tree(4), "((0 1) (2 3))");
  EXPECT_EQ(tree(7), "(((0 1) (2 3)) ((4 5) 6))");
  EXPECT_EQ(tree(8), "(((0 1) (2 3)) ((4 5) (6 7)))");
  // Every element appears once, in order, for many counts.
  for (int n = 1; n < 200; ++n) {
    std::string flat;
    for (char ch : tree(n)) if (ch != '(' && ch != ')') flat += ch;
    std::string want;
    for (int i = 0; i < n; ++i) want += (i ? " " : "") + std::to_string(i);
    ASSERT_EQ(flat, want) << n;
  }
}

// merge_pairwise is bitwise reproducible and (for sums) accurate where a running sum is not.
TEST(Algebra, MergePairwiseAccuracy) {
  using Q = SumSq<float>;
  std::vector<Q> ones((1 << 20) + 3, Q::of(1, 1.0f));  // 2^20 + 3 blocks of value 1
  std::vector<Q> a = ones, b = ones;
  const Q pa = merge_pairwise(a.data(), static_cast<int64_t>(a.size()));
  const Q pb = merge_pairwise(b.data(), static_cast<int64_t>(b.size()));
  EXPECT_TRUE(same_bits(pa.s, pb.s));
  EXPECT_EQ(pa.s, static_cast<float>((1 << 20) + 3));
  EXPECT_EQ(pa.n, (1 << 20) + 3);
}

TEST(Algebra, VarianceAndMeanSquare) {
  Welford<double> w = Welford<double>::identity();
  for (double v : {1.0, 2.0, 3.0, 4.0}) w.push(v);
  EXPECT_DOUBLE_EQ(w.variance(), 1.25);
  SumSq<double> q = SumSq<double>::identity();
  for (double v : {1.0, 2.0, 3.0, 4.0}) q.push(v);
  EXPECT_DOUBLE_EQ(q.mean_square(), 7.5);
}

}  // namespace

namespace {

// PairwiseFold builds merge_pairwise's tree as states arrive: bitwise the same result for
// every count (non-commutative rounding makes a different tree visible in the bits).
TEST(Algebra, PairwiseFoldIsMergePairwiseBitwise) {
  SEEDED(rng);
  std::normal_distribution<float> nd(1000.0f, 3.0f);
  for (int64_t count = 1; count <= 300; ++count) {
    std::vector<Welford<float>> states;
    onorm::core::PairwiseFold<Welford<float>> fold;
    for (int64_t i = 0; i < count; ++i) {
      Welford<float> w = Welford<float>::identity();
      for (int k = 0; k < 1 + static_cast<int>(rng() % 5); ++k) w.push(nd(rng));
      states.push_back(w);
      fold.push(w);
    }
    const Welford<float> a = merge_pairwise(states.data(), count), b = fold.result();
    ASSERT_EQ(a.n, b.n) << "count " << count;
    ASSERT_TRUE(same_bits(a.mean, b.mean)) << "count " << count;
    ASSERT_TRUE(same_bits(a.m2, b.m2)) << "count " << count;
  }
  EXPECT_EQ(onorm::core::PairwiseFold<SumSq<float>>().result().n, 0);
}

// The corrected two-pass state from float sums around a poor pivot: a pivot off by many
// standard deviations still gives the exact mean and M2 (the correction term removes it),
// and a double state keeps the block mean to more digits than a float holds.
TEST(Algebra, OfPivotCorrectsTheRoundedPivot) {
  std::vector<float> x;
  for (int i = 0; i < 4096; ++i) x.push_back(1e6f + static_cast<float>((i % 7) - 3) * 0.25f);
  double mean = 0, m2 = 0;
  for (float v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (float v : x) m2 += (v - mean) * (v - mean);
  const float pivot = 1e6f + 0.5f;  // 0.5 away from the mean: 2 ulp of 1e6 in float
  float s1 = 0, s2 = 0;
  for (float v : x) {
    s1 += v - pivot;
    s2 += (v - pivot) * (v - pivot);
  }
  const Welford<double> w = Welford<double>::of_pivot(static_cast<int64_t>(x.size()), pivot, s1, s2);
  EXPECT_NEAR(w.mean, mean, 1e-9 * 1e6);
  EXPECT_NEAR(w.m2, m2, 1e-6 * m2);
  // Without the correction (squared deviations around the rounded pivot): biased.
  EXPECT_GT(std::fabs(static_cast<double>(s2) - m2), 1e-2 * m2);
}

// A zero correction (s1 = +-0, a pivot equal to the mean) divides nothing: the state is the
// pivot's, zero signs kept, as s1 / n gives them; an empty block's state is clean (no 0 / 0);
// any other s1 is divided as before.
TEST(Algebra, OfPivotZeroCorrection) {
  for (float s1 : {0.0f, -0.0f}) {
    for (float pivot : {0.0f, -0.0f, 3.5f}) {
      const Welford<float> w = Welford<float>::of_pivot(64, pivot, s1, 2.0f);
      EXPECT_TRUE(same_bits(w.mean, pivot + s1 / 64.0f)) << pivot << " " << s1;
      EXPECT_TRUE(same_bits(w.m2, 2.0f - s1 * (s1 / 64.0f)));
    }
  }
  const Welford<double> e = Welford<double>::of_pivot(0, 1.5f, 0.0f, 0.0f);
  EXPECT_EQ(e.mean, 1.5);
  EXPECT_EQ(e.m2, 0.0);
  const Welford<float> w = Welford<float>::of_pivot(3, 1.0f, 1.0f, 4.0f);
  EXPECT_TRUE(same_bits(w.mean, 1.0f + 1.0f / 3.0f));
  EXPECT_TRUE(same_bits(w.m2, 4.0f - 1.0f * (1.0f / 3.0f)));
}

// The norms' trust rule and scaled finish (core/norm_stats.hpp).
TEST(Algebra, NormFloatStatsRule) {
  using onorm::core::norm_float_stats_ok;
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(norm_float_stats_ok(10.0f, 1.0f));
  EXPECT_FALSE(norm_float_stats_ok(inf, 1.0f));       // sums overflowed
  EXPECT_FALSE(norm_float_stats_ok(1.0f, inf));       // eps beyond FLT_MAX
  EXPECT_FALSE(norm_float_stats_ok(1.0f, 1e-40f));    // squares underflowed, eps 0
  EXPECT_FALSE(norm_float_stats_ok(std::nanf(""), 1.0f));
  EXPECT_TRUE(norm_float_stats_ok(0.0f, 1e-5f));      // a constant row with the usual eps
}

TEST(Algebra, ScaledNormFinishNeverOverflows) {
  using onorm::core::norm_coefs_scaled;
  using onorm::core::norm_finish;
  // x = {3e38, -3e38, -3e38, -3e38}: mean -1.5e38, var 6.75e76 (double), y0 = sqrt(3).
  const double mean = -1.5e38, rstd = 1.0 / std::sqrt(6.75e76);
  const auto c = norm_coefs_scaled(mean, rstd);
  EXPECT_NEAR(norm_finish(3e38f, c, 1.0f, 0.0f), std::sqrt(3.0), 1e-6);
  EXPECT_NEAR(norm_finish(-3e38f, c, 1.0f, 0.0f), -1.0 / std::sqrt(3.0), 1e-6);
  EXPECT_GT(c.rstd, 0.0f);  // a subnormal float, not flushed
  // Tiny rows with eps 0: rstd 1e38 (and beyond float for subnormal rows) stays finite.
  const auto t = norm_coefs_scaled(0.0, 1e40);
  EXPECT_NEAR(norm_finish(1e-40f, t, 1.0f, 0.0f), 1.0, 1e-4);
  // In float's normal range the scaled finish is bitwise (x - mean) * rstd.
  const auto u = norm_coefs_scaled(0.25, 3.0);
  const auto v = onorm::core::norm_coefs_f32(0.25f, 3.0f);
  for (float x : {-7.5f, 0.1f, 1e3f, 3.3e-3f}) {
    const float a = norm_finish(x, u, 1.5f, 0.5f), b = norm_finish(x, v, 1.5f, 0.5f);
    EXPECT_TRUE(same_bits(a, b)) << x;
  }
}

}  // namespace
