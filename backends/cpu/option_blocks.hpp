// The norms' residual add and quantized output on the CPU around the SIMD kernels, a block of rows
// at a time that stays in cache: the version-1 SIMD norm of h = round_X(x + residual) into y (or a
// float scratch block), h stored into residual_out or a scratch block by the norm's passes a chunk
// at a time (kernels.hpp, ResidualSum) or, for LayerNorm's 16-bit rows of one chunk, by an add of
// the block first, then the quantized codes from y (quantize_simd-inl.h). Requests whose residual
// and residual_out have x's dtype (f32, f16, bf16), whose column vectors are of the version-1 form
// and whose norm the SIMD kernels take; any other runs option_rows.hpp's portable code. A row's
// results depend on that row alone.
#pragma once

#include <cstdint>
#include <memory>

#include "backend_interface.h"

namespace onorm {
namespace cpu {

// Whether q's options run here on target `target_index`.
bool option_blocks_fit(size_t target_index, const onorm_request& q);

// One thread's scratch: a block of h rows (without residual_out) and of float y rows (quantized).
class OptionBlockScratch {
 public:
  // Allocates (std::bad_alloc on failure, before anything is written).
  explicit OptionBlockScratch(const onorm_request& q);
  int64_t block_rows() const { return block_rows_; }
  void* h() const { return h_.get(); }
  float* y() const { return y_.get(); }

 private:
  int64_t block_rows_ = 1;
  std::unique_ptr<unsigned char[]> h_;
  std::unique_ptr<float[]> y_;
};

// Rows [r0, r1) of a request option_blocks_fit took; opts as for simd_run_rows.
void option_blocks_run(size_t target_index, const onorm_request& q, int64_t r0, int64_t r1, unsigned opts,
                       const OptionBlockScratch& scratch);

}  // namespace cpu
}  // namespace onorm
