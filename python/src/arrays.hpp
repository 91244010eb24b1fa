// DLPack arrays (numpy, torch, any __dlpack__ object) as the C ABI's rows and vectors.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <onlinenorm/onlinenorm.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "context.hpp"

namespace nb = nanobind;

using InArray = nb::ndarray<nb::ro>;  // read-only arrays are taken as inputs
using OutArray = nb::ndarray<>;

// The C ABI's name of a DLPack dtype; TypeError for one it has none for.
onorm_dtype dtype_of(nb::dlpack::dtype dtype, const char* name);

// TypeError unless an array of this DLPack device can be used by the context's backend.
void check_device(const Context& ctx, int device_type, int device_id, const char* name);

// The rows of an array: the last axis holds the columns (stride 1), the leading axes flatten
// into rows with one row stride. ValueError for strides of another form (the C ABI's own checks,
// a row stride below the columns for one, come from the library).
struct RowsLayout {
  int64_t rows, cols, row_stride;
};
RowsLayout rows_layout(size_t ndim, const int64_t* shape, const int64_t* strides, const char* name);

// ValueError unless an array is dense (C order, size-1 axes aside) with count elements.
void check_vector(size_t ndim, const int64_t* shape, const int64_t* strides, int64_t count, const char* name);

template <class Array>
void* data_of(const Array& a) {
  return static_cast<char*>(a.data_handle()) + a.byte_offset();
}

template <class Array>
onorm_rows rows_of(const Context& ctx, const Array& a, const char* name, int dtype_override = -1) {
  check_device(ctx, a.device_type(), a.device_id(), name);
  const RowsLayout layout = rows_layout(a.ndim(), a.shape_ptr(), a.stride_ptr(), name);
  const onorm_dtype dtype = dtype_override >= 0 ? static_cast<onorm_dtype>(dtype_override) : dtype_of(a.dtype(), name);
  return onorm_rows{data_of(a), dtype, layout.rows, layout.cols, layout.row_stride};
}

// gamma and beta (either may be absent) of cols elements: their data and their one dtype (the C
// ABI's param_dtype; fallback when neither is given). TypeError for two dtypes.
onorm_dtype params_of(const Context& ctx, const std::optional<InArray>& gamma, const std::optional<InArray>& beta,
                      int64_t cols, onorm_dtype fallback, const void** gamma_data, const void** beta_data);

// A vector of count elements (gamma, beta, mean, rstd, ...): its data and dtype.
template <class Array>
void* vector_of(const Context& ctx, const Array& a, int64_t count, const char* name, onorm_dtype* dtype) {
  check_device(ctx, a.device_type(), a.device_id(), name);
  check_vector(a.ndim(), a.shape_ptr(), a.stride_ptr(), count, name);
  *dtype = dtype_of(a.dtype(), name);
  return data_of(a);
}

// A vector of count float32 (mean, rstd, y_scale, dgamma, dbeta); TypeError for another dtype.
template <class Array>
float* floats_of(const Context& ctx, const Array& a, int64_t count, const char* name) {
  onorm_dtype dtype;
  void* data = vector_of(ctx, a, count, name, &dtype);
  if (dtype != ONORM_F32) throw nb::type_error((std::string(name) + ": must be float32").c_str());
  return static_cast<float*>(data);
}

// A dense vector of count int64 (targets, top-k indices); TypeError for another dtype.
template <class Array>
int64_t* int64s_of(const Context& ctx, const Array& a, int64_t count, const char* name) {
  check_device(ctx, a.device_type(), a.device_id(), name);
  check_vector(a.ndim(), a.shape_ptr(), a.stride_ptr(), count, name);
  const nb::dlpack::dtype d = a.dtype();
  if (d.code != static_cast<uint8_t>(nb::dlpack::dtype_code::Int) || d.bits != 64 || d.lanes != 1)
    throw nb::type_error((std::string(name) + ": must be int64").c_str());
  return static_cast<int64_t*>(data_of(a));
}

// The partial row states of rows rows, passed as their memory: onorm_softmax_state as 2 float32
// per row, onorm_moments_state as 3 float64 per row (count's int64 bits in the first).
template <class State, class Array>
State* states_of(const Context& ctx, const Array& a, int64_t rows, const char* name) {
  static_assert(sizeof(State) % 4 == 0, "a state is whole words");
  constexpr bool softmax = std::is_same_v<State, onorm_softmax_state>;
  constexpr int64_t words = softmax ? 2 : 3;
  onorm_dtype dtype;
  void* data = vector_of(ctx, a, rows * words, name, &dtype);
  if (dtype != (softmax ? ONORM_F32 : ONORM_F64))
    throw nb::type_error((std::string(name) + (softmax ? ": softmax states must be float32 (max, sum_exp)"
                                                       : ": moments states must be float64 (count bits, mean, m2)"))
                             .c_str());
  return static_cast<State*>(data);
}

