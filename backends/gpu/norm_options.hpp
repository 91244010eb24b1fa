// The norms' residual add and quantized output on GPUs (API.md, "norms with options"), shared
// by CUDA and HIP, as launches around the row plan. Per batch of rows:
//   residual_add_kernel   h = round_H(x + residual) (core/residual.hpp) into residual_out, or
//                         into a staging buffer of x's dtype when there is none;
//   the row plan          the norm of h (or x), a request without these options: into y, or
//                         into a float staging buffer when y is quantized;
//   quantize_rows_kernel  a block per row: the row's scale (dynamic: max |v| / Q, written to
//                         y_scale; or the static one), then q = quant(v / scale) (core/quantize.hpp).
// A row's results depend on that row alone (batch invariance), so the batches change no bit.
// Staging memory is stream-ordered (the runtime's malloc_async / free_async): at most
// kStagingBytes a batch, or one row where a row alone needs more.
#pragma once

#include <algorithm>
#include <cstdint>

#include "dtype_io.hpp"
#include "onlinenorm/core/ops/dispatch.hpp"
#include "onlinenorm/core/quantize.hpp"
#include "onlinenorm/core/residual.hpp"
#include "reduce.hpp"
#include "request_form.hpp"

namespace onorm {
namespace gpu {

// Whether a request needs these launches (else the row plan runs it alone).
inline bool needs_norm_options(const onorm_request& q) { return has_residual(q) || is_quantized(q.out[0].dtype); }

// The dtypes a GPU backend takes: f32, f16 and bf16, and the quantized outputs.
inline int supports_dtype(onorm_dtype t, int is_input) {
  return t == ONORM_F32 || t == ONORM_F16 || t == ONORM_BF16 || (!is_input && is_quantized(t));
}

inline int64_t bytes_of(onorm_dtype t) {
  return t == ONORM_F64 ? 8 : t == ONORM_F32 ? 4 : t == ONORM_F16 || t == ONORM_BF16 ? 2 : 1;
}

// Rows [r0, r0 + n) of a row tensor.
inline onorm_rows rows_slice(const onorm_rows& t, int64_t r0, int64_t n) {
  onorm_rows s = t;
  s.data = static_cast<char*>(t.data) + r0 * t.row_stride * bytes_of(t.dtype);
  s.rows = n;
  return s;
}

constexpr int kOptionsBlock = 256;
constexpr int64_t kStagingBytes = int64_t(64) << 20;

struct ResidualArgs {
  const void* x;
  const void* r;
  void* h;
  int64_t sx, sr, sh;  // row strides in elements
  int xt, rt, ht;      // kF32, kF16, kBF16
  int64_t rows, cols;
};

// The add in float, rounded once to H by the store. Each element is read and written by one
// thread: residual_out may be x or the residual.
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) residual_add_kernel(ResidualArgs a) {
  for (int64_t r = blockIdx.y; r < a.rows; r += gridDim.y)
    for (int64_t j = static_cast<int64_t>(blockIdx.x) * BLOCK + threadIdx.x; j < a.cols;
         j += static_cast<int64_t>(gridDim.x) * BLOCK) {
      const double h = core::residual_add<float>(load_dtype(a.x, a.xt, r * a.sx + j), load_dtype(a.r, a.rt, r * a.sr + j),
                                                 false);
      store_dtype(a.h, a.ht, r * a.sh + j, static_cast<float>(h));
    }
}

struct QuantizeArgs {
  const float* v;  // rows x cols, dense
  void* q;         // ONORM_I8 or ONORM_F8_E4M3
  int64_t sq;      // q's row stride in elements
  int e4m3;
  float* y_scale;  // dynamic: written; NULL: static_scale
  double static_scale;  // as given: a scale below FLT_MIN stays exact
  int64_t rows, cols;
};

template <int WARP>
__global__ void __launch_bounds__(kOptionsBlock) quantize_rows_kernel(QuantizeArgs a) {
  __shared__ float scratch[kOptionsBlock / WARP];
  const float q_max = a.e4m3 ? core::kE4M3Max : core::kI8Max;
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const float* v = a.v + r * a.cols;
    float scale = 0.0f;
    if (a.y_scale) {
      float m = 0.0f;
      for (int64_t j = threadIdx.x; j < a.cols; j += kOptionsBlock) m = core::nan_max_abs(m, v[j]);
      m = block_allreduce<WARP, kOptionsBlock>(m, scratch, MaxOp{});
      scale = core::quant_scale(m, q_max);
      if (threadIdx.x == 0) a.y_scale[r] = scale;
    }
    for (int64_t j = threadIdx.x; j < a.cols; j += kOptionsBlock) {
      const float s = a.y_scale ? v[j] / scale : static_cast<float>(v[j] / a.static_scale);
      if (a.e4m3) static_cast<uint8_t*>(a.q)[r * a.sq + j] = core::quantize_e4m3(s);
      else static_cast<int8_t*>(a.q)[r * a.sq + j] = core::quantize_i8(s);
    }
  }
}

// Runs a validated norm request with a residual and/or a quantized y on warp width WARP; plan(p)
// runs a request without either through the row plan, on the runtime's stream.
template <int WARP, typename Rt, typename Plan>
onorm_status run_norm_options(Rt& rt, const onorm_request& q, Plan&& plan) {
  const core::ops::Signature& sig = core::ops::signature(q.op);
  const onorm_rows &x = q.in[0], &y = q.out[0];
  const bool residual = has_residual(q), quantized = is_quantized(y.dtype);
  // The optional tensors follow the op's own: residual in[inputs], residual_out out[outputs].
  const onorm_rows* res = residual ? &q.in[sig.inputs] : nullptr;
  const onorm_rows* res_out = residual && q.outputs > sig.outputs ? &q.out[sig.outputs] : nullptr;
  const bool stage_h = residual && !res_out;
  const int64_t rows = x.rows, cols = x.cols;
  const int64_t h_row = stage_h ? cols * bytes_of(x.dtype) : 0;
  const int64_t v_row = quantized ? cols * 4 : 0;
  const int64_t batch = h_row + v_row == 0 ? rows : std::max<int64_t>(1, std::min<int64_t>(rows, kStagingBytes / (h_row + v_row)));
  const int64_t h_bytes = (batch * h_row + 255) / 256 * 256;  // the float buffer after it, aligned
  void* staging = nullptr;
  if (h_row + v_row > 0)
    if (onorm_status s = rt.malloc_async(&staging, static_cast<size_t>(h_bytes + batch * v_row))) return s;
  float* v_stage = reinterpret_cast<float*>(static_cast<char*>(staging) + h_bytes);
  onorm_status status = ONORM_OK;
  for (int64_t r0 = 0; r0 < rows && status == ONORM_OK; r0 += batch) {
    const int64_t n = std::min(batch, rows - r0);
    onorm_request p = q;
    p.inputs = sig.inputs;
    p.outputs = sig.outputs;
    p.in[0] = rows_slice(x, r0, n);
    for (int k = sig.inputs; k < ONORM_REQUEST_INPUTS; ++k) p.in[k] = onorm_rows{};
    for (int k = sig.outputs; k < ONORM_REQUEST_OUTPUTS; ++k) p.out[k] = onorm_rows{};
    for (int k = 0; k < ONORM_REQUEST_ROW_OUTS; ++k)
      if (q.row_out[k]) p.row_out[k] = q.row_out[k] + r0;
    p.y_scale = nullptr;
    p.y_static_scale = 0.0;
    if (residual) {
      const onorm_rows r = rows_slice(*res, r0, n);
      const onorm_rows h = res_out ? rows_slice(*res_out, r0, n) : onorm_rows{staging, x.dtype, n, cols, cols};
      const ResidualArgs ra{p.in[0].data, r.data, h.data, p.in[0].row_stride, r.row_stride, h.row_stride,
                            p.in[0].dtype, r.dtype, h.dtype, n, cols};
      const unsigned gx = static_cast<unsigned>(std::min<int64_t>((cols + kOptionsBlock - 1) / kOptionsBlock, 1024));
      residual_add_kernel<kOptionsBlock><<<dim3(gx, static_cast<unsigned>(std::min<int64_t>(n, 65535))), kOptionsBlock, 0,
                            rt.stream()>>>(ra);
      if ((status = rt.check("residual add launch"))) break;
      p.in[0] = h;
    }
    const onorm_rows y_rows = rows_slice(y, r0, n);
    p.out[0] = quantized ? onorm_rows{v_stage, ONORM_F32, n, cols, cols} : y_rows;
    if ((status = plan(p))) break;
    if (quantized) {
      const QuantizeArgs qa{v_stage, y_rows.data, y_rows.row_stride, y.dtype == ONORM_F8_E4M3,
                            q.y_scale ? q.y_scale + r0 : nullptr, q.y_static_scale, n, cols};
      quantize_rows_kernel<WARP><<<static_cast<unsigned>(std::min<int64_t>(n, 1 << 20)), kOptionsBlock, 0, rt.stream()>>>(qa);
      status = rt.check("quantize launch");
    }
  }
  const onorm_status f = staging ? rt.free_async(staging) : ONORM_OK;
  return status != ONORM_OK ? status : f;
}

}  // namespace gpu
}  // namespace onorm
