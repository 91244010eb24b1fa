// What a row kernel is given: the request's tensors as kernel arguments (RowArgs, mapped from
// the backend request once, row_args), the schedule of split rows (SplitArgs), and the static
// description of one instantiation (Row: the op and the input element types).
#pragma once

#include <stdint.h>

#include "vendor_shim.hpp"  // first: the vendor runtime defines __host__ / __device__
#include "backend_interface.h"
#include "dtype_io.hpp"
#include "onlinenorm/core/ops/dispatch.hpp"
#include "request_form.hpp"

namespace onorm {
namespace gpu {

// One kernel instantiation: the op (core/ops) and the element type of each input it reads
// (In1 = In for single-input ops). Vectors hold VEC = 16 / sizeof(In) elements of every input.
// kOptions: the kernels carry the norms' RowOptions (their own instantiations, so that the
// rows without them keep their registers). Col: the element type of the column vectors (gamma,
// beta): x's, or f32 beside 16-bit rows (folded_columns.hpp).
template <typename OpT, typename InT, typename In1T = InT, bool kOptionsT = false, typename ColT = InT>
struct Row {
  using Op = OpT;
  using In = InT;
  using In1 = In1T;
  using Col = ColT;
  static constexpr int kVec = io<InT>::kVec;
  static constexpr bool kOptions = kOptionsT;
};
template <int K, typename A, typename B>
struct pick_type {
  using type = A;
};
template <typename A, typename B>
struct pick_type<1, A, B> {
  using type = B;
};
// The element type of input k of a Row.
template <typename R, int K>
using input_t = typename pick_type<K, typename R::In, typename R::In1>::type;

// The norms' residual add and quantized output, carried out inside the register and cluster
// rows (row_options.hpp; norm_options.hpp decides which requests): all zero for the others.
struct RowOptions {
  const void* res;      // the residual rows, in[0]'s dtype; null: none
  void* h;              // residual_out, in[0]'s dtype; null: none
  int64_t res_stride, h_stride;  // row strides in elements
  int res_vec;          // res and h rows 16-byte aligned
  float* y_scale;       // quantized y (out_dtype kE4M3 / kI8): the dynamic per-row scale; null: static
  double static_scale;  // as given: a scale below FLT_MIN stays exact
};

struct RowArgs {
  const void* in[ONORM_REQUEST_INPUTS];
  int64_t in_stride[ONORM_REQUEST_INPUTS];  // row strides in elements
  int in_vec[ONORM_REQUEST_INPUTS];         // every row of the input 16-byte aligned
  void* out;
  int64_t out_stride;
  int out_dtype;                            // kF32 / kF16 / kBF16 (kE4M3 / kI8: opt)
  int out_vec;                              // out rows aligned for VEC-element stores
  const void* col[ONORM_REQUEST_COLS];      // Row::Col elements, or null (the op's col_default)
  int col_vec;                              // every col 16-byte aligned
  float col_offset0;                        // added to column 0 (kOffsetInRows): weight_offset
  float* row_out[ONORM_REQUEST_ROW_OUTS];
  double param[ONORM_REQUEST_PARAMS];       // as given: eps beyond FLT_MAX stays exact in double
  int64_t rows, cols;
  RowOptions opt;
};

// Ops whose kernels add RowArgs::col_offset0 to column 0 as it loads: RMSNorm (Gemma's scale
// 1 + gamma). LayerNorm's kernels (two column vectors, more registers) measured slower with the
// addition in them (f32 rows of 1024 columns most: bench/RESULTS.md); its offset is folded
// into its columns (folded_columns.hpp).
template <typename Op>
constexpr bool kOffsetInRows = Op::kCols == 1;

struct SplitArgs {
  int64_t chunk;        // elements per chunk
  int64_t chunks;       // chunks per row (K)
  int64_t groups;       // staged: rows in flight (grid = groups * K)
  int64_t row0;         // two-read, cluster: first row of this launch
  int64_t chunk_alloc;  // staged: elements per shared-memory buffer and input (a multiple of 8)
  uint64_t epoch;       // coop: this launch's tag (nonzero, unique per workspace use)
  void* entries;        // coop: Entry slots and flags; two-read: stats output (batch * K states)
  const void* final_states;  // two-read finish: one merged state per batch row
  const void* row_coefs;     // two-read finish of ops with a float64 fallback: coefficients per batch row
  int prefetch_cols;         // cluster: prefetch the column vectors to L1 before the merge
};

// Bytes of an element of any onorm_dtype (the kernels take f32, f16 and bf16).
inline int64_t dtype_size(int dtype) {
  return dtype == ONORM_F64 ? 8 : dtype == kF32 ? 4 : dtype == kF16 || dtype == kBF16 ? 2 : 1;
}

// Every row of t starts on a 16-byte boundary (its data and its row stride in bytes).
inline bool rows_aligned16(const onorm_rows& t) {
  return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && (t.row_stride * dtype_size(t.dtype)) % 16 == 0;
}

// The kernel arguments of a validated request.
inline RowArgs row_args(const onorm_request& q) {
  RowArgs a{};
  auto aligned = [](const void* p, size_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; };
  const int64_t vec = 16 / dtype_size(q.in[0].dtype);  // elements per vector of in[0]
  for (int k = 0; k < ONORM_REQUEST_INPUTS; ++k) {
    a.in[k] = q.in[k].data;
    a.in_stride[k] = q.in[k].row_stride;
    a.in_vec[k] = q.in[k].data && rows_aligned16(q.in[k]);
  }
  a.out = q.out[0].data;
  a.out_stride = q.out[0].row_stride;
  a.out_dtype = q.out[0].dtype;
  const int64_t ystore = vec * dtype_size(q.out[0].dtype) < 16 ? vec * dtype_size(q.out[0].dtype) : 16;
  a.out_vec = aligned(a.out, static_cast<size_t>(ystore)) && a.out_stride % vec == 0;
  a.col_vec = 1;
  for (int c = 0; c < ONORM_REQUEST_COLS; ++c) {
    a.col[c] = q.col[c];
    a.col_vec = a.col_vec && aligned(q.col[c], 16);
  }
  a.col_offset0 = static_cast<float>(q.col_offset[0]);  // exact where the kernels take it (column_form)
  for (int r = 0; r < ONORM_REQUEST_ROW_OUTS; ++r) a.row_out[r] = q.row_out[r];
  for (int p = 0; p < ONORM_REQUEST_PARAMS; ++p) a.param[p] = q.param[p];
  a.rows = q.in[0].rows;
  a.cols = q.in[0].cols;
  if (const onorm_rows* r = residual_of(q)) {
    a.opt.res = r->data;
    a.opt.res_stride = r->row_stride;
    a.opt.res_vec = rows_aligned16(*r);
    if (const onorm_rows* out = residual_out_of(q)) {
      const onorm_rows& h = *out;
      a.opt.h = h.data;
      a.opt.h_stride = h.row_stride;
      a.opt.res_vec = a.opt.res_vec && rows_aligned16(h);
    }
  }
  a.opt.y_scale = q.y_scale;
  a.opt.static_scale = q.y_static_scale;
  return a;
}

// Rows [r0, r0 + n) of a request as a request of their own (launches cut into grid-sized pieces).
template <typename R>
inline RowArgs rows_from(const RowArgs& a, int64_t r0, int64_t n) {
  RowArgs p = a;
  p.rows = n;
  p.in[0] = static_cast<const typename R::In*>(a.in[0]) + r0 * a.in_stride[0];
  if (R::Op::kInputs > 1) p.in[1] = static_cast<const typename R::In1*>(a.in[1]) + r0 * a.in_stride[1];
  if constexpr (R::kOptions) {
    if (a.opt.res) p.opt.res = static_cast<const typename R::In*>(a.opt.res) + r0 * a.opt.res_stride;
    if (a.opt.h) p.opt.h = static_cast<typename R::In*>(a.opt.h) + r0 * a.opt.h_stride;
    if (a.opt.y_scale) p.opt.y_scale += r0;
  }
  p.out = static_cast<char*>(a.out) + r0 * a.out_stride * dtype_size(a.out_dtype);
  for (int r = 0; r < ONORM_REQUEST_ROW_OUTS; ++r)
    if (p.row_out[r]) p.row_out[r] += r0;
  return p;
}

// A published state: up to 24 bytes of state (Welford<double>), then the tag that releases it.
struct alignas(16) Entry {
  uint32_t words[6];
  uint64_t tag;
};
static_assert(sizeof(Entry) == 32, "Entry: 24 bytes of state and the tag");

}  // namespace gpu
}  // namespace onorm
