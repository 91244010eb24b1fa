// A one-row softmax request over row r of a driver op's input (cross-entropy's logits, top-k's
// x): the driver ops take softmax's statistics, and its finish, from the SIMD chunk kernels.
#pragma once

#include <algorithm>

#include "backend_interface.h"
#include "kernels.hpp"
#include "scalar_rows.hpp"

namespace onorm {
namespace cpu {

// Row r of q.in[0] as the input of a softmax request; its output `out` (cols floats, or the
// row of an f32 output), or a placeholder when only the statistics are taken.
inline onorm_request softmax_row_request(const onorm_request& q, int64_t r, void* out) {
  onorm_request s{};
  s.op = ONORM_OP_SOFTMAX;
  s.inputs = 1;
  s.outputs = 1;
  s.in[0] = q.in[0];
  s.in[0].data = const_cast<void*>(row_of(q.in[0], r));
  s.in[0].rows = 1;
  s.out[0] = onorm_rows{out, ONORM_F32, 1, q.in[0].cols, q.in[0].cols};
  s.col_dtype = q.in[0].dtype;
  return s;
}

// The softmax state of the row of s (softmax_row_request): the SIMD chunk states folded in the
// softmax call's tree where the SIMD kernels take the dtypes (simd), else the portable passes.
// after_chunk(b, e) runs on columns [b, e) of the row once the statistics have read them (a
// chunk at a time in SIMD, while they are in L1; the whole row after the portable passes).
template <typename AfterChunk>
core::MaxSum<double> softmax_row_state(size_t target, const onorm_request& s, bool simd, AfterChunk&& after_chunk) {
  const int64_t cols = s.in[0].cols;
  if (!simd) {
    const core::MaxSum<double> ms = scalar_state_of_row<core::ops::Softmax, double>(s, 0);
    after_chunk(int64_t(0), cols);
    return ms;
  }
  core::PairwiseFold<core::MaxSum<float>> fold;
  for (int64_t k = 0; k * kChunk < cols; ++k) {
    fold.push(simd_chunk_state(core::ops::Softmax{}, target, s, 0, k, kOptPrefetch));
    after_chunk(k * kChunk, std::min(cols, (k + 1) * kChunk));
  }
  const core::MaxSum<float> m = fold.result();
  return core::MaxSum<double>::of(m.m, m.d);
}
inline core::MaxSum<double> softmax_row_state(size_t target, const onorm_request& s, bool simd) {
  return softmax_row_state(target, s, simd, [](int64_t, int64_t) {});
}

}  // namespace cpu
}  // namespace onorm
