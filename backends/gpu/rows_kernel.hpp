// Short and medium rows in registers: rows_kernel, a group of TPR lanes per row (TPR <= WARP:
// several rows per block; TPR == BLOCK: a block per row), ITEMS 16-byte vectors per thread and
// input. The row is read once, reduced by the op's passes (row_chunk.hpp) in its group, and
// finished from registers. A single chunk: the op's float state (Op::State<float>), no merge.
// The norms' options (RowOptions) happen here too: the residual added as the row loads, h
// stored before the finish, y quantized with the row's scale.
#pragma once

#include "f64_fallback.hpp"
#include "row_chunk.hpp"
#include "row_options.hpp"

namespace onorm {
namespace gpu {

// Register caps (ptxas, sm_90a; bench/cuda/NOTES.md): blocks of 256 threads (or the same
// threads in blocks of 128) get 40 registers where one or two vectors per thread without
// column vectors fit them, 64 for up to 16 floats per thread, 80 for up to 32, 128 for the
// dense 16-bit shapes (64 elements) and two inputs of eight vectors; blocks of 512 threads 64
// for up to 16 floats per thread, else 128. The norms' caps keep the blocks per SM their rows
// had before the column vectors' loads were batched (finish_aligned_items), which took what the
// cap left: 40 registers up to 8 floats, 48 (RMSNorm) or 64 (LayerNorm) up to 16 (without the
// options: theirs spill there), and two blocks of 384 threads up to 32 (NVIDIA only:
// shim::kCudaRegisterCaps).
template <typename R, int ITEMS, int BLOCK>
constexpr int rows_min_blocks() {
  constexpr int kFloats = R::Op::kInputs * ITEMS * R::kVec;
  constexpr bool kNorm = shim::kCudaRegisterCaps && R::Op::kInputs == 1 && R::Op::kCols > 0;
  if constexpr (BLOCK > 256) return kFloats <= 16 || (kNorm && BLOCK == 384 && kFloats <= 32) ? 2 : 1;
  if constexpr (ITEMS * R::kVec > 32) return 2 * (256 / BLOCK);
  // Two inputs of eight vectors a thread (f32 rows of 513-1024 columns of the backward passes)
  // spilled about 170 bytes at 80 registers: 128.
  if constexpr (R::Op::kInputs > 1 && ITEMS >= 8) return 2 * (256 / BLOCK);
  if constexpr (kNorm && !R::kOptions && kFloats <= 16) return (kFloats <= 8 ? 6 : R::Op::kCols >= 2 ? 4 : 5) * (256 / BLOCK);
  return (R::Op::kCols == 0 && ITEMS <= 2 && kFloats <= 16 ? 6 : R::Op::kCols == 0 && kFloats <= 16 ? 4 : 3) *
         (256 / BLOCK);
}

// A thread's row in the register placements: groups of TPR lanes a row (a part of a warp, a
// warp, or the block), BLOCK / TPR rows a block. Inactive groups (past the last row) take part
// in the shuffles with an empty row (n = 0) at row 0.
template <int WARP, int TPR, int BLOCK>
struct RegisterRow {
  static_assert(TPR <= WARP || TPR == BLOCK, "row group");
  int lane;
  int64_t row;
  int n;
  ONORM_DEV explicit RegisterRow(const RowArgs& a) {
    constexpr int GPB = BLOCK / TPR;  // groups per block
    lane = static_cast<int>(threadIdx.x) % TPR;
    const int64_t r = static_cast<int64_t>(blockIdx.x) * GPB + static_cast<int>(threadIdx.x) / TPR;
    n = r < a.rows ? static_cast<int>(a.cols) : 0;
    row = r < a.rows ? r : 0;
  }
};

template <typename R, int WARP, int TPR, int ITEMS, int BLOCK>
__global__ void __launch_bounds__(BLOCK, (rows_min_blocks<R, ITEMS, BLOCK>())) rows_kernel(RowArgs a) {
  using Op = typename R::Op;
  constexpr int E = ITEMS * R::kVec;
  __shared__ Scratch<Op, WARP, BLOCK> scratch;
  const RegisterRow<WARP, TPR, BLOCK> g(a);
  const int lane = g.lane, n = g.n;
  const int64_t rr = g.row;
  float v[Op::kInputs][E];
  load_row_inputs<R, ITEMS, TPR, WARP>(a, rr, 0, n, lane, v);
  const ChunkStats<Op> cs = chunk_passes<R, ITEMS, TPR>(v, n, lane, RowReduce<Op, WARP, TPR, BLOCK>{&scratch, lane});
  const typename Op::Params prm = Op::params(a.param);
  bool ok;
  coefs_t<Op> cf = Op::narrow(Op::coefs(cs.template state<float>(), prm, ok));
  // Rows whose float coefficients the op does not trust: again in double (every lane calls
  // it; inactive groups never count), read from memory; then the values again (not written yet).
  if constexpr (Op::kF64Fallback) {
    if (rows_f64<R, WARP, TPR, BLOCK>(a, rr, n, lane, prm, ok || n == 0, cf)) {
      load_row_inputs<R, ITEMS, TPR, WARP>(a, rr, 0, n, lane, v);
      if constexpr (Op::kKeepsLift) chunk_passes<R, ITEMS, TPR>(v, n, lane, RowReduce<Op, WARP, TPR, BLOCK>{&scratch, lane});
    }
  }
  if (n > 0 && lane == 0) Op::write_row_outputs(cf, a.row_out, rr);
  if constexpr (R::kOptions) store_h<R, ITEMS, TPR>(a, rr, 0, n, lane, v[0]);
  // The chunk is the row: its chunk coefficients are the row's.
  finish_items<R, ITEMS, TPR>(a, 0, n, lane, v, cf);
  if constexpr (R::kOptions) {
    if (is_quantized_dtype(a.out_dtype)) {
      store_quantized_row<R, ITEMS, TPR>(a, rr, n, lane, v[0], RowReduce<Op, WARP, TPR, BLOCK>{&scratch, lane});
      return;
    }
  }
  store_any<R, ITEMS, TPR, WARP>(a, rr, 0, n, lane, v[0]);
}

}  // namespace gpu
}  // namespace onorm
