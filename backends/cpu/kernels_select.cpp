// Softmax top-k's scans in SIMD: where the next column that can enter a row's k first lies
// (simd_find_beating), and a short row's candidates (simd_topk_candidates); compiled once per
// Highway target in a translation unit of its own (kernels.cpp says how the tables work).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_select.cpp"  // this file, found through the include path
#include "hwy/foreach_target.h"                  // IWYU pragma: keep

#include <algorithm>
#include <limits>

#include "dispatch-inl.h"
#include "hwy/highway.h"
#include "kernels.hpp"
#include "onlinenorm/core/ops/softmax_topk.hpp"
#include "scalar_rows.hpp"
#include "simd_io-inl.h"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {

// The first column j in [from, cols) of x whose value beats `bar` (not NaN): !(x[j] <= bar), a
// NaN beating everything; cols where none does. Four vectors a test while none beats it.
template <typename T>
int64_t FindBeatingT(const T* x, int64_t from, int64_t cols, float bar) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF vbar = hn::Set(d, bar);
  const auto beats = [&](VF v) { return hn::Or(hn::Gt(v, vbar), hn::IsNaN(v)); };
  int64_t j = from;
  for (; j + 4 * N <= cols; j += 4 * N) {
    const auto m01 = hn::Or(beats(Io<T>::Load(d, x + j)), beats(Io<T>::Load(d, x + j + N)));
    const auto m23 = hn::Or(beats(Io<T>::Load(d, x + j + 2 * N)), beats(Io<T>::Load(d, x + j + 3 * N)));
    if (!hn::AllFalse(d, hn::Or(m01, m23))) break;
  }
  for (; j + N <= cols; j += N) {
    const intptr_t i = hn::FindFirstTrue(d, beats(Io<T>::Load(d, x + j)));
    if (i >= 0) return j + i;
  }
  if (j < cols) {  // lanes past the row: -inf, which beats no bar
    const VF v = LoadTail(d, x + j, static_cast<size_t>(cols - j), -std::numeric_limits<float>::infinity());
    const intptr_t i = hn::FindFirstTrue(d, beats(v));
    if (i >= 0) return j + i;
  }
  return cols;
}

using DU = hn::RebindToUnsigned<DF>;
using VU = hn::Vec<DU>;

// SoftmaxTopk::key of every lane: the value's bits with the sign's order folded in (-0 as +0,
// a NaN the largest key).
HWY_INLINE VU TopkKeys(DF d, VF v) {
  const DU du;
  const VU u = hn::IfThenZeroElse(hn::RebindMask(du, hn::Eq(v, hn::Zero(d))), hn::BitCast(du, v));
  const VU flip = hn::Or(hn::BitCast(du, hn::ShiftRight<31>(hn::BitCast(hn::RebindToSigned<DU>(), u))),
                         hn::Set(du, 0x80000000u));
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), hn::Set(du, 0xffffffffu), hn::Xor(u, flip));
}

// The columns of x that can be among its k first (k <= the lanes), in column order, into out
// (room for cols + 64); returns how many. Lane l's maximum key over columns l, l + N, ... is a
// distinct column for each lane, so k columns have a key at least the k-th largest of the N
// maxima, K0: a column whose key is below K0 has k columns before it in the selection order.
// The candidates are the columns with key >= K0.
template <typename T>
int64_t TopkCandidatesT(const T* x, int64_t cols, int64_t k, int32_t* out) {
  const DF d;
  const DU du;
  const hn::RebindToSigned<DU> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t whole = cols / N * N;
  const size_t tail = static_cast<size_t>(cols - whole);
  const auto keys_at = [&](int64_t j) {
    if (j < whole) return TopkKeys(d, Io<T>::Load(d, x + j));
    // Past the row: key 0, below every column's (the lanes' maxima of columns that exist are
    // then unchanged; a lane with none holds 0, which prunes nothing).
    return hn::IfThenElseZero(hn::FirstN(du, tail), TopkKeys(d, LoadTail(d, x + j, tail, 0.0f)));
  };
  VU m0 = hn::Zero(du), m1 = m0;
  int64_t j = 0;
  for (; j + 2 * N <= whole; j += 2 * N) {
    m0 = hn::Max(m0, keys_at(j));
    m1 = hn::Max(m1, keys_at(j + N));
  }
  for (; j < cols; j += N) m0 = hn::Max(m0, keys_at(j));
  m0 = hn::Max(m0, m1);
  // K0, the k-th largest maximum: the least of those with fewer than k larger ones. above[i]
  // counts the maxima above lane i's, a lane at a time (std::nth_element took twice the time
  // of the rest of the selection).
  HWY_ALIGN uint32_t maxima[hn::MaxLanes(du)];
  hn::Store(m0, du, maxima);
  VU above = hn::Zero(du);
  for (int64_t l = 0; l < N; ++l)
    above = hn::Add(above, hn::IfThenElseZero(hn::Lt(m0, hn::Set(du, maxima[l])), hn::Set(du, 1u)));
  const auto top = hn::Lt(above, hn::Set(du, static_cast<uint32_t>(k)));
  const VU bar = hn::MinOfLanes(du, hn::IfThenElse(top, m0, hn::Set(du, 0xffffffffu)));
  int64_t n = 0;
  const auto lanes = hn::Iota(di, 0);
  for (j = 0; j < cols; j += N) {
    const auto keep = hn::RebindMask(di, hn::Not(hn::Lt(keys_at(j), bar)));
    n += static_cast<int64_t>(hn::CompressBlendedStore(hn::Add(lanes, hn::Set(di, static_cast<int32_t>(j))), keep, di, out + n));
  }
  return n;
}

// The k first of the candidate columns c[0, n) of x (in column order, k <= the lanes), in the
// selection order, into keys and cols; returns min(k, n). Each candidate takes its place in the
// lanes without a branch: the lanes whose key is at least its key stay (an equal key came from
// an earlier column, which goes first), it takes the next lane, the rest move up one and the
// last drops. Empty lanes hold key 0, which no value has.
template <typename T>
int64_t TopkOfCandidatesT(const T* x, const int32_t* c, int64_t n, int64_t k, uint32_t* keys, int64_t* cols) {
  const DU du;
  const size_t N = hn::Lanes(du);
  HWY_ALIGN uint32_t up[hn::MaxLanes(du)];
  for (size_t l = 0; l < N; ++l) up[l] = l > 0 ? static_cast<uint32_t>(l - 1) : 0u;
  const auto one_up = hn::SetTableIndices(du, up);
  VU kv = hn::Zero(du), cv = hn::Zero(du);
  for (int64_t i = 0; i < n; ++i) {
    const VU key = hn::Set(du, core::ops::SoftmaxTopk::key(load_as<float>(x, c[i])));
    const VU col = hn::Set(du, static_cast<uint32_t>(c[i]));
    const size_t place = hn::CountTrue(du, hn::Not(hn::Gt(key, kv)));
    const auto before = hn::FirstN(du, place), upto = hn::FirstN(du, place + 1);
    kv = hn::IfThenElse(before, kv, hn::IfThenElse(upto, key, hn::TableLookupLanes(kv, one_up)));
    cv = hn::IfThenElse(before, cv, hn::IfThenElse(upto, col, hn::TableLookupLanes(cv, one_up)));
  }
  HWY_ALIGN uint32_t kk[hn::MaxLanes(du)], cc[hn::MaxLanes(du)];
  hn::Store(kv, du, kk);
  hn::Store(cv, du, cc);
  const int64_t m = std::min(k, n);
  for (int64_t i = 0; i < m; ++i) keys[i] = kk[i], cols[i] = cc[i];
  return m;
}

// The same for a row of dtype t; -1 where this target has no SIMD loads of t or k is more
// than its lanes.
int64_t TopkOfCandidates(const void* x, onorm_dtype t, const int32_t* c, int64_t n, int64_t k, uint32_t* keys,
                         int64_t* cols) {
  int64_t m = -1;
  if (k > static_cast<int64_t>(hn::Lanes(DU()))) return m;
  WithSimdType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    m = TopkOfCandidatesT(static_cast<const T*>(x), c, n, k, keys, cols);
  });
  return m;
}

// The same for a row of dtype t; -1 where this target has no SIMD loads of t or k is more
// than its lanes.
int64_t TopkCandidates(const void* x, onorm_dtype t, int64_t cols, int64_t k, int32_t* out) {
  int64_t n = -1;
  if (k > static_cast<int64_t>(hn::Lanes(DF()))) return n;
  WithSimdType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    n = TopkCandidatesT(static_cast<const T*>(x), cols, k, out);
  });
  return n;
}

// The same for a row of dtype t; -1 where this target has no SIMD loads of t.
int64_t FindBeating(const void* x, onorm_dtype t, int64_t from, int64_t cols, float bar) {
  int64_t found = -1;
  WithSimdType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    found = FindBeatingT(static_cast<const T*>(x), from, cols, bar);
  });
  return found;
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace onorm {
namespace cpu {

HWY_EXPORT(FindBeating);
HWY_EXPORT(TopkCandidates);
HWY_EXPORT(TopkOfCandidates);

int64_t simd_topk_of_candidates(size_t t, const void* x, onorm_dtype dt, const int32_t* c, int64_t n, int64_t k,
                                uint32_t* keys, int64_t* cols) {
  return HWY_DISPATCH_TABLE(TopkOfCandidates)[t](x, dt, c, n, k, keys, cols);
}

int64_t simd_topk_candidates(size_t t, const void* x, onorm_dtype dt, int64_t cols, int64_t k, int32_t* out) {
  return HWY_DISPATCH_TABLE(TopkCandidates)[t](x, dt, cols, k, out);
}

int64_t simd_find_beating(size_t t, const void* x, onorm_dtype dt, int64_t from, int64_t cols, float bar) {
  return HWY_DISPATCH_TABLE(FindBeating)[t](x, dt, from, cols, bar);
}

}  // namespace cpu
}  // namespace onorm
#endif  // HWY_ONCE
