// What a row operator is, for every placement of a row (SIMD lanes and threads on the CPU;
// lanes, warps, blocks, clusters and batches of blocks on GPUs): the one interface the
// backends are generic over. An op is a struct of static members (core/ops/<name>.hpp);
// everything about its math lives there, host and device alike, and nothing anywhere else.
//
// A row is cut by the placement into chunks (a SIMD chunk, a warp's or block's slice). Per chunk:
//   pass 1   reduce x (in[0]) with kPass1 (kMax keeps NaN; kSum; kNone): r1;
//   pivot    p = Op::pivot(r1, n), the centre of pass 2;
//   pass 2   Op::accumulate(m, acc, p, x) adds each element's kSums contributions into acc
//            (and returns the value kept for the finish when kKeepsLift);
//   state    Op::state(n, r1, p, sums): a monoid (identity, combine) in core/.
// Chunk states merge in a fixed tree into the row's state (Op::Merged across chunks, slices,
// blocks and devices). Then per row:
//   coefs    Op::coefs(state, params, ok): the finish coefficients and the special-value
//            rules; ok == false (ops with kF64Fallback) asks the placement to take the row's
//            statistics again in double (the same passes with T = double) and use those;
//   outputs  Op::write_row_outputs(coefs, row_out, r): per-row outputs (mean, rstd);
//   finish   per chunk, Op::chunk_coefs(row coefs, chunk state), then every element
//            y = Op::finish(m, coefs, x, cols) (or Op::finish_kept(m, coefs, kept, cols)).
// Padding (elements past the row's end inside a vector) loads as Op::pad(input) and then
// contributes nothing to pass 1 or pass 2, except where kPadWithPivot: the placement sets
// pass 2's padding to the pivot.
//
// `m` is the element math of the placement: core::ops::ScalarMath<T> (below) on scalars, or a
// backend's own (Highway vectors, the GPUs' approximate exp) with the same members: V, set,
// add, sub, mul, mul_add, exp (of non-positive arguments and -inf; NaN stays NaN), exp_any (of
// any argument: inputs no max bounds, as log-softmax backward's y), nan_or_zero (a where a is
// NaN, else 0: a NaN anywhere in a row reaches a sum).
#pragma once

#include "onlinenorm/core/hd.hpp"

namespace onorm {
namespace core {
namespace ops {

enum class Pass1 { kNone, kMax, kSum };

// What a scalar parameter must satisfy (validation, src/validate.cpp).
enum class ParamRule {
  kNonNegative,  // >= 0 and not NaN (eps), +inf allowed
  kUnit,         // in [0, 1] (label smoothing)
  kFinite,       // finite (a gradient's scale)
  kFiniteNonNegative,  // >= 0 and finite (z-loss)
};

// The tensors and parameters of an op, by slot of the backend request (src/backend_interface.h):
// in[] row tensors read, out[] row tensors written, col[] column vectors read (cols elements
// of the request's col_dtype, NULL allowed), row_out[] per-row floats written (NULL allowed),
// param[].
struct Signature {
  int inputs;
  const char* input[3];
  int outputs;
  const char* output[2];
  int cols;
  const char* col[2];
  int row_outs;
  const char* row_out[2];
  int params;
  const char* param[3];
  ParamRule param_rule[3];
  // The norms' residual add (API.md, "norms with options"): an optional row tensor in[inputs]
  // (input[inputs]) added to x before the op, h = round_H(x + residual), and an optional
  // out[outputs] (output[outputs]) that receives h (the CPU: backends/cpu/option_rows.cpp).
  bool residual = false;
  // Bit i of alias[o]: out[o] may alias in[i] exactly (same data, stride and dtype size).
  unsigned alias[2] = {~0u, ~0u};
  // out[0] may be ONORM_I8 / ONORM_F8_E4M3, quantized with a per-row or static scale.
  bool quantized_output = false;
  // An optional row tensor in[inputs] (input[inputs]) added to out[0] (the norms' backward:
  // dresidual), with no optional output.
  bool added_input = false;
  // Per-row floats read (row_in[], all required) and column floats written (col_out[], NULL
  // allowed): the norms' backward takes the forward's mean and rstd and sums dgamma, dbeta.
  int row_ins = 0;
  const char* row_in[2] = {nullptr, nullptr};
  int col_outs = 0;
  const char* col_out[2] = {nullptr, nullptr};
};

// What most ops share: an op derives from it and declares only what differs (a declaration in
// the op hides the default of the same name).
struct RowOpDefaults {
  static constexpr int kInputs = 1;
  static constexpr int kSums = 1;
  static constexpr int kCols = 0;
  static constexpr Pass1 kPass1 = Pass1::kNone;
  static constexpr bool kPadWithPivot = false;
  static constexpr bool kF64Fallback = false;
  static constexpr bool kKeepsLift = false;
  struct Params {};
  ONORM_HD_INLINE static Params params(const double*) { return Params{}; }
  ONORM_HD_INLINE static float pad(int) { return 0.0f; }
  ONORM_HD_INLINE static float col_default(int) { return 0.0f; }
  // Pass 2 centred at 0 (ops without a pass 1).
  template <typename T>
  ONORM_HD_INLINE static T pivot(T, int64_t) {
    return T(0);
  }
  // Every chunk finishes with the row's coefficients.
  template <typename C, typename S>
  ONORM_HD_INLINE static C chunk_coefs(const C& row, const S&) {
    return row;
  }
  // No per-row outputs.
  template <typename C>
  ONORM_HD_INLINE static void write_row_outputs(const C&, float* const*, int64_t) {}
};

// Element math on scalars (host and device): the reference implementation of the math policy.
template <typename T>
struct ScalarMath {
  using V = T;
  ONORM_HD_INLINE V set(T s) const { return s; }
  ONORM_HD_INLINE V add(V a, V b) const { return a + b; }
  ONORM_HD_INLINE V sub(V a, V b) const { return a - b; }
  ONORM_HD_INLINE V mul(V a, V b) const { return a * b; }
  ONORM_HD_INLINE V mul_add(V a, V b, V c) const { return a * b + c; }
  ONORM_HD_INLINE V exp(V a) const { return exp_of(a); }
  ONORM_HD_INLINE V exp_any(V a) const { return exp_of(a); }
  ONORM_HD_INLINE V nan_or_zero(V a) const { return is_nan(a) ? a : T(0); }
};

}  // namespace ops
}  // namespace core
}  // namespace onorm
