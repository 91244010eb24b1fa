// From a row's merged state to the finish coefficients of the SIMD write pass, for every op:
// Op::coefs (special values included), the float64 fallback where the op asks for it, the
// narrowing to float, and the per-row outputs. Target-independent; inline because it runs once
// per row and short rows feel every nanosecond.
#pragma once

#include <type_traits>

#include "backend_interface.h"
#include "scalar_rows.hpp"

namespace onorm {
namespace cpu {

template <class Op>
using FloatCoefs = typename Op::template Coefs<float>;

// The scalar type of a state (MaxSum<float>: float; Welford<double>: double).
template <typename S>
struct StateScalar;
template <template <typename> class S, typename T>
struct StateScalar<S<T>> {
  using type = T;
};

template <class Op>
inline FloatCoefs<Op> row_coefs(const onorm_request& q, const typename Op::Merged& s, int64_t r) {
  bool ok = true;
  FloatCoefs<Op> c = Op::narrow(Op::coefs(s, Op::params(q.param), ok));
  if constexpr (Op::kF64Fallback) {
    // Statistics the op does not trust (float sums that overflowed or underflowed): the row's
    // statistics again in double, by the op's own passes.
    if (!ok) c = scalar_coefs_f64<Op>(q, r);
  }
  Op::write_row_outputs(c, q.row_out, r);
  return c;
}

// A row of one chunk (sums: its ChunkSums): the coefficients of its float state where the op
// trusts them (the GPU's register rows take the same), else row_coefs of its merge state. A
// norm's merge state is double: its division, square root and scaled narrowing cost a short
// row more than its float ones.
template <class Op, class Sums>
inline FloatCoefs<Op> one_chunk_coefs(const onorm_request& q, const Sums& sums, int64_t r) {
  using T = typename StateScalar<typename Op::Merged>::type;
  if constexpr (!std::is_same<T, float>::value) {
    bool ok = false;
    const FloatCoefs<Op> c = Op::coefs(sums.template state<float>(), Op::params(q.param), ok);
    if (ok) {
      Op::write_row_outputs(c, q.row_out, r);
      return c;
    }
  }
  return row_coefs<Op>(q, sums.merged(), r);
}

}  // namespace cpu
}  // namespace onorm
