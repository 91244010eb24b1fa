// What LayerNorm and RMSNorm share: eps, zero padding, the coefficients of core/norm_stats.hpp
// and their narrowing to a float finish, and the float64 fallback.
#pragma once

#include "onlinenorm/core/norm_stats.hpp"
#include "onlinenorm/core/ops/row_op.hpp"

namespace onorm {
namespace core {
namespace ops {

struct NormOpDefaults : RowOpDefaults {
  static constexpr bool kF64Fallback = true;
  template <typename T>
  using Coefs = BasicNormCoefs<T>;
  struct Params {
    double eps;
  };
  ONORM_HD_INLINE static Params params(const double* p) { return Params{p[0]}; }
  template <typename T>
  ONORM_HD_INLINE static Coefs<float> narrow(const Coefs<T>& c) {
    return norm_coefs_narrow(c);
  }
};

}  // namespace ops
}  // namespace core
}  // namespace onorm
