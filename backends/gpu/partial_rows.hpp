// The row ops' partial states (docs/API.md), shared by CUDA and HIP, generic over the op. A
// slice that the register placement holds (row_plan.hpp: place_registers, any shape) takes its
// stage there, read once (stage_rows_kernel); longer slices, and finishes with other columns
// (param_dtype, weight_offset), take the two-read schedule (chunk states, the fixed merge tree,
// the finish):
//   STATS   each row's state of the slice into the caller's states (a row whose statistics the
//           op does not trust at eps = 0, Op::coefs's ok, is taken again in double from the
//           row: LayerNorm's moments of offset, tiny or non-finite rows). cols == 0: the
//           identity for every row. Two-read: per batch of rows, the chunk states and their
//           merge tree, then state_out_kernel.
//   FINISH  the row coefficients from the given states: ops without a float64 fallback
//           (softmax, log-softmax) take them in the finish kernel from the state itself (its
//           final_states); the norms from state_coefs_kernel (moments as Welford<double>, or
//           as RMSNorm's sum of squares), which the finish reads (row_coefs), mean / rstd
//           written by the finish; in registers, or split_chunk_kernel's finish modes
//           (param_dtype, weight_offset). A statically quantized y: the float finish into a
//           staging buffer, then the quantizer (norm_options.hpp; launcher.hpp: run_partial).
//           Dynamic quantization never arrives (validation: UNSUPPORTED).
#pragma once

#include "vendor_shim.hpp"  // first: the vendor runtime defines __host__ / __device__

#include <cstdio>

#include "partial_state.hpp"
#include "row_plan.hpp"

namespace onorm {
namespace gpu {

// A stage of the partial states on the register placement: a group of TPR lanes per row holds
// the row's slice (ITEMS vectors per thread), its passes those of rows_kernel. STATS writes the
// slice's state to s.entries[s.row0 + row] (again in double where the op does not trust it,
// as state_out_kernel); FINISH finishes the slice from the row's coefficients (s.row_coefs, or
// the state s.final_states) scaled to the slice's own (slice_coefs), with the row outputs.
template <typename R, int WARP, int TPR, int ITEMS, int BLOCK, int STAGE>
__global__ void __launch_bounds__(BLOCK, (rows_min_blocks<R, ITEMS, BLOCK>())) stage_rows_kernel(RowArgs a, SplitArgs s) {
  using Op = typename R::Op;
  using S = typename Op::Merged;
  static_assert(STAGE == kStageStats || STAGE == kStageFinish, "a stage of the partial states");
  __shared__ Scratch<Op, WARP, BLOCK> scratch;
  const RegisterRow<WARP, TPR, BLOCK> g(a);
  const int lane = g.lane, n = g.n;
  const int64_t rr = g.row;
  float v[Op::kInputs][ITEMS * R::kVec];
  load_inputs<R, ITEMS, TPR, WARP>(a, rr, 0, n, lane, v);
  const ChunkStats<Op> cs = chunk_passes<R, ITEMS, TPR>(v, n, lane, RowReduce<Op, WARP, TPR, BLOCK>{&scratch, lane});
  if constexpr (STAGE == kStageStats) {
    S st = cs.merged();
    state_trusted_at_eps0<R, WARP, TPR, BLOCK, false>(a, rr, n, lane, st);
    if (n > 0 && lane == 0) static_cast<S*>(s.entries)[s.row0 + rr] = st;
  } else {
    coefs_t<Op> cf;
    if constexpr (Op::kF64Fallback) {
      cf = static_cast<const coefs_t<Op>*>(s.row_coefs)[s.row0 + rr];
    } else {
      bool ok;
      cf = Op::narrow(Op::coefs(static_cast<const S*>(s.final_states)[s.row0 + rr], Op::params(a.param), ok));
    }
    cf = slice_coefs<Op>(a, rr, lane, cf, cs, n > 0);
    finish_items<R, ITEMS, TPR>(a, 0, n, lane, v, cf);
    store_any<R, ITEMS, TPR, WARP>(a, rr, 0, n, lane, v[0]);
  }
}

// Each batch row's merged state (s.final_states) into states[row]; a row the op does not trust
// at eps = 0 is read again in double by the block (the decision is block-uniform: every thread
// holds the same state). Grid: the batch's rows.
template <typename R, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK) state_out_kernel(RowArgs a, SplitArgs s, void* states) {
  using Op = typename R::Op;
  using S = typename Op::Merged;
  const int64_t row = s.row0 + blockIdx.x;
  S st = static_cast<const S*>(s.final_states)[blockIdx.x];
  state_trusted_at_eps0<R, WARP, BLOCK, BLOCK, true>(a, row, a.cols, static_cast<int>(threadIdx.x), st);
  if (threadIdx.x == 0) static_cast<S*>(states)[row] = st;
}

// The finish coefficients of batch rows [0, n) from their given states (states[s.row0 + i])
// into s.row_coefs, a thread per row. The state is all there is of the row: its coefficients
// are taken as they come (the scaled finish of core/norm_stats.hpp covers every range).
template <typename R>
__global__ void __launch_bounds__(kStateBlock) state_coefs_kernel(RowArgs a, SplitArgs s, const void* states, int64_t n) {
  using Op = typename R::Op;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kStateBlock + threadIdx.x;
  if (i >= n) return;
  const partial_state_t<Op> st = static_cast<const partial_state_t<Op>*>(states)[s.row0 + i];
  bool ok;
  const coefs_t<Op> c = Op::narrow(Op::coefs(finish_state<Op>(st), Op::params(a.param), ok));
  static_cast<coefs_t<Op>*>(const_cast<void*>(s.row_coefs))[i] = c;
  // A slice of no columns has no finish to write the row's statistics: they are written here,
  // from the coefficients every other slice's finish writes them from (the same bits).
  if (a.cols == 0) Op::write_row_outputs(c, a.row_out, s.row0 + i);
}

// Rows per launch of a stats or finish call: each reads its rows once (no second read to keep
// in L2, unlike two_read_batch), so as many as the grid and 2^20 chunk states take.
inline int64_t stage_batch(const RowArgs& a, int64_t K) {
  return std::min<int64_t>({a.rows, 65535, std::max<int64_t>(1, (int64_t(1) << 20) / std::max<int64_t>(K, 1))});
}

// STATS of a request's rows into states (an op whose merge state is its partial state).
template <typename R, int W, typename L>
onorm_status place_stats(const RowArgs& a, L& l, void* states) {
  using Shape = SplitShape<R>;
  if (a.cols == 0) return l.template merge_parts<typename R::Op::Merged>(a.rows, 0, nullptr, states);
  {
    SplitArgs s{};
    s.entries = states;
    onorm_status status = ONORM_OK;
    if (place_registers<R, W, kStageStats>(a, l, status, -1, s)) return status;
  }
  const int64_t K = (a.cols + Shape::kChunk - 1) / Shape::kChunk;
  const int64_t batch = stage_batch(a, K);
  size_t buf0, buf1;
  two_read_state_bytes<R>(batch, K, buf0, buf1);
  onorm_status status = ONORM_OK;
  char* b0 = static_cast<char*>(l.workspace(buf0 + buf1, status));
  if (status != ONORM_OK) return status;
  for (int64_t r0 = 0; r0 < a.rows; r0 += batch) {
    const int64_t nb = std::min(batch, a.rows - r0);
    SplitArgs s{};
    s.chunk = Shape::kChunk;
    s.chunks = K;
    s.row0 = r0;
    const unsigned gx = static_cast<unsigned>(K), gy = static_cast<unsigned>(nb);
    if (onorm_status e = two_read_states<R, W>(a, l, s, gx, gy, b0, b0 + buf0)) return e;
    if (onorm_status e = l.template state_out<R, W, kSplitBlock>(gy, a, s, states)) return e;
  }
  return ONORM_OK;
}

// FINISH of a request's rows from states (partial_state_t<Op>, one per row).
template <typename R, int W, typename L>
onorm_status place_finish(const RowArgs& a, L& l, const void* states) {
  using Op = typename R::Op;
  using Shape = SplitShape<R>;
  const int64_t K = (a.cols + Shape::kChunk - 1) / Shape::kChunk;
  if (a.cols > 0 && a.cols <= register_max_cols<R>(l.caps())) {
    SplitArgs s{};
    if constexpr (Op::kF64Fallback) {
      onorm_status status = ONORM_OK;
      s.row_coefs = l.workspace(size_t(a.rows) * sizeof(coefs_t<Op>), status);
      if (status != ONORM_OK) return status;
      if (onorm_status e = l.template state_coefs<R>(a.rows, a, s, states)) return e;
    } else {
      s.final_states = states;
    }
    onorm_status status = ONORM_OK;
    if (place_registers<R, W, kStageFinish>(a, l, status, -1, s)) return status;
    // No register shape for this width (none today): the two-read finish below.
  }
  const int64_t batch = stage_batch(a, K);
  void* coefs = nullptr;
  if constexpr (Op::kF64Fallback) {
    onorm_status status = ONORM_OK;
    coefs = l.workspace(size_t(batch) * sizeof(coefs_t<Op>), status);
    if (status != ONORM_OK) return status;
  }
  for (int64_t r0 = 0; r0 < a.rows; r0 += batch) {
    const int64_t nb = std::min(batch, a.rows - r0);
    SplitArgs s{};
    s.chunk = Shape::kChunk;
    s.chunks = K;
    s.row0 = r0;
    if constexpr (Op::kF64Fallback) {
      s.row_coefs = coefs;
      if (onorm_status e = l.template state_coefs<R>(nb, a, s, states)) return e;
    } else {
      static_assert(std::is_same<typename Op::Merged, partial_state_t<Op>>::value, "the finish reads the state");
      s.final_states = static_cast<const partial_state_t<Op>*>(states) + r0;
    }
    if (K == 0) continue;  // a slice of no columns: the statistics only (state_coefs_kernel)
    const unsigned gx = static_cast<unsigned>(K), gy = static_cast<unsigned>(nb);
    if (onorm_status e = l.template split<R, W, Shape::kItems, kSplitBlock, kModeFinish>(gx, gy, a, s)) return e;
  }
  return ONORM_OK;
}

}  // namespace gpu
}  // namespace onorm
