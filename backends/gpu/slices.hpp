// A slice of a row held in registers by a block (ITEMS vectors per thread and input, BLOCK
// threads), one of K slices of a row whose states merge into the row's (Op::Merged): the
// two-read schedule's chunks (two_read.hpp) and the CUDA cluster kernel's blocks. The slice's
// passes leave its ChunkStats; once the row's merged state is known, the row's coefficients
// (merged_coefs), the slice's own (Op::chunk_coefs: softmax finishes from the slice's kept
// exp(x - m_c)), the finish and the stores.
#pragma once

#include "f64_fallback.hpp"
#include "row_chunk.hpp"

namespace onorm {
namespace gpu {

template <typename R, int WARP, int ITEMS, int BLOCK>
ONORM_DEV ChunkStats<typename R::Op> slice_passes(float (&v)[R::Op::kInputs][ITEMS * R::kVec], int n, int lane,
                                                  Scratch<typename R::Op, WARP, BLOCK>& scratch) {
  return chunk_passes<R, ITEMS, BLOCK>(v, n, lane, RowReduce<typename R::Op, WARP, BLOCK, BLOCK>{&scratch, lane});
}

// A slice's finish coefficients from the row's; `first` (the slice holding column 0) writes
// the row outputs.
template <typename Op>
ONORM_DEV coefs_t<Op> slice_coefs(const RowArgs& a, int64_t row, int lane, const coefs_t<Op>& row_cf,
                                  const ChunkStats<Op>& cs, bool first) {
  if (first && lane == 0) Op::write_row_outputs(row_cf, a.row_out, row);
  return Op::chunk_coefs(row_cf, cs.template state<float>());
}

// Finishes the slice [col0, col0 + n) of `row` with the row's coefficients, into v[0].
template <typename R, int ITEMS, int BLOCK>
ONORM_DEV void slice_finish_values(const RowArgs& a, int64_t row, int64_t col0, int n, int lane,
                                   float (&v)[R::Op::kInputs][ITEMS * R::kVec], const coefs_t<typename R::Op>& row_cf,
                                   const ChunkStats<typename R::Op>& cs, bool first) {
  const auto cf = slice_coefs<typename R::Op>(a, row, lane, row_cf, cs, first);
  finish_items<R, ITEMS, BLOCK, false>(a, col0, n, lane, v, cf);
}

// The same, then the slice's stores.
template <typename R, int ITEMS, int BLOCK, int WARP>
ONORM_DEV void slice_finish(const RowArgs& a, int64_t row, int64_t col0, int n, int lane,
                            float (&v)[R::Op::kInputs][ITEMS * R::kVec], const coefs_t<typename R::Op>& row_cf,
                            const ChunkStats<typename R::Op>& cs, bool first) {
  slice_finish_values<R, ITEMS, BLOCK>(a, row, col0, n, lane, v, row_cf, cs, first);
  store_any<R, ITEMS, BLOCK, WARP>(a, row, col0, n, lane, v[0]);
}

}  // namespace gpu
}  // namespace onorm
