#include "partial_states.hpp"

#include <omp.h>

#include <algorithm>
#include <type_traits>

#include "kernels.hpp"
#include "onlinenorm/core/ops/partial_states.hpp"
#include "request_form.hpp"
#include "scalar_rows.hpp"

namespace onorm {
namespace cpu {
namespace {

namespace ops = core::ops;

template <class Op>
using MergedScalar = typename std::conditional<std::is_same<typename Op::Merged, core::Welford<double>>::value, double,
                                               float>::type;

// The merged state of row r: the SIMD chunk states (the whole-row call's chunks) folded
// pairwise, or the portable kernels' where the SIMD kernels do not take the dtypes. Moments
// whose float sums the norms would not trust are taken again in double.
template <class Op>
typename Op::Merged row_stats(size_t target, const onorm_request& q, int64_t r, unsigned opts, bool simd) {
  using Merged = typename Op::Merged;
  const int64_t cols = q.in[0].cols;
  Merged st;
  if (simd) {
    core::PairwiseFold<Merged> fold;
    for (int64_t k = 0; k * kChunk < cols; ++k) fold.push(simd_chunk_state(Op{}, target, q, r, k, opts));
    st = fold.result();
  } else {
    st = scalar_state_of_row<Op, MergedScalar<Op>>(q, r);
  }
  if constexpr (ops::kMomentsStates<Op>) {
    if (!ops::moments_trusted(st)) st = scalar_state_of_row<Op, double>(q, r);
  }
  return st;
}

template <class Op>
void stats_rows(size_t target, const onorm_request& q, int64_t r0, int64_t r1, unsigned opts) {
  const bool simd = simd_supports(target, q);
  for (int64_t r = r0; r < r1; ++r) {
    const ops::StateRecord<Op> rec =
        q.in[0].cols == 0 ? ops::identity_record<Op>() : ops::record_of(row_stats<Op>(target, q, r, opts, simd));
    ops::put_state_record<Op>(q.state_out, r, rec);
  }
}

// The records of Op as a monoid for merge_parts (the same bytes: the record is its only member).
template <class Op>
struct MergedRecord {
  ops::StateRecord<Op> s;
  static MergedRecord identity() { return MergedRecord{ops::identity_record<Op>()}; }
  static MergedRecord combine(const MergedRecord& a, const MergedRecord& b) {
    return MergedRecord{ops::combine_records<Op>(a.s, b.s)};
  }
};

// The SIMD finish of rows from their records: the coefficients of the merged state, then each
// chunk written as the whole-row call writes it (ops that finish from a kept lift take their
// chunk's own state again: Op::chunk_coefs).
template <class Op>
void finish_rows(size_t target, const onorm_request& q, int64_t r0, int64_t r1, unsigned opts) {
  using Merged = typename Op::Merged;
  const int64_t cols = q.in[0].cols;
  for (int64_t r = r0; r < r1; ++r) {
    bool ok = true;  // the merged state is what there is: no data to take it again from
    const auto c = Op::narrow(
        Op::coefs(ops::op_state<Op, MergedScalar<Op>>(ops::state_record<Op>(q.state_in, r)), Op::params(q.param), ok));
    Op::write_row_outputs(c, q.row_out, r);
    for (int64_t k = 0; k * kChunk < cols; ++k) {
      const Merged chunk = Op::kKeepsLift ? simd_chunk_state(Op{}, target, q, r, k, opts) : Merged::identity();
      simd_write_chunk(Op{}, target, q, r, k, c, chunk, opts);
    }
  }
}

template <typename F>
void over_rows(int64_t rows, int threads, F&& f) {
  const int nt = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, rows)));
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t r0 = rows * t / n, r1 = rows * (t + 1) / n;
    if (r1 > r0) f(r0, r1);
  }
}

}  // namespace

bool simd_finish_fits(size_t target_index, const onorm_request& q) {
  return version1_form(q) && simd_supports(target_index, q);
}

void partial_states_run(size_t target, const onorm_request& q, int threads, unsigned opts) {
  core::ops::visit(q.op, [&](auto op) {
    using Op = decltype(op);
    if constexpr (ops::kPartialStates<Op>) {
      switch (q.stage) {
        case ONORM_STAGE_STATS:
          if constexpr (ops::kStatsRecords<Op>)
            over_rows(q.in[0].rows, threads, [&](int64_t r0, int64_t r1) { stats_rows<Op>(target, q, r0, r1, opts); });
          break;
        case ONORM_STAGE_MERGE:
          static_assert(sizeof(MergedRecord<Op>) == sizeof(ops::StateRecord<Op>), "a record's bytes");
          over_rows(q.state_rows, threads, [&](int64_t r0, int64_t r1) { merge_parts<MergedRecord<Op>>(q, r0, r1); });
          break;
        case ONORM_STAGE_FINISH:
          over_rows(q.in[0].rows, threads, [&](int64_t r0, int64_t r1) { finish_rows<Op>(target, q, r0, r1, opts); });
          break;
        default: break;
      }
    }
  });
}

}  // namespace cpu
}  // namespace onorm
