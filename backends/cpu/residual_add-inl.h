// The norms' residual add in SIMD: h = round_T(x + residual) a vector at a time, one float add
// rounded once to T (core::residual_add's float case, bit for bit), the bf16 rounding in the
// CPU's instruction where it has one (WithStoreType). The row drivers call it a chunk at a time
// (ResidualSum), simd_add_rows a block of rows at a time. Per target (Highway's -inl.h pattern).

// Per-target include guard (see hwy/examples/skeleton-inl.h).
#if defined(ONORM_CPU_RESIDUAL_ADD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ONORM_CPU_RESIDUAL_ADD_INL_H_
#undef ONORM_CPU_RESIDUAL_ADD_INL_H_
#else
#define ONORM_CPU_RESIDUAL_ADD_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "bf16_cvt-inl.h"
#include "hwy/highway.h"
#include "scalar_rows.hpp"
#include "simd_io-inl.h"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// h[0, n) = round(x + r), elements of T stored as S (T's layout); whole vectors by streaming
// stores where kStream. Each vector of x and r is loaded before its h is stored: h may be x or r.
template <typename T, typename S, bool kStream = false>
HWY_INLINE void AddRow(const T* x, const T* r, S* h, size_t n) {
  const DF d;
  const size_t L = hn::Lanes(d);
  size_t j = 0;
  if constexpr (kStream) {
    // Streaming stores take whole vectors at their own alignment: the elements before the
    // first such address by a partial store.
    const size_t vbytes = L * sizeof(S), addr = reinterpret_cast<uintptr_t>(h);
    if (addr % sizeof(S) == 0) {
      const size_t head = std::min(n, ((vbytes - addr % vbytes) % vbytes) / sizeof(S));
      if (head > 0) StoreTail<S>(d, hn::Add(LoadTail<T>(d, x, head, 0.0f), LoadTail<T>(d, r, head, 0.0f)), h, head);
      for (j = head; j + L <= n; j += L) Io<S>::Stream(d, hn::Add(Io<T>::Load(d, x + j), Io<T>::Load(d, r + j)), h + j);
    }
  }
  for (; j + L <= n; j += L) Io<S>::Store(d, hn::Add(Io<T>::Load(d, x + j), Io<T>::Load(d, r + j)), h + j);
  if (j < n) StoreTail<S>(d, hn::Add(LoadTail<T>(d, x + j, n - j, 0.0f), LoadTail<T>(d, r + j, n - j, 0.0f)), h + j, n - j);
}

// Columns [b, b + n) of row hr of h = round(x + res) of row xr of x and res, all rows of T; h
// stored in the CPU's store type for T (WithStoreType), streamed where kStream.
template <typename T, bool kStream = false>
HWY_INLINE void AddRowColumns(const onorm_rows& x, const onorm_rows& res, const onorm_rows& h, int64_t xr, int64_t hr,
                              int64_t b, size_t n) {
  WithStoreType<T>([&](auto store) {
    using S = typename decltype(store)::type;
    AddRow<T, S, kStream>(static_cast<const T*>(row_of(x, xr)) + b, static_cast<const T*>(row_of(res, xr)) + b,
                          static_cast<S*>(const_cast<void*>(row_of(h, hr))) + b, n);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
