// Partial row states (API.md, "partial row states"): the API's state records as the ops' own
// states and back. A softmax state is MaxSum (softmax and log-softmax); a moments state is
// Welford's (count, mean, M2), which LayerNorm takes as it is and RMSNorm as its sum of squares,
// M2 + count * mean^2. Host and device alike.
#pragma once

#include <string.h>

#include <type_traits>

#include "onlinenorm/core/moments.hpp"
#include "onlinenorm/core/ops/layer_norm.hpp"
#include "onlinenorm/core/ops/rms_norm.hpp"
#include "onlinenorm/core/ops/softmax.hpp"

namespace onorm {
namespace core {
namespace ops {

// The layouts of onorm_softmax_state and onorm_moments_state (include/onlinenorm/onlinenorm.h).
struct SoftmaxStateRecord {
  float max, sum_exp;
};
struct MomentsStateRecord {
  int64_t count;
  double mean, m2;
};

template <class Op>
constexpr bool kSoftmaxStates = std::is_base_of<SoftmaxStatistics, Op>::value;
template <class Op>
constexpr bool kMomentsStates = std::is_same<Op, LayerNorm>::value || std::is_same<Op, RmsNorm>::value;
// Ops with partial row states: a stats call writes Op::Merged's record, a finish reads one.
template <class Op>
constexpr bool kPartialStates = kSoftmaxStates<Op> || kMomentsStates<Op>;

// Ops whose merged state is a record (a stats call of the norms' moments is LayerNorm's).
template <class Op>
constexpr bool kStatsRecords = kSoftmaxStates<Op> || std::is_same<Op, LayerNorm>::value;

template <class Op>
using StateRecord = typename std::conditional<kSoftmaxStates<Op>, SoftmaxStateRecord, MomentsStateRecord>::type;

// Record r of an array of them (any alignment: through memcpy).
template <class Op>
ONORM_HD_INLINE StateRecord<Op> state_record(const void* records, int64_t r) {
  StateRecord<Op> s;
  memcpy(&s, static_cast<const char*>(records) + r * static_cast<int64_t>(sizeof s), sizeof s);
  return s;
}
template <class Op>
ONORM_HD_INLINE void put_state_record(void* records, int64_t r, const StateRecord<Op>& s) {
  memcpy(static_cast<char*>(records) + r * static_cast<int64_t>(sizeof s), &s, sizeof s);
}

// The op's state in T from a record.
template <class Op, typename T>
ONORM_HD_INLINE auto op_state(const StateRecord<Op>& s) {
  if constexpr (kSoftmaxStates<Op>) {
    return MaxSum<T>::of(static_cast<T>(s.max), static_cast<T>(s.sum_exp));
  } else if constexpr (std::is_same<Op, LayerNorm>::value) {
    return Welford<T>::of(s.count, static_cast<T>(s.mean), static_cast<T>(s.m2));
  } else {
    const SumSq<double> sq = sum_sq_of_moments(Welford<double>::of(s.count, s.mean, s.m2));
    return SumSq<T>::of(sq.n, static_cast<T>(sq.s));
  }
}

// The record of a softmax state (MaxSum) or of moments (Welford in double).
template <typename T>
ONORM_HD_INLINE SoftmaxStateRecord record_of(const MaxSum<T>& s) {
  return SoftmaxStateRecord{static_cast<float>(s.m), static_cast<float>(s.d)};
}
ONORM_HD_INLINE MomentsStateRecord record_of(const Welford<double>& w) { return MomentsStateRecord{w.n, w.mean, w.m2}; }

// The identity record (a slice of no columns).
template <class Op>
ONORM_HD_INLINE StateRecord<Op> identity_record() {
  if constexpr (kSoftmaxStates<Op>) return record_of(MaxSum<float>::identity());
  else return record_of(Welford<double>::identity());
}

// The merge of two records, in the algebra's combine (Welford's in double).
template <class Op>
ONORM_HD_INLINE StateRecord<Op> combine_records(const StateRecord<Op>& a, const StateRecord<Op>& b) {
  if constexpr (kSoftmaxStates<Op>) {
    return record_of(MaxSum<float>::combine(op_state<Op, float>(a), op_state<Op, float>(b)));
  } else {
    return record_of(Welford<double>::combine(Welford<double>::of(a.count, a.mean, a.m2),
                                              Welford<double>::of(b.count, b.mean, b.m2)));
  }
}

// Whether a slice's merged float-summed moments can be trusted for its finish: the same rule
// as LayerNorm's double statistics with eps = 0 (sums finite, variance above the floor where
// squares underflow); otherwise a backend takes them again in double from the data.
ONORM_HD_INLINE bool moments_trusted(const Welford<double>& w) {
  return norm_double_stats_ok(w.m2 + w.mean, w.variance());
}

}  // namespace ops
}  // namespace core
}  // namespace onorm
