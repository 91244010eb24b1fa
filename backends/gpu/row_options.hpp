// The norms' residual add and quantized output inside a row held in registers (API.md, "norms
// with options"; RowOptions): the register rows (rows_kernel) and the CUDA cluster rows call
// these on a thread's items, so that x and the residual are read once and h and y written once.
//   load_row_inputs  x, and v[0] = h = round_In(x + residual) where the request has a residual,
//                    the add in float (core/residual.hpp);
//   store_h          h into residual_out: after the row's coefficients, because residual_out
//                    may be x or the residual, which the float64 fallback reads again;
//   quantized y      the row's max |y| over its threads, the scale (dynamic, or the static
//                    one), q = quant(y / scale) (core/quantize.hpp), VEC bytes a store.
// The element rules are the unfused ones' (norm_options.hpp calls quantized_bits too).
#pragma once

#include "onlinenorm/core/quantize.hpp"
#include "row_chunk.hpp"

namespace onorm {
namespace gpu {

// Whether an op takes RowOptions (the norms): only its requests with options run kernels of
// Row<..., kOptions = true>.
template <typename Op>
constexpr bool kRowOptions = Op::kSignature.residual || Op::kSignature.quantized_output;

ONORM_DEV bool is_quantized_dtype(int dt) { return dt == kE4M3 || dt == kI8; }

// core::quant_input of a row whose rule is known to multiply (QuantRow::multiply): the same
// product, without the rule's tests.
struct MultiplyRule {
  float inverse;
};
ONORM_DEV float code_input(const MultiplyRule& q, float v) { return v * q.inverse; }
ONORM_DEV float code_input(const core::QuantRow& q, float v) { return core::quant_input(q, v); }

// The codes of two elements (int8_t or E4M3 bits), a in the low byte; q = quant(v / scale) by
// core::quant_input's rule (Rule: core::QuantRow, or MultiplyRule where it multiplies).
template <typename Rule>
ONORM_DEV uint16_t quant_codes2(const Rule& q, bool e4m3, float a, float b) {
  const float sa = code_input(q, a), sb = code_input(q, b);
  if (e4m3) return shim::f32x2_to_e4m3x2(sa, sb);
  return static_cast<uint16_t>(static_cast<uint8_t>(core::quantize_i8(sa)) |
                               (static_cast<uint16_t>(static_cast<uint8_t>(core::quantize_i8(sb))) << 8));
}

// h = round_In(x + residual) for a thread's items of columns [col0, col0 + n) of `row`, into
// v[0] (which holds x); padding past n keeps Op::pad. core::residual_add's float case: one float
// add, rounded once to In.
template <typename R, int ITEMS, int STRIDE>
ONORM_DEV void add_residual(const RowArgs& a, int64_t row, int64_t col0, int n, int lane,
                            float (&v)[R::Op::kInputs][ITEMS * R::kVec]) {
  using In = typename R::In;
  constexpr int VEC = R::kVec;
  const In* r = static_cast<const In*>(a.opt.res) + row * a.opt.res_stride + col0;
  float t[ITEMS * VEC];
  // (Rows off a 16-byte boundary by element: load_row_items here measured more registers and
  // spills in the norms' option kernels, ptxas sm_90a.)
  load_items<In, ITEMS, STRIDE, VEC>(r, n, lane, t, a.opt.res_vec != 0, 0.0f);
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int c = (lane + i * STRIDE) * VEC;
#pragma unroll
    for (int j = 0; j < VEC; ++j)
      if (c + j < n) v[0][i * VEC + j] = round_to<In>(v[0][i * VEC + j] + t[i * VEC + j]);
  }
}

// A thread's items of x, and h = x + residual where the request has one (add_residual); whole
// items of aligned rows with every load of both issued before the first conversion
// (load_whole_pair).
template <typename R, int ITEMS, int STRIDE, int WARP>
ONORM_DEV void load_row_inputs(const RowArgs& a, int64_t row, int64_t col0, int n, int lane,
                               float (&v)[R::Op::kInputs][ITEMS * R::kVec]) {
  if constexpr (R::kOptions) {
    static_assert(R::Op::kInputs == 1, "the residual is added to the one input");
    using In = typename R::In;
    constexpr int VEC = R::kVec;
    if (a.opt.res) {
      if (a.in_vec[0] && a.opt.res_vec && items_whole<ITEMS, STRIDE, VEC>(n, lane)) {
        float t[ITEMS * VEC];
        load_whole_pair<In, In, ITEMS, STRIDE, VEC>(static_cast<const In*>(a.in[0]) + row * a.in_stride[0] + col0,
                                                    static_cast<const In*>(a.opt.res) + row * a.opt.res_stride + col0,
                                                    lane, v[0], t);
#pragma unroll
        for (int e = 0; e < ITEMS * VEC; ++e) v[0][e] = round_to<In>(v[0][e] + t[e]);
      } else {
        load_inputs<R, ITEMS, STRIDE, WARP>(a, row, col0, n, lane, v);
        add_residual<R, ITEMS, STRIDE>(a, row, col0, n, lane, v);
      }
      return;
    }
  }
  load_inputs<R, ITEMS, STRIDE, WARP>(a, row, col0, n, lane, v);
}

// h (v[0], before the finish) into residual_out, where the request has one.
template <typename R, int ITEMS, int STRIDE>
ONORM_DEV void store_h(const RowArgs& a, int64_t row, int64_t col0, int n, int lane, const float* h) {
  using In = typename R::In;
  if (!a.opt.h) return;
  store_items<In, R::kVec, ITEMS, STRIDE>(static_cast<In*>(a.opt.h) + row * a.opt.h_stride + col0, n, lane, h,
                                          a.opt.res_vec != 0);
}

// The largest |y| of a thread's items (NaN kept).
template <typename R, int ITEMS, int STRIDE>
ONORM_DEV float items_max_abs(int n, int lane, const float* y) {
  constexpr int VEC = R::kVec;
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int c = (lane + i * STRIDE) * VEC;
    // A whole item without a test per element: one max each (shim::nan_max keeps a NaN).
    const bool whole = c + VEC <= n;
#pragma unroll
    for (int j = 0; j < VEC; ++j)
      if (whole || c + j < n) m = shim::nan_max(m, fabsf(y[i * VEC + j]));
  }
  return m;
}

// The row's scale from the row's max |y| (dynamic; the static scale is applied in double).
ONORM_DEV float row_quant_scale(const RowArgs& a, float max_abs) {
  return core::quant_scale(max_abs, a.out_dtype == kE4M3 ? core::kE4M3Max : core::kI8Max);
}

// Stores a thread's items of y quantized with the row's scale: VEC bytes a store where the
// row allows (out_vec), else a byte at a time.
template <typename R, int ITEMS, int STRIDE>
ONORM_DEV void store_quantized(const RowArgs& a, int64_t row, int64_t col0, int n, int lane, const float* y,
                               float scale) {
  constexpr int VEC = R::kVec;
  static_assert(VEC == 4 || VEC == 8, "a 4- or 8-byte store");
  using Word = typename std::conditional<VEC == 4, uint32_t, uint64_t>::type;
  uint8_t* q = static_cast<uint8_t*>(a.out) + row * a.out_stride + col0;
  const core::QuantRow rq = core::quant_row(a.opt.y_scale != nullptr, scale, a.opt.static_scale);
  // The row's rule and code dtype chosen once, outside the elements: tested per pair, they cost
  // a branch and a comparison around every conversion, and the rows were bound by instructions.
  auto store = [&](auto rule, auto e4m3) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int c = (lane + i * STRIDE) * VEC;
      Word w = 0;
#pragma unroll
      for (int j = 0; j < VEC; j += 2)
        w |= static_cast<Word>(quant_codes2(rule, decltype(e4m3)::value, y[i * VEC + j], y[i * VEC + j + 1])) << (8 * j);
      if (a.out_vec && c + VEC <= n) {
        *reinterpret_cast<Word*>(q + c) = w;
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j)
          if (c + j < n) q[c + j] = static_cast<uint8_t>(w >> (8 * j));
      }
    }
  };
  auto with_codes = [&](auto rule) {
    if (a.out_dtype == kE4M3) store(rule, std::true_type());
    else store(rule, std::false_type());
  };
  if (rq.multiply) with_codes(MultiplyRule{rq.inverse});
  else with_codes(rq);
}

// Register rows: the row's scale over its TPR threads (`reduce`: the row's reduction), the
// dynamic scale written by the row's first lane, then the stores.
template <typename R, int ITEMS, int TPR, typename Reduce>
ONORM_DEV void store_quantized_row(const RowArgs& a, int64_t row, int n, int lane, const float* y, Reduce reduce) {
  float scale = 0.0f;
  if (a.opt.y_scale) {
    scale = row_quant_scale(a, reduce(items_max_abs<R, ITEMS, TPR>(n, lane, y), MaxOp{}));
    if (n > 0 && lane == 0) a.opt.y_scale[row] = scale;
  }
  store_quantized<R, ITEMS, TPR>(a, row, 0, n, lane, y, scale);
}

}  // namespace gpu
}  // namespace onorm
