// The CPU's hardware bf16 store (backends/cpu/bf16_cvt-inl.h: VCVTNEPS2BF16 with the denormal
// fix-up) against the software Io<core::bf16_bits>::Round and core::f32_to_bf16, bit for bit, on
// every target this build compiled with it and this machine runs: every sign, exponent and top
// 7 mantissa bits (every bf16 value) with low bits on, just below and just above the rounding
// point (bit 15), which covers zeros, denormals, infinities and NaNs with payloads in either
// half; then the same shuffled (denormal lanes beside others in one vector) and random
// patterns. Skipped where the CPU lacks AVX512_BF16. Then the software store of the write
// pass's even/odd halves against core::f32_to_bf16 on every target (never skipped).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bf16_cvt_test.cpp"  // this file, found through the include path
#include "hwy/foreach_target.h"                 // IWYU pragma: keep

#include "bf16_cvt-inl.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if ONORM_SIMD_BF16_CVT
// The instruction alone, by its intrinsic (bf16_cvt-inl.h writes it as asm).
__attribute__((target("avx512bf16"))) inline __m256i RawCvt(__m512 x) { return (__m256i)_mm512_cvtneps_pbh(x); }
#endif

// hw: v stored through Io<Bf16Cvt> (whole vectors by Store and Stream, the rest by StoreTail),
// hw2: the same by pairs (Store2 and Stream2), sw: through Io<core::bf16_bits>; raw:
// VCVTNEPS2BF16 alone, whole vectors only. hw and hw2 aligned to two vectors (Stream, Stream2).
// False where this target has no hardware path or the CPU lacks AVX512_BF16.
bool StoreBoth(const float* v, size_t n, uint16_t* hw, uint16_t* hw2, uint16_t* sw, uint16_t* raw) {
#if ONORM_SIMD_BF16_CVT
  if (!HasBf16Cvt()) return false;
  const DF d;
  const size_t N = hn::Lanes(d);
  using H = Io<Bf16Cvt>;
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    H::Store(d, hn::LoadU(d, v + i), reinterpret_cast<Bf16Cvt*>(hw + i));
    H::Stream(d, hn::LoadU(d, v + i + N), reinterpret_cast<Bf16Cvt*>(hw + i + N));
    H::Stream(d, hn::LoadU(d, v + i + 2 * N), reinterpret_cast<Bf16Cvt*>(hw + i + 2 * N));
    H::Store(d, hn::LoadU(d, v + i + 3 * N), reinterpret_cast<Bf16Cvt*>(hw + i + 3 * N));
    H::Store2(d, hn::LoadU(d, v + i), hn::LoadU(d, v + i + N), reinterpret_cast<Bf16Cvt*>(hw2 + i));
    H::Stream2(d, hn::LoadU(d, v + i + 2 * N), hn::LoadU(d, v + i + 3 * N), reinterpret_cast<Bf16Cvt*>(hw2 + i + 2 * N));
  }
  for (; i < n; i += N) {
    StoreTail(d, hn::LoadU(d, v + i), reinterpret_cast<Bf16Cvt*>(hw + i), n - i < N ? n - i : N);
    StoreTail(d, hn::LoadU(d, v + i), reinterpret_cast<Bf16Cvt*>(hw2 + i), n - i < N ? n - i : N);
  }
  hwy::FlushStream();
  for (i = 0; i < n; i += N)
    StoreTail(d, hn::LoadU(d, v + i), reinterpret_cast<core::bf16_bits*>(sw + i), n - i < N ? n - i : N);
  for (i = 0; i + N <= n; i += N)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(raw + i), RawCvt(hn::LoadU(d, v + i).raw));
  return true;
#else
  (void)v, (void)n, (void)hw, (void)hw2, (void)sw, (void)raw;
  return false;
#endif
}

// The software store of the write pass's even/odd halves (Io<core::bf16_bits>::Store2EvenOdd
// and Stream2EvenOdd, every target): v's 2N elements a step split into the halves as
// LoadEvenOdd splits them, stored back in order into out (aligned to a vector of floats),
// alternately by the plain and the streaming store. n is a multiple of 2 * Lanes.
void StoreEvenOdd(const float* v, size_t n, uint16_t* out) {
  const DF d;
  const size_t N = hn::Lanes(d);
  HWY_ALIGN float even[kMaxLanes], odd[kMaxLanes];
  using S = Io<core::bf16_bits>;
  for (size_t i = 0; i + 2 * N <= n; i += 2 * N) {
    for (size_t k = 0; k < N; ++k) even[k] = v[i + 2 * k], odd[k] = v[i + 2 * k + 1];
    auto* p = reinterpret_cast<core::bf16_bits*>(out + i);
    if ((i / (2 * N)) % 2 == 0) S::Store2EvenOdd(d, hn::Load(d, even), hn::Load(d, odd), p);
    else S::Stream2EvenOdd(d, hn::Load(d, even), hn::Load(d, odd), p);
  }
  hwy::FlushStream();
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "onlinenorm/core/convert.hpp"

namespace onorm {
namespace cpu {
HWY_EXPORT(StoreBoth);
HWY_EXPORT(StoreEvenOdd);

namespace {

bool is_denormal(uint32_t u) { return (u & 0x7f800000u) == 0 && (u & 0x007fffffu) != 0; }

// Checks every target with the hardware path on bits (whole vectors long); false if none ran.
// flushed: the lanes where the instruction alone differed (denormals), added up.
bool check(const std::vector<uint32_t>& bits, const char* what, size_t* flushed = nullptr) {
  const size_t n = bits.size();
  std::vector<float> v(n);
  std::vector<uint16_t> want(n), sw(n), raw(n);
  const hwy::AlignedFreeUniquePtr<uint16_t[]> hw = hwy::AllocateAligned<uint16_t>(n);
  const hwy::AlignedFreeUniquePtr<uint16_t[]> hw2 = hwy::AllocateAligned<uint16_t>(n);
  for (size_t k = 0; k < n; ++k) {
    v[k] = core::float_of(bits[k]);
    want[k] = core::f32_to_bf16(v[k]);
  }
  bool ran = false;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(std::string(hwy::TargetName(target)) + ", " + what);
    // Lengths off the vector width: the tail goes through StoreTail.
    for (size_t len : {n, n - 5}) {
      if (!HWY_DYNAMIC_DISPATCH(StoreBoth)(v.data(), len, hw.get(), hw2.get(), sw.data(), raw.data())) break;
      ran = true;
      size_t bad = 0;
      for (size_t k = 0; k < len && bad < 5; ++k) {
        if (hw[k] != sw[k] || hw2[k] != sw[k] || sw[k] != want[k]) {
          ++bad;
          ADD_FAILURE() << "bits 0x" << std::hex << bits[k] << ": hardware 0x" << hw[k] << ", by pairs 0x" << hw2[k]
                        << ", software 0x" << sw[k] << ", f32_to_bf16 0x" << want[k];
        }
        // Where the instruction alone differs, the fix-up must take the vector (a denormal).
        if (len == n && raw[k] != sw[k] && flushed) ++*flushed;
        if (len == n && raw[k] != sw[k] && !is_denormal(bits[k]) && bad < 5) {
          ++bad;
          ADD_FAILURE() << "bits 0x" << std::hex << bits[k] << ": VCVTNEPS2BF16 gives 0x" << raw[k]
                        << " for a value the fix-up does not take; software 0x" << sw[k];
        }
      }
      if (bad) break;
    }
  }
  hwy::SetSupportedTargetsForTest(0);
  return ran;
}

std::vector<uint32_t> boundary_patterns() {
  const uint32_t low[] = {0x0000, 0x0001, 0x4000, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xc000, 0xfffe, 0xffff};
  std::mt19937 rng(20261123);
  std::vector<uint32_t> bits;
  bits.reserve(size_t(1) << 20);
  for (uint32_t hi = 0; hi < 0x10000u; ++hi) {
    for (uint32_t l : low) bits.push_back(hi << 16 | l);
    for (int r = 0; r < 6; ++r) bits.push_back(hi << 16 | (rng() & 0xffffu));
  }
  return bits;
}

TEST(Bf16Cvt, EveryBf16ValueAndRoundingPoint) {
  size_t flushed = 0;
  if (!check(boundary_patterns(), "in order", &flushed)) GTEST_SKIP() << "no target with AVX512_BF16 stores here";
  // The Intel SDM's denormal flush, seen: the hardware path ran and the fix-up had work to do.
  EXPECT_GT(flushed, 0u);
}

TEST(Bf16Cvt, ShuffledAndRandom) {
  std::vector<uint32_t> bits = boundary_patterns();
  std::mt19937 rng(7);
  std::shuffle(bits.begin(), bits.end(), rng);
  if (!check(bits, "shuffled")) GTEST_SKIP() << "no target with AVX512_BF16 stores here";
  for (uint32_t& b : bits) b = rng();
  check(bits, "random");
}

// The software even/odd store (no hardware needed: runs on every target this machine has)
// against core::f32_to_bf16, bit for bit, on every bf16 value's rounding points and random bits.
TEST(Bf16Soft, EvenOddStoreOnEveryTarget) {
  std::vector<uint32_t> bits = boundary_patterns();
  std::mt19937 rng(11);
  for (int r = 0; r < 1 << 16; ++r) bits.push_back(rng());
  bits.resize(bits.size() / 64 * 64);  // whole steps of 2 * Lanes on every target
  const size_t n = bits.size();
  std::vector<float> v(n);
  std::vector<uint16_t> want(n);
  for (size_t k = 0; k < n; ++k) {
    v[k] = core::float_of(bits[k]);
    want[k] = core::f32_to_bf16(v[k]);
  }
  const hwy::AlignedFreeUniquePtr<uint16_t[]> out = hwy::AllocateAligned<uint16_t>(n);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    std::fill(out.get(), out.get() + n, uint16_t{0x5555});  // poison: every word must be written
    HWY_DYNAMIC_DISPATCH(StoreEvenOdd)(v.data(), n, out.get());
    size_t bad = 0;
    for (size_t k = 0; k < n && bad < 5; ++k) {
      if (out[k] != want[k]) {
        ++bad;
        ADD_FAILURE() << "element " << k << ", bits 0x" << std::hex << bits[k] << ": stored 0x" << out[k]
                      << ", f32_to_bf16 0x" << want[k];
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace
}  // namespace cpu
}  // namespace onorm
#endif  // HWY_ONCE
