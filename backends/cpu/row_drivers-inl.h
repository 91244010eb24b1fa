// The row drivers of the SIMD kernels, generic over the op (core/ops/row_op.hpp): whole rows
// (the chunk states of a row merged in the fixed pairwise tree, the row's coefficients, the
// write pass while the row is in cache; the norms' residual add just before the passes that
// read it), and one chunk's state or write for rows split over threads. Every input is of one
// storage type In. Per target (Highway's -inl.h pattern).
//
// The ops' functions (core/ops) are defined outside the target's region and carry no target
// attributes: GCC will not inline this target's vector code into them, only them into this
// target's code. HWY_FLATTEN on the drivers inlines every op function (and the math policy
// into it) into the target's code, so that no vector crosses a call.

// Per-target include guard (see hwy/examples/skeleton-inl.h).
#if defined(ONORM_CPU_ROW_DRIVERS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ONORM_CPU_ROW_DRIVERS_INL_H_
#undef ONORM_CPU_ROW_DRIVERS_INL_H_
#else
#define ONORM_CPU_ROW_DRIVERS_INL_H_
#endif

#include <algorithm>

#include "chunk_passes-inl.h"
#include "hwy/highway.h"
#include "onlinenorm/core/pairwise.hpp"
#include "residual_add-inl.h"
#include "row_coefs.hpp"
#include "write_pass-inl.h"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Row r of every input, offset by `at` columns.
template <class Op, typename In>
HWY_INLINE void RowInputs(const onorm_request& q, int64_t r, int64_t at, const In** x) {
  for (int k = 0; k < Op::kInputs; ++k) x[k] = static_cast<const In*>(q.in[k].data) + r * q.in[k].row_stride + at;
}
// The column vectors offset by `at` (absent ones stay nullptr), and the mask of those present.
template <class Op, typename In>
HWY_INLINE unsigned RowCols(const onorm_request& q, int64_t at, const In** col) {
  unsigned mask = 0;
  for (int k = 0; k < Op::kCols; ++k) {
    col[k] = q.col[k] ? static_cast<const In*>(q.col[k]) + at : nullptr;
    mask |= q.col[k] ? 1u << k : 0u;
  }
  return mask;
}

// Columns [b, b + n) of row r of q's in[0] = round(x + residual) of row sum.row0 + r
// (ResidualSum), just before the passes read them: they stay in L1 for those passes.
template <typename In>
HWY_INLINE void AddColumns(const onorm_request& q, const ResidualSum& sum, int64_t r, int64_t b, size_t n) {
  AddRowColumns<In>(sum.x, sum.residual, q.in[0], sum.row0 + r, r, b, n);
}

template <class Op>
constexpr int kColSlots = Op::kCols > 0 ? Op::kCols : 1;

// kRowGroup rows of one chunk from r: every row's state, then every row's coefficients, then
// every row's write. Each row's operations are RunRowsT's, in its order (the same bits); only
// the rows interleave, so that one row's scalar chain (the reductions' last steps, the
// coefficients) overlaps the next row's instead of waiting. kept: kRowGroup rows of scratch
// for the kept lift, or nullptr.
template <class Op, typename In, typename Out>
HWY_INLINE void RowGroup(const onorm_request& q, int64_t r, unsigned opts, float* kept) {
  const bool pf = (opts & kOptPrefetch) != 0;
  const DF d;
  const int64_t cols = q.in[0].cols;
  const size_t n = static_cast<size_t>(cols);
  const In* x[Op::kInputs];
  const In* col[kColSlots<Op>];
  ChunkSums<Op> sums[kRowGroup];
  for (int64_t g = 0; g < kRowGroup; ++g) {
    RowInputs<Op>(q, r + g, 0, x);
    sums[g] = ChunkSumsOf<Op, SimdMathFor<Out>>(d, x, n, kept ? kept + g * cols : nullptr, pf);
  }
  FloatCoefs<Op> c[kRowGroup];
  for (int64_t g = 0; g < kRowGroup; ++g) c[g] = one_chunk_coefs<Op>(q, sums[g], r + g);
  const unsigned mask = RowCols<Op>(q, 0, col);
  for (int64_t g = 0; g < kRowGroup; ++g) {
    RowInputs<Op>(q, r + g, 0, x);
    Out* y = static_cast<Out*>(q.out[0].data) + (r + g) * q.out[0].row_stride;
    if constexpr (Op::kKeepsLift) {
      if (kept) {
        const WriteSources<In> src{nullptr, kept + g * cols, col};
        WriteRangeCols<Op, true>(mask, d, Op::chunk_coefs(c[g], sums[g].merged()), src, y, n, opts,
                                 WritePrefetch(q, x[0], opts));
        continue;
      }
    }
    const WriteSources<In> src{x, nullptr, col};
    WriteRangeCols<Op, false>(mask, d, c[g], src, y, n, opts, WritePrefetch(q, x[0], opts));
  }
}

// The write pass takes its pointers after row_coefs: values live across that call would sit
// in the few callee-saved registers or be spilled and loaded again in the write loop.
// sum: in[0] is added as it is read (ResidualSum), or nullptr.
template <class Op, typename In, typename Out>
HWY_FLATTEN void RunRowsT(const onorm_request& q, int64_t r0, int64_t r1, unsigned opts, float* scratch,
                          const ResidualSum* sum) {
  const bool pf = (opts & kOptPrefetch) != 0;
  const DF d;
  const int64_t cols = q.in[0].cols;
  const int64_t chunks = (cols + kChunk - 1) / kChunk;
  const In* x[Op::kInputs];
  const In* col[kColSlots<Op>];
  int64_t r = r0;
  if (row_groups(q)) {
    float* kept = kept_scratch_cols<Op>(q, opts) > 0 ? scratch : nullptr;
    for (; r + kRowGroup <= r1; r += kRowGroup) {
      if (sum)
        for (int64_t g = 0; g < kRowGroup; ++g) AddColumns<In>(q, *sum, r + g, 0, static_cast<size_t>(cols));
      RowGroup<Op, In, Out>(q, r, opts, kept);
    }
  }
  for (; r < r1; ++r) {
    core::PairwiseFold<typename Op::Merged> fold;
    if constexpr (Op::kKeepsLift) {
      if (kept_scratch_cols<Op>(q, opts) > 0) {
        // One pass 2 per element: the lift kept in f32, finished per chunk at the end.
        typename Op::Merged states[kMaxScratchChunks];
        for (int64_t k = 0; k < chunks; ++k) {
          const int64_t b = k * kChunk, n = std::min(kChunk, cols - b);
          if (sum) AddColumns<In>(q, *sum, r, b, static_cast<size_t>(n));
          RowInputs<Op>(q, r, b, x);
          states[k] = ChunkStateOf<Op, SimdMathFor<Out>>(d, x, static_cast<size_t>(n), scratch + b, pf);
          fold.push(states[k]);
        }
        const FloatCoefs<Op> c = row_coefs<Op>(q, fold.result(), r);
        Out* y = static_cast<Out*>(q.out[0].data) + r * q.out[0].row_stride;
        for (int64_t k = 0; k < chunks; ++k) {
          const int64_t b = k * kChunk, n = std::min(kChunk, cols - b);
          RowInputs<Op>(q, r, b, x);
          const unsigned mask = RowCols<Op>(q, b, col);
          const WriteSources<In> src{nullptr, scratch + b, col};
          WriteRangeCols<Op, true>(mask, d, Op::chunk_coefs(c, states[k]), src, y + b, static_cast<size_t>(n), opts,
                                   WritePrefetch(q, x[0], opts));
        }
        continue;
      }
    }
    FloatCoefs<Op> c;
    for (int64_t k = 0; k < chunks; ++k) {
      const int64_t b = k * kChunk, n = std::min(kChunk, cols - b);
      if (sum) AddColumns<In>(q, *sum, r, b, static_cast<size_t>(n));
      RowInputs<Op>(q, r, b, x);
      const ChunkSums<Op> s = ChunkSumsOf<Op, SimdMathFor<Out>>(d, x, static_cast<size_t>(n), nullptr, pf);
      if (chunks == 1) c = one_chunk_coefs<Op>(q, s, r);  // as RowGroup's rows
      else fold.push(s.merged());
    }
    if (chunks != 1) c = row_coefs<Op>(q, fold.result(), r);
    RowInputs<Op>(q, r, 0, x);
    const unsigned mask = RowCols<Op>(q, 0, col);
    Out* y = static_cast<Out*>(q.out[0].data) + r * q.out[0].row_stride;
    const WriteSources<In> src{x, nullptr, col};
    WriteRangeCols<Op, false>(mask, d, c, src, y, static_cast<size_t>(cols), opts, WritePrefetch(q, x[0], opts));
  }
}

// Math: SimdMathFor the output's storage type, as RunRowsT computes the row's statistics.
template <class Op, typename In, class Math>
HWY_FLATTEN typename Op::Merged ChunkStateT(const onorm_request& q, int64_t r, int64_t k, unsigned opts) {
  const DF d;
  const int64_t b = k * kChunk, n = std::min(kChunk, q.in[0].cols - b);
  const In* x[Op::kInputs];
  RowInputs<Op>(q, r, b, x);
  return ChunkStateOf<Op, Math>(d, x, static_cast<size_t>(n), nullptr, (opts & kOptPrefetch) != 0);
}

// Rows that RunRowsT finishes from the kept lift are written with the chunk's coefficients
// (the lift is computed again: the same bits); the others with the row's.
template <class Op, typename In, typename Out>
HWY_FLATTEN void WriteChunkT(const onorm_request& q, int64_t r, int64_t k, const FloatCoefs<Op>& row,
                 const typename Op::Merged& chunk, unsigned opts) {
  const DF d;
  const int64_t b = k * kChunk, n = std::min(kChunk, q.in[0].cols - b);
  const In* x[Op::kInputs];
  RowInputs<Op>(q, r, b, x);
  const In* col[kColSlots<Op>];
  const unsigned mask = RowCols<Op>(q, b, col);
  Out* y = static_cast<Out*>(q.out[0].data) + r * q.out[0].row_stride + b;
  const FloatCoefs<Op> c = kept_scratch_cols<Op>(q, opts) > 0 ? Op::chunk_coefs(row, chunk) : row;
  const WriteSources<In> src{x, nullptr, col};
  WriteRangeCols<Op, false>(mask, d, c, src, y, static_cast<size_t>(n), opts, WritePrefetch(q, x[0], opts));
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
