// Partial row states on GPUs (API.md, "partial row states"), shared by CUDA and HIP: the state
// types of the C ABI as the algebra's (onorm_softmax_state is MaxSum<float>, onorm_moments_state
// is Welford<double>: the same bytes), which ops have them, and their merge:
//   merge_parts_kernel   a thread per row folds parts p = 0..parts-1 of in[p * rows + r]
//                        left to right, pairwise (core::PairwiseFold), into out[r]; out may be
//                        in exactly (row r's thread alone reads in[r], and writes out[r] after).
//                        parts == 0 writes the identity (also a stats call of no columns).
#pragma once

#include "vendor_shim.hpp"  // first: the vendor runtime defines __host__ / __device__

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include "backend_interface.h"
#include "onlinenorm/core/max_sum.hpp"
#include "onlinenorm/core/moments.hpp"
#include "onlinenorm/core/ops/dispatch.hpp"
#include "onlinenorm/core/ops/partial_states.hpp"
#include "onlinenorm/core/pairwise.hpp"
#include "onlinenorm/core/welford.hpp"

namespace onorm {
namespace gpu {

static_assert(sizeof(onorm_softmax_state) == sizeof(core::MaxSum<float>) &&
                  offsetof(onorm_softmax_state, max) == offsetof(core::MaxSum<float>, m) &&
                  offsetof(onorm_softmax_state, sum_exp) == offsetof(core::MaxSum<float>, d),
              "onorm_softmax_state is MaxSum<float>");
static_assert(sizeof(onorm_moments_state) == sizeof(core::Welford<double>) &&
                  offsetof(onorm_moments_state, count) == offsetof(core::Welford<double>, n) &&
                  offsetof(onorm_moments_state, mean) == offsetof(core::Welford<double>, mean) &&
                  offsetof(onorm_moments_state, m2) == offsetof(core::Welford<double>, m2),
              "onorm_moments_state is Welford<double>");

// The row ops with partial states (src/validate.cpp: state_size).
using core::ops::kPartialStates;

// An op's partial state: softmax's (max, sum) or the moments (RMSNorm's too).
template <typename Op>
using partial_state_t = typename std::conditional<std::is_same<typename Op::Merged, core::MaxSum<float>>::value,
                                                  core::MaxSum<float>, core::Welford<double>>::type;

// The state Op finishes from, given its partial state: the moments are RMSNorm's sum of squares.
template <typename Op, typename S>
ONORM_HD_INLINE auto finish_state(const S& s) {
  if constexpr (std::is_same<typename Op::template State<double>, core::SumSq<double>>::value)
    return core::sum_sq_of_moments(s);
  else
    return s;
}

constexpr int kStateBlock = 256;

template <typename S>
__global__ void __launch_bounds__(kStateBlock) merge_parts_kernel(const void* in, void* out, int64_t parts,
                                                                  int64_t rows) {
  const S* src = static_cast<const S*>(in);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kStateBlock + threadIdx.x; r < rows;
       r += static_cast<int64_t>(gridDim.x) * kStateBlock) {
    core::PairwiseFold<S> fold;
    for (int64_t p = 0; p < parts; ++p) fold.push(src[p * rows + r]);
    static_cast<S*>(out)[r] = fold.result();
  }
}

// Blocks of merge_parts_kernel for `rows` (a grid-stride loop past that).
inline unsigned merge_parts_grid(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>((rows + kStateBlock - 1) / kStateBlock, int64_t(1) << 20));
}

// Runs a validated MERGE request (no row tensors) with launcher l (launcher.hpp: merge_parts).
template <typename L>
onorm_status run_state_merge(L& l, const onorm_request& q) {
  if (q.op == ONORM_OP_CROSS_ENTROPY)
    return l.template merge_parts<core::ops::CrossEntropy::StateRecord>(q.state_rows, q.state_parts, q.state_in,
                                                                         q.state_out);
  if (q.op == ONORM_OP_SOFTMAX || q.op == ONORM_OP_LOG_SOFTMAX)
    return l.template merge_parts<core::MaxSum<float>>(q.state_rows, q.state_parts, q.state_in, q.state_out);
  return l.template merge_parts<core::Welford<double>>(q.state_rows, q.state_parts, q.state_in, q.state_out);
}

}  // namespace gpu
}  // namespace onorm
