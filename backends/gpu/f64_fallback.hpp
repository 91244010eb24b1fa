// The float64 fallback of ops with kF64Fallback (the norms): rows whose float statistics the
// op does not trust (Op::coefs sets ok = false: sums overflowed, var + eps underflowed or
// beyond FLT_MAX, inf / NaN in the row) take the op's own passes again in double
// (Op::pivot, Op::accumulate with core::ops::ScalarMath<double>, Op::state<double>,
// Op::coefs, Op::narrow), as the CPU backend does. Correctness, not speed. Every reduction is
// a fixed tree over a fixed per-thread order: every block that recomputes a row gets the same
// bits.
#pragma once

#include "row_chunk.hpp"

namespace onorm {
namespace gpu {

template <typename Op>
using dsums_t = Vals<double, Op::kSums>;

// Element i of the row the op normalizes: x, or h = round_In(x + residual) (row_options.hpp).
template <typename In>
ONORM_DEV double input0_at(const In* x0, const In* res, int64_t i) {
  const float x = io<In>::load1(x0 + i);
  return static_cast<double>(res ? round_to<In>(x + io<In>::load1(res + i)) : x);
}

// The state of row `row` (n elements; with a residual, of h) in double, read again from global memory by the TPR
// threads that share it (a group of lanes, or the block: TPR == BLOCK) in a fixed order and
// reduced in fixed trees: every placement that recomputes a row gets the same bits. Every
// lane of the warp (TPR <= WARP) or thread of the block (TPR == BLOCK) must call it: callers
// decide warp- or block-uniformly. Its own shared arrays (the callers' scratch is not assumed
// free). Loops not unrolled: few values live. The register kernel inlines it: as a call, the
// values live across it cost its float path registers and spills (ptxas, sm_90a;
// bench/RESULTS.md).
// In place (out == in): register rows and a row held by one block (staged K == 1) are read
// whole before they are written; the two-read schedule takes its coefficients in a launch of
// their own before the finish (row_coefs_kernel); the CUDA cluster kernel holds every block at
// a cluster barrier, and the cooperative staged schedule at a group barrier (coop_barrier),
// until all have read the row.
template <typename R, int WARP, int TPR, int BLOCK>
ONORM_DEV typename R::Op::template State<double> row_state_f64(const typename R::In* x0, const typename R::In1* x1,
                                                              const typename R::In* res, int64_t n, int lane) {
  using Op = typename R::Op;
  constexpr int NI = Op::kInputs;
  __shared__ double red[TPR > WARP ? BLOCK / WARP : 1];
  __shared__ dsums_t<Op> red2[TPR > WARP ? BLOCK / WARP : 1];
  const core::ops::ScalarMath<double> m;
  double r1 = pass1_identity<Op, double>();
  if constexpr (Op::kPass1 != core::ops::Pass1::kNone) {
#pragma unroll 1
    for (int64_t i = lane; i < n; i += TPR) r1 = pass1_fold<Op>(r1, input0_at(x0, res, i));
    if constexpr (kPass1Max<Op>) r1 = row_allreduce<WARP, TPR, BLOCK>(r1, lane, red, MaxOp{});
    else r1 = row_allreduce<WARP, TPR, BLOCK>(r1, lane, red, AddOp{});
  }
  const double p = Op::pivot(r1, n > 0 ? n : 1);
  dsums_t<Op> acc;
#pragma unroll
  for (int q = 0; q < Op::kSums; ++q) acc.v[q] = 0.0;
#pragma unroll 1
  for (int64_t i = lane; i < n; i += TPR) {
    double x[NI];
    x[0] = input0_at(x0, res, i);
    if constexpr (NI > 1) x[1] = static_cast<double>(io<typename R::In1>::load1(x1 + i));
    Op::accumulate(m, acc.v, p, x);
  }
  acc = row_allreduce<WARP, TPR, BLOCK>(acc, lane, red2, AddOp{});
  return Op::template state<double>(n, r1, p, acc.v);
}

// row_state_f64 as a call, for the placements that merge states (staged, cluster, two-read):
// inlined there, it cost the CUDA cluster kernel spills (ptxas, sm_90a). Its arguments by
// value: a reference to the kernel's RowArgs put a copy of them on every thread's stack.
template <typename R, int WARP, int TPR, int BLOCK>
__device__ __noinline__ typename R::Op::template State<double> row_state_f64_call(const typename R::In* x0,
                                                                                  const typename R::In1* x1,
                                                                                  const typename R::In* res,
                                                                                  int64_t n, int lane) {
  return row_state_f64<R, WARP, TPR, BLOCK>(x0, x1, res, n, lane);
}

// row_state_f64 of row `row` of a request, inlined or (kCall) as a call.
template <typename R, int WARP, int TPR, int BLOCK, bool kCall>
ONORM_DEV typename R::Op::template State<double> request_row_state_f64(const RowArgs& a, int64_t row, int64_t n,
                                                                       int lane) {
  const auto* x0 = static_cast<const typename R::In*>(a.in[0]) + row * a.in_stride[0];
  const auto* x1 = static_cast<const typename R::In1*>(a.in[1]) + row * a.in_stride[1];
  const auto* res =
      R::kOptions && a.opt.res ? static_cast<const typename R::In*>(a.opt.res) + row * a.opt.res_stride : nullptr;
  if constexpr (kCall) return row_state_f64_call<R, WARP, TPR, BLOCK>(x0, x1, res, n, lane);
  else return row_state_f64<R, WARP, TPR, BLOCK>(x0, x1, res, n, lane);
}

// Whether any row group of the calling warp needs its row in double (`need`: uniform within a
// group). The double pass is a group's collective, so the decision must be warp-uniform where
// several groups share a warp (TPR < WARP: one vote); one group per warp (TPR == WARP) or per
// block (TPR == BLOCK: every thread holds the row's state) decides uniformly already.
template <int WARP, int TPR>
ONORM_DEV bool groups_need_f64(bool need) {
  if constexpr (TPR < WARP) return shim::warp_ballot(need) != 0;
  else return need;
}

// Whether the op trusts a merged state's float statistics without knowing eps: a partial
// state is finished later with any eps, so a slice's state is trusted only where eps = 0 is.
template <typename Op>
ONORM_DEV bool trusted_at_eps0(const typename Op::Merged& st) {
  const double no_eps[ONORM_REQUEST_PARAMS] = {};
  bool ok;
  (void)Op::coefs(st, Op::params(no_eps), ok);
  return ok;
}

// A row's merged state for the partial states (STATS), again in double from memory where the
// op does not trust it at eps = 0 (every thread of the group calls it; rows of no columns are
// trusted). kCall as for request_row_state_f64.
template <typename R, int WARP, int TPR, int BLOCK, bool kCall>
ONORM_DEV void state_trusted_at_eps0(const RowArgs& a, int64_t row, int64_t n, int lane,
                                     typename R::Op::Merged& st) {
  if constexpr (R::Op::kF64Fallback) {
    const bool ok = n == 0 || trusted_at_eps0<typename R::Op>(st);
    if (!groups_need_f64<WARP, TPR>(!ok)) return;
    const typename R::Op::Merged st64 = request_row_state_f64<R, WARP, TPR, BLOCK, kCall>(a, row, n, lane);
    if (!ok) st = st64;
  }
}

// Register placements: the rows whose float coefficients failed (ok false) get cf again in
// double, the decision warp-uniform (groups_need_f64). Rows that passed keep their float
// coefficients: a row's result does not depend on its neighbours. Returns whether the warp
// took the double path: the caller then loads its values again, so that they are not live
// during the double pass (which would cost the float path registers).
template <typename R, int WARP, int TPR, int BLOCK>
ONORM_DEV bool rows_f64(const RowArgs& a, int64_t row, int n, int lane, const typename R::Op::Params& prm, bool ok,
                        coefs_t<typename R::Op>& cf) {
  using Op = typename R::Op;
  if (!groups_need_f64<WARP, TPR>(!ok)) return false;
  const auto st = request_row_state_f64<R, WARP, TPR, BLOCK, false>(a, row, n, lane);
  if (!ok) {
    bool ok64;
    cf = Op::narrow(Op::coefs(st, prm, ok64));
  }
  return true;
}

// A merging placement's row coefficients in double, read again from memory by the block (every
// thread calls it; row_state_f64 as a call).
template <typename R, int WARP, int BLOCK>
ONORM_DEV coefs_t<typename R::Op> row_coefs_f64(const RowArgs& a, int64_t row, const typename R::Op::Params& prm) {
  bool ok64;
  return R::Op::narrow(
      R::Op::coefs(request_row_state_f64<R, WARP, BLOCK, BLOCK, true>(a, row, a.cols, threadIdx.x), prm, ok64));
}

// The finish coefficients of a row from its merged state `fin`, which must be the same in
// every thread of the block (the decision to read the row again is then block-uniform).
// reread: the row was read again (in-place placements hold their blocks until all have).
template <typename R, int WARP, int BLOCK>
ONORM_DEV coefs_t<typename R::Op> merged_coefs(const RowArgs& a, int64_t row, const typename R::Op::Merged& fin,
                                               bool& reread) {
  using Op = typename R::Op;
  const typename Op::Params prm = Op::params(a.param);
  bool ok;
  const coefs_t<Op> cf = Op::narrow(Op::coefs(fin, prm, ok));
  reread = false;
  if constexpr (Op::kF64Fallback) {
    if (!ok) {
      reread = true;
      return row_coefs_f64<R, WARP, BLOCK>(a, row, prm);
    }
  }
  return cf;
}

}  // namespace gpu
}  // namespace onorm
