// The CPU's SIMD quantizer (backends/cpu/quantize_simd-inl.h) on every Highway target this
// build compiled and this machine runs, against core/quantize.hpp's scalar rules, bit for bit:
// every rounding boundary of the I8 and E4M3 codes at every exponent; random rows with
// random dynamic inverses, float and double divisions, lengths off the vector width; the row
// maximum with NaN, infinities and -0.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quantize_simd_test.cpp"  // this file, found through the include path
#include "hwy/foreach_target.h"                       // IWYU pragma: keep

#include "hwy/highway.h"
#include "quantize_simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {

void CodesOf(const float* v, size_t n, float mul, int8_t* i8, uint8_t* e4m3) {
  CodesI8(v, n, mul, i8);
  CodesE4M3(v, n, mul, e4m3);
}
float MaxAbs(const float* v, size_t n) { return MaxAbsOf(v, n); }
void Divide(const core::QuantRow& rq, float* v, size_t n) { DivideInPlace(rq, v, n); }

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace onorm {
namespace cpu {
HWY_EXPORT(CodesOf);
HWY_EXPORT(MaxAbs);
HWY_EXPORT(Divide);

namespace {

// Runs f once per target this build has and this machine runs, that target chosen.
template <typename F>
void for_each_target(F&& f) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    f();
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Every sign, exponent and top 8 mantissa bits, each with low bits that sit on, just above and just
// below every rounding point either code has (the I8 integer and the E4M3 3-bit mantissa, normal
// and subnormal: a rounding bit at position 15 or above), plus random low bits: 4M patterns a
// target, where all 2^32 took minutes under the sanitizers.
TEST(QuantizeSimd, EveryRoundingBoundary) {
  constexpr uint32_t kLowBits = 15;
  const uint32_t fixed_low[] = {0x0000, 0x0001, 0x0002, 0x3fff, 0x4000, 0x4001, 0x7ffe, 0x7fff};
  constexpr size_t kRandomLow = 8;
  constexpr size_t kPerPrefix = sizeof(fixed_low) / sizeof(fixed_low[0]) + kRandomLow;
  constexpr uint32_t kPrefixes = uint32_t(1) << (32 - kLowBits);
  constexpr uint32_t kPrefixesPerBlock = 1u << 13;
  constexpr size_t kBlock = size_t(kPrefixesPerBlock) * kPerPrefix;
  std::mt19937 rng(std::random_device{}());
  std::vector<uint32_t> bits(kBlock);
  std::vector<float> v(kBlock);
  std::vector<int8_t> want_i8(kBlock), got_i8(kBlock);
  std::vector<uint8_t> want_e4m3(kBlock), got_e4m3(kBlock);
  for (uint32_t first = 0; first < kPrefixes; first += kPrefixesPerBlock) {
    size_t k = 0;
    for (uint32_t prefix = first; prefix < first + kPrefixesPerBlock; ++prefix) {
      for (uint32_t low : fixed_low) bits[k++] = (prefix << kLowBits) | low;
      for (size_t r = 0; r < kRandomLow; ++r) bits[k++] = (prefix << kLowBits) | (rng() & ((1u << kLowBits) - 1));
    }
    for (k = 0; k < kBlock; ++k) {
      v[k] = core::float_of(bits[k]);
      want_i8[k] = core::quantize_i8(v[k]);
      want_e4m3[k] = core::quantize_e4m3(v[k]);
    }
    bool ok = true;
    for_each_target([&] {
      HWY_DYNAMIC_DISPATCH(CodesOf)(v.data(), kBlock, 1.0f, got_i8.data(), got_e4m3.data());
      for (size_t j = 0; j < kBlock && ok; ++j) {
        if (got_i8[j] != want_i8[j] || got_e4m3[j] != want_e4m3[j]) {
          ADD_FAILURE() << "bits 0x" << std::hex << bits[j] << ": i8 " << std::dec << int(got_i8[j]) << " want "
                        << int(want_i8[j]) << ", e4m3 0x" << std::hex << int(got_e4m3[j]) << " want 0x"
                        << int(want_e4m3[j]);
          ok = false;
        }
      }
    });
    if (!ok) return;
  }
}

TEST(QuantizeSimd, RandomRowsAndScales) {
  std::mt19937_64 rng(12345);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<double> log_scale(-140.0, 20.0);
  for (int trial = 0; trial < 400; ++trial) {
    const size_t n = 1 + rng() % 300;
    std::vector<float> v(n);
    const float spread = std::ldexp(1.0f, static_cast<int>(rng() % 60) - 30);
    for (float& e : v) e = normal(rng) * spread;
    if (trial % 7 == 0) v[rng() % n] = std::numeric_limits<float>::quiet_NaN();
    if (trial % 11 == 0) v[rng() % n] = -std::numeric_limits<float>::infinity();
    if (trial % 13 == 0) v[rng() % n] = -0.0f;
    // Dynamic (multiply by the float inverse, or divide in float where it is not finite) and
    // static (divide in double) scales.
    const bool dynamic = trial % 2 == 0;
    const double s = std::exp2(log_scale(rng));
    const core::QuantRow rq = core::quant_row(dynamic, static_cast<float>(s), s);
    std::vector<int8_t> want_i8(n), got_i8(n);
    std::vector<uint8_t> want_e4m3(n), got_e4m3(n);
    for (size_t k = 0; k < n; ++k) {
      want_i8[k] = core::quantize_i8(core::quant_input(rq, v[k]));
      want_e4m3[k] = core::quantize_e4m3(core::quant_input(rq, v[k]));
    }
    float want_max = 0.0f;
    for (float e : v) want_max = core::nan_max_abs(want_max, e);
    for_each_target([&] {
      const float got_max = HWY_DYNAMIC_DISPATCH(MaxAbs)(v.data(), n);
      EXPECT_EQ(core::bits_of(got_max) & 0x7fffffffu, core::bits_of(want_max) & 0x7fffffffu) << "n " << n;
      std::vector<float> w = v;
      float mul = rq.inverse;
      if (!rq.multiply) {
        HWY_DYNAMIC_DISPATCH(Divide)(rq, w.data(), n);
        mul = 1.0f;
      }
      HWY_DYNAMIC_DISPATCH(CodesOf)(w.data(), n, mul, got_i8.data(), got_e4m3.data());
      for (size_t k = 0; k < n; ++k) {
        ASSERT_EQ(got_i8[k], want_i8[k]) << "trial " << trial << " v " << v[k] << " scale " << s;
        ASSERT_EQ(got_e4m3[k], want_e4m3[k]) << "trial " << trial << " v " << v[k] << " scale " << s;
      }
    });
  }
}

}  // namespace
}  // namespace cpu
}  // namespace onorm
#endif  // HWY_ONCE
