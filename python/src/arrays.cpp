#include "arrays.hpp"

#include <string>

namespace {

// DLPack device types (dlpack.h).
constexpr int kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLROCM = 10, kDLCUDAManaged = 13;

std::string with_name(const char* name, const std::string& what) { return std::string(name) + ": " + what; }

}  // namespace

onorm_dtype dtype_of(nb::dlpack::dtype dtype, const char* name) {
  using code = nb::dlpack::dtype_code;
  if (dtype.lanes == 1) {
    const auto c = static_cast<code>(dtype.code);
    if (c == code::Float && dtype.bits == 32) return ONORM_F32;
    if (c == code::Float && dtype.bits == 16) return ONORM_F16;
    if (c == code::Float && dtype.bits == 64) return ONORM_F64;
    if (c == code::Bfloat && dtype.bits == 16) return ONORM_BF16;
    if (c == code::Float8_E4M3FN && dtype.bits == 8) return ONORM_F8_E4M3;
    if (c == code::Int && dtype.bits == 8) return ONORM_I8;
  }
  throw nb::type_error(with_name(name, "dtype (DLPack code " + std::to_string(dtype.code) + ", " +
                                           std::to_string(dtype.bits) + " bits) is none of float32, float16, "
                                           "bfloat16, float64 (and int8, float8_e4m3fn for quantized outputs)")
                           .c_str());
}

void check_device(const Context& ctx, int device_type, int device_id, const char* name) {
  bool ok = false;
  switch (ctx.kind) {
    case ONORM_BACKEND_CPU: ok = device_type == kDLCPU || device_type == kDLCUDAHost; break;
    case ONORM_BACKEND_CUDA: ok = (device_type == kDLCUDA || device_type == kDLCUDAManaged) && device_id == ctx.device; break;
    case ONORM_BACKEND_HIP: ok = (device_type == kDLROCM || device_type == kDLCUDA) && device_id == ctx.device; break;
    default: break;
  }
  if (!ok)
    throw nb::type_error(with_name(name, "lives on DLPack device (" + std::to_string(device_type) + ", " +
                                             std::to_string(device_id) + "), which the context's backend " +
                                             onorm_backend_name(ctx.handle) + " cannot use (no implicit copies)")
                             .c_str());
}

RowsLayout rows_layout(size_t ndim, const int64_t* shape, const int64_t* strides, const char* name) {
  if (ndim == 0) throw nb::value_error(with_name(name, "needs at least one axis (the row)").c_str());
  RowsLayout layout{1, shape[ndim - 1], shape[ndim - 1]};
  // An empty array has no data to lay out (numpy gives it zero strides).
  for (size_t i = 0; i < ndim; ++i) {
    if (shape[i] == 0) {
      for (size_t j = 0; j + 1 < ndim; ++j) layout.rows *= shape[j];
      return layout;
    }
  }
  if (layout.cols > 1 && strides[ndim - 1] != 1)
    throw nb::value_error(with_name(name, "the last axis must be contiguous (stride 1, got " +
                                              std::to_string(strides[ndim - 1]) +
                                              " elements); make a contiguous copy first")
                              .c_str());
  // The row stride is that of the innermost leading axis longer than 1; each axis further out
  // must step over whole blocks of the axes inside it.
  bool have_stride = false;
  int64_t block = 1;  // rows spanned by one step of the current axis
  for (size_t i = ndim - 1; i-- > 0;) {
    layout.rows *= shape[i];
    if (shape[i] == 1) continue;
    if (!have_stride) {
      layout.row_stride = strides[i];
      have_stride = true;
    } else if (strides[i] != layout.row_stride * block) {
      throw nb::value_error(with_name(name, "the leading axes do not flatten into rows of one stride (axis " +
                                                std::to_string(i) + " has stride " + std::to_string(strides[i]) +
                                                ", rows need " + std::to_string(layout.row_stride * block) +
                                                "); make a contiguous copy first")
                                .c_str());
    }
    block *= shape[i];
  }
  return layout;
}

void check_vector(size_t ndim, const int64_t* shape, const int64_t* strides, int64_t count, const char* name) {
  int64_t size = 1, expected_stride = 1;
  bool dense = true;
  for (size_t i = ndim; i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expected_stride) dense = false;
    expected_stride *= shape[i];
    size *= shape[i];
  }
  if (size != count)
    throw nb::value_error(
        with_name(name, "has " + std::to_string(size) + " elements, needs " + std::to_string(count)).c_str());
  if (!dense) throw nb::value_error(with_name(name, "must be contiguous").c_str());
}

// gamma and beta share one dtype (the C ABI's param_dtype).
onorm_dtype params_of(const Context& ctx, const std::optional<InArray>& gamma, const std::optional<InArray>& beta,
                      int64_t cols, onorm_dtype fallback, const void** gamma_data, const void** beta_data) {
  onorm_dtype dtype = fallback, beta_dtype = fallback;
  *gamma_data = gamma ? vector_of(ctx, *gamma, cols, "gamma", &dtype) : nullptr;
  *beta_data = beta ? vector_of(ctx, *beta, cols, "beta", &beta_dtype) : nullptr;
  if (gamma && beta && dtype != beta_dtype) throw nb::type_error("gamma and beta must have one dtype");
  return beta && !gamma ? beta_dtype : dtype;
}
