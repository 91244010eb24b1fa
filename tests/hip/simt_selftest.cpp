// The SIMT emulator itself: its shuffles agree with CUDA's and HIP's definitions at widths 32 and
// 64, and each kind of mistake it exists to catch is caught (so that the tests of the shared
// device templates built on it can fail).
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "simt_device.hpp"

namespace {

using onorm_sim::launch;

std::string joined(const std::vector<std::string>& errors) {
  std::string s;
  for (const auto& e : errors) s += e + "\n";
  return s;
}

// Butterfly sum over the whole hardware warp, the shape every reduction in the templates has.
template <int W>
float warp_sum_xor(float v) {
  for (int o = W / 2; o > 0; o /= 2) v += __shfl_xor(v, o, W);
  return v;
}

class SimtWidth : public ::testing::TestWithParam<int> {};

TEST_P(SimtWidth, ShuffleSemantics) {
  const int W = GetParam();
  std::vector<int> idx(W), up(W), down(W), xr(W), sub(W);
  const auto errors = launch(W, dim3(1), dim3(W), 0, [&] {
    const int lane = static_cast<int>(threadIdx.x);
    idx[lane] = __shfl(lane * 10, 3);
    up[lane] = __shfl_up(lane, 2u);
    down[lane] = __shfl_down(lane, 5u);
    xr[lane] = __shfl_xor(lane, 1);
    sub[lane] = __shfl_xor(lane, 4, 4);  // a later 4-lane group: own value
  });
  ASSERT_TRUE(errors.empty()) << joined(errors);
  for (int l = 0; l < W; ++l) {
    EXPECT_EQ(idx[l], 30);
    EXPECT_EQ(up[l], l >= 2 ? l - 2 : l);
    EXPECT_EQ(down[l], l + 5 < W ? l + 5 : l);
    EXPECT_EQ(xr[l], l ^ 1);
    EXPECT_EQ(sub[l], (l & 4) ? l - 4 : l);  // earlier groups are readable, later ones not
  }
}

TEST_P(SimtWidth, WarpAndBlockReduction) {
  const int W = GetParam();
  const int threads = 256;
  std::vector<float> out(threads, -1.0f);
  const auto errors = launch(W, dim3(2), dim3(threads), 0, [&] {
    __shared__ float partial[1024];  // generously sized: per-warp partials
    const int t = static_cast<int>(threadIdx.x);
    float v = static_cast<float>(t + 1 + static_cast<int>(blockIdx.x) * 1000);
    v = W == 64 ? warp_sum_xor<64>(v) : warp_sum_xor<32>(v);
    if (t % warpSize == 0) partial[t / warpSize] = v;
    __syncthreads();
    if (t == 0) {
      float s = 0;
      for (int w = 0; w < threads / warpSize; ++w) s += partial[w];
      out[blockIdx.x] = s;
    }
  });
  ASSERT_TRUE(errors.empty()) << joined(errors);
  EXPECT_EQ(out[0], 256.0f * 257.0f / 2.0f);
  EXPECT_EQ(out[1], 256.0f * 257.0f / 2.0f + 256000.0f);
}

INSTANTIATE_TEST_SUITE_P(Widths, SimtWidth, ::testing::Values(32, 64),
                         [](const ::testing::TestParamInfo<int>& i) { return "W" + std::to_string(i.param); });

// A reduction written for 32 lanes (first offset 16) on a 64-lane warp: the sum is wrong.
TEST(SimtCatches, OffsetsWrittenFor32On64) {
  std::vector<float> out(64);
  const auto errors = launch(64, dim3(1), dim3(64), 0, [&] {
    float v = 1.0f;
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor(v, o);
    out[threadIdx.x] = v;
  });
  EXPECT_TRUE(errors.empty()) << joined(errors);
  EXPECT_NE(out[0], 64.0f);  // 32: half the wave is missing
}

// A 32-bit full mask on a 64-lane warp leaves the upper lanes out of their own mask.
TEST(SimtCatches, Mask32On64) {
  const auto errors = launch(64, dim3(1), dim3(64), 0, [&] {
    float v = 1.0f;
    for (int o = 32; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o, 64);
    (void)v;
  });
  EXPECT_FALSE(errors.empty());
}

// A partial warp (block of 48 threads, 32-wide warps) reducing as if it were whole.
TEST(SimtCatches, PartialWarpReadsMissingLanes) {
  const auto errors = launch(32, dim3(1), dim3(48), 0, [&] {
    float v = 1.0f;
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor(v, o);
    (void)v;
  });
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors[0].find("does not take part"), std::string::npos) << joined(errors);
}

// Lanes that returned early are read by a shuffle.
TEST(SimtCatches, ExitedLanes) {
  const auto errors = launch(64, dim3(1), dim3(64), 0, [&] {
    if (threadIdx.x >= 40) return;
    float v = 1.0f;
    v += __shfl_down(v, 16u);
    (void)v;
  });
  EXPECT_FALSE(errors.empty());
}

// Half a warp at a barrier while the other half shuffles with a full mask.
TEST(SimtCatches, DivergentWarpCollective) {
  const auto errors = launch(32, dim3(1), dim3(32), 0, [&] {
    if (threadIdx.x < 16) {
      __syncthreads();
    } else {
      (void)__shfl_xor_sync(0xffffffffu, 1.0f, 1, 32);
    }
  });
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors[0].find("mask names lane"), std::string::npos) << joined(errors);
}

}  // namespace
