// core/quantize.hpp against the reference's quantization (found by search over the grid, no
// bit tricks): every E4M3 code's value and the midpoints between neighbours (ties to even),
// subnormals, saturation, NaN, and random values; I8 half to even and clamping; the scale rule.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "onlinenorm/core/quantize.hpp"
#include "reference.hpp"

namespace {

double e4m3_decoded(uint8_t code) {
  return onorm_ref::decode(&code, ONORM_F8_E4M3, 0);
}

void expect_e4m3(float v) {
  const double want = onorm_ref::quantize(v, ONORM_F8_E4M3);
  const double got = e4m3_decoded(onorm::core::quantize_e4m3(v));
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << v;
  } else {
    EXPECT_EQ(got, want) << "v = " << v;
    EXPECT_EQ(std::signbit(got), std::signbit(want)) << "v = " << v;
  }
}

TEST(Quantize, E4M3CodesAndMidpoints) {
  for (int c = 0; c <= 126; ++c) {
    const double a = e4m3_decoded(static_cast<uint8_t>(c));
    expect_e4m3(static_cast<float>(a));
    expect_e4m3(static_cast<float>(-a));
    if (c < 126) {
      const double mid = (a + e4m3_decoded(static_cast<uint8_t>(c + 1))) / 2;  // a tie: to the even code
      for (double v : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e9)}) {
        expect_e4m3(static_cast<float>(v));
        expect_e4m3(static_cast<float>(-v));
      }
    }
  }
  for (float v : {448.0f, 449.0f, 463.99f, 464.0f, 1e6f, std::numeric_limits<float>::infinity(), 1e-30f, 0.0f,
                  std::numeric_limits<float>::denorm_min()}) {
    expect_e4m3(v);
    expect_e4m3(-v);
  }
  EXPECT_TRUE(std::isnan(e4m3_decoded(onorm::core::quantize_e4m3(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Quantize, RandomValues) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> e(-14, 10), u(-1, 1);
  for (int k = 0; k < 200000; ++k) {
    const float v = static_cast<float>(u(rng) * std::exp2(e(rng)));
    expect_e4m3(v);
    const float w = static_cast<float>(u(rng) * 140);
    EXPECT_EQ(static_cast<double>(onorm::core::quantize_i8(w)), onorm_ref::quantize(w, ONORM_I8)) << w;
  }
}

TEST(Quantize, I8HalfToEvenAndClamp) {
  for (float v = -130.0f; v <= 130.0f; v += 0.25f)
    EXPECT_EQ(static_cast<double>(onorm::core::quantize_i8(v)), onorm_ref::quantize(v, ONORM_I8)) << v;
  EXPECT_EQ(onorm::core::quantize_i8(2.5f), 2);
  EXPECT_EQ(onorm::core::quantize_i8(-3.5f), -4);
  EXPECT_EQ(onorm::core::quantize_i8(1e9f), 127);
  EXPECT_EQ(onorm::core::quantize_i8(-1e9f), -127);
  EXPECT_EQ(onorm::core::quantize_i8(std::numeric_limits<float>::quiet_NaN()), 0);
}

TEST(Quantize, ScaleRule) {
  EXPECT_EQ(onorm::core::quant_scale(0.0f, 127.0f), 1.0f);
  EXPECT_EQ(onorm::core::quant_scale(254.0f, 127.0f), 2.0f);
  EXPECT_TRUE(std::isnan(onorm::core::quant_scale(std::numeric_limits<float>::quiet_NaN(), 448.0f)));
  EXPECT_TRUE(std::isnan(onorm::core::nan_max_abs(1.0f, std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(onorm::core::nan_max_abs(1.0f, -3.0f), 3.0f);
}

}  // namespace
