#include "option_blocks.hpp"

#include <algorithm>

#include "kernels.hpp"
#include "request_form.hpp"
#include "scalar_rows.hpp"

namespace onorm {
namespace cpu {
namespace {

// Bytes of h and y a thread keeps per block: well inside L2, so that the norm reads h, and the
// quantizer y, from cache.
constexpr int64_t kBlockBytes = int64_t(256) << 10;

// Rows [r0, r0 + n) of a row tensor.
onorm_rows rows_at(const onorm_rows& t, int64_t r0, int64_t n) {
  onorm_rows s = t;
  s.data = const_cast<void*>(row_of(t, r0));
  s.rows = n;
  return s;
}

// The request the SIMD kernels run for rows [r0, r0 + n) of q: the norm of h (those rows of h,
// of x without a residual) into y, or into the float block when y is quantized; no options.
onorm_request norm_of_block(const onorm_request& q, const onorm_rows& h, int64_t r0, int64_t n, float* y_block) {
  const core::ops::Signature& sig = core::ops::signature(q.op);
  onorm_request p = q;
  p.inputs = sig.inputs;
  p.outputs = sig.outputs;
  for (int k = 0; k < ONORM_REQUEST_INPUTS; ++k) p.in[k] = onorm_rows{};
  for (int k = 0; k < ONORM_REQUEST_OUTPUTS; ++k) p.out[k] = onorm_rows{};
  p.in[0] = h;
  if (y_block) {
    p.out[0] = onorm_rows{y_block, ONORM_F32, n, q.out[0].cols, q.out[0].cols};
  } else {
    p.out[0] = rows_at(q.out[0], r0, n);
  }
  for (int k = 0; k < ONORM_REQUEST_ROW_OUTS; ++k) p.row_out[k] = q.row_out[k] ? q.row_out[k] + r0 : nullptr;
  p.y_scale = nullptr;
  p.y_static_scale = 0.0;
  return p;
}

// Whether the norm adds the residual as it reads h (ResidualSum) rather than after an add of
// the whole block: measured faster everywhere but LayerNorm's 16-bit rows of one chunk, which
// ran slower so (bench/RESULTS.md).
bool adds_in_the_norm(const onorm_request& q) {
  return q.in[0].cols > kChunk || q.in[0].dtype == ONORM_F32 || q.op != ONORM_OP_LAYER_NORM;
}

}  // namespace

bool option_blocks_fit(size_t target_index, const onorm_request& q) {
  const onorm_dtype t = q.in[0].dtype;
  if (t != ONORM_F32 && t != ONORM_F16 && t != ONORM_BF16) return false;
  if (!plain_columns(q)) return false;
  const onorm_rows *res = residual_of(q), *res_out = residual_out_of(q);
  if (res && (res->dtype != t || (res_out && res_out->dtype != t))) return false;
  float probe = 0.0f;
  const onorm_request p = norm_of_block(q, rows_at(q.in[0], 0, 1), 0, 1, is_quantized(q.out[0].dtype) ? &probe : nullptr);
  return simd_supports(target_index, p);
}

OptionBlockScratch::OptionBlockScratch(const onorm_request& q) {
  const int64_t cols = std::max<int64_t>(q.in[0].cols, 1);
  const bool h_block = residual_of(q) && !residual_out_of(q), y_block = is_quantized(q.out[0].dtype);
  const int64_t row_bytes = (h_block ? cols * static_cast<int64_t>(dtype_size(q.in[0].dtype)) : 0) + (y_block ? cols * 4 : 0);
  block_rows_ = row_bytes > 0 ? std::max<int64_t>(1, kBlockBytes / row_bytes) : std::max<int64_t>(q.in[0].rows, 1);
  if (h_block) h_.reset(new unsigned char[static_cast<size_t>(block_rows_ * cols) * dtype_size(q.in[0].dtype)]);
  if (y_block) y_.reset(new float[static_cast<size_t>(block_rows_ * cols)]);
}

void option_blocks_run(size_t target_index, const onorm_request& q, int64_t r0, int64_t r1, unsigned opts,
                       const OptionBlockScratch& scratch) {
  const onorm_rows& x = q.in[0];
  const int64_t cols = x.cols;
  const onorm_rows *res = residual_of(q), *res_out = residual_out_of(q);
  const bool quantized = is_quantized(q.out[0].dtype);
  const bool fused = res && adds_in_the_norm(q);
  // The float block is read back at once: no streaming stores into it.
  if (quantized) opts &= ~static_cast<unsigned>(kOptStream);
  for (int64_t b0 = r0; b0 < r1; b0 += scratch.block_rows()) {
    const int64_t n = std::min(scratch.block_rows(), r1 - b0);
    // h: residual_out's rows, the scratch block's (its rows from b0), or x itself.
    onorm_rows h = x;
    int64_t h0 = b0;
    if (res) {
      if (res_out) {
        h = *res_out;
      } else {
        h = onorm_rows{scratch.h(), x.dtype, n, cols, cols};
        h0 = 0;
      }
      // Streamed into residual_out: no read of its lines before they are written; the norm
      // reads h back from memory, still faster than a normal store's read and write-back
      // (bench/RESULTS.md).
      if (!fused) simd_add_rows(target_index, x, *res, h, b0, h0, n, res_out != nullptr);
    }
    const ResidualSum sum{x, res ? *res : onorm_rows{}, b0};
    const onorm_request p = norm_of_block(q, rows_at(h, h0, n), b0, n, quantized ? scratch.y() : nullptr);
    simd_run_rows(target_index, p, 0, n, opts, nullptr, fused ? &sum : nullptr);
    if (quantized) simd_quantize_rows(target_index, q, b0, n, scratch.y());
  }
}

}  // namespace cpu
}  // namespace onorm
