// The SIMD kernels' two exps of non-positive arguments (backends/cpu/simd_math-inl.h: ExpNonPos
// for f32 outputs; simd_exp16-inl.h: ExpNonPosFor16BitOutput) and the exp of any argument
// (SimdMath::exp_any: log-softmax backward's exp of y; SimdMathT<true>::exp_any: the same into a
// 16-bit dx, ExpAnyFor16BitOutput on AVX3) against std::exp in double, on
// every Highway target this machine runs: every 61st float from 0 down to -104 (every residue of
// the low mantissa bits; all exponents), the exact ends (0, -inf, NaN, the cut to 0), and the
// arguments where y = x log2(e) crosses an integer (f near 0 and near 1). The 16-bit exp's
// bound is the one its error analysis (simd_exp16-inl.h) and API.md's 16-bit bounds rest on.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd_exp_test.cpp"  // this file, found through the include path
#include "hwy/foreach_target.h"                 // IWYU pragma: keep

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "hwy/highway.h"
#include "simd_math-inl.h"

// Which exp ExpOf takes (once, outside the per-target part).
#ifndef ONORM_SIMD_EXP_TEST_KINDS
#define ONORM_SIMD_EXP_TEST_KINDS
namespace onorm {
namespace cpu {
enum ExpKind { kF32Exp, k16BitExp, kAnyExp, kAnyExp16 };
}  // namespace cpu
}  // namespace onorm
#endif

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// out[i] = exp(in[i]) by the exp of `kind`; n a multiple of the lanes.
void ExpOf(const float* in, float* out, size_t n, int kind) {
  const DF d;
  const SimdMath m{d};
  const SimdMathT<true> m16{d};
  for (size_t i = 0; i < n; i += hn::Lanes(d)) {
    const VF x = hn::LoadU(d, in + i);
    hn::StoreU(kind == k16BitExp   ? ExpNonPosFor16BitOutput(d, x)
               : kind == kF32Exp   ? ExpNonPos(d, x)
               : kind == kAnyExp16 ? m16.exp_any(x)
                                   : m.exp_any(x),
               d, out + i);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <gtest/gtest.h>

#include "hwy/targets.h"

namespace onorm {
namespace cpu {
HWY_EXPORT(ExpOf);

namespace {

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Every 61st float in [-104, 0) by bit pattern, then the points around y = x log2(e) = k for
// every integer k in [-150, 0]: the float nearest k ln 2 and 8 neighbours on each side.
std::vector<float> Arguments() {
  std::vector<float> v;
  const uint32_t top = 0xc2d00000u;  // -104
  for (uint32_t u = 0x80000001u; u <= top; u += 61) v.push_back(bits_to_float(u));
  for (int k = -150; k <= 0; ++k) {
    float c = static_cast<float>(k * 0.693147180559945309417);
    for (int s = 0; s < 8; ++s) c = std::nextafter(c, 0.0f);
    for (int s = 0; s < 17; ++s, c = std::nextafter(c, -1000.0f))
      if (c <= 0.0f) v.push_back(c);
  }
  v.push_back(0.0f);
  v.push_back(-0.0f);
  while (v.size() % 64) v.push_back(-1.0f);
  return v;
}

struct ErrorReport {
  double max_rel = 0;  // over arguments whose exp is a normal float
  float worst = 0;
  double max_rel_times = 0;  // max over x of rel / (1 + |x|): the y-rounding term grows with |x|
};

// The relative error of one exp over the arguments; cut: below it the result must be 0.
ErrorReport Check(int kind, float cut) {
  const std::vector<float> x = Arguments();
  std::vector<float> y(x.size());
  HWY_DYNAMIC_DISPATCH(ExpOf)(x.data(), y.data(), x.size(), kind);
  ErrorReport r;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] < cut) {
      EXPECT_EQ(y[i], 0.0f) << "exp(" << x[i] << ") below the cut";
      if (y[i] != 0.0f) return r;
      continue;
    }
    const double ref = std::exp(static_cast<double>(x[i]));
    if (ref < 1.1754944e-38) continue;  // within a float ulp of the cut: either side is right
    const double rel = std::fabs(y[i] - ref) / ref;
    if (rel > r.max_rel) r.max_rel = rel, r.worst = x[i];
    r.max_rel_times = std::max(r.max_rel_times, rel / (1.0 + std::fabs(x[i])));
  }
  return r;
}

// f(name) with each target this build compiled and this CPU runs chosen in turn.
template <class F>
void ForEachTarget(F f) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    f(hwy::TargetName(target));
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Ends: exp(0) = 1 exactly (a row's maximum contributes exactly 1), -inf gives 0, NaN stays NaN.
void CheckEnds(int kind, const char* name) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> x(64, -1.0f), y(64);
  x[0] = 0.0f, x[1] = -0.0f, x[2] = -inf, x[3] = nan, x[4] = -1e30f, x[5] = -std::numeric_limits<float>::max();
  HWY_DYNAMIC_DISPATCH(ExpOf)(x.data(), y.data(), x.size(), kind);
  EXPECT_EQ(y[0], 1.0f) << name;
  EXPECT_EQ(y[1], 1.0f) << name;
  EXPECT_EQ(y[2], 0.0f) << name;
  EXPECT_TRUE(std::isnan(y[3])) << name;
  EXPECT_EQ(y[4], 0.0f) << name;
  EXPECT_EQ(y[5], 0.0f) << name;
}

TEST(SimdExp, F32OutputsExpUnder3e7) {
  ForEachTarget([](const char* name) {
    CheckEnds(kF32Exp, name);
    const ErrorReport r = Check(kF32Exp, -87.3f);
    EXPECT_LE(r.max_rel, 3e-7) << name << " worst at " << r.worst;
    std::printf("%-10s f32 exp: max relative error %.3g at %.9g\n", name, r.max_rel, r.worst);
  });
}

// The bound simd_exp16-inl.h's analysis uses: 2.9e-6 from the polynomial (3.3e-6 with its float
// coefficients and evaluation), at most 7.4e-8 |x| from y = x log2(e) in float (the product's
// rounding, |x| 2^-24, and log2(e)'s, |x| 1.4e-8), and 1e-5 overall. Below -87.3466 (exp < 0.99 2^-126) the result is 0.
TEST(SimdExp, SixteenBitOutputsExpUnder1e5) {
  ForEachTarget([](const char* name) {
    CheckEnds(k16BitExp, name);
    const ErrorReport r = Check(k16BitExp, -87.3466f);
    EXPECT_LE(r.max_rel, 1e-5) << name << " worst at " << r.worst;
    std::printf("%-10s 16-bit exp: max relative error %.3g at %.9g, max error / (1 + |x|) %.3g\n", name, r.max_rel,
                r.worst, r.max_rel_times);
    const std::vector<float> x = Arguments();
    std::vector<float> y(x.size());
    HWY_DYNAMIC_DISPATCH(ExpOf)(x.data(), y.data(), x.size(), k16BitExp);
    for (size_t i = 0; i < x.size(); ++i) {
      const double ref = std::exp(static_cast<double>(x[i]));
      if (ref < 1.1754944e-38) continue;
      const double bound = 3.3e-6 + 7.4e-8 * std::fabs(x[i]);
      ASSERT_LE(std::fabs(y[i] - ref), bound * ref) << name << " exp(" << x[i] << ") = " << y[i];
    }
  });
}

// Appends every 61st float in (0, 89], the floats around every y = x log2(e) = k up to 128, the
// overflow's edge, 100, 1e30, FLT_MAX and +inf; then pads to whole vectors with 1.
void AddPositiveArguments(std::vector<float>& x) {
  for (uint32_t u = 1; u <= 0x42b20000u; u += 61) x.push_back(bits_to_float(u));  // to 89
  for (int k = 1; k <= 128; ++k) {
    float c = static_cast<float>(k * 0.693147180559945309417);
    for (int s = 0; s < 8; ++s) c = std::nextafter(c, 0.0f);
    for (int s = 0; s < 17; ++s, c = std::nextafter(c, 1000.0f)) x.push_back(c);
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {88.7228f, 88.72284f, 88.7229f, 88.8f, 88.9f, 100.0f, 1e30f, std::numeric_limits<float>::max(), inf})
    x.push_back(v);
  while (x.size() % 64) x.push_back(1.0f);
}

// exp_any: the non-positive arguments as the f32 exp, then every 61st float in (0, 89] and
// around every y = k (k up to 128), under 3e-7 relative; +inf where exp(x) rounds past
// FLT_MAX (and for x = +inf, 1e30, FLT_MAX); NaN stays NaN.
TEST(SimdExp, AnyArgumentUnder3e7) {
  ForEachTarget([](const char* name) {
    CheckEnds(kAnyExp, name);
    // Below -87.3 the AVX3 targets give 0 and the others hn::Exp's tiny values: only below -104
    // must both be 0, and results under FLT_MIN are not compared.
    const ErrorReport low = Check(kAnyExp, -104.0f);
    EXPECT_LE(low.max_rel, 3e-7) << name << " worst at " << low.worst;
    std::vector<float> x;
    AddPositiveArguments(x);
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> y(x.size());
    HWY_DYNAMIC_DISPATCH(ExpOf)(x.data(), y.data(), x.size(), kAnyExp);
    const double kOverflow = 3.4028235677973366e38;  // FLT_MAX + half an ulp: rounds to +inf
    double max_rel = 0;
    float worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double ref = std::exp(static_cast<double>(x[i]));
      if (ref >= kOverflow * (1 + 3e-7)) {
        ASSERT_EQ(y[i], inf) << name << " exp(" << x[i] << ")";
      } else if (ref <= kOverflow * (1 - 3e-7)) {
        ASSERT_TRUE(std::isfinite(y[i])) << name << " exp(" << x[i] << ") = " << y[i];
        const double rel = std::fabs(y[i] - ref) / ref;
        if (rel > max_rel) max_rel = rel, worst = x[i];
      }
    }
    EXPECT_LE(max_rel, 3e-7) << name << " worst at " << worst;
    std::printf("%-10s exp_any: max relative error %.3g at %.9g (x > 0), %.3g at %.9g (x <= 0)\n", name, max_rel,
                worst, low.max_rel, low.worst);
  });
}

// exp_any for 16-bit outputs (log-softmax backward into a bf16 or f16 dx): on AVX3 the 16-bit
// exp clamped at 88.8 and cut at y = -150, within simd_exp16-inl.h's 3.3e-6 + 7.4e-8 |x| (so
// under 1e-5) over [-104, 89], subnormal results within that plus 2^-149; +inf where exp(x) is
// past FLT_MAX by more than that error, NaN kept. The other targets take the f32 exp_any, which
// meets the same bounds.
TEST(SimdExp, AnyArgumentFor16BitOutputs) {
  ForEachTarget([](const char* name) {
    CheckEnds(kAnyExp16, name);
    const ErrorReport low = Check(kAnyExp16, -104.0f);
    EXPECT_LE(low.max_rel, 1e-5) << name << " worst at " << low.worst;
    std::vector<float> x = Arguments();
    for (float v = -103.9f; v < -87.0f; v += 0.0371f) x.push_back(v);  // subnormal results
    AddPositiveArguments(x);
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> y(x.size());
    HWY_DYNAMIC_DISPATCH(ExpOf)(x.data(), y.data(), x.size(), kAnyExp16);
    const double kOverflow = 3.4028235677973366e38;  // FLT_MAX + half an ulp: rounds to +inf
    const double kMinNormal = 1.1754943508222875e-38, kMinSub = 1.401298464324817e-45;
    double max_rel = 0;
    float worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double ref = std::exp(static_cast<double>(x[i]));
      const double bound = 3.3e-6 + 7.4e-8 * std::fabs(x[i]);
      if (ref >= kOverflow * (1 + bound)) {
        ASSERT_EQ(y[i], inf) << name << " exp(" << x[i] << ")";
      } else if (ref <= kOverflow * (1 - bound)) {
        ASSERT_TRUE(std::isfinite(y[i])) << name << " exp(" << x[i] << ") = " << y[i];
        if (ref < kMinNormal) {
          ASSERT_LE(std::fabs(y[i] - ref), bound * ref + kMinSub) << name << " exp(" << x[i] << ") = " << y[i];
          continue;
        }
        const double rel = std::fabs(y[i] - ref) / ref;
        ASSERT_LE(rel, bound) << name << " exp(" << x[i] << ") = " << y[i];
        if (rel > max_rel) max_rel = rel, worst = x[i];
      }
    }
    std::printf("%-10s exp_any, 16-bit outputs: max relative error %.3g at %.9g\n", name, max_rel, worst);
  });
}

}  // namespace
}  // namespace cpu
}  // namespace onorm
#endif  // HWY_ONCE
