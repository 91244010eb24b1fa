// Device math for the kernels.
#pragma once

#include "vendor_shim.hpp"

namespace onorm {
namespace gpu {

// exp(t) for t <= 0 (or NaN), within about |t| * 2^-24 + 2 ulp relative:
// 2^(t log2 e) with the product split into hi + lo (log2 e as two floats, lo by fma), so the
// rounding of t * log2(e) (|t| * 2^-24 relative, 4e-6 at t = -69) does not add to the error
// of t itself; then 2^hi * (1 + lo ln 2). The softmax bound is 1e-5 relative.
// t = -inf gives 0 (clamped to -104 first: 2^-150 flushes to 0), NaN stays NaN, 0 gives 1.
ONORM_DEV float fast_exp(float t) {
  constexpr float kLog2e = 1.44269502162933349609375f;    // float(log2 e)
  constexpr float kLog2eLo = 1.925963033500011e-08f;      // log2 e - kLog2e
  constexpr float kLn2 = 0.693147180559945f;
  t = t < -104.0f ? -104.0f : t;  // keeps NaN (the comparison is false)
  const float hi = t * kLog2e;
  const float lo = fmaf(t, kLog2e, -hi) + t * kLog2eLo;
  const float r = shim::ex2_approx(hi);
  return fmaf(r, lo * kLn2, r);
}

}  // namespace gpu
}  // namespace onorm
