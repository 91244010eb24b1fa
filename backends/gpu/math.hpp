// Device math for the kernels.
#pragma once

#include "vendor_shim.hpp"

namespace onorm {
namespace gpu {

// exp(t) for t <= 0 (or NaN) as 2^(t log2 e) on the hardware's approximate exp2.
// Error: the rounding of t * log2(e) adds |t| * 2^-24 relative, ex2 about 2 ulp. Where the
// softmax bound is relative (results above ~1e-25, so t > -57.5) the total stays under 4e-6,
// besides the |t| * 2^-24 that rounding t = x - m itself costs every implementation; below,
// the bound's absolute 1e-30 covers it. -inf gives 0 (ex2 flushes), NaN stays NaN, 0 gives 1.
// (A compensated variant, hi/lo split of log2 e, cost 4 more instructions per element and
// made bf16 softmax compute-bound: bench/cuda/NOTES.md.)
ONORM_DEV float fast_exp(float t) {
  constexpr float kLog2e = 1.44269502162933349609375f;  // float(log2 e)
  return shim::ex2_approx(t * kLog2e);
}

}  // namespace gpu
}  // namespace onorm
