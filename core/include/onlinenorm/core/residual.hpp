// The norms' residual add (API.md, "norms with options"): the row normalized is
// h = round_H(x + residual), the add in float32 (in float64 when x or the residual is f64) and
// rounded once to H, the dtype of residual_out (else x's). Host and device alike.
#pragma once

#include "onlinenorm/core/element.hpp"

namespace onorm {
namespace core {

// H is the storage type of h; wide: an input is f64.
template <typename H>
ONORM_HD_INLINE double residual_add(double x, double residual, bool wide) {
  const double sum = wide ? x + residual : static_cast<double>(static_cast<float>(x) + static_cast<float>(residual));
  return static_cast<double>(element<H>::load(store_from_double<H>(sum)));
}

}  // namespace core
}  // namespace onorm
