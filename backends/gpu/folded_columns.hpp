// The norms' column vectors (gamma, beta) as the row kernels take them: of element type
// Row::Col, x's dtype (the version-1 form) or f32 beside 16-bit rows; RMSNorm's with its
// weight_offset added as gamma loads (RowArgs::col_offset0, kOffsetInRows: Gemma's scale
// 1 + gamma, one f32 addition, exact before its one rounding where the offset is a float).
// Any other form (gamma of f16 beside bf16 x or of 16 bits beside f32 x, LayerNorm's offset,
// an offset no float holds) is folded once per call into f32 vectors in the launcher's column
// workspace:
// s_j = float(weight_offset + gamma_j) and beta_j, each rounded once from double, as the CPU
// backend folds them (backends/cpu/folded_columns.hpp). Both ways the kernels scale by the
// floats the CPU does. The fold costs a kernel ahead of the row kernels (bench/RESULTS.md),
// which the common forms do without.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend_interface.h"
#include "onlinenorm/core/ops/dispatch.hpp"
#include "row_args.hpp"
#include "visit_dtype.hpp"

namespace onorm {
namespace gpu {

enum class ColumnForm {
  kOfX,   // x's dtype (or no column vectors given)
  kF32,   // f32 beside 16-bit rows
  kFold,  // anything else: kernel_columns folds them first
};

inline ColumnForm column_form(const onorm_request& q) {
  const int cols = core::ops::signature(q.op).cols;
  if (cols == 0) return ColumnForm::kOfX;
  const double off = q.col_offset[0];
  if (off != 0.0 && (cols != 1 || static_cast<double>(static_cast<float>(off)) != off))  // kOffsetInRows
    return ColumnForm::kFold;
  for (int k = 1; k < ONORM_REQUEST_COLS; ++k)
    if (q.col_offset[k] != 0.0) return ColumnForm::kFold;
  bool given = false;
  for (int k = 0; k < ONORM_REQUEST_COLS; ++k) given = given || q.col[k];
  if (!given || q.col_dtype == q.in[0].dtype) return ColumnForm::kOfX;
  return q.col_dtype == ONORM_F32 ? ColumnForm::kF32 : ColumnForm::kFold;
}

// f(type_tag<Row>{}) with the Row of op Op on input In (kOptions: RowOptions) whose Col the
// request's column form gives (a folded request: kOfX or kF32).
template <typename Op, typename In, bool kOptions, typename F>
auto visit_column_row(const onorm_request& q, F&& f) {
  if constexpr (Op::kCols > 0 && sizeof(In) == 2) {
    if (column_form(q) == ColumnForm::kF32) return f(type_tag<Row<Op, In, In, kOptions, float>>{});
  }
  return f(type_tag<Row<Op, In, In, kOptions>>{});
}

struct FoldArgs {
  const void* col[ONORM_REQUEST_COLS];  // param_dtype elements, or null (the op's default)
  double offset[ONORM_REQUEST_COLS];
  float fallback[ONORM_REQUEST_COLS];   // the op's col_default
  float* out[ONORM_REQUEST_COLS];       // null: column k is not folded
  int dtype;                            // kF32, kF16 or kBF16
  int64_t cols;
};

constexpr int kFoldBlock = 256;

template <typename T>
ONORM_DEV double fold_load(const void* p, int64_t j) {
  return static_cast<double>(io<T>::load1(static_cast<const T*>(p) + j));
}

// A grid-stride loop over the columns (grid x times BLOCK stays below 2^31). A template, as
// every kernel here: each translation unit that launches it has its own.
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) fold_columns_kernel(FoldArgs f) {
  const int64_t step = int64_t(gridDim.x) * BLOCK;
  for (int64_t j = int64_t(blockIdx.x) * BLOCK + threadIdx.x; j < f.cols; j += step) {
#pragma unroll
    for (int k = 0; k < ONORM_REQUEST_COLS; ++k) {
      if (!f.out[k]) continue;
      double c = f.fallback[k];
      if (f.col[k]) {
        c = f.dtype == kF32 ? fold_load<float>(f.col[k], j)
            : f.dtype == kF16 ? fold_load<core::f16_bits>(f.col[k], j)
                              : fold_load<core::bf16_bits>(f.col[k], j);
      }
      f.out[k][j] = static_cast<float>(c + f.offset[k]);
    }
  }
}

// q with its columns in a form the row kernels take: q itself, or its columns folded into the
// launcher's column workspace (l.column_workspace, l.fold_columns), offsets and all. A column
// vector neither given nor offset stays null (the op's default).
template <typename L>
onorm_request kernel_columns(const onorm_request& q, L& l, onorm_status& status) {
  status = ONORM_OK;
  if (column_form(q) != ColumnForm::kFold) return q;
  const int ncols = core::ops::signature(q.op).cols;
  const int64_t n = q.in[0].cols;
  const int64_t stride = (n + 63) / 64 * 64;  // each vector on 256 bytes
  float* ws = static_cast<float*>(l.column_workspace(size_t(stride) * size_t(ncols) * sizeof(float), status));
  if (status != ONORM_OK) return q;
  FoldArgs f{};
  onorm_request folded = q;
  core::ops::visit(q.op, [&](auto op) {
    for (int k = 0; k < ncols; ++k) {
      f.col[k] = q.col[k];
      f.offset[k] = q.col_offset[k];
      f.fallback[k] = decltype(op)::col_default(k);
      if (q.col[k] || q.col_offset[k] != 0.0) f.out[k] = ws + k * stride;
      folded.col[k] = f.out[k];
      folded.col_offset[k] = 0.0;
    }
    return ONORM_OK;
  });
  f.dtype = q.col_dtype;
  f.cols = n;
  folded.col_dtype = ONORM_F32;
  if (n > 0) {
    const int64_t blocks = std::min<int64_t>((n + kFoldBlock - 1) / kFoldBlock, 4096);
    status = l.fold_columns(static_cast<unsigned>(blocks), f);
  }
  return folded;
}

}  // namespace gpu
}  // namespace onorm
