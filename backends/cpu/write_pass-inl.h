// The write pass of a range of one row, generic over the op (core/ops/row_op.hpp): every
// element y = Op::finish(m, coefs, x, cols), or Op::finish_kept(m, coefs, kept, cols) from the
// lift kept in pass 2; column vectors absent from the request load as Op::col_default.
// Streaming stores where asked, software prefetch of the input ahead. Per target (Highway's
// -inl.h pattern).

// Per-target include guard (see hwy/examples/skeleton-inl.h).
#if defined(ONORM_CPU_WRITE_PASS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ONORM_CPU_WRITE_PASS_INL_H_
#undef ONORM_CPU_WRITE_PASS_INL_H_
#else
#define ONORM_CPU_WRITE_PASS_INL_H_
#endif

#include <type_traits>

#include "chunk_passes-inl.h"
#include "hwy/highway.h"
#include "row_coefs.hpp"
#include "simd_io-inl.h"
#include "simd_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// What a range is written from: the inputs (x[k] at the range's start) or the kept lift, and
// the column vectors (col[c] at the range's start; those not in kColMask are not read).
template <typename In>
struct WriteSources {
  const In* const* x;
  const float* kept;
  const In* const* col;
};

// y[i] for i in [0, n). kKept: from the kept lift; kColMask: the column vectors present.
// pf: the address prefetched beside element 0 (WritePrefetch), advancing as the input does;
// 0: none.
template <class Op, bool kKept, unsigned kColMask, typename In, typename Out>
HWY_INLINE void WriteRange(DF d, const FloatCoefs<Op>& c, const WriteSources<In>& src, Out* y, size_t n,
                           unsigned opts, uintptr_t pf) {
  constexpr int kCols = Op::kCols > 0 ? Op::kCols : 1;
  const SimdMathFor<Out> m{d};
  const bool stream = (opts & kOptStream) != 0;
  const size_t N = hn::Lanes(d);
  VF defaults[kCols];
  for (int k = 0; k < kCols; ++k) defaults[k] = hn::Set(d, Op::col_default(k));
  // The pointers in locals (registers): read through `src`, every vector store to y
  // (may_alias) would make the compiler load them again.
  const In* x[Op::kInputs];
  const In* col[kCols];
  const float* kept = src.kept;
  for (int k = 0; k < Op::kInputs; ++k) x[k] = kKept ? nullptr : src.x[k];
  for (int k = 0; k < kCols; ++k) col[k] = k < Op::kCols && ((kColMask >> k) & 1u) ? src.col[k] : nullptr;
  // kPartial: count < N elements, through LoadTail. The lambdas are flattened themselves: GCC
  // may otherwise leave the math policy's calls out of line in them (they are inlined into
  // the driver, whose own flatten does not always reach that far).
  auto compute = [=](size_t at, size_t count, auto partial) HWY_FLATTEN {
    constexpr bool kPartial = decltype(partial)::value;
    VF cv[kCols];
    for (int k = 0; k < Op::kCols; ++k) {
      if (!((kColMask >> k) & 1u)) cv[k] = defaults[k];
      else if (kPartial) cv[k] = LoadTail(d, col[k] + at, count, Op::col_default(k));
      else cv[k] = Io<In>::Load(d, col[k] + at);
    }
    if constexpr (kKept) {
      const VF e = kPartial ? LoadTail(d, kept + at, count, 0.0f) : hn::LoadU(d, kept + at);
      return Op::finish_kept(m, c, e, cv);
    } else {
      VF xv[Op::kInputs];
      if (kPartial) LoadInputsTail<Op>(d, x, at, count, 0.0f, xv);
      else LoadInputs<Op>(d, x, at, xv);
      return Op::finish(m, c, xv, cv);
    }
  };
  // Pairs of bf16 inputs and outputs: each input's 2 * N elements in one load, computed as the
  // even- and the odd-indexed ones and stored back in order (Io::LoadEvenOdd, Store2EvenOdd):
  // the same arithmetic per element as compute, with half the conversion work on the loads.
  constexpr bool kEvenOdd = !kKept && Io<Out>::kPaired && std::is_same<In, core::bf16_bits>::value;
  auto compute_even_odd = [=](size_t at, VF& even, VF& odd) HWY_FLATTEN {
    if constexpr (kEvenOdd) {
      VF ce[kCols], co[kCols], xe[Op::kInputs], xo[Op::kInputs];
      for (int k = 0; k < Op::kCols; ++k) {
        if (!((kColMask >> k) & 1u)) ce[k] = co[k] = defaults[k];
        else Io<In>::LoadEvenOdd(d, col[k] + at, ce[k], co[k]);
      }
      for (int k = 0; k < Op::kInputs; ++k) Io<In>::LoadEvenOdd(d, x[k] + at, xe[k], xo[k]);
      even = Op::finish(m, c, xe, ce);
      odd = Op::finish(m, c, xo, co);
    }
  };
  const std::true_type partial;
  const std::false_type full;
  // Two vectors from `at` through Io<Out>'s paired store (kStreamed: the streaming one).
  auto write_pair = [&](size_t at, auto streamed) HWY_FLATTEN {
    constexpr bool kStreamed = decltype(streamed)::value;
    if (pf) PrefetchBytes(pf + at * sizeof(In), 2 * N * sizeof(In));
    if constexpr (kEvenOdd) {
      VF even, odd;
      compute_even_odd(at, even, odd);
      if constexpr (kStreamed) Io<Out>::Stream2EvenOdd(d, even, odd, y + at);
      else Io<Out>::Store2EvenOdd(d, even, odd, y + at);
    } else {
      const VF a = compute(at, N, full), b = compute(at + N, N, full);
      if constexpr (kStreamed) Io<Out>::Stream2(d, a, b, y + at);
      else Io<Out>::Store2(d, a, b, y + at);
    }
  };
  size_t i = 0;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(y);
  // Pairs of vectors only where the store gains from them (Io<Out>::kPaired): elsewhere the
  // single-vector loop, which GCC flattens completely.
  constexpr size_t kStep = Io<Out>::kPaired ? 2 : 1;
  if (kCanStream && stream && addr % sizeof(Out) == 0) {
    // The streamed part starts at a multiple of a step's bytes (Io::Stream2's alignment).
    const size_t vbytes = kStep * N * sizeof(Out);
    size_t head = ((vbytes - addr % vbytes) % vbytes) / sizeof(Out);
    if (head > n) head = n;
    for (; i + N <= head; i += N) Io<Out>::Store(d, compute(i, N, full), y + i);
    if (i < head) StoreTail(d, compute(i, head - i, partial), y + i, head - i);
    i = head;
    if constexpr (Io<Out>::kPaired) {
      for (; i + 2 * N <= n; i += 2 * N) write_pair(i, std::true_type());
    } else {
      for (; i + N <= n; i += N) {
        if (pf) PrefetchBytes(pf + i * sizeof(In), N * sizeof(In));
        Io<Out>::Stream(d, compute(i, N, full), y + i);
      }
    }
  }
  if constexpr (Io<Out>::kPaired) {
    for (; i + 2 * N <= n; i += 2 * N) write_pair(i, std::false_type());
  }
  for (; i + N <= n; i += N) {
    if (pf) PrefetchBytes(pf + i * sizeof(In), N * sizeof(In));
    Io<Out>::Store(d, compute(i, N, full), y + i);
  }
  if (i < n) StoreTail(d, compute(i, n - i, partial), y + i, n - i);
}

// Where the write pass of a range whose input starts at x0 prefetches (WriteRange's pf): the
// next row's same columns with kOptNextRow, else one chunk ahead; 0 without kOptPrefetch.
// Address arithmetic only: past the end of the data it is harmless.
template <typename In>
HWY_INLINE uintptr_t WritePrefetch(const onorm_request& q, const In* x0, unsigned opts) {
  if (!(opts & kOptPrefetch)) return 0;
  const int64_t ahead = (opts & kOptNextRow) ? q.in[0].row_stride : kChunk;
  return reinterpret_cast<uintptr_t>(x0) + static_cast<uintptr_t>(ahead) * sizeof(In);
}

// WriteRange for the column vectors present (a run-time mask of up to Op::kCols bits).
template <class Op, bool kKept, unsigned kColMask = 0, typename In, typename Out>
HWY_INLINE void WriteRangeCols(unsigned mask, DF d, const FloatCoefs<Op>& c, const WriteSources<In>& src, Out* y,
                               size_t n, unsigned opts, uintptr_t pf) {
  if constexpr (kColMask + 1 < (1u << Op::kCols)) {
    if (mask != kColMask) return WriteRangeCols<Op, kKept, kColMask + 1>(mask, d, c, src, y, n, opts, pf);
  }
  WriteRange<Op, kKept, kColMask>(d, c, src, y, n, opts, pf);
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
