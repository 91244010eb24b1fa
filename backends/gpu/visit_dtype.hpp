// f(type_tag<T>{}) for the element type T of a GPU input dtype (f32, f16, bf16): the one
// switch from a request's run-time dtype to the kernels' template argument, shared by the
// planners (row_plan.hpp, cross_entropy_plan.hpp, softmax_topk_plan.hpp).
#pragma once

#include <cstddef>
#include <cstdio>

#include "backend_interface.h"
#include "dtype_io.hpp"

namespace onorm {
namespace gpu {

template <typename T>
struct type_tag {
  using type = T;
};

// f(type_tag<T>{}) for the element type of a GPU dtype (f32, f16, bf16), or unsupported.
template <typename F>
onorm_status visit_dtype(int dtype, F&& f, char* err, size_t err_len) {
  switch (dtype) {
    case kF32: return f(type_tag<float>{});
    case kF16: return f(type_tag<core::f16_bits>{});
    case kBF16: return f(type_tag<core::bf16_bits>{});
    default:
      if (err && err_len) std::snprintf(err, err_len, "gpu: input dtype %d is not supported", dtype);
      return ONORM_ERROR_UNSUPPORTED;
  }
}

}  // namespace gpu
}  // namespace onorm
