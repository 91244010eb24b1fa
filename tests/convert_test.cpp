// bf16 / f16 <-> f32 conversions of the core, against an independent implementation that
// works in double arithmetic (ldexp / rint), not bit tricks: decode exhaustively for all
// 65536 patterns, encode for ~2M f32 patterns (ties, subnormals, overflow, NaN) and for
// doubles (store_from_double must round once, not twice).
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "onlinenorm/core/convert.hpp"
#include "onlinenorm/core/element.hpp"

namespace {

using onorm::core::bf16_to_f32;
using onorm::core::f16_to_f32;
using onorm::core::f32_to_bf16;
using onorm::core::f32_to_f16;

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A binary format with `man` explicit mantissa bits, exponent bias `bias`, `ebits` exponent bits.
struct Format {
  int man, ebits, bias;
  int emin() const { return 1 - bias; }
  int emax() const { return (1 << ebits) - 2 - bias; }
};
constexpr Format kF16{10, 5, 15};
constexpr Format kBF16{7, 8, 127};

// Value of a 16-bit pattern, by the definition of the format.
double decode_ref(uint16_t h, Format f) {
  const int sign = h >> 15;
  const int e = (h >> f.man) & ((1 << f.ebits) - 1);
  const int m = h & ((1 << f.man) - 1);
  double v;
  if (e == (1 << f.ebits) - 1) v = m ? std::numeric_limits<double>::quiet_NaN() : HUGE_VAL;
  else if (e == 0) v = std::ldexp(static_cast<double>(m), f.emin() - f.man);
  else v = std::ldexp(static_cast<double>((1 << f.man) + m), e - f.bias - f.man);
  return sign ? -v : v;
}

// Round-to-nearest-even of a double into the format, by arithmetic: scale to the quantum of
// v's binade (or of the subnormal range), rint (ties to even), and check for overflow.
// Returns the bit pattern (NaN -> canonical quiet NaN of the sign; callers check NaN-ness).
uint16_t encode_ref(double v, Format f) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const uint16_t exp_all = static_cast<uint16_t>(((1 << f.ebits) - 1) << f.man);
  if (std::isnan(v)) return static_cast<uint16_t>(sign | exp_all | (1 << (f.man - 1)));
  const double a = std::fabs(v);
  if (std::isinf(a)) return sign | exp_all;
  if (a == 0) return sign;
  int e = std::ilogb(a);
  if (e < f.emin()) e = f.emin();
  const double quantum = std::ldexp(1.0, e - f.man);
  const double q = std::rint(a / quantum);  // a/quantum is exact (power-of-two scale)
  const double r = q * quantum;
  if (r >= std::ldexp(1.0, f.emax() + 1)) return sign | exp_all;  // overflow to infinity
  // Encode r exactly.
  if (r < std::ldexp(1.0, f.emin())) return static_cast<uint16_t>(sign | static_cast<uint16_t>(r / std::ldexp(1.0, f.emin() - f.man)));
  const int re = std::ilogb(r);
  const int m = static_cast<int>(r / std::ldexp(1.0, re - f.man)) - (1 << f.man);
  return static_cast<uint16_t>(sign | ((re + f.bias) << f.man) | m);
}

bool is_nan16(uint16_t h, Format f) {
  const int e = (h >> f.man) & ((1 << f.ebits) - 1);
  return e == (1 << f.ebits) - 1 && (h & ((1 << f.man) - 1)) != 0;
}

TEST(Convert, RoundingModeIsNearest) { ASSERT_EQ(std::fegetround(), FE_TONEAREST); }

TEST(Convert, Bf16DecodeAll65536) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = bf16_to_f32(static_cast<uint16_t>(h));
    const double want = decode_ref(static_cast<uint16_t>(h), kBF16);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
      ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << std::hex << h;
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << std::hex << h;  // -0 stays -0
    }
  }
}

TEST(Convert, F16DecodeAll65536) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = f16_to_f32(static_cast<uint16_t>(h));
    const double want = decode_ref(static_cast<uint16_t>(h), kF16);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
      ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << std::hex << h;
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << std::hex << h;
    }
  }
}

// Round trip: every non-NaN 16-bit value encodes back to itself.
TEST(Convert, RoundTripAll65536) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t b = static_cast<uint16_t>(h);
    if (!is_nan16(b, kBF16)) { ASSERT_EQ(f32_to_bf16(bf16_to_f32(b)), b) << std::hex << h; }
    else ASSERT_TRUE(is_nan16(f32_to_bf16(bf16_to_f32(b)), kBF16)) << std::hex << h;
    if (!is_nan16(b, kF16)) { ASSERT_EQ(f32_to_f16(f16_to_f32(b)), b) << std::hex << h; }
    else ASSERT_TRUE(is_nan16(f32_to_f16(f16_to_f32(b)), kF16)) << std::hex << h;
  }
}

// f32 patterns that exercise every rounding case: for each of the 65536 upper halves,
// low halves at the bf16 tie (0x8000) and around it, and at the f16 ties (bit 12 set, the
// low 12 clear, bits 13..15 all combinations) and around them, plus random ones.
std::vector<uint32_t> f32_patterns() {
  std::vector<uint32_t> lows = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
  for (uint32_t k = 0; k < 8; ++k) {
    lows.push_back((k << 13) | 0x1000);
    lows.push_back((k << 13) | 0x0fff);
    lows.push_back((k << 13) | 0x1001);
  }
  std::mt19937 rng(12345);  // fixed: these are coverage patterns, not random tests
  for (int i = 0; i < 4; ++i) lows.push_back(rng() & 0xffff);
  std::vector<uint32_t> v;
  v.reserve(65536 * lows.size());
  for (uint32_t hi = 0; hi < 65536; ++hi)
    for (uint32_t lo : lows) v.push_back((hi << 16) | lo);
  return v;
}

void check_encode(uint32_t u, bool bf16) {
  const float f = from_bits(u);
  const Format fmt = bf16 ? kBF16 : kF16;
  const uint16_t got = bf16 ? f32_to_bf16(f) : f32_to_f16(f);
  const uint16_t want = encode_ref(static_cast<double>(f), fmt);
  if (std::isnan(f)) {
    ASSERT_TRUE(is_nan16(got, fmt)) << std::hex << "f32 " << u << " -> " << got;
    ASSERT_EQ(got & 0x8000, (u >> 16) & 0x8000) << std::hex << u;
    ASSERT_NE(got & (1 << (fmt.man - 1)), 0) << "NaN must come out quiet: " << std::hex << u << " -> " << got;
  } else {
    ASSERT_EQ(got, want) << (bf16 ? "bf16" : "f16") << " of f32 0x" << std::hex << u << " (" << std::scientific << f
                         << "): got 0x" << got << " want 0x" << want;
  }
}

TEST(Convert, Bf16EncodeF32Patterns) {
  for (uint32_t u : f32_patterns()) {
    check_encode(u, true);
    if (HasFatalFailure()) return;
  }
}

TEST(Convert, F16EncodeF32Patterns) {
  for (uint32_t u : f32_patterns()) {
    check_encode(u, false);
    if (HasFatalFailure()) return;
  }
}

TEST(Convert, EncodeRandomF32) {
  std::random_device rd;
  const uint32_t seed = rd();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t u = rng();
    check_encode(u, true);
    check_encode(u, false);
    if (HasFatalFailure()) return;
  }
}

TEST(Convert, NamedEdgeCases) {
  // bf16: largest finite, the midpoint to infinity (ties to even = inf), just below it.
  EXPECT_EQ(f32_to_bf16(from_bits(0x7f7f0000)), 0x7f7f);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7f7f8000)), 0x7f80);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7f7f7fff)), 0x7f7f);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-HUGE_VALF), 0xff80);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  // bf16 keeps f32 subnormals (same exponent range): smallest f32 subnormal rounds to 0.
  EXPECT_EQ(f32_to_bf16(from_bits(0x00000001)), 0x0000);
  EXPECT_EQ(f32_to_bf16(from_bits(0x00018000)), 0x0002);  // tie, odd -> even up
  EXPECT_EQ(f32_to_bf16(from_bits(0x00008000)), 0x0000);  // tie, even stays
  // f16: 65504 is the largest finite, 65520 the midpoint to infinity.
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.996f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-65520.0f), 0xfc00);
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  // f16 subnormals: 2^-24 is the smallest, 2^-25 a tie to 0, just above it rounds to 2^-24.
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(f32_to_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 units: tie -> even (2)
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(f32_to_f16(std::ldexp(1023.5f, -24)), 0x0400);  // subnormal rounding up into the normals
  EXPECT_EQ(f32_to_f16(-std::ldexp(1.0f, -30)), 0x8000);
  // NaN: quiet, sign kept, never infinity.
  EXPECT_TRUE(is_nan16(f32_to_f16(from_bits(0x7f800001)), kF16));  // signalling, payload only in low bits
  EXPECT_TRUE(is_nan16(f32_to_bf16(from_bits(0x7f800001)), kBF16));
  EXPECT_TRUE(is_nan16(f32_to_bf16(from_bits(0xff800001)), kBF16));
  EXPECT_EQ(f32_to_bf16(from_bits(0xff800001)) & 0x8000, 0x8000);
}

// store_from_double narrows a double to bf16/f16 with ONE rounding (through round-to-odd f32).
TEST(Convert, StoreFromDoubleRoundsOnce) {
  using onorm::core::bf16_bits;
  using onorm::core::f16_bits;
  using onorm::core::store_from_double;
  std::random_device rd;
  const uint32_t seed = rd();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> hdist(0, 65535);
  std::uniform_real_distribution<double> tiny(-1, 1);
  for (int i = 0; i < 300000; ++i) {
    // A value near a 16-bit tie: the midpoint between two neighbours, nudged by far less than
    // an f32 ulp (double rounding through f32 would land on the tie and round to even).
    const uint16_t h = static_cast<uint16_t>(hdist(rng) & 0x7ffe);
    for (int fmt = 0; fmt < 2; ++fmt) {
      const Format F = fmt ? kF16 : kBF16;
      if (is_nan16(h, F) || is_nan16(static_cast<uint16_t>(h + 1), F)) continue;
      const double lo = decode_ref(h, F), hi = decode_ref(static_cast<uint16_t>(h + 1), F);
      if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
      const double mid = 0.5 * (lo + hi);
      const double v = (rng() & 1) ? mid + (hi - lo) * 1e-9 * tiny(rng) : mid;
      const double sv = (rng() & 1) ? -v : v;
      const uint16_t want = encode_ref(sv, F);
      const uint16_t got = fmt ? store_from_double<f16_bits>(sv).bits : store_from_double<bf16_bits>(sv).bits;
      ASSERT_EQ(got, want) << (fmt ? "f16" : "bf16") << " of double " << std::hexfloat << sv;
    }
  }
  // Double -> f32 is one IEEE rounding.
  for (int i = 0; i < 100000; ++i) {
    const double v = std::ldexp(tiny(rng), static_cast<int>(rng() % 200) - 100);
    ASSERT_EQ(store_from_double<float>(v), static_cast<float>(v));
  }
}

}  // namespace
