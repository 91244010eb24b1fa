// The portable row kernels of the CPU backend: plain C++ generic over the op
// (core/ops/row_op.hpp) with core::ops::ScalarMath. They serve the dtype combinations the SIMD
// kernels do not take (f64; f16 without F16C; softmax backward's y and dy of two dtypes), the
// float64 fallback of ops that ask for it, and (option_rows.cpp) the norms' options. Rows are
// cut into fixed chunks whose states merge pairwise, so accuracy holds at 2^24+ columns and the
// result does not depend on the thread count.
#pragma once

#include <cstring>
#include <type_traits>

#include "backend_interface.h"
#include "onlinenorm/core/element.hpp"
#include "onlinenorm/core/ops/dispatch.hpp"
#include "onlinenorm/core/ops/partial_states.hpp"
#include "onlinenorm/core/pairwise.hpp"
#include "onlinenorm/core/residual.hpp"
#include "validate.hpp"

namespace onorm {
namespace cpu {

// Short chunks: plain sums over 256 elements stay well inside the accuracy bounds.
constexpr int64_t kScalarChunk = 256;

// Element i of p as Acc, and a store of v to it. Through memcpy: the API takes rows at any
// address, so an f64 element need not be 8-byte aligned.
template <typename Acc, typename In>
inline Acc load_as(const In* p, int64_t i) {
  In v;
  std::memcpy(&v, reinterpret_cast<const char*>(p) + i * static_cast<int64_t>(sizeof(In)), sizeof(In));
  return static_cast<Acc>(core::element<In>::load(v));
}
template <typename Out>
inline void store_as(Out* p, int64_t i, double v) {
  const Out e = core::store_from_double<Out>(v);
  std::memcpy(reinterpret_cast<char*>(p) + i * static_cast<int64_t>(sizeof(Out)), &e, sizeof(Out));
}

// The row tensors an op reads, of one row: in[0] of In0 and (two-input ops) in[1] of In1.
template <typename In0, typename In1>
struct ScalarInputs {
  const In0* x0;
  const In1* x1;
  template <class Op, typename Acc>
  void at(int64_t c, Acc* v) const {
    v[0] = load_as<Acc>(x0, c);
    if constexpr (Op::kInputs > 1) v[1] = load_as<Acc>(x1, c);
  }
  // in[0] alone (pass 1).
  template <typename Acc>
  Acc first(int64_t c) const {
    return load_as<Acc>(x0, c);
  }
};

// The op's state of one row in Acc: per fixed chunk the op's pass 1, pivot, pass 2 and state,
// the chunk states merged in the fixed pairwise tree as they arrive (no allocation). X is a
// row's inputs: at<Op, Acc>(c, v) every input of column c, first<Acc>(c) in[0] alone.
template <class Op, typename Acc, typename X>
typename Op::template State<Acc> scalar_row_state(const X& x, int64_t cols) {
  using State = typename Op::template State<Acc>;
  const core::ops::ScalarMath<Acc> m;
  core::PairwiseFold<State> fold;
  Acc v[Op::kInputs];
  for (int64_t b = 0; b < cols; b += kScalarChunk) {
    const int64_t e = b + kScalarChunk < cols ? b + kScalarChunk : cols;
    Acc r1 = Acc(0);
    if constexpr (Op::kPass1 == core::ops::Pass1::kMax) {
      r1 = core::neg_infinity<Acc>();
      for (int64_t c = b; c < e; ++c) r1 = core::nan_max(r1, x.template first<Acc>(c));
    } else if constexpr (Op::kPass1 == core::ops::Pass1::kSum) {
      for (int64_t c = b; c < e; ++c) r1 += x.template first<Acc>(c);
    }
    const Acc p = Op::pivot(r1, e - b);
    Acc acc[Op::kSums] = {};
    for (int64_t c = b; c < e; ++c) {
      x.template at<Op, Acc>(c, v);
      Op::accumulate(m, acc, p, v);
    }
    fold.push(Op::template state<Acc>(e - b, r1, p, acc));
  }
  return fold.result();
}

template <typename T>
struct TypeTag {
  using type = T;
};

// f(TypeTag<T>{}) for the storage type of a dtype (validated before: no other dtype arrives).
template <typename F>
inline void with_dtype(onorm_dtype t, F&& f) {
  switch (t) {
    case ONORM_F32: return f(TypeTag<float>{});
    case ONORM_F16: return f(TypeTag<core::f16_bits>{});
    case ONORM_BF16: return f(TypeTag<core::bf16_bits>{});
    case ONORM_F64: return f(TypeTag<double>{});
    default: return;
  }
}

// Element i of a row of run-time dtype t (any address, as load_as), and a store of v (a value of
// one of the float dtypes) rounded once to t.
inline double load_at(const void* p, onorm_dtype t, int64_t i) {
  double v = 0;
  with_dtype(t, [&](auto tag) { v = load_as<double>(static_cast<const typename decltype(tag)::type*>(p), i); });
  return v;
}
inline void store_at(void* p, onorm_dtype t, int64_t i, double v) {
  with_dtype(t, [&](auto tag) { store_as(static_cast<typename decltype(tag)::type*>(p), i, v); });
}

// Element i of h = core::residual_add of x (dtype xt) and the residual r (dtype rt), rounded
// once to ht: the norms' portable residual add.
inline double residual_at(const void* x, onorm_dtype xt, const void* r, onorm_dtype rt, onorm_dtype ht, int64_t i) {
  const double a = load_at(x, xt, i), b = load_at(r, rt, i);
  double h = a;
  with_dtype(ht, [&](auto tag) {
    h = core::residual_add<typename decltype(tag)::type>(a, b, xt == ONORM_F64 || rt == ONORM_F64);
  });
  return h;
}

// Row r of a row tensor.
inline const void* row_of(const onorm_rows& t, int64_t r) {
  return static_cast<const char*>(t.data) + r * t.row_stride * static_cast<int64_t>(dtype_size(t.dtype));
}

// f(in[0]'s tag, in[1]'s tag); single-input ops get in[0]'s tag twice.
template <class Op, typename F>
inline void with_input_types(const onorm_request& q, F&& f) {
  with_dtype(q.in[0].dtype, [&](auto t0) {
    if constexpr (Op::kInputs > 1) with_dtype(q.in[1].dtype, [&](auto t1) { f(t0, t1); });
    else f(t0, t0);
  });
}

// The op's state of row r of q in Acc by the portable passes (every input read by its dtype).
template <class Op, typename Acc>
typename Op::template State<Acc> scalar_state_of_row(const onorm_request& q, int64_t r) {
  typename Op::template State<Acc> st{};
  with_input_types<Op>(q, [&](auto t0, auto t1) {
    using In0 = typename decltype(t0)::type;
    using In1 = typename decltype(t1)::type;
    const In0* x0 = static_cast<const In0*>(row_of(q.in[0], r));
    const In1* x1 = Op::kInputs > 1 ? static_cast<const In1*>(row_of(q.in[1], r)) : nullptr;
    st = scalar_row_state<Op, Acc>(ScalarInputs<In0, In1>{x0, x1}, q.in[0].cols);
  });
  return st;
}

// The state a row finishes from: its own (scalar_row_state over x), or, for a finish from
// partial states (API.md), the merged record the request gives for row r.
template <class Op, typename Acc, typename X>
typename Op::template State<Acc> row_state(const onorm_request& q, const X& x, int64_t r) {
  if constexpr (core::ops::kPartialStates<Op>) {
    if (q.stage == ONORM_STAGE_FINISH) return core::ops::op_state<Op, Acc>(core::ops::state_record<Op>(q.state_in, r));
  }
  return scalar_row_state<Op, Acc>(x, q.in[0].cols);
}

// The coefficients of row r from its statistics taken in double (every input read again), for
// rows whose float statistics the op does not trust (Op::kF64Fallback).
template <class Op>
typename Op::template Coefs<float> scalar_coefs_f64(const onorm_request& q, int64_t r);
// The same coefficients before their narrowing to float.
template <class Op>
typename Op::template Coefs<double> scalar_coefs_double(const onorm_request& q, int64_t r);

// Runs one validated request on rows [row_begin, row_end) with the scalar kernels.
void scalar_run_rows(const onorm_request& q, int64_t row_begin, int64_t row_end);

// The norms' residual add (core/residual.hpp) of rows [r0, r0 + n) of x and res into rows
// [h0, h0 + n) of h, each of any float dtype: the portable loop.
void scalar_add_rows(const onorm_rows& x, const onorm_rows& res, const onorm_rows& h, int64_t r0, int64_t h0,
                     int64_t n);

}  // namespace cpu
}  // namespace onorm
