// One chunk of a row held in registers (a thread's ITEMS vectors of VEC elements, for every
// input of the op), as every register placement (row groups, blocks, slices, cluster blocks)
// takes it: the loads, the op's two passes (core/ops/row_op.hpp) with the placement's
// reduction, the finish with the column vectors, the stores. Nothing here knows an op.
#pragma once

#include "vendor_shim.hpp"  // first: the vendor runtime defines __host__ / __device__
#include "dtype_io.hpp"
#include "math.hpp"
#include "onlinenorm/core/ops/row_op.hpp"
#include "reduce.hpp"
#include "row_args.hpp"

namespace onorm {
namespace gpu {

template <typename Op>
using coefs_t = typename Op::template Coefs<float>;
template <typename Op>
using sums_t = Vals<float, Op::kSums>;

// The scalar type of a state (MaxSum<float> -> float, Welford<double> -> double).
template <typename S>
struct scalar_of;
template <template <typename> class St, typename T>
struct scalar_of<St<T>> {
  using type = T;
};

// Shared memory of a block's reductions of op Op: floats (pass 1), the pass-2 sums, merged
// states, doubles (batched_chan); BLOCK / WARP of each.
template <typename Op, int WARP, int BLOCK>
union Scratch {
  float f[BLOCK / WARP];
  sums_t<Op> v[BLOCK / WARP];
  typename Op::Merged s[BLOCK / WARP];
  double d[BLOCK / WARP];
};

// The reduction over the TPR threads of a row (a group of lanes, or the block: TPR == BLOCK),
// for pass 1 (a float, max or sum) and pass 2 (the op's sums, one tree).
template <typename Op, int WARP, int TPR, int BLOCK>
struct RowReduce {
  Scratch<Op, WARP, BLOCK>* sc;
  int lane;
  template <typename O>
  ONORM_DEV float operator()(float v, O op) const {
    return row_allreduce<WARP, TPR, BLOCK>(v, lane, sc->f, op);
  }
  ONORM_DEV sums_t<Op> operator()(const sums_t<Op>& v, AddOp op) const {
    return row_allreduce<WARP, TPR, BLOCK>(v, lane, sc->v, op);
  }
};

// Pass 1 keeps the maximum (else a sum, or nothing).
template <typename Op>
constexpr bool kPass1Max = Op::kPass1 == core::ops::Pass1::kMax;

// What a chunk's passes leave: pass 1's result, the pivot, pass 2's sums over n elements.
// The chunk's state in any scalar type (Op::state), the merge state among them.
template <typename Op>
struct ChunkStats {
  int n;
  float r1, p;
  sums_t<Op> s;
  template <typename T>
  ONORM_DEV auto state() const {
    return Op::template state<T>(n, r1, p, s.v);
  }
  ONORM_DEV typename Op::Merged merged() const { return state<typename scalar_of<typename Op::Merged>::type>(); }
};

// Pass 1's fold of one element (kMax keeps NaN; kSum adds) and its identity.
template <typename Op, typename T>
ONORM_DEV T pass1_fold(T r, T x) {
  if constexpr (kPass1Max<Op>) return MaxOp{}(r, x);
  else return r + x;
}
template <typename Op, typename T>
ONORM_DEV T pass1_identity() {
  return kPass1Max<Op> ? core::neg_infinity<T>() : T(0);
}

// Pass 1 over a thread's values (padding loaded as Op::pad: neutral for max and sum).
template <typename Op, int E>
ONORM_DEV float pass1_local(const float* x) {
  float r = pass1_identity<Op, float>();
#pragma unroll
  for (int e = 0; e < E; ++e) r = pass1_fold<Op>(r, x[e]);
  return r;
}

// Pass 1 reduced by `reduce` (kNone: 0).
template <typename Op, int E, typename Reduce>
ONORM_DEV float pass1(const float* x, Reduce reduce) {
  if constexpr (Op::kPass1 == core::ops::Pass1::kMax) return reduce(pass1_local<Op, E>(x), MaxOp{});
  else if constexpr (Op::kPass1 == core::ops::Pass1::kSum) return reduce(pass1_local<Op, E>(x), AddOp{});
  else return 0.0f;
}

// The element of input k at item i, lane j, for accumulate / finish.
template <int NI, int E>
ONORM_DEV void element_of(const float (&v)[NI][E], int e, float* x) {
#pragma unroll
  for (int k = 0; k < NI; ++k) x[k] = v[k][e];
}

// Loads a thread's items of columns [col0, col0 + n) of `row` for every input. Two inputs, one
// of them 16-bit: whole items of aligned rows with every load issued before the first
// conversion (load_whole_pair). f32 words need no conversion, so load_items' loads do not
// wait: the same order for two f32 inputs measured slower where the slices spill
// (bench/RESULTS.md). Rows off a 16-byte boundary: load_row_items (every lane of the warp calls
// it).
template <typename R, int ITEMS, int STRIDE, int WARP>
ONORM_DEV void load_inputs(const RowArgs& a, int64_t row, int64_t col0, int n, int lane,
                           float (&v)[R::Op::kInputs][ITEMS * R::kVec]) {
  using Op = typename R::Op;
  constexpr int VEC = R::kVec;
  const auto* x = static_cast<const typename R::In*>(a.in[0]) + row * a.in_stride[0] + col0;
  if constexpr (Op::kInputs > 1) {
    const auto* x1 = static_cast<const typename R::In1*>(a.in[1]) + row * a.in_stride[1] + col0;
    constexpr bool kSixteenBit = sizeof(typename R::In) == 2 || sizeof(typename R::In1) == 2;
    if (kSixteenBit && a.in_vec[0] && a.in_vec[1] && items_whole<ITEMS, STRIDE, VEC>(n, lane)) {
      load_whole_pair<typename R::In, typename R::In1, ITEMS, STRIDE, VEC>(x, x1, lane, v[0], v[1]);
      return;
    }
    load_row_items<typename R::In, ITEMS, STRIDE, VEC, WARP>(x, n, lane, v[0], a.in_vec[0] != 0, Op::pad(0));
    load_row_items<typename R::In1, ITEMS, STRIDE, VEC, WARP>(x1, n, lane, v[1], a.in_vec[1] != 0, Op::pad(1));
  } else if constexpr (R::kOptions) {
    // (By element off a 16-byte boundary: load_row_items cost the option kernels registers and
    // spills, ptxas sm_90a.)
    load_items<typename R::In, ITEMS, STRIDE, VEC>(x, n, lane, v[0], a.in_vec[0] != 0, Op::pad(0));
  } else {
    load_row_items<typename R::In, ITEMS, STRIDE, VEC, WARP>(x, n, lane, v[0], a.in_vec[0] != 0, Op::pad(0));
  }
}

// Both passes over a thread's items of a chunk of n elements (STRIDE threads share the chunk;
// `reduce` reduces over them). kKeepsLift: v[0] receives pass 2's kept values.
template <typename R, int ITEMS, int STRIDE, typename Reduce>
ONORM_DEV ChunkStats<typename R::Op> chunk_passes(float (&v)[R::Op::kInputs][ITEMS * R::kVec], int n, int lane,
                                                  Reduce reduce) {
  using Op = typename R::Op;
  constexpr int VEC = R::kVec, NI = Op::kInputs;
  const GpuMath m;
  ChunkStats<Op> cs;
  cs.n = n;
  cs.r1 = pass1<Op, ITEMS * VEC>(v[0], reduce);
  cs.p = Op::pivot(cs.r1, n);
  if constexpr (Op::kPadWithPivot) {
    // Padding takes the pivot, so that pass 2 adds nothing for it; only a thread whose items
    // pass the row's end checks (a select per element cost full rows three instructions each).
    if ((lane + (ITEMS - 1) * STRIDE) * VEC + VEC > n) {
#pragma unroll
      for (int i = 0; i < ITEMS; ++i)
#pragma unroll
        for (int j = 0; j < VEC; ++j)
          if ((lane + i * STRIDE) * VEC + j >= n) v[0][i * VEC + j] = cs.p;
    }
  }
  sums_t<Op> acc;
#pragma unroll
  for (int q = 0; q < Op::kSums; ++q) acc.v[q] = 0.0f;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      float x[NI];
      element_of(v, i * VEC + j, x);
      const float kept = Op::accumulate(m, acc.v, cs.p, x);
      if constexpr (Op::kKeepsLift) v[0][i * VEC + j] = kept;
    }
  }
  cs.s = reduce(acc, AddOp{});
  return cs;
}

// Column 0's weight_offset (RowArgs::col_offset0) added to N of its values (kOffsetInRows).
template <typename R, int N>
ONORM_DEV void add_col_offset(const RowArgs& a, int q, float* o) {
  if constexpr (kOffsetInRows<typename R::Op>) {
    if (q == 0) {
#pragma unroll
      for (int j = 0; j < N; ++j) o[j] += a.col_offset0;
    }
  }
}

// The VEC values of column vector q at item c (Op::col_default where the request gave none),
// of element type Row::Col, with column 0's offset.
template <typename R, int VEC>
ONORM_DEV void load_col(const RowArgs& a, int q, int64_t col0, int c, int n, float* o) {
  using Col = typename R::Col;
  const auto* col = static_cast<const Col*>(a.col[q]);
  if (col) {
    load_one_item<Col, VEC>(col + col0, c, n, a.col_vec != 0, 0.0f, o);
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) o[j] = R::Op::col_default(q);
  }
  add_col_offset<R, VEC>(a, q, o);
}

// The same for ITEMS vectors of a thread of STRIDE (items at (lane + i * STRIDE) * VEC).
template <typename R, int ITEMS, int STRIDE>
ONORM_DEV void load_col_items(const RowArgs& a, int q, int64_t col0, int n, int lane, float* o) {
  const auto* col = static_cast<const typename R::Col*>(a.col[q]);
  if (col) {
    load_items<typename R::Col, ITEMS, STRIDE, R::kVec>(col + col0, n, lane, o, a.col_vec != 0, 0.0f);
  } else {
#pragma unroll
    for (int j = 0; j < ITEMS * R::kVec; ++j) o[j] = R::Op::col_default(q);
  }
  add_col_offset<R, ITEMS * R::kVec>(a, q, o);
}

// The finish of item i's VEC values with the coefficients and the item's column values cv
// (Op::finish, or finish_kept on pass 2's kept values), into v[0].
template <typename R, int NC, int E>
ONORM_DEV void finish_item(float (&v)[R::Op::kInputs][E], int i, const coefs_t<typename R::Op>& cf,
                           const float (&cv)[NC][R::kVec]) {
  using Op = typename R::Op;
  constexpr int VEC = R::kVec, NI = Op::kInputs;
  const GpuMath m;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    float cols[NC];
#pragma unroll
    for (int q = 0; q < NC; ++q) cols[q] = Op::kCols > 0 ? cv[q][j] : 0.0f;
    if constexpr (Op::kKeepsLift) {
      v[0][i * VEC + j] = Op::finish_kept(m, cf, v[0][i * VEC + j], cols);
    } else {
      float x[NI];
      element_of(v, i * VEC + j, x);
      v[0][i * VEC + j] = Op::finish(m, cf, x, cols);
    }
  }
}

// Items per window of the column vectors' loads: the raw words of a window's items take at
// most half as many registers as the thread's values (ptxas places the loads within it, under
// the kernel's register cap), and the windows tile the items exactly (three items: windows of
// one; a window of two would reach a fourth item past the thread's values).
template <typename R, typename Col>
constexpr int col_window(int items) {
  constexpr int kWordsPerItem = (R::Op::kCols > 0 ? R::Op::kCols : 1) * RawN<Col, R::kVec>::kWords;
  int g = 1;
  while (items % (g * 2) == 0 && g * 2 * kWordsPerItem <= items * R::kVec / 2) g *= 2;
  return g;
}

// The finish of a thread's items where the column vectors are aligned: the loads of a window
// of whole items (col_window) are issued before any is used; an item the row's end cuts takes
// its elements one at a time, items past it nothing. kPresent: bit q set where column vector q
// was given (the others take Op::col_default, a constant). kOffset: column 0's offset is added
// (RowArgs::col_offset0; without, it is known to be 0).
template <unsigned kPresent, bool kAllWhole, bool kOffset, typename R, int ITEMS, int STRIDE>
ONORM_DEV void finish_aligned_items(const RowArgs& a, int64_t col0, int n, int lane,
                                    float (&v)[R::Op::kInputs][ITEMS * R::kVec], const coefs_t<typename R::Op>& cf) {
  using Op = typename R::Op;
  using Col = typename R::Col;
  constexpr int VEC = R::kVec, NC = Op::kCols;
  constexpr int G = col_window<R, Col>(ITEMS);
  static_assert(ITEMS % G == 0, "windows tile the items");
#pragma unroll
  for (int i0 = 0; i0 < ITEMS; i0 += G) {
    RawN<Col, VEC> raw[NC][G];
#pragma unroll
    for (int q = 0; q < NC; ++q) {
      if (kPresent >> q & 1u) {
        const auto* col = static_cast<const Col*>(a.col[q]) + col0;
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const int c = (lane + (i0 + g) * STRIDE) * VEC;
          if (kAllWhole || c + VEC <= n) load_raw_n<Col, VEC>(col + c, raw[q][g]);
        }
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const int c = (lane + (i0 + g) * STRIDE) * VEC;
      if (!kAllWhole && c + VEC > n) continue;
      float cv[NC][VEC];
#pragma unroll
      for (int q = 0; q < NC; ++q) {
        if (kPresent >> q & 1u) {
          unpack_n<Col, VEC>(raw[q][g], cv[q]);
        } else {
#pragma unroll
          for (int j = 0; j < VEC; ++j) cv[q][j] = Op::col_default(q);
        }
        if (kOffset) add_col_offset<R, VEC>(a, q, cv[q]);
      }
      finish_item<R, NC>(v, i0 + g, cf, cv);
    }
  }
  if constexpr (!kAllWhole) {
    // The item the row's end cuts (one thread's, at most one).
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int c = (lane + i * STRIDE) * VEC;
      if (c < n && c + VEC > n) {
        float cv[NC][VEC];
#pragma unroll
        for (int q = 0; q < NC; ++q) load_col<R, VEC>(a, q, col0, c, n, cv[q]);
        finish_item<R, NC>(v, i, cf, cv);
      }
    }
  }
}

// The finish of a thread's items with the chunk's coefficients (Op::finish, or finish_kept
// on pass 2's kept values), into v[0].
// Aligned column vectors, all given (or only the first, for a thread whose items are whole):
// finish_aligned_items (a branch around each item's load and its use made every load wait for
// the one before: LayerNorm, two waits an item), RMSNorm's whole items without an offset in a
// copy that adds none (the addition slowed the FP8 output and f32 gamma beside 16-bit x on
// an H200: bench/RESULTS.md). Else item by item. kCut: threads whose items
// the row's end cuts take finish_aligned_items too (slices under a cap of 64 registers, of which
// only a row's last is cut, spilled several hundred bytes more with it: item by item there).
template <typename R, int ITEMS, int STRIDE, bool kCut = true>
ONORM_DEV void finish_items(const RowArgs& a, int64_t col0, int n, int lane,
                            float (&v)[R::Op::kInputs][ITEMS * R::kVec], const coefs_t<typename R::Op>& cf) {
  using Op = typename R::Op;
  constexpr int VEC = R::kVec, NC = Op::kCols > 0 ? Op::kCols : 1;
  if constexpr (Op::kCols > 0) {
    if (a.col_vec != 0) {
      constexpr unsigned kAll = (1u << Op::kCols) - 1u;
      unsigned present = 0;
#pragma unroll
      for (int q = 0; q < Op::kCols; ++q) present |= a.col[q] ? 1u << q : 0u;
      const bool whole = (lane + (ITEMS - 1) * STRIDE) * VEC + VEC <= n;
      if (present == kAll && whole) {
        if (!kOffsetInRows<Op> || a.col_offset0 == 0.0f) {
          finish_aligned_items<kAll, true, false, R, ITEMS, STRIDE>(a, col0, n, lane, v, cf);
        } else {
          finish_aligned_items<kAll, true, true, R, ITEMS, STRIDE>(a, col0, n, lane, v, cf);
        }
        return;
      }
      if (kCut && present == kAll) {
        finish_aligned_items<kAll, false, true, R, ITEMS, STRIDE>(a, col0, n, lane, v, cf);
        return;
      }
      if (Op::kCols > 1 && present == 1u && whole) {
        finish_aligned_items<1u, true, true, R, ITEMS, STRIDE>(a, col0, n, lane, v, cf);
        return;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int c = (lane + i * STRIDE) * VEC;
    float cv[NC][VEC];
#pragma unroll
    for (int q = 0; q < Op::kCols; ++q) load_col<R, VEC>(a, q, col0, c, n, cv[q]);
    finish_item<R, NC>(v, i, cf, cv);
  }
}

// Stores a thread's finished items as the output dtype.
template <typename Out, int VEC, int ITEMS, int STRIDE>
ONORM_DEV void store_items(Out* y, int n, int lane, const float* v, bool aligned) {
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) store_one_item<Out, VEC>(y, (lane + i * STRIDE) * VEC, n, aligned, v + i * VEC);
}
// The same into rows of a run-time dtype (kF32, kF16, kBF16) at element offset off of out.
template <int VEC, int ITEMS, int STRIDE>
ONORM_DEV void store_items_as(void* out, int dtype, int64_t off, int n, int lane, const float* v, bool aligned) {
  switch (dtype) {
    case kF32: store_items<float, VEC, ITEMS, STRIDE>(static_cast<float*>(out) + off, n, lane, v, aligned); break;
    case kF16:
      store_items<core::f16_bits, VEC, ITEMS, STRIDE>(static_cast<core::f16_bits*>(out) + off, n, lane, v, aligned);
      break;
    default:
      store_items<core::bf16_bits, VEC, ITEMS, STRIDE>(static_cast<core::bf16_bits*>(out) + off, n, lane, v, aligned);
      break;
  }
}
// The op's output row. Rows off a 16-byte boundary that a block holds go through the warp's
// buffer (every lane of the warp calls it): f32 always (store_items_through_warp), 16-bit where
// k16Bit (store_16bit_items_through_warp): the cluster stream, where it measured faster than
// the items' shifted stores; in the register rows and the per-row clusters the buffer's
// barriers and shared traffic cost more than those stores (bench/RESULTS.md).
template <typename R, int ITEMS, int STRIDE, int WARP, bool k16Bit = false>
ONORM_DEV void store_any(const RowArgs& a, int64_t row, int64_t col0, int n, int lane, const float* v) {
  if constexpr (kThroughWarpBuffer<float, STRIDE, WARP> && R::kVec % 4 == 0) {
    if (!a.out_vec) {
      const int64_t off = row * a.out_stride + col0;
      switch (a.out_dtype) {
        case kF32:
          return store_items_through_warp<ITEMS, STRIDE, R::kVec, WARP>(static_cast<float*>(a.out) + off, n, lane, v);
        case kF16:
          if constexpr (k16Bit)
            return store_16bit_items_through_warp<core::f16_bits, ITEMS, STRIDE, R::kVec, WARP>(
                static_cast<core::f16_bits*>(a.out) + off, n, lane, v);
          break;
        case kBF16:
          if constexpr (k16Bit)
            return store_16bit_items_through_warp<core::bf16_bits, ITEMS, STRIDE, R::kVec, WARP>(
                static_cast<core::bf16_bits*>(a.out) + off, n, lane, v);
          break;
        default: break;
      }
    }
  }
  store_items_as<R::kVec, ITEMS, STRIDE>(a.out, a.out_dtype, row * a.out_stride + col0, n, lane, v, a.out_vec != 0);
}

}  // namespace gpu
}  // namespace onorm
