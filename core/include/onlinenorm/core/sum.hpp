// Sum: a plain sum as a state (the backward passes of softmax and log-softmax). combine adds.
#pragma once

#include "onlinenorm/core/hd.hpp"

namespace onorm {
namespace core {

template <typename T>
struct Sum {
  T s;
  ONORM_HD_INLINE static Sum identity() { return Sum{T(0)}; }
  ONORM_HD_INLINE static Sum of(T s) { return Sum{s}; }
  ONORM_HD_INLINE static Sum combine(const Sum& a, const Sum& b) { return Sum{a.s + b.s}; }
};

}  // namespace core
}  // namespace onorm
