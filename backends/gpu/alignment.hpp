// A GPU reads and writes an element at an address aligned to its size: a tensor that is not
// (an f32 row at an odd address, which the CPU backend takes) is refused with
// ONORM_ERROR_UNSUPPORTED before anything runs, since a misaligned access would end the
// process's device context. Shared by CUDA and HIP.
#pragma once

#include <cstdint>
#include <cstdio>

#include "backend_interface.h"
#include "row_args.hpp"

namespace onorm {
namespace gpu {

inline onorm_status check_alignment(const onorm_request& q, char* err, size_t err_len) {
  auto size_of = [](onorm_dtype t) { return static_cast<uintptr_t>(dtype_size(t)); };
  auto refuse = [&](const char* what, int k, uintptr_t size) {
    if (err && err_len)
      std::snprintf(err, err_len, "gpu: %s %d is not aligned to its element size (%u bytes); GPUs cannot access it",
                    what, k, static_cast<unsigned>(size));
    return ONORM_ERROR_UNSUPPORTED;
  };
  auto off = [](const void* p, uintptr_t size) { return reinterpret_cast<uintptr_t>(p) % size != 0; };
  for (int k = 0; k < q.inputs; ++k)
    if (off(q.in[k].data, size_of(q.in[k].dtype))) return refuse("input", k, size_of(q.in[k].dtype));
  for (int k = 0; k < q.outputs; ++k)
    if (off(q.out[k].data, size_of(q.out[k].dtype))) return refuse("output", k, size_of(q.out[k].dtype));
  for (int k = 0; k < ONORM_REQUEST_COLS; ++k)
    if (q.col[k] && off(q.col[k], size_of(q.col_dtype))) return refuse("parameter vector", k, size_of(q.col_dtype));
  for (int k = 0; k < ONORM_REQUEST_ROW_OUTS; ++k)
    if (off(q.row_out[k], 4)) return refuse("row statistic", k, 4);
  for (int k = 0; k < ONORM_REQUEST_ROW_INS; ++k)
    if (off(q.row_in[k], 4)) return refuse("row statistic input", k, 4);
  for (int k = 0; k < ONORM_REQUEST_COL_OUTS; ++k)
    if (off(q.col_out[k], 4)) return refuse("column sum", k, 4);
  if (off(q.y_scale, 4)) return refuse("y_scale", 0, 4);
  // Partial states (the moments and cross-entropy's hold doubles), cross-entropy's targets,
  // top-k's indices.
  const uintptr_t state_size =
      q.op == ONORM_OP_LAYER_NORM || q.op == ONORM_OP_RMS_NORM || q.op == ONORM_OP_CROSS_ENTROPY ? 8 : 4;
  if (off(q.state_in, state_size)) return refuse("state input", 0, state_size);
  if (off(q.state_out, state_size)) return refuse("state output", 0, state_size);
  if (off(q.targets, 8)) return refuse("targets", 0, 8);
  if (off(q.indices, 8)) return refuse("indices", 0, 8);
  return ONORM_OK;
}

}  // namespace gpu
}  // namespace onorm
