// The passes over one chunk (n <= kChunk elements, in L1 after the first pass), generic over
// the op (core/ops/row_op.hpp): pass 1 (the op's kPass1 on in[0]), the pivot, pass 2 (the op's
// accumulate in four independent accumulator chains, keeping the lift where asked), and the
// chunk's state. Every input is of one storage type In. Per target (Highway's -inl.h pattern).

// Per-target include guard (see hwy/examples/skeleton-inl.h).
#if defined(ONORM_CPU_CHUNK_PASSES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ONORM_CPU_CHUNK_PASSES_INL_H_
#undef ONORM_CPU_CHUNK_PASSES_INL_H_
#else
#define ONORM_CPU_CHUNK_PASSES_INL_H_
#endif

#include <cmath>
#include <limits>

#include "hwy/highway.h"
#include "row_coefs.hpp"
#include "simd_io-inl.h"
#include "simd_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Max over the chunk, padded with `pad`; NaN when the chunk holds a NaN (which Max may drop).
// The lane sums of the elements hold a NaN when the chunk holds a NaN or both infinities: only
// then is the chunk looked at element by element.
template <typename In>
HWY_INLINE float ChunkMax(DF d, const In* HWY_RESTRICT x, size_t n, float pad) {
  const size_t N = hn::Lanes(d);
  VF m0 = hn::Set(d, pad), m1 = m0, m2 = m0, m3 = m0;
  VF s0 = hn::Zero(d), s1 = s0;
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    const VF a = Io<In>::Load(d, x + i), b = Io<In>::Load(d, x + i + N);
    const VF c = Io<In>::Load(d, x + i + 2 * N), e = Io<In>::Load(d, x + i + 3 * N);
    m0 = hn::Max(m0, a);
    m1 = hn::Max(m1, b);
    m2 = hn::Max(m2, c);
    m3 = hn::Max(m3, e);
    s0 = hn::Add(s0, hn::Add(a, b));
    s1 = hn::Add(s1, hn::Add(c, e));
  }
  for (; i + N <= n; i += N) {
    const VF a = Io<In>::Load(d, x + i);
    m0 = hn::Max(m0, a);
    s0 = hn::Add(s0, a);
  }
  if (i < n) {
    m0 = hn::Max(m0, LoadTail(d, x + i, n - i, pad));
    s1 = hn::Add(s1, LoadTail(d, x + i, n - i, 0.0f));
  }
  if (!hn::AllFalse(d, hn::IsNaN(hn::Add(s0, s1)))) {
    for (size_t k = 0; k < n; ++k)
      if (std::isnan(core::element<In>::load(x[k]))) return std::numeric_limits<float>::quiet_NaN();
  }
  const VF mv = hn::Max(hn::Max(m0, m1), hn::Max(m2, m3));
#if HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
  // Lanes reduced here rather than with hn::MaxOfLanes: EMU128's starts from the lowest finite
  // value, which turns an all -inf chunk into -FLT_MAX.
  HWY_ALIGN float lanes[hn::MaxLanes(d)];
  hn::Store(mv, d, lanes);
  float m = lanes[0];
  for (size_t k = 1; k < N; ++k) m = lanes[k] > m ? lanes[k] : m;
  return m;
#else
  // A shuffle tree: a lane-by-lane loop is one long dependency chain, which every short row
  // waits on before its pass 2.
  return hn::GetLane(hn::MaxOfLanes(d, mv));
#endif
}

template <typename In>
HWY_INLINE float ChunkSum(DF d, const In* HWY_RESTRICT x, size_t n, float pad) {
  const size_t N = hn::Lanes(d);
  VF s0 = hn::Zero(d), s1 = s0, s2 = s0, s3 = s0;
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    s0 = hn::Add(s0, Io<In>::Load(d, x + i));
    s1 = hn::Add(s1, Io<In>::Load(d, x + i + N));
    s2 = hn::Add(s2, Io<In>::Load(d, x + i + 2 * N));
    s3 = hn::Add(s3, Io<In>::Load(d, x + i + 3 * N));
  }
  for (; i + N <= n; i += N) s0 = hn::Add(s0, Io<In>::Load(d, x + i));
  if (i < n) s1 = hn::Add(s1, LoadTail(d, x + i, n - i, pad));
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
}

// Pass 1 of the op over in[0] (0 for ops without one).
template <class Op, typename In>
HWY_INLINE float Pass1Of(DF d, const In* x, size_t n) {
  if constexpr (Op::kPass1 == core::ops::Pass1::kMax) return ChunkMax(d, x, n, Op::pad(0));
  else if constexpr (Op::kPass1 == core::ops::Pass1::kSum) return ChunkSum(d, x, n, Op::pad(0));
  else return 0.0f;
}

// Loads of element i of every input: whole vectors, or the n < Lanes(d) ones left, padded
// (the pivot for in[0] where the op pads with it, so that padding deviates by 0).
template <class Op, typename In>
HWY_INLINE void LoadInputs(DF d, const In* const* x, size_t i, VF* v) {
  for (int k = 0; k < Op::kInputs; ++k) v[k] = Io<In>::Load(d, x[k] + i);
}
template <class Op, typename In>
HWY_INLINE void LoadInputsTail(DF d, const In* const* x, size_t i, size_t n, float pivot, VF* v) {
  for (int k = 0; k < Op::kInputs; ++k)
    v[k] = LoadTail(d, x[k] + i, n, Op::kPadWithPivot && k == 0 ? pivot : Op::pad(k));
}

// Iterations of pass 2's chains between folds into the totals. A float sum that holds a large
// term (the square of an outlier) drops the digits of each later small term below its ulp:
// restarting the chains bounds the terms any one float sum takes to about kSumBlock plus the
// folds (SCALAR: 32 + 32 a chunk rather than 1024), on every target alike.
constexpr size_t kSumBlock = 32;

// Pass 2: the op's sums around the pivot in four accumulator chains, folded into totals every
// kSumBlock iterations; `kept` (n floats, or nullptr) gets the lift the op returns. Ops with a
// pass 1 read the chunk from L1 here, and prefetch the next chunk meanwhile. Math: the element
// math (SimdMathFor the output's storage type).
template <class Op, class Math, typename In>
HWY_INLINE void Pass2Of(DF d, const In* const* inputs, size_t n, float pivot, float* HWY_RESTRICT kept, bool pf,
                        float* sums) {
  constexpr int S = Op::kSums;
  // The input pointers in locals (registers): read through `inputs`, every vector store to
  // `kept` (may_alias) would make the compiler load them again.
  const In* x[Op::kInputs];
  for (int k = 0; k < Op::kInputs; ++k) x[k] = inputs[k];
  const Math m{d};
  const size_t N = hn::Lanes(d);
  const VF p = hn::Set(d, pivot);
  pf = pf && Op::kPass1 != core::ops::Pass1::kNone;
  VF a0[S], a1[S], a2[S], a3[S], total[S];
  for (int s = 0; s < S; ++s) a0[s] = a1[s] = a2[s] = a3[s] = total[s] = hn::Zero(d);
  VF v0[Op::kInputs], v1[Op::kInputs], v2[Op::kInputs], v3[Op::kInputs];
  size_t i = 0;
  const size_t whole = n - n % (4 * N);
  for (;;) {
    const size_t end = whole - i > kSumBlock * 4 * N ? i + kSumBlock * 4 * N : whole;
    for (; i < end; i += 4 * N) {
      if (pf) PrefetchAhead(x[0] + i, 4 * N * sizeof(In));
      LoadInputs<Op>(d, x, i, v0);
      LoadInputs<Op>(d, x, i + N, v1);
      LoadInputs<Op>(d, x, i + 2 * N, v2);
      LoadInputs<Op>(d, x, i + 3 * N, v3);
      const VF e0 = Op::accumulate(m, a0, p, v0);
      const VF e1 = Op::accumulate(m, a1, p, v1);
      const VF e2 = Op::accumulate(m, a2, p, v2);
      const VF e3 = Op::accumulate(m, a3, p, v3);
      if (kept) {
        hn::StoreU(e0, d, kept + i);
        hn::StoreU(e1, d, kept + i + N);
        hn::StoreU(e2, d, kept + i + 2 * N);
        hn::StoreU(e3, d, kept + i + 3 * N);
      }
    }
    if (i == whole) break;
    for (int s = 0; s < S; ++s) {
      total[s] = hn::Add(total[s], hn::Add(hn::Add(a0[s], a1[s]), hn::Add(a2[s], a3[s])));
      a0[s] = a1[s] = a2[s] = a3[s] = hn::Zero(d);
    }
  }
  for (; i + N <= n; i += N) {
    LoadInputs<Op>(d, x, i, v0);
    const VF e0 = Op::accumulate(m, a0, p, v0);
    if (kept) hn::StoreU(e0, d, kept + i);
  }
  if (i < n) {
    LoadInputsTail<Op>(d, x, i, n - i, pivot, v1);
    const VF e1 = Op::accumulate(m, a1, p, v1);
    if (kept) StoreTail(d, e1, kept + i, n - i);
  }
  for (int s = 0; s < S; ++s)
    sums[s] = hn::GetLane(hn::SumOfLanes(d, hn::Add(total[s], hn::Add(hn::Add(a0[s], a1[s]), hn::Add(a2[s], a3[s])))));
}

// What one chunk's passes leave: pass 1's result, the pivot, pass 2's sums over n elements;
// the chunk's state in any scalar type (Op::state), or in the one the row's chunks merge in.
template <class Op>
struct ChunkSums {
  int64_t n;
  float r1, p;
  float sums[Op::kSums];
  template <typename T>
  auto state() const {
    return Op::template state<T>(n, r1, p, static_cast<const float*>(sums));
  }
  typename Op::Merged merged() const { return state<typename StateScalar<typename Op::Merged>::type>(); }
};

// Both passes over one chunk; with kept != nullptr, kept gets the op's lift (Op::kKeepsLift).
template <class Op, class Math, typename In>
HWY_INLINE ChunkSums<Op> ChunkSumsOf(DF d, const In* const* x, size_t n, float* kept, bool pf) {
  ChunkSums<Op> s;
  s.n = static_cast<int64_t>(n);
  s.r1 = Pass1Of<Op>(d, x[0], n);
  s.p = Op::pivot(s.r1, s.n);
  Pass2Of<Op, Math>(d, x, n, s.p, kept, pf, s.sums);
  return s;
}

// The state of one chunk (Op::Merged, the type the row's chunks merge in).
template <class Op, class Math, typename In>
HWY_INLINE typename Op::Merged ChunkStateOf(DF d, const In* const* x, size_t n, float* kept, bool pf) {
  return ChunkSumsOf<Op, Math>(d, x, n, kept, pf).merged();
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
