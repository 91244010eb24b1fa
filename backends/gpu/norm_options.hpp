// The norms' residual add and quantized output on GPUs (API.md, "norms with options"), shared
// by CUDA and HIP. A request whose residual and residual_out share x's dtype and whose column
// vectors are plain runs them inside the row kernels (RowOptions, row_options.hpp) where a
// register or cluster placement holds its rows: every tensor read or written once. Any other
// runs them as launches around the row plan, per batch of rows:
//   residual_add_kernel   h = round_H(x + residual) (core/residual.hpp) into residual_out, or
//                         into a staging buffer of x's dtype when there is none;
//   the row plan          the norm of h (or x), a request without these options: into y, or
//                         into a float staging buffer when y is quantized;
//   the quantizer         a warp per row, or blocks per chunk of longer rows: the row's scale
//                         (dynamic: max |v| / Q, written to y_scale; or the static one), then
//                         q = quant(v / scale) (core/quantize.hpp).
// A row's results depend on that row alone (batch invariance), so the batches change no bit.
// Staging memory is stream-ordered (the runtime's malloc_async / free_async): at most
// kStagingBytes a batch, or one row where a row alone needs more.
#pragma once

#include <algorithm>
#include <cstdint>

#include "dtype_io.hpp"
#include "folded_columns.hpp"
#include "onlinenorm/core/ops/dispatch.hpp"
#include "onlinenorm/core/quantize.hpp"
#include "onlinenorm/core/residual.hpp"
#include "reduce.hpp"
#include "request_form.hpp"
#include "row_args.hpp"
#include "row_options.hpp"
#include "row_plan.hpp"

namespace onorm {
namespace gpu {

// Whether a request needs these launches (else the row plan runs it alone).
inline bool needs_norm_options(const onorm_request& q) { return has_residual(q) || is_quantized(q.out[0].dtype); }

// The dtypes a GPU backend takes: f32, f16 and bf16, and the quantized outputs.
inline int supports_dtype(onorm_dtype t, int is_input) {
  return t == ONORM_F32 || t == ONORM_F16 || t == ONORM_BF16 || (!is_input && is_quantized(t));
}

// Rows [r0, r0 + n) of a row tensor.
inline onorm_rows rows_slice(const onorm_rows& t, int64_t r0, int64_t n) {
  onorm_rows s = t;
  s.data = static_cast<char*>(t.data) + r0 * t.row_stride * dtype_size(t.dtype);
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
  int col_threads;     // threads of a block per row (a power of two): short rows share a block
};

// The add in float, rounded once to H by the store. Each element is read and written by one
// thread: residual_out may be x or the residual. T: x, residual and h of that one type, every
// row 16-byte aligned and cols a multiple of its vector (16 bytes a load); void: each of its
// own run-time dtype, an element a load.
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) residual_add_kernel(ResidualArgs a) {
  constexpr int V = Elems<T>::kVec;
  const int ct = a.col_threads, per_block = BLOCK / ct;
  const int lane = static_cast<int>(threadIdx.x) % ct, sub = static_cast<int>(threadIdx.x) / ct;
  for (int64_t r = static_cast<int64_t>(blockIdx.y) * per_block + sub; r < a.rows;
       r += static_cast<int64_t>(gridDim.y) * per_block)
    for (int64_t j = (static_cast<int64_t>(blockIdx.x) * ct + lane) * V; j < a.cols;
         j += static_cast<int64_t>(gridDim.x) * ct * V) {
      float x[V], res[V], h[V];
      load_group<T, V>(a.x, a.xt, r * a.sx + j, x);
      load_group<T, V>(a.r, a.rt, r * a.sr + j, res);
#pragma unroll
      for (int i = 0; i < V; ++i) h[i] = static_cast<float>(core::residual_add<float>(x[i], res[i], false));
      if constexpr (V > 1) Elems<T>::store_vec(a.h, r * a.sh + j, h);
      else Elems<T>::store(a.h, a.ht, r * a.sh + j, h[0]);
    }
}

// Threads per row (a power of two, up to the block), so short rows share a block; grid (column
// blocks, row blocks).
template <typename T, typename Stream>
void launch_residual_add(ResidualArgs a, Stream stream) {
  const int64_t units = (a.cols + Elems<T>::kVec - 1) / Elems<T>::kVec;
  int ct = 1;
  while (ct < kOptionsBlock && ct < units) ct *= 2;
  a.col_threads = ct;
  const int64_t per_block = kOptionsBlock / ct;
  const int64_t gx = std::min<int64_t>((units + ct - 1) / ct, 1024);
  const int64_t gy = std::min<int64_t>((a.rows + per_block - 1) / per_block, 65535);
  residual_add_kernel<T, kOptionsBlock>
      <<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy)), kOptionsBlock, 0, stream>>>(a);
}

// Whether x, the residual and h can take the typed kernel of 16-byte vectors.
inline bool residual_vectors(const onorm_rows& x, const onorm_rows& r, const onorm_rows& h) {
  return x.dtype == r.dtype && x.dtype == h.dtype && rows_aligned16(x) && rows_aligned16(r) && rows_aligned16(h) &&
         x.cols % (16 / dtype_size(x.dtype)) == 0;
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

// One element of a row: q = quant(v / scale) (row_options.hpp's rule).
ONORM_DEV void quantize_at(const QuantizeArgs& a, int64_t r, int64_t j, float scale) {
  const core::QuantRow rq = core::quant_row(a.y_scale != nullptr, scale, a.static_scale);
  static_cast<uint8_t*>(a.q)[r * a.sq + j] = static_cast<uint8_t>(quant_codes2(rq, a.e4m3 != 0, a.v[r * a.cols + j], 0.0f));
}

// Rows of up to kQuantWarpRowCols: TPR threads per row (a warp), the scale and the row in one pass
// each. Every thread of the block takes part in each round's reduction, past the last row too.
template <int WARP, int TPR>
__global__ void __launch_bounds__(kOptionsBlock) quantize_rows_kernel(QuantizeArgs a) {
  constexpr int GPB = kOptionsBlock / TPR;  // rows per block
  __shared__ float scratch[kOptionsBlock / WARP];
  const float q_max = a.e4m3 ? core::kE4M3Max : core::kI8Max;
  const int lane = static_cast<int>(threadIdx.x) % TPR;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * GPB; first < a.rows;
       first += static_cast<int64_t>(gridDim.x) * GPB) {
    const int64_t r = first + static_cast<int>(threadIdx.x) / TPR;
    const bool active = r < a.rows;
    const int64_t n = active ? a.cols : 0;
    float scale = 0.0f;
    if (a.y_scale) {
      float m = 0.0f;
      for (int64_t j = lane; j < n; j += TPR) m = core::nan_max_abs(m, a.v[r * a.cols + j]);
      m = row_allreduce<WARP, TPR, kOptionsBlock>(m, lane, scratch, MaxOp{});
      scale = core::quant_scale(m, q_max);
      if (active && lane == 0) a.y_scale[r] = scale;
    }
    for (int64_t j = lane; j < n; j += TPR) quantize_at(a, r, j, scale);
  }
}
constexpr int64_t kQuantWarpRowCols = 4096;

// Longer rows in chunks of kQuantChunk, a block each (grid: chunks, rows): chunk_max_kernel
// writes each chunk's largest |v|, quantize_chunks_kernel takes the row's scale from them (a
// maximum: the same in any order) and quantizes its chunk.
constexpr int64_t kQuantChunk = int64_t(kOptionsBlock) * 16;

template <int WARP>
__global__ void __launch_bounds__(kOptionsBlock) chunk_max_kernel(QuantizeArgs a, float* chunk_max, int64_t chunks) {
  __shared__ float scratch[kOptionsBlock / WARP];
  const int64_t r = blockIdx.y, c0 = static_cast<int64_t>(blockIdx.x) * kQuantChunk;
  const int64_t end = c0 + kQuantChunk < a.cols ? c0 + kQuantChunk : a.cols;
  float m = 0.0f;
  for (int64_t j = c0 + threadIdx.x; j < end; j += kOptionsBlock) m = core::nan_max_abs(m, a.v[r * a.cols + j]);
  m = block_allreduce<WARP, kOptionsBlock>(m, scratch, MaxOp{});
  if (threadIdx.x == 0) chunk_max[r * chunks + blockIdx.x] = m;
}

template <int WARP>
__global__ void __launch_bounds__(kOptionsBlock) quantize_chunks_kernel(QuantizeArgs a, const float* chunk_max,
                                                                        int64_t chunks) {
  __shared__ float scratch[kOptionsBlock / WARP];
  const int64_t r = blockIdx.y, c0 = static_cast<int64_t>(blockIdx.x) * kQuantChunk;
  float scale = 0.0f;
  if (a.y_scale) {
    float m = 0.0f;
    for (int64_t k = threadIdx.x; k < chunks; k += kOptionsBlock) m = core::nan_max(m, chunk_max[r * chunks + k]);
    m = block_allreduce<WARP, kOptionsBlock>(m, scratch, MaxOp{});
    scale = core::quant_scale(m, a.e4m3 ? core::kE4M3Max : core::kI8Max);
    if (blockIdx.x == 0 && threadIdx.x == 0) a.y_scale[r] = scale;
  }
  const int64_t end = c0 + kQuantChunk < a.cols ? c0 + kQuantChunk : a.cols;
  for (int64_t j = c0 + threadIdx.x; j < end; j += kOptionsBlock) quantize_at(a, r, j, scale);
}

// Runs a validated norm request with a residual and/or a quantized y around the row plan on
// warp width WARP; plan(p) runs a request without either, on the runtime's stream.
template <int WARP, typename Rt, typename Plan>
onorm_status run_options_around_plan(Rt& rt, const onorm_request& q, Plan&& plan) {
  const onorm_rows &x = q.in[0], &y = q.out[0];
  const bool residual = has_residual(q), quantized = is_quantized(y.dtype);
  const onorm_rows *res = residual_of(q), *res_out = residual_out_of(q);
  const bool stage_h = residual && !res_out;
  const int64_t rows = x.rows, cols = x.cols;
  const int64_t h_row = stage_h ? cols * dtype_size(x.dtype) : 0;
  const int64_t v_row = quantized ? cols * 4 : 0;
  // Rows quantized in chunks need each chunk's maximum: a float per chunk, after the floats.
  const int64_t chunks = (cols + kQuantChunk - 1) / kQuantChunk;
  const int64_t m_row = quantized && cols > kQuantWarpRowCols ? chunks * 4 : 0;
  const int64_t per_row = h_row + v_row + m_row;
  const int64_t batch = per_row == 0 ? rows : std::max<int64_t>(1, std::min<int64_t>(rows, kStagingBytes / per_row));
  const int64_t h_bytes = (batch * h_row + 255) / 256 * 256;  // the floats after it, aligned
  void* staging = nullptr;
  if (per_row > 0)
    if (onorm_status s = rt.malloc_async(&staging, static_cast<size_t>(h_bytes + batch * (v_row + m_row)))) return s;
  float* v_stage = quantized ? reinterpret_cast<float*>(static_cast<char*>(staging) + h_bytes) : nullptr;
  float* chunk_max = m_row > 0 ? v_stage + batch * cols : nullptr;
  const core::ops::Signature& sig = core::ops::signature(q.op);
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
    // A finish from partial states (a norm's: moments) takes its batch's states.
    if (q.stage == ONORM_STAGE_FINISH) p.state_in = static_cast<const onorm_moments_state*>(q.state_in) + r0;
    if (residual) {
      const onorm_rows r = rows_slice(*res, r0, n);
      const onorm_rows h = res_out ? rows_slice(*res_out, r0, n) : onorm_rows{staging, x.dtype, n, cols, cols};
      const ResidualArgs ra{p.in[0].data, r.data, h.data, p.in[0].row_stride, r.row_stride, h.row_stride,
                            p.in[0].dtype, r.dtype, h.dtype, n, cols, 1};
      if (!residual_vectors(p.in[0], r, h)) launch_residual_add<void>(ra, rt.stream());
      else if (x.dtype == ONORM_F32) launch_residual_add<float>(ra, rt.stream());
      else if (x.dtype == ONORM_F16) launch_residual_add<core::f16_bits>(ra, rt.stream());
      else launch_residual_add<core::bf16_bits>(ra, rt.stream());
      if ((status = rt.check("residual add launch"))) break;
      p.in[0] = h;
    }
    const onorm_rows y_rows = rows_slice(y, r0, n);
    p.out[0] = quantized ? onorm_rows{v_stage, ONORM_F32, n, cols, cols} : y_rows;
    if ((status = plan(p))) break;
    if (quantized) {
      const QuantizeArgs qa{v_stage, y_rows.data, y_rows.row_stride, y.dtype == ONORM_F8_E4M3,
                            q.y_scale ? q.y_scale + r0 : nullptr, q.y_static_scale, n, cols};
      if (cols <= kQuantWarpRowCols) {
        constexpr int64_t kGpb = kOptionsBlock / WARP;
        const int64_t blocks = std::min((n + kGpb - 1) / kGpb, int64_t(32) * rt.caps().sms);
        quantize_rows_kernel<WARP, WARP><<<static_cast<unsigned>(blocks), kOptionsBlock, 0, rt.stream()>>>(qa);
      } else {
        const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(n));
        if (qa.y_scale) {
          chunk_max_kernel<WARP><<<grid, kOptionsBlock, 0, rt.stream()>>>(qa, chunk_max, chunks);
          if ((status = rt.check("quantize chunk max launch"))) break;
        }
        quantize_chunks_kernel<WARP><<<grid, kOptionsBlock, 0, rt.stream()>>>(qa, chunk_max, chunks);
      }
      status = rt.check("quantize launch");
    }
  }
  const onorm_status f = staging ? rt.free_async(staging) : ONORM_OK;
  return status != ONORM_OK ? status : f;
}

// Whether the row kernels can carry a request's options (RowOptions): h of x's dtype, the
// column vectors in a form the kernels take (folded_columns.hpp).
inline bool options_in_rows(const onorm_request& q) {
  const onorm_dtype t = q.in[0].dtype;
  if (column_form(q) == ColumnForm::kFold) return false;
  const onorm_rows *res = residual_of(q), *res_out = residual_out_of(q);
  return !res || (res->dtype == t && (!res_out || res_out->dtype == t));
}

// A validated norm request of op Op, first input In, with a residual and/or a quantized y, on
// warp width W: inside the row kernels where a placement takes it, else around the plan;
// plan(p) runs a request without options of any input dtype (h's dtype may not be x's).
template <typename Op, typename In, int W, typename Rt, typename L, typename Plan>
onorm_status run_norm_options(Rt& rt, L& l, const onorm_request& q0, Plan&& plan) {
  onorm_status status = ONORM_OK;
  const onorm_request q = kernel_columns(q0, l, status);  // folded once, for the plan(p) below too
  if (status != ONORM_OK) return status;
  if (options_in_rows(q)) {
    const bool placed = visit_column_row<Op, In, true>(q, [&](auto row) {
      return place_with_options<typename decltype(row)::type, W>(row_args(q), l, status);
    });
    if (placed) return status;
  }
  return run_options_around_plan<W>(rt, q, plan);
}

}  // namespace gpu
}  // namespace onorm
