// Fixed-order pairwise merge of an array of states: the same partition of a row always
// merges in the same tree, so results are bitwise reproducible, and the rounding error grows
// with log2 of the number of blocks instead of their count.
#pragma once

#include "onlinenorm/core/hd.hpp"

namespace onorm {
namespace core {

// Merges states[0..count) in place (the array is clobbered) and returns the total.
// Adjacent pairs merge level by level: ((s0 s1)(s2 s3))((s4 s5) s6) ...
template <typename State>
ONORM_HD_INLINE State merge_pairwise(State* states, int64_t count) {
  if (count <= 0) return State::identity();
  for (int64_t width = 1; width < count; width *= 2) {
    for (int64_t i = 0; i + width < count; i += 2 * width) {
      states[i] = State::combine(states[i], states[i + width]);
    }
  }
  return states[0];
}

}  // namespace core
}  // namespace onorm
