// The norms' backward pass in SIMD (core/ops/norm_backward.hpp mirrored in f32 lanes), for rows
// whose x, dy, dx and dresidual share one storage type, a cache-sized block of rows at a time:
// per row, one read of x and dy for the row sums S = sum g and C = sum g (x - mean) (float
// lanes over short column blocks, added in double); then dx of the block from cache, and the
// column contributions dy xhat and dy in float, added in double every kBackwardBlockRows rows
// at most (by the caller's flush_backward_block). Rows whose float finish could overflow or
// lose the bound (non-finite sums: NaN or overflow; coefficients outside float's comfortable
// range) run norm_backward_row_in_double instead, before anything of theirs is written.
// Per target (Highway's -inl.h pattern).

// Per-target include guard (see hwy/examples/skeleton-inl.h).
#if defined(ONORM_CPU_NORM_BACKWARD_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ONORM_CPU_NORM_BACKWARD_SIMD_INL_H_
#undef ONORM_CPU_NORM_BACKWARD_SIMD_INL_H_
#else
#define ONORM_CPU_NORM_BACKWARD_SIMD_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "dispatch-inl.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "norm_backward_rows.hpp"
#include "simd_io-inl.h"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Columns whose row-sum terms stay in float lanes (a few per lane) before the block's sum is
// added in double: the float sums' error stays far below the dx bound at any row length.
constexpr size_t kBackwardSumCols = 1024;
// Bytes of x, dy (and dresidual) of a block of rows: the block and the next one, prefetched
// meanwhile, stay in L2. Longer rows prefetch ahead within their sums instead.
constexpr size_t kBackwardBlockBytes = size_t(192) << 10;
// Rows too long for a block still go two at a time: the float partials of their column sums
// (cols x K floats, read and written once a block) then cost half as much per row. Four rows
// lost where their x and dy no longer fit in L2 (bench/RESULTS.md).
constexpr int64_t kBackwardLongRowsPerBlock = 2;

bool BackwardSupports(const onorm_request& q) {
  const onorm_dtype t = q.in[0].dtype;
  for (int k = 1; k < q.inputs; ++k)
    if (q.in[k].dtype != t) return false;
  return SimdType(t) && q.out[0].dtype == t;
}

struct BackwardRowSums {
  double g, gc;           // S and C of the row
  float max_dy, max_dev;  // max |dy_j|, max |x_j - mean|: bound every float term of the finish
};

// x and dy are prefetched kChunk elements ahead: into the rows after this one where the rows are
// short. Rows of cache-sized blocks (their next block prefetched during dx's pass) waited on
// their loads here without it, short rows most (bench/RESULTS.md).
template <bool kSumG, typename T>
HWY_INLINE BackwardRowSums RowSumsOf(DF d, const T* x, const T* dy, const float* HWY_RESTRICT s, size_t n,
                                     float mean) {
  const size_t N = hn::Lanes(d);
  const VF vmean = hn::Set(d, mean);
  VF mdy = hn::Zero(d), mdev = hn::Zero(d);
  double S = 0.0, C = 0.0;
  for (size_t b = 0; b < n; b += kBackwardSumCols) {
    const size_t e = std::min(n, b + kBackwardSumCols);
    VF g0 = hn::Zero(d), g1 = g0, c0 = g0, c1 = g0;
    size_t i = b;
    for (; i + 2 * N <= e; i += 2 * N) {
      PrefetchAhead(x + i, 2 * N * sizeof(T));
      PrefetchAhead(dy + i, 2 * N * sizeof(T));
      const VF x0 = Io<T>::Load(d, x + i), x1 = Io<T>::Load(d, x + i + N);
      const VF dy0 = Io<T>::Load(d, dy + i), dy1 = Io<T>::Load(d, dy + i + N);
      const VF dev0 = hn::Sub(x0, vmean), dev1 = hn::Sub(x1, vmean);
      const VF gg0 = hn::Mul(dy0, hn::LoadU(d, s + i)), gg1 = hn::Mul(dy1, hn::LoadU(d, s + i + N));
      if (kSumG) {
        g0 = hn::Add(g0, gg0);
        g1 = hn::Add(g1, gg1);
      }
      c0 = hn::MulAdd(gg0, dev0, c0);
      c1 = hn::MulAdd(gg1, dev1, c1);
      mdy = hn::Max(mdy, hn::Max(hn::Abs(dy0), hn::Abs(dy1)));
      mdev = hn::Max(mdev, hn::Max(hn::Abs(dev0), hn::Abs(dev1)));
    }
    for (; i < e; i += N) {
      const size_t m = std::min(N, e - i);
      // Padding: x = mean and dy = 0, so every padded term is 0.
      const VF x0 = m == N ? Io<T>::Load(d, x + i) : LoadTail(d, x + i, m, mean);
      const VF dy0 = m == N ? Io<T>::Load(d, dy + i) : LoadTail(d, dy + i, m, 0.0f);
      const VF dev0 = hn::Sub(x0, vmean);
      const VF gg0 = hn::Mul(dy0, m == N ? hn::LoadU(d, s + i) : LoadTail(d, s + i, m, 0.0f));
      if (kSumG) g0 = hn::Add(g0, gg0);
      c0 = hn::MulAdd(gg0, dev0, c0);
      mdy = hn::Max(mdy, hn::Abs(dy0));
      mdev = hn::Max(mdev, hn::Abs(dev0));
    }
    if (kSumG) S += static_cast<double>(hn::GetLane(hn::SumOfLanes(d, hn::Add(g0, g1))));
    C += static_cast<double>(hn::GetLane(hn::SumOfLanes(d, hn::Add(c0, c1))));
  }
  return BackwardRowSums{S, C, hn::GetLane(hn::MaxOfLanes(d, mdy)), hn::GetLane(hn::MaxOfLanes(d, mdev))};
}

// The row's coefficients for the float finish, or false where the row must run in double: a
// NaN or an overflow in the sums (the double path gives NaN rows their NaN), a coefficient
// that is not a float of normal size, or a finish term that could overflow float.
template <class Op>
HWY_INLINE bool FloatBackwardCoefs(const BackwardRowSums& t, float mean, float rstd, int64_t n, double max_scale,
                                   typename Op::template Coefs<float>& out) {
  if (!std::isfinite(t.g) || !std::isfinite(t.gc)) return false;
  const auto c = Op::template coefs<double>(typename Op::template Sums<double>{t.g, t.gc},
                                            typename Op::template Row<double>{mean, rstd}, n);
  auto comfortable = [](double v) { return v == 0.0 || (std::fabs(v) > 0x1p-100 && std::fabs(v) < 0x1p100); };
  if (!comfortable(c.rstd) || !comfortable(c.a) || !comfortable(c.b)) return false;
  const double xhat = static_cast<double>(t.max_dev) * c.rstd;
  const double inner = static_cast<double>(t.max_dy) * max_scale + std::fabs(c.a) + xhat * std::fabs(c.b);
  constexpr double kLimit = 1e37;
  if (!(inner < kLimit && c.rstd * inner < kLimit && static_cast<double>(t.max_dy) * xhat < kLimit)) return false;
  out = typename Op::template Coefs<float>{static_cast<float>(c.mean), static_cast<float>(c.rstd),
                                           static_cast<float>(c.a), static_cast<float>(c.b)};
  return true;
}

// Rows of a block whose sums are done and whose finish is float: their pointers and
// coefficients (rows that ran in double are left out).
template <typename T>
struct FloatRows {
  int rows = 0;
  const T* x[kBackwardBlockRows];
  const T* dy[kBackwardBlockRows];
  const T* dres[kBackwardBlockRows];
  T* dx[kBackwardBlockRows];
  bool stream = true;  // dx by streaming stores: every row's whole vectors aligned
  float mean[kBackwardBlockRows], rstd[kBackwardBlockRows], a[kBackwardBlockRows], b[kBackwardBlockRows];
};

// The next block's rows, prefetched into cache while this block is finished from cache, so that
// their sums read them from there.
template <typename T>
struct NextRows {
  int rows = 0;
  const T* in[3][kBackwardBlockRows];  // x, dy, dresidual
};

// Whether dx's pass prefetches the next block's rows into L2 (the row sums prefetch into L1 ahead
// of themselves anyway): measured faster for 16-bit rows, slower for f32 rows of 1024 columns
// and more (bench/RESULTS.md; why the two differ was not found).
template <typename T>
constexpr bool kPrefetchNextBlock = sizeof(T) == 2;

// Columns [i, i + K N) of every row of the block (m < N of them when kPartial, K = 1): dx,
// Op::dx in f32 lanes, and with kCols the block's column contributions dy xhat and dy summed in
// registers, then added to acc_g and acc_b (RMSNorm: acc_g only). Element i of x and dy is read
// before dx_i is written: dx may alias either.
template <int K, bool kPartial, bool kStream, class Op, typename T, bool kCols, bool kResidual>
HWY_INLINE void BlockTile(DF d, const FloatRows<T>& blk, const float* HWY_RESTRICT s, size_t i, size_t m,
                          float* HWY_RESTRICT acc_g, float* HWY_RESTRICT acc_b, const NextRows<T>& next) {
  const size_t N = hn::Lanes(d);
  VF sv[K], ag[K], ab[K];
  for (int k = 0; k < K; ++k) {
    // Padding s = 0 (and dy = 0 below): the padded lanes of the sums gain 0.
    sv[k] = kPartial ? LoadTail(d, s + i, m, 0.0f) : hn::LoadU(d, s + i + k * N);
    ag[k] = ab[k] = hn::Zero(d);
  }
  for (int r = 0; r < blk.rows; ++r) {
    if (kPrefetchNextBlock<T> && r < next.rows) {
      for (int t = 0; t < (kResidual ? 3 : 2); ++t)
        for (size_t byte = 0; byte < K * N * sizeof(T); byte += 64)
          __builtin_prefetch(reinterpret_cast<const char*>(next.in[t][r] + i) + byte, 0, 2);
    }
    const T *x = blk.x[r], *dy = blk.dy[r];
    T* dx = blk.dx[r];
    const VF mean = hn::Set(d, blk.mean[r]), rstd = hn::Set(d, blk.rstd[r]);
    const VF a = hn::Set(d, blk.a[r]), b = hn::Set(d, blk.b[r]);
    for (int k = 0; k < K; ++k) {
      const size_t at = i + k * N;
      const VF xv = kPartial ? LoadTail(d, x + at, m, blk.mean[r]) : Io<T>::Load(d, x + at);
      const VF dyv = kPartial ? LoadTail(d, dy + at, m, 0.0f) : Io<T>::Load(d, dy + at);
      const VF xhat = hn::Mul(hn::Sub(xv, mean), rstd);
      const VF inner = hn::NegMulAdd(xhat, b, hn::Sub(hn::Mul(dyv, sv[k]), a));
      VF out;
      if (kResidual) {
        const VF dr = kPartial ? LoadTail(d, blk.dres[r] + at, m, 0.0f) : Io<T>::Load(d, blk.dres[r] + at);
        out = hn::MulAdd(rstd, inner, dr);
      } else {
        out = hn::Mul(rstd, inner);
      }
      if (kCols) {
        ag[k] = hn::MulAdd(dyv, xhat, ag[k]);
        if (Op::kColOuts > 1) ab[k] = hn::Add(ab[k], dyv);
      }
      if (kPartial) StoreTail(d, out, dx + at, m);
      else if (kStream) Io<T>::Stream(d, out, dx + at);
      else Io<T>::Store(d, out, dx + at);
    }
  }
  if (kCols) {
    for (int k = 0; k < K; ++k) {
      const size_t at = i + k * N;  // the accumulators are padded to whole vectors
      hn::StoreU(hn::Add(hn::LoadU(d, acc_g + at), ag[k]), d, acc_g + at);
      if (Op::kColOuts > 1) hn::StoreU(hn::Add(hn::LoadU(d, acc_b + at), ab[k]), d, acc_b + at);
    }
  }
}

// Rows in blocks of at most kBlockBytes of inputs (kBackwardBlockRows at most): the sums of each
// row of the block, then dx of the whole block tile by tile from cache (the column sums of a
// tile in registers over the block's rows) while the next block is prefetched.
template <class Op, typename T, bool kCols, bool kResidual>
HWY_FLATTEN void BackwardRowsOf(const onorm_request& q, const BackwardCall& call, int64_t r0, int64_t r1,
                                float* acc, double* group) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const int64_t n = q.in[0].cols;
  const size_t pitch = backward_accumulator_pitch(n);
  float* acc_g = kCols ? acc : nullptr;
  float* acc_b = kCols && Op::kColOuts > 1 ? acc + pitch : nullptr;
  const int inputs = kResidual ? 3 : 2;
  const size_t row_bytes = static_cast<size_t>(n) * sizeof(T) * static_cast<size_t>(inputs);
  const bool blocks_fit = row_bytes <= kBackwardBlockBytes;
  const int64_t R = blocks_fit ? std::min<int64_t>(kBackwardBlockRows, static_cast<int64_t>(kBackwardBlockBytes / row_bytes))
                               : kBackwardLongRowsPerBlock;
  auto input = [&](int t, int64_t r) {
    return static_cast<const T*>(q.in[t].data) + r * q.in[t].row_stride;
  };
  const size_t vbytes = N * sizeof(T);
  const uintptr_t dx0 = reinterpret_cast<uintptr_t>(q.out[0].data) + static_cast<uintptr_t>(r0 * q.out[0].row_stride) * sizeof(T);
  const size_t head = dx0 % sizeof(T) == 0 ? (vbytes - dx0 % vbytes) % vbytes / sizeof(T) : 0;
  int64_t in_acc = 0;  // rows in the float partials since they were last added in double
  bool group_started = false;  // group holds sums (its memory is not zeroed before)
  for (int64_t b0 = r0; b0 < r1; b0 += R) {
    const int64_t nb = std::min(R, r1 - b0);
    if (kCols && in_acc + nb > kBackwardBlockRows) {
      flush_backward_block(acc, group, n, Op::kColOuts, group_started);
      in_acc = 0;
    }
    in_acc += nb;
    FloatRows<T> blk;
    blk.stream = kCanStream && call.stream;
    for (int64_t r = b0; r < b0 + nb; ++r) {
      const T *x = input(0, r), *dy = input(1, r);
      const auto row = Op::template row<float>(q.row_in, r);
      // S only for LayerNorm (two column sums): RMSNorm's dx has no mean of g.
      const BackwardRowSums t = RowSumsOf<Op::kColOuts == 2>(d, x, dy, call.scale, static_cast<size_t>(n), row.mean);
      typename Op::template Coefs<float> c;
      if (!FloatBackwardCoefs<Op>(t, row.mean, row.rstd, n, call.max_scale, c)) {
        if (kCols) start_backward_group(group, n, Op::kColOuts, group_started);
        norm_backward_row_in_double(q, r, kCols ? group : nullptr);
        continue;
      }
      const int k = blk.rows++;
      blk.x[k] = x;
      blk.dy[k] = dy;
      blk.dres[k] = kResidual ? input(2, r) : nullptr;
      blk.dx[k] = static_cast<T*>(q.out[0].data) + r * q.out[0].row_stride;
      blk.stream = blk.stream && reinterpret_cast<uintptr_t>(blk.dx[k] + head) % vbytes == 0;
      blk.mean[k] = c.mean;
      blk.rstd[k] = c.rstd;
      blk.a[k] = c.a;
      blk.b[k] = c.b;
    }
    NextRows<T> next;
    if (blocks_fit) {
      next.rows = static_cast<int>(std::min(R, r1 - (b0 + nb)));
      for (int k = 0; k < next.rows; ++k)
        for (int t = 0; t < inputs; ++t) next.in[t][k] = input(t, b0 + nb + k);
    }
    // Tiles start where the first row's dx is aligned for streaming stores (rows of one
    // alignment, the usual case, all stream); the columns before go as a partial tile.
    const size_t cols = static_cast<size_t>(n);
    auto tiles = [&](auto stream) {
      constexpr bool kStream = decltype(stream)::value;
      size_t i = std::min(cols, head);
      if (i > 0) BlockTile<1, true, false, Op, T, kCols, kResidual>(d, blk, call.scale, 0, i, acc_g, acc_b, next);
      for (; i + 4 * N <= cols; i += 4 * N)
        BlockTile<4, false, kStream, Op, T, kCols, kResidual>(d, blk, call.scale, i, 4 * N, acc_g, acc_b, next);
      for (; i + N <= cols; i += N)
        BlockTile<1, false, kStream, Op, T, kCols, kResidual>(d, blk, call.scale, i, N, acc_g, acc_b, next);
      if (i < cols)
        BlockTile<1, true, false, Op, T, kCols, kResidual>(d, blk, call.scale, i, cols - i, acc_g, acc_b, next);
    };
    if (blk.stream) tiles(std::true_type());
    else tiles(std::false_type());
  }
  if (kCols && in_acc > 0) flush_backward_block(acc, group, n, Op::kColOuts, group_started);
  if (kCols) start_backward_group(group, n, Op::kColOuts, group_started);  // a group of no rows: zeros
}

// Rows [r0, r1) of a request BackwardSupports took. group: nullptr (no column sums), or the
// kColOuts x cols doubles that the rows' column contributions are added to; block: the float
// partials of at most kBackwardBlockRows rows (backward_accumulator_pitch per column sum, zero
// on entry and on return).
void BackwardRows(const onorm_request& q, const BackwardCall& cols, int64_t r0, int64_t r1, float* block,
                  double* group) {
  core::ops::visit_column_op(q.op, [&](auto op) {
    using Op = decltype(op);
    WithSimdType(q.in[0].dtype, [&](auto dtype) {
      WithStoreType<typename decltype(dtype)::type>([&](auto tag) {
        using T = typename decltype(tag)::type;
        const bool residual = q.inputs > 2;
        if (group) {
          if (residual) BackwardRowsOf<Op, T, true, true>(q, cols, r0, r1, block, group);
          else BackwardRowsOf<Op, T, true, false>(q, cols, r0, r1, block, group);
        } else {
          if (residual) BackwardRowsOf<Op, T, false, true>(q, cols, r0, r1, block, group);
          else BackwardRowsOf<Op, T, false, false>(q, cols, r0, r1, block, group);
        }
      });
    });
  });
  if (cols.stream) hwy::FlushStream();
}

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
