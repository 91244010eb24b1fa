// Per-target SIMD kernels of the CPU backend (Highway). Included once per target by
// kernels.cpp through foreach_target.h; everything here lives in onorm::cpu::HWY_NAMESPACE.
//
// Row algorithm (both whole-row and split-row paths use the same per-chunk and per-element
// arithmetic, so the result does not depend on how rows are spread over threads):
//   - a row is cut into chunks of kChunk columns; each chunk's state is computed while the
//     chunk sits in L1 (max then sum of exp; sum then sum of squared deviations; sum of squares),
//     then the chunk states are merged with core::merge_pairwise in a fixed tree;
//   - the write pass rewrites every element from the row's final state.
// Accumulation is f32 (inputs f32, bf16, f16). Stores round to nearest even.

// Per-target include guard (see hwy/examples/skeleton-inl.h).
#if defined(ONORM_CPU_KERNELS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ONORM_CPU_KERNELS_INL_H_
#undef ONORM_CPU_KERNELS_INL_H_
#else
#define ONORM_CPU_KERNELS_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels.hpp"
#include "onlinenorm/core/element.hpp"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// f16 in SIMD only where the hardware converts (F16C: round to nearest even, NaN and inf
// exact); elsewhere Highway 1.0.3 emulates with truncation, so those targets use the scalar
// kernels for f16.
#undef ONORM_SIMD_F16
#if HWY_ARCH_X86 && (HWY_TARGET <= HWY_AVX2) && !defined(HWY_DISABLE_F16C)
#define ONORM_SIMD_F16 1
#else
#define ONORM_SIMD_F16 0
#endif
// Non-temporal stores where Highway maps Stream to a real streaming store.
#if HWY_ARCH_X86 && (HWY_TARGET <= HWY_SSE4)
constexpr bool kCanStream = true;
#else
constexpr bool kCanStream = false;
#endif

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);

// Options of one call (bit mask), see kernels.hpp: kOptStream, kOptPrefetch, kOptTwoExp.

// Software prefetch one chunk ahead of the element being computed on, into L2: the compute
// passes (exp, squared deviations, the write pass) run over cached data while memory fetches
// what comes next (the rest of a long row, or the next rows). Plain address arithmetic, no
// dereference: prefetching past the end of the data is harmless.
template <typename T>
HWY_INLINE void PrefetchAhead(const T* p, size_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(kChunk) * sizeof(T);
  for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(reinterpret_cast<const void*>(a + b), 0, 2);
}

// ---------------------------------------------------------------------------------------
// Element I/O: load Lanes(DF) elements as f32, store f32 lanes rounded to the storage type.
template <typename T>
struct Io;

template <>
struct Io<float> {
  static HWY_INLINE VF Load(DF d, const float* p) { return hn::LoadU(d, p); }
  static HWY_INLINE void Store(DF d, VF v, float* p) { hn::StoreU(v, d, p); }
  static HWY_INLINE void Stream(DF d, VF v, float* p) { hn::Stream(v, d, p); }
};

template <>
struct Io<core::bf16_bits> {
  using D16 = hn::Rebind<uint16_t, DF>;
  static HWY_INLINE VF Load(DF d, const core::bf16_bits* p) {
    const D16 d16;
    const hn::RebindToUnsigned<DF> du;
    const auto u16 = hn::LoadU(d16, reinterpret_cast<const uint16_t*>(p));
    return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, u16)));
  }
  // Round to nearest even (Highway 1.0.3's DemoteTo truncates); NaN stays a quiet NaN.
  static HWY_INLINE hn::Vec<D16> Round(DF d, VF v) {
    const hn::RebindToUnsigned<DF> du;
    const hn::RebindToSigned<DF> di;
    const auto u = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
    const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(u, hn::Set(du, 0x7fffu)), lsb));
    const auto quiet = hn::ShiftRight<16>(hn::Or(u, hn::Set(du, 0x00400000u)));
    const auto r = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet, rounded);
    (void)d;
    return hn::DemoteTo(D16(), hn::BitCast(di, r));  // values <= 0xffff: no saturation
  }
  static HWY_INLINE void Store(DF d, VF v, core::bf16_bits* p) {
    hn::StoreU(Round(d, v), D16(), reinterpret_cast<uint16_t*>(p));
  }
  static HWY_INLINE void Stream(DF d, VF v, core::bf16_bits* p) {
    hn::Stream(Round(d, v), D16(), reinterpret_cast<uint16_t*>(p));
  }
};

#if ONORM_SIMD_F16
template <>
struct Io<core::f16_bits> {
  using DH = hn::Rebind<hwy::float16_t, DF>;
  using D16 = hn::Rebind<uint16_t, DF>;
  static HWY_INLINE VF Load(DF d, const core::f16_bits* p) {
    return hn::PromoteTo(d, hn::LoadU(DH(), reinterpret_cast<const hwy::float16_t*>(p)));
  }
  static HWY_INLINE void Store(DF d, VF v, core::f16_bits* p) {
    (void)d;
    hn::StoreU(hn::DemoteTo(DH(), v), DH(), reinterpret_cast<hwy::float16_t*>(p));
  }
  static HWY_INLINE void Stream(DF d, VF v, core::f16_bits* p) {
    (void)d;
    hn::Stream(hn::BitCast(D16(), hn::DemoteTo(DH(), v)), D16(), reinterpret_cast<uint16_t*>(p));
  }
};
#endif

// Fewer than Lanes(d) elements: through a buffer, never touching memory past the end.
template <typename In>
HWY_INLINE VF LoadTail(DF d, const In* p, size_t n, float pad) {
  HWY_ALIGN In buf[kMaxLanes];
  std::memset(static_cast<void*>(buf), 0, sizeof buf);
  std::memcpy(static_cast<void*>(buf), static_cast<const void*>(p), n * sizeof(In));
  return hn::IfThenElse(hn::FirstN(d, n), Io<In>::Load(d, buf), hn::Set(d, pad));
}
template <typename Out>
HWY_INLINE void StoreTail(DF d, VF v, Out* p, size_t n) {
  HWY_ALIGN Out buf[kMaxLanes];
  Io<Out>::Store(d, v, buf);
  std::memcpy(static_cast<void*>(p), static_cast<const void*>(buf), n * sizeof(Out));
}

template <typename In>
HWY_INLINE float LoadScalar(const In& v) {
  return core::element<In>::load(v);
}

// exp(x) for x <= 0 (x = -inf included), the only range the kernels need (x - max).
// The same reduction and polynomial as hwy::Exp (two-part ln 2, degree-6 polynomial on
// |r| <= ln2/2, about 1 ulp), but 2^n is built with one shift from the rounding constant and
// no range handling beyond the low end: about half the instructions. Below -87.3 (where 2^n
// would leave the normal range) it returns 0; the true value is under 1.2e-38 there.
HWY_INLINE VF ExpNonPos(DF d, VF x) {
  const hn::RebindToSigned<DF> di;
  const VF kMagic = hn::Set(d, 12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const VF t = hn::MulAdd(x, hn::Set(d, 1.442695040888963407359924681f), kMagic);
  const VF n = hn::Sub(t, kMagic);
  VF r = hn::MulAdd(n, hn::Set(d, -0.693145751953125f), x);
  r = hn::MulAdd(n, hn::Set(d, -1.428606765330187045e-6f), r);
  VF q = hn::Set(d, +0.000198527617612853646278381f);
  q = hn::MulAdd(q, r, hn::Set(d, +0.00139304355252534151077271f));
  q = hn::MulAdd(q, r, hn::Set(d, +0.00833336077630519866943359f));
  q = hn::MulAdd(q, r, hn::Set(d, +0.0416664853692054748535156f));
  q = hn::MulAdd(q, r, hn::Set(d, +0.166666671633720397949219f));
  q = hn::MulAdd(q, r, hn::Set(d, +0.5f));
  const VF one = hn::Set(d, 1.0f);
  const VF p = hn::MulAdd(hn::MulAdd(q, r, one), r, one);  // 1 + r + r^2 q
  // t's low mantissa bits hold n (+ 2^22); (bits + 127) << 23 is the float 2^n.
  const VF scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::BitCast(di, t), hn::Set(di, 127))));
  return hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, -87.3f)), hn::Mul(p, scale));
}

// ---------------------------------------------------------------------------------------
// Chunk reductions (n <= kChunk elements, in L1 after the first pass).

// Max over the chunk; `maybe_nan` is set when the lane sums of the elements hold a NaN, i.e.
// when the chunk holds a NaN (which Max may drop) or both infinities: the caller looks closer.
template <typename In>
HWY_INLINE float ChunkMax(DF d, const In* HWY_RESTRICT x, size_t n, bool& maybe_nan) {
  const size_t N = hn::Lanes(d);
  VF m0 = hn::Set(d, -kInf), m1 = m0, m2 = m0, m3 = m0;
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
    const VF a = LoadTail(d, x + i, n - i, -kInf);
    m0 = hn::Max(m0, a);
    s1 = hn::Add(s1, LoadTail(d, x + i, n - i, 0.0f));
  }
  maybe_nan = !hn::AllFalse(d, hn::IsNaN(hn::Add(s0, s1)));
  // Lanes reduced here rather than with hn::MaxOfLanes: EMU128's starts from the lowest finite
  // value, which turns an all -inf chunk into -FLT_MAX (and the masked row into 0/0).
  HWY_ALIGN float lanes[hn::MaxLanes(d)];
  hn::Store(hn::Max(hn::Max(m0, m1), hn::Max(m2, m3)), d, lanes);
  float m = lanes[0];
  for (size_t k = 1; k < N; ++k) m = lanes[k] > m ? lanes[k] : m;
  return m;
}

template <typename In>
HWY_INLINE bool ChunkHasNaN(const In* x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (std::isnan(LoadScalar(x[i]))) return true;
  return false;
}

// Sum of exp(x - m); with kStore also writes exp(x - m) to e (f32).
template <bool kStore, typename In>
HWY_INLINE float ChunkExpSum(DF d, const In* HWY_RESTRICT x, size_t n, float m, float* HWY_RESTRICT e, bool pf) {
  const size_t N = hn::Lanes(d);
  const VF vm = hn::Set(d, m);
  VF s0 = hn::Zero(d), s1 = s0, s2 = s0, s3 = s0;
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    if (pf) PrefetchAhead(x + i, 4 * N * sizeof(In));
    const VF a = ExpNonPos(d, hn::Sub(Io<In>::Load(d, x + i), vm));
    const VF b = ExpNonPos(d, hn::Sub(Io<In>::Load(d, x + i + N), vm));
    const VF c = ExpNonPos(d, hn::Sub(Io<In>::Load(d, x + i + 2 * N), vm));
    const VF f = ExpNonPos(d, hn::Sub(Io<In>::Load(d, x + i + 3 * N), vm));
    if (kStore) {
      hn::StoreU(a, d, e + i);
      hn::StoreU(b, d, e + i + N);
      hn::StoreU(c, d, e + i + 2 * N);
      hn::StoreU(f, d, e + i + 3 * N);
    }
    s0 = hn::Add(s0, a);
    s1 = hn::Add(s1, b);
    s2 = hn::Add(s2, c);
    s3 = hn::Add(s3, f);
  }
  for (; i + N <= n; i += N) {
    const VF a = ExpNonPos(d, hn::Sub(Io<In>::Load(d, x + i), vm));
    if (kStore) hn::StoreU(a, d, e + i);
    s0 = hn::Add(s0, a);
  }
  if (i < n) {
    const VF a = ExpNonPos(d, hn::Sub(LoadTail(d, x + i, n - i, -kInf), vm));
    if (kStore) StoreTail(d, a, e + i, n - i);
    s1 = hn::Add(s1, a);
  }
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
}

// Softmax chunk state (max, sum exp(x - max)); with e != nullptr, e gets exp(x - max) (or the
// value the write pass must produce for special chunks: 0 for an empty chunk, NaN for NaN).
template <typename In>
HWY_INLINE core::MaxSum<float> SoftmaxChunk(DF d, const In* x, size_t n, float* e, bool pf) {
  bool maybe_nan = false;
  const float m = ChunkMax(d, x, n, maybe_nan);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if ((maybe_nan && ChunkHasNaN(x, n)) || std::isnan(m) || m == kInf) {
    // NaN (or +inf: exp(inf - inf)) makes the row NaN, as core::MaxSum's push would.
    if (e) std::fill(e, e + n, nan);
    return core::MaxSum<float>::of(m == kInf ? kInf : nan, nan);
  }
  if (m == -kInf) {
    if (e) std::fill(e, e + n, 0.0f);
    return core::MaxSum<float>::identity();
  }
  const float s = e ? ChunkExpSum<true>(d, x, n, m, e, pf) : ChunkExpSum<false>(d, x, n, m, nullptr, pf);
  return core::MaxSum<float>::of(m, s);
}

// LayerNorm chunk state by the corrected two-pass (core::Welford::of_pivot): the float sum
// gives a pivot near the chunk mean, then the sums of x - p and (x - p)^2 over the cached
// chunk. Neither an outlier anywhere in the chunk nor a large offset biases it.
template <typename In>
HWY_INLINE core::Welford<double> WelfordChunk(DF d, const In* HWY_RESTRICT x, size_t n, bool pf) {
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
  if (i < n) s1 = hn::Add(s1, LoadTail(d, x + i, n - i, 0.0f));
  const float pivot =
      hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)))) / static_cast<float>(n);
  // Second pass over the cached chunk: deviations from the pivot (t) and their squares (q),
  // four independent accumulator chains each.
  const VF vp = hn::Set(d, pivot);
  VF t0 = hn::Zero(d), t1 = t0, t2 = t0, t3 = t0, q0 = t0, q1 = t0, q2 = t0, q3 = t0;
  i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    if (pf) PrefetchAhead(x + i, 4 * N * sizeof(In));
    const VF a = hn::Sub(Io<In>::Load(d, x + i), vp), b = hn::Sub(Io<In>::Load(d, x + i + N), vp);
    const VF c = hn::Sub(Io<In>::Load(d, x + i + 2 * N), vp), f = hn::Sub(Io<In>::Load(d, x + i + 3 * N), vp);
    t0 = hn::Add(t0, a);
    t1 = hn::Add(t1, b);
    t2 = hn::Add(t2, c);
    t3 = hn::Add(t3, f);
    q0 = hn::MulAdd(a, a, q0);
    q1 = hn::MulAdd(b, b, q1);
    q2 = hn::MulAdd(c, c, q2);
    q3 = hn::MulAdd(f, f, q3);
  }
  for (; i + N <= n; i += N) {
    const VF a = hn::Sub(Io<In>::Load(d, x + i), vp);
    t0 = hn::Add(t0, a);
    q0 = hn::MulAdd(a, a, q0);
  }
  if (i < n) {
    const VF a = hn::Sub(LoadTail(d, x + i, n - i, pivot), vp);  // padding deviates by 0
    t1 = hn::Add(t1, a);
    q1 = hn::MulAdd(a, a, q1);
  }
  const float sd = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(t0, t1), hn::Add(t2, t3))));
  const float sq = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(q0, q1), hn::Add(q2, q3))));
  return core::Welford<double>::of_pivot(static_cast<int64_t>(n), pivot, sd, sq);
}

template <typename In>
HWY_INLINE core::SumSq<double> SumSqChunk(DF d, const In* HWY_RESTRICT x, size_t n) {
  const size_t N = hn::Lanes(d);
  VF s0 = hn::Zero(d), s1 = s0, s2 = s0, s3 = s0;
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    const VF a = Io<In>::Load(d, x + i), b = Io<In>::Load(d, x + i + N);
    const VF c = Io<In>::Load(d, x + i + 2 * N), f = Io<In>::Load(d, x + i + 3 * N);
    s0 = hn::MulAdd(a, a, s0);
    s1 = hn::MulAdd(b, b, s1);
    s2 = hn::MulAdd(c, c, s2);
    s3 = hn::MulAdd(f, f, s3);
  }
  for (; i + N <= n; i += N) {
    const VF a = Io<In>::Load(d, x + i);
    s0 = hn::MulAdd(a, a, s0);
  }
  if (i < n) {
    const VF a = LoadTail(d, x + i, n - i, 0.0f);
    s1 = hn::MulAdd(a, a, s1);
  }
  const float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
  return core::SumSq<double>::of(static_cast<int64_t>(n), s);
}

template <typename In>
HWY_INLINE OpState ChunkStateOf(DF d, onorm_op op, const In* x, size_t n, bool pf) {
  OpState s;
  s.op = op;
  switch (op) {
    case ONORM_OP_SOFTMAX:
    case ONORM_OP_LOG_SOFTMAX: s.s.ms = SoftmaxChunk(d, x, n, nullptr, pf); break;
    case ONORM_OP_LAYER_NORM: s.s.w = WelfordChunk(d, x, n, pf); break;
    case ONORM_OP_RMS_NORM: s.s.ss = SumSqChunk(d, x, n); break;
  }
  return s;
}

// ---------------------------------------------------------------------------------------
// Write pass: y[i] = f(x[i], g[i], b[i]) for i in [0, n), with optional streaming stores.
// pf: the input stream to prefetch ahead of (the row's x), or nullptr.
template <bool kG, bool kB, typename Tx, typename Tg, typename Out, class F>
HWY_INLINE void MapRange(DF d, const Tx* HWY_RESTRICT x, const Tg* g, const Tg* b, Out* y, size_t n,
                         unsigned opts, const Tg* pf, const F& f) {
  const bool stream = (opts & kOptStream) != 0;
  if (!(opts & kOptPrefetch)) pf = nullptr;
  const size_t N = hn::Lanes(d);
  const VF one = hn::Set(d, 1.0f), zero = hn::Zero(d);
  size_t i = 0;
  auto partial = [&](size_t at, size_t count) {
    const VF xv = LoadTail(d, x + at, count, 0.0f);
    const VF gv = kG ? LoadTail(d, g + at, count, 1.0f) : one;
    const VF bv = kB ? LoadTail(d, b + at, count, 0.0f) : zero;
    StoreTail(d, f(xv, gv, bv), y + at, count);
  };
  auto full = [&](size_t at) {
    const VF xv = Io<Tx>::Load(d, x + at);
    const VF gv = kG ? Io<Tg>::Load(d, g + at) : one;
    const VF bv = kB ? Io<Tg>::Load(d, b + at) : zero;
    return f(xv, gv, bv);
  };
  const uintptr_t addr = reinterpret_cast<uintptr_t>(y);
  if (kCanStream && stream && addr % sizeof(Out) == 0) {
    const size_t vbytes = N * sizeof(Out);
    size_t head = ((vbytes - addr % vbytes) % vbytes) / sizeof(Out);
    if (head > n) head = n;
    if (head) partial(0, head);
    i = head;
    for (; i + N <= n; i += N) {
      if (pf) PrefetchAhead(pf + i, N * sizeof(Tg));
      Io<Out>::Stream(d, full(i), y + i);
    }
  }
  for (; i + N <= n; i += N) {
    if (pf) PrefetchAhead(pf + i, N * sizeof(Tg));
    Io<Out>::Store(d, full(i), y + i);
  }
  if (i < n) partial(i, n - i);
}

template <typename Tx, typename In, typename Out, class F>
HWY_INLINE void MapNoAffine(DF d, const Tx* x, Out* y, size_t n, unsigned opts, const In* pf, const F& f) {
  MapRange<false, false, Tx, In, Out>(d, x, static_cast<const In*>(nullptr), static_cast<const In*>(nullptr), y,
                                      n, opts, pf, f);
}

// Writes columns [c0, c1) of one row from its final state (x, y point at the row start).
template <typename In, typename Out>
HWY_INLINE void WriteRow(DF d, const onorm_request& q, const In* x, Out* y, int64_t c0, int64_t c1,
                         const RowFinal& fin, unsigned opts) {
  const size_t n = static_cast<size_t>(c1 - c0);
  x += c0;
  y += c0;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if (fin.mode != kFinite) {
    const float v = fin.mode == kAllZero ? 0.0f : fin.mode == kAllNegInf ? -kInf : nan;
    const VF vv = hn::Set(d, v);
    MapNoAffine<In, In>(d, x, y, n, opts, x, [vv](VF, VF, VF) { return vv; });
    return;
  }
  const VF va = hn::Set(d, fin.a), vb = hn::Set(d, fin.b);
  switch (q.op) {
    case ONORM_OP_SOFTMAX:
      MapNoAffine<In, In>(d, x, y, n, opts, x,
                          [d, va, vb](VF xv, VF, VF) { return hn::Mul(ExpNonPos(d, hn::Sub(xv, va)), vb); });
      break;
    case ONORM_OP_LOG_SOFTMAX:
      MapNoAffine<In, In>(d, x, y, n, opts, x, [va, vb](VF xv, VF, VF) { return hn::Sub(hn::Sub(xv, va), vb); });
      break;
    case ONORM_OP_LAYER_NORM: {
      const In* g = q.col[0] ? static_cast<const In*>(q.col[0]) + c0 : nullptr;
      const In* b = q.col[1] ? static_cast<const In*>(q.col[1]) + c0 : nullptr;
      // core::norm_finish: ((x * k - mk) * rk) * gamma + beta; x * k is exact.
      const VF vk = hn::Set(d, fin.norm.k), vmk = hn::Set(d, fin.norm.mk), vrk = hn::Set(d, fin.norm.rk);
      auto f = [vk, vmk, vrk](VF xv, VF gv, VF bv) { return hn::MulAdd(hn::Mul(hn::MulSub(xv, vk, vmk), vrk), gv, bv); };
      if (g && b) MapRange<true, true>(d, x, g, b, y, n, opts, x, f);
      else if (g) MapRange<true, false>(d, x, g, b, y, n, opts, x, f);
      else if (b) MapRange<false, true>(d, x, g, b, y, n, opts, x, f);
      else MapRange<false, false>(d, x, g, b, y, n, opts, x, f);
      break;
    }
    case ONORM_OP_RMS_NORM: {
      const In* g = q.col[0] ? static_cast<const In*>(q.col[0]) + c0 : nullptr;
      // x * rstd where rstd is a normal float (k * rk is then rstd exactly): one multiply less.
      // Rows whose rstd is beyond float (tiny rows with eps 0) keep the scaled form.
      const float r = fin.norm.rstd;
      if (r >= std::numeric_limits<float>::min() && r <= std::numeric_limits<float>::max()) {
        const VF vr = hn::Set(d, r);
        auto f = [vr](VF xv, VF gv, VF) { return hn::Mul(hn::Mul(xv, vr), gv); };
        if (g) MapRange<true, false>(d, x, g, g, y, n, opts, x, f);
        else MapRange<false, false>(d, x, g, g, y, n, opts, x, f);
        break;
      }
      const VF vk = hn::Set(d, fin.norm.k), vrk = hn::Set(d, fin.norm.rk);
      auto f = [vk, vrk](VF xv, VF gv, VF) { return hn::Mul(hn::Mul(hn::Mul(xv, vk), vrk), gv); };
      if (g) MapRange<true, false>(d, x, g, g, y, n, opts, x, f);
      else MapRange<false, false>(d, x, g, g, y, n, opts, x, f);
      break;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Whole rows.
template <typename In, typename Out>
void RunRowsT(const onorm_request& q, int64_t r0, int64_t r1, unsigned opts, float* scratch) {
  const bool pf = (opts & kOptPrefetch) != 0;
  const DF d;
  const int64_t cols = q.in[0].cols;
  const int64_t chunks = (cols + kChunk - 1) / kChunk;
  const bool scratch_softmax = softmax_scratch_cols(q, opts) > 0;
  float* chunk_max = scratch + cols;  // after the row's exp values (softmax_scratch_cols)
  const In* x = static_cast<const In*>(q.in[0].data);
  Out* y = static_cast<Out*>(q.out[0].data);
  for (int64_t r = r0; r < r1; ++r) {
    const In* xr = x + r * q.in[0].row_stride;
    Out* yr = y + r * q.out[0].row_stride;
    RowFold fold;
    if (scratch_softmax) {
      // One exp per element: e = exp(x - m_chunk) kept in f32, rescaled per chunk at the end.
      for (int64_t k = 0; k < chunks; ++k) {
        const int64_t b = k * kChunk, n = std::min(kChunk, cols - b);
        OpState s;
        s.op = q.op;
        s.s.ms = SoftmaxChunk(d, xr + b, static_cast<size_t>(n), scratch + b, pf);
        chunk_max[k] = s.s.ms.m;
        fold.push(s);
      }
      const RowFinal fin = final_of(q, fold.result(), r);
      for (int64_t k = 0; k < chunks; ++k) {
        const int64_t b = k * kChunk, n = std::min(kChunk, cols - b);
        const VF vs = hn::Set(d, chunk_scale(fin, chunk_max[k]));
        MapNoAffine<float, In>(d, scratch + b, yr + b, static_cast<size_t>(n), opts, xr + b,
                               [vs](VF ev, VF, VF) { return hn::Mul(ev, vs); });
      }
      continue;
    }
    for (int64_t k = 0; k < chunks; ++k) {
      const int64_t b = k * kChunk, n = std::min(kChunk, cols - b);
      fold.push(ChunkStateOf(d, q.op, xr + b, static_cast<size_t>(n), pf));
    }
    const RowFinal fin = final_of(q, fold.result(), r);
    if (mean_out(q)) mean_out(q)[r] = fin.norm.mean;
    if (rstd_out(q)) rstd_out(q)[r] = fin.norm.rstd;
    WriteRow(d, q, xr, yr, 0, cols, fin, opts);
  }
}

template <typename In, typename Out>
OpState ChunkStateT(const onorm_request& q, int64_t r, int64_t k, unsigned opts) {
  const DF d;
  const In* xr = static_cast<const In*>(q.in[0].data) + r * q.in[0].row_stride;
  const int64_t b = k * kChunk, n = std::min(kChunk, q.in[0].cols - b);
  return ChunkStateOf(d, q.op, xr + b, static_cast<size_t>(n), (opts & kOptPrefetch) != 0);
}

template <typename In, typename Out>
void WriteChunkT(const onorm_request& q, int64_t r, int64_t k, const RowFinal& f, unsigned opts, float chunk_max) {
  const DF d;
  const In* xr = static_cast<const In*>(q.in[0].data) + r * q.in[0].row_stride;
  Out* yr = static_cast<Out*>(q.out[0].data) + r * q.out[0].row_stride;
  const int64_t c0 = k * kChunk, c1 = std::min(q.in[0].cols, c0 + kChunk);
  if (softmax_scratch_cols(q, opts) > 0) {
    // exp(x - m_chunk) * scale: the bits RunRowsT's scratch holds. A chunk whose scale is 0 or
    // NaN is written directly, as e * scale is there: exp(-inf - -inf) would be NaN.
    const float scale = chunk_scale(f, chunk_max);
    const size_t n = static_cast<size_t>(c1 - c0);
    if (!(scale > 0.0f)) {  // 0 (an all -inf chunk, or one far below the row max) or NaN
      const VF vv = hn::Set(d, scale);
      MapNoAffine<In, In>(d, xr + c0, yr + c0, n, opts, xr + c0, [vv](VF, VF, VF) { return vv; });
      return;
    }
    const VF vm = hn::Set(d, chunk_max), vs = hn::Set(d, scale);
    MapNoAffine<In, In>(d, xr + c0, yr + c0, n, opts, xr + c0,
                        [d, vm, vs](VF xv, VF, VF) { return hn::Mul(ExpNonPos(d, hn::Sub(xv, vm)), vs); });
    return;
  }
  WriteRow(d, q, xr, yr, c0, c1, f, opts);
}

// ---------------------------------------------------------------------------------------
// Dtype dispatch. Combinations that return false from SimdSupports go to the scalar kernels.
bool SimdSupports(onorm_dtype in, onorm_dtype out) {
  auto ok = [](onorm_dtype t) {
    return t == ONORM_F32 || t == ONORM_BF16 || (ONORM_SIMD_F16 && t == ONORM_F16);
  };
  return ok(in) && ok(out);
}

template <template <typename, typename> class Fn, typename In, typename... Args>
HWY_INLINE void DispatchOut(onorm_dtype out, Args&&... args) {
  switch (out) {
    case ONORM_F32: return Fn<In, float>::Run(args...);
    case ONORM_BF16: return Fn<In, core::bf16_bits>::Run(args...);
#if ONORM_SIMD_F16
    case ONORM_F16: return Fn<In, core::f16_bits>::Run(args...);
#endif
    default: return;
  }
}
template <template <typename, typename> class Fn, typename... Args>
HWY_INLINE void Dispatch(onorm_dtype in, onorm_dtype out, Args&&... args) {
  switch (in) {
    case ONORM_F32: return DispatchOut<Fn, float>(out, args...);
    case ONORM_BF16: return DispatchOut<Fn, core::bf16_bits>(out, args...);
#if ONORM_SIMD_F16
    case ONORM_F16: return DispatchOut<Fn, core::f16_bits>(out, args...);
#endif
    default: return;
  }
}

template <typename In, typename Out>
struct RunRowsFn {
  static void Run(const onorm_request& q, int64_t r0, int64_t r1, unsigned opts, float* scratch) {
    RunRowsT<In, Out>(q, r0, r1, opts, scratch);
  }
};
template <typename In, typename Out>
struct WriteChunkFn {
  static void Run(const onorm_request& q, int64_t r, int64_t k, const RowFinal& f, unsigned opts, float chunk_max) {
    WriteChunkT<In, Out>(q, r, k, f, opts, chunk_max);
  }
};

void RunRows(const onorm_request& q, int64_t r0, int64_t r1, unsigned opts, float* scratch) {
  Dispatch<RunRowsFn>(q.in[0].dtype, q.out[0].dtype, q, r0, r1, opts, scratch);
  if (opts & kOptStream) hwy::FlushStream();
}
OpState ChunkState1(const onorm_request& q, int64_t r, int64_t k, unsigned opts) {
  // The state depends on the input type only: the output type parameter is fixed to f32.
  switch (q.in[0].dtype) {
#if ONORM_SIMD_F16
    case ONORM_F16: return ChunkStateT<core::f16_bits, float>(q, r, k, opts);
#endif
    case ONORM_BF16: return ChunkStateT<core::bf16_bits, float>(q, r, k, opts);
    default: return ChunkStateT<float, float>(q, r, k, opts);
  }
}
void WriteChunk(const onorm_request& q, int64_t r, int64_t k, const RowFinal& f, unsigned opts, float chunk_max) {
  Dispatch<WriteChunkFn>(q.in[0].dtype, q.out[0].dtype, q, r, k, f, opts, chunk_max);
  if (opts & kOptStream) hwy::FlushStream();
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
