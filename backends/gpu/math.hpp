// Device math for the kernels: the approximate exp and the GPU element-math policy of the ops
// (core/ops/row_op.hpp: V, set, add, sub, mul, mul_add, exp, exp_any, nan_or_zero).
#pragma once

#include "vendor_shim.hpp"  // first: the vendor runtime defines __host__ / __device__
#include "onlinenorm/core/ops/row_op.hpp"

namespace onorm {
namespace gpu {

// exp(t) for t <= 0 (or NaN) as 2^(t log2 e) on the hardware's approximate exp2.
// Error: the rounding of t * log2(e) adds |t| * 2^-24 relative, ex2 about 2 ulp. Where the
// softmax bound is relative (results above ~1e-25, so t > -57.5) the total stays under 4e-6,
// besides the |t| * 2^-24 that rounding t = x - m itself costs every implementation; below,
// the bound's absolute 1e-30 covers it. -inf gives 0 (ex2 flushes), NaN stays NaN, 0 gives 1.
constexpr float kLog2e = 1.44269502162933349609375f;  // float(log2 e)
ONORM_DEV float fast_exp(float t) { return shim::ex2_approx(t * kLog2e); }

// The element math of every GPU placement: the scalar policy on floats (core/ops/row_op.hpp;
// mul_add a plain a * b + c, which the compiler contracts as it did the hand-written finishes)
// with the approximate exp.
struct GpuMath : core::ops::ScalarMath<float> {
  ONORM_DEV V exp(V a) const { return fast_exp(a); }
  // ex2 covers every argument: large ones give +inf, as exp does.
  ONORM_DEV V exp_any(V a) const { return fast_exp(a); }
};

}  // namespace gpu
}  // namespace onorm
