// The moments of a partial row state (count, mean, M2: a Welford state) as the statistics
// RMSNorm finishes from (API.md, "partial row states"): mean(x^2) = M2 / n + mean^2, so the
// sum of squares is M2 + n mean^2. LayerNorm finishes from the moments as they are.
#pragma once

#include "onlinenorm/core/hd.hpp"
#include "onlinenorm/core/sum_sq.hpp"
#include "onlinenorm/core/welford.hpp"

namespace onorm {
namespace core {

template <typename T>
ONORM_HD_INLINE SumSq<T> sum_sq_of_moments(const Welford<T>& w) {
  return SumSq<T>::of(w.n, w.m2 + static_cast<T>(w.n) * w.mean * w.mean);
}

}  // namespace core
}  // namespace onorm
