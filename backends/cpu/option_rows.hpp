// The norms' options on the CPU (API.md, "norms with options"): the residual add h =
// round_H(x + residual) and its store, column vectors of any dtype with offsets (the scale
// weight_offset + gamma), quantized outputs with a dynamic or static scale. Requests beyond
// the version-1 form (src/request_form.hpp) that option_blocks.hpp does not take run here:
// portable code generic over the op, with the tensors read by their run-time dtypes and the
// statistics and finish in double.
#pragma once

#include <cstdint>

#include "backend_interface.h"

namespace onorm {
namespace cpu {

// Runs one validated request on rows [row_begin, row_end).
void option_run_rows(const onorm_request& q, int64_t row_begin, int64_t row_end);

}  // namespace cpu
}  // namespace onorm
