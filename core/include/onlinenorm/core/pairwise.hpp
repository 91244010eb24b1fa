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

// The same tree as merge_pairwise, built while the states arrive, with no array of them: a
// binary counter of complete subtrees (level l holds 2^l states when bit l of the count is
// set), folded right to left at the end. Rows of any length merge in 64 slots, so the row
// kernels need no allocation for their chunk states.
template <typename State>
struct PairwiseFold {
  State level[64];
  int64_t count = 0;

  ONORM_HD_INLINE void push(State s) {
    int l = 0;
    for (int64_t c = count; c & 1; c >>= 1, ++l) s = State::combine(level[l], s);
    level[l] = s;
    ++count;
  }

  ONORM_HD_INLINE State result() const {
    State acc = State::identity();
    bool any = false;
    for (int l = 0; (count >> l) != 0; ++l) {
      if (!((count >> l) & 1)) continue;
      acc = any ? State::combine(level[l], acc) : level[l];
      any = true;
    }
    return acc;
  }
};

}  // namespace core
}  // namespace onorm
