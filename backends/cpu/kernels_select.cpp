// Softmax top-k's scan in SIMD (simd_find_beating): where the next column that can enter a
// row's k first lies, compiled once per Highway target in a translation unit of its own
// (kernels.cpp says how the tables work).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_select.cpp"  // this file, found through the include path
#include "hwy/foreach_target.h"                  // IWYU pragma: keep

#include <limits>

#include "dispatch-inl.h"
#include "hwy/highway.h"
#include "kernels.hpp"
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

int64_t simd_find_beating(size_t t, const void* x, onorm_dtype dt, int64_t from, int64_t cols, float bar) {
  return HWY_DISPATCH_TABLE(FindBeating)[t](x, dt, from, cols, bar);
}

}  // namespace cpu
}  // namespace onorm
#endif  // HWY_ONCE
