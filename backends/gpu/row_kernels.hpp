// The row kernels shared by CUDA and HIP. Three regimes:
//  (a) short rows: rows_kernel, a group of TPR <= WARP lanes per row, RPG rows per group,
//      the rows in registers (ITEMS 16-byte vectors per thread per row);
//  (b) medium rows: rows_kernel with a block per row (rows in registers), or staged_kernel
//      with K == 1: a persistent grid, a block per row, the row staged in shared memory by
//      cp.async with the next row's copy in flight (two buffers);
//  (c) long rows: staged_kernel with K > 1 chunks per row, one block per chunk, chunk states
//      merged in a fixed order by every block of the row (cooperative launch, release/acquire
//      flags in a workspace): the row is read from memory once. Rows too long for the
//      co-resident grid take split_chunk_kernel (stats) + merge_states_kernel (fixed tree) +
//      [norms: norm_stats_kernel] + split_chunk_kernel (finish): read twice, in row batches
//      the host sizes to the L2.
// Accumulation is float for every dtype; special values follow the core algebra (API.md);
// every reduction is a fixed tree, so results are bitwise reproducible.
// Norm statistics: LayerNorm takes the corrected two-pass sums around a pivot p (the float
// sum / n): s1 = sum(x - p), s2 = sum((x - p)^2), so that a rounded p costs nothing (offset
// data, 1e6 + N(0,1)); a row held by one group stays in float (Welford<float>::of_pivot), a
// row split over blocks merges Welford<double> states (a float slice mean breaks Chan's
// between-slice term on offset data). Rows whose statistics fail core::norm_float_stats_ok
// (sums overflowed, var + eps underflowed or beyond FLT_MAX, inf / NaN in the row) get mean
// and rstd again in double (rows_norm_f64, row_norm_stats), as the CPU backend does, and are
// finished scaled by a power of two (core::norm_coefs_scaled): finite inputs never overflow
// inside (API.md). Every finish is core::norm_finish with a core::NormCoefs.
#pragma once

#include "vendor_shim.hpp"  // first: the vendor runtime defines __host__ / __device__
#include "dtype_io.hpp"
#include "math.hpp"
#include "onlinenorm/core/max_sum.hpp"
#include "onlinenorm/core/norm_stats.hpp"
#include "onlinenorm/core/sum_sq.hpp"
#include "onlinenorm/core/welford.hpp"
#include "reduce.hpp"

namespace onorm {
namespace gpu {

enum : int { kOpSoftmax = 0, kOpLogSoftmax = 1, kOpLayerNorm = 2, kOpRmsNorm = 3 };
enum : int { kFamSoftmax = 0, kFamNorm = 1 };

struct RowArgs {
  const void* x;
  void* y;
  int64_t rows, cols;
  int64_t xs, ys;  // row strides in elements
  const void* gamma;
  const void* beta;
  float* mean;
  float* rstd;
  double eps;  // as given: eps beyond FLT_MAX is still exact on the double path
  int op;         // kOp*
  int out_dtype;  // kF32 / kF16 / kBF16
  int x_vec;      // x rows 16-byte aligned
  int y_vec;      // y rows aligned for VEC-element stores
  int gb_vec;     // gamma / beta 16-byte aligned
};

struct SplitArgs {
  int64_t chunk;   // elements per chunk
  int64_t chunks;  // chunks per row (K)
  int64_t groups;  // coop: rows in flight (grid = groups * K)
  int64_t row0;    // two-read: first row of this batch
  int64_t chunk_alloc;  // staged: elements per shared-memory buffer (chunk rounded up to VEC)
  int64_t stages;       // staged: 2, or 3 for the pipelined split schedule
  uint64_t epoch;  // coop: this launch's tag (nonzero, unique per workspace use)
  void* entries;   // coop: 2 * grid Entry; two-read: stats output (batch * K states)
  const void* final_states;  // two-read finish: one state per batch row
  void* norm_stats;          // two-read finish of norms: one core::NormCoefs per batch row, or null
  int prefetch_params;       // cluster: prefetch gamma / beta to L1 before the merge
};

// Rows [r0, r0 + n) of a request as a request of their own (launches cut into grid-sized pieces).
template <typename In>
inline RowArgs rows_from(const RowArgs& a, int64_t r0, int64_t n) {
  RowArgs p = a;
  p.rows = n;
  p.x = static_cast<const In*>(a.x) + r0 * a.xs;
  p.y = static_cast<char*>(a.y) + r0 * a.ys * (a.out_dtype == kF32 ? 4 : 2);
  if (p.mean) p.mean += r0;
  if (p.rstd) p.rstd += r0;
  return p;
}

// A published state: up to 24 bytes of state (Welford<double>), then the tag that releases it.
struct alignas(16) Entry {
  uint32_t words[6];
  uint64_t tag;
};
static_assert(sizeof(Entry) == 32, "Entry: 24 bytes of state and the tag");
static_assert(sizeof(core::Welford<double>) <= sizeof(Entry::words), "the LayerNorm merge state fits an entry");

template <int OP> struct op_state;
template <> struct op_state<kOpSoftmax> { using type = core::MaxSum<float>; };
template <> struct op_state<kOpLogSoftmax> { using type = core::MaxSum<float>; };
// LayerNorm merges in double: each slice's state is Welford<double>::of_pivot of its float sums.
template <> struct op_state<kOpLayerNorm> { using type = core::Welford<double>; };
template <> struct op_state<kOpRmsNorm> { using type = core::SumSq<float>; };

constexpr float kNegInf = -__builtin_huge_valf();

// Finishes the register-held row (values in v, softmax family already exponentiated or not),
// then stores it as Out.
template <typename Out, typename In, int ITEMS, int STRIDE>
ONORM_DEV void store_items(Out* y, int n, int lane, const float* v, bool aligned) {
  constexpr int VEC = io<In>::kVec;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
    store_one_item<Out, VEC>(y, (lane + i * STRIDE) * VEC, n, aligned, v + i * VEC);
}

template <typename In, int ITEMS, int STRIDE>
ONORM_DEV void store_any(const RowArgs& a, int64_t row, int64_t col0, int n, int lane, const float* v) {
  const bool al = a.y_vec != 0;
  switch (a.out_dtype) {
    case kF32:
      store_items<float, In, ITEMS, STRIDE>(static_cast<float*>(a.y) + row * a.ys + col0, n, lane, v, al);
      break;
    case kF16:
      store_items<core::f16_bits, In, ITEMS, STRIDE>(static_cast<core::f16_bits*>(a.y) + row * a.ys + col0, n,
                                                     lane, v, al);
      break;
    default:
      store_items<core::bf16_bits, In, ITEMS, STRIDE>(static_cast<core::bf16_bits*>(a.y) + row * a.ys + col0,
                                                      n, lane, v, al);
      break;
  }
}

// y = norm(x) * gamma (+ beta) for the register-held items (core::norm_finish; RMSNorm: its
// coefficients have mean 0, and beta is 0); `col0` is the first column of this piece of the row
// (gamma and beta are indexed by column).
template <typename In, int ITEMS, int STRIDE>
ONORM_DEV void norm_finish_items(const RowArgs& a, int64_t col0, int n, int lane, float* v, bool rms,
                                 const core::NormCoefs& cf) {
  constexpr int VEC = io<In>::kVec;
  const In* g = static_cast<const In*>(a.gamma);
  const In* b = rms ? nullptr : static_cast<const In*>(a.beta);
  const bool al = a.gb_vec != 0;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int c = (lane + i * STRIDE) * VEC;
    float gv[VEC], bv[VEC];
    if (g) load_one_item<In>(g + col0, c, n, al, 1.0f, gv);
    else
#pragma unroll
      for (int j = 0; j < VEC; ++j) gv[j] = 1.0f;
    if (b) load_one_item<In>(b + col0, c, n, al, 0.0f, bv);
    else
#pragma unroll
      for (int j = 0; j < VEC; ++j) bv[j] = 0.0f;
#pragma unroll
    for (int j = 0; j < VEC; ++j) v[i * VEC + j] = core::norm_finish(v[i * VEC + j], cf, gv[j], bv[j]);
  }
}

// The corrected two-pass sums around the pivot p over the valid elements of the items:
// s1 = sum(x - p), s2 = sum((x - p)^2) (RMSNorm: p = 0, s2 is the sum of squares).
template <typename In, int ITEMS, int STRIDE>
ONORM_DEV Sums2 pivot_sums_items(const float* v, int n, int lane, float p) {
  constexpr int VEC = io<In>::kVec;
  Sums2 q{0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int c = (lane + i * STRIDE) * VEC;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float d = c + j < n ? v[i * VEC + j] - p : 0.0f;
      q.s1 += d;
      q.s2 += d * d;
    }
  }
  return q;
}

// When a row's statistics hold, and its finish coefficients. Float statistics are trusted by
// core::norm_float_stats_ok (sums: m2 + mean for LayerNorm, s for RMSNorm; var_eps: var +
// float(eps), in float); the LayerNorm merge state (double) by core::norm_double_stats_ok.
// A row that fails takes mean and rstd again in double from the row itself
// (row_stats_f64, rows_norm_f64) and is finished scaled (core::norm_coefs_scaled). Rows holding
// inf or NaN fail too; the double path gives them non-finite statistics and outputs, as before.

// eps as the float path adds it (inf for eps beyond FLT_MAX: such rows fail the test).
ONORM_DEV float eps_f32(const RowArgs& a) { return static_cast<float>(a.eps); }

// A merged state's trust test (the same in every thread that holds the same state).
ONORM_DEV bool state_ok(const core::Welford<double>& s, double eps) {
  return core::norm_double_stats_ok(s.m2 + s.mean, s.variance() + eps);
}
ONORM_DEV bool state_ok(const core::SumSq<float>& s, double eps) {
  return core::norm_float_stats_ok(s.s, s.mean_square() + static_cast<float>(eps));
}
// The coefficients of a state that passed state_ok: LayerNorm's double state is finished
// scaled (its mean and rstd are double); RMSNorm's float state with k = 1.
ONORM_DEV core::NormCoefs state_coefs(const core::Welford<double>& s, double eps) {
  return core::norm_coefs_scaled(s.mean, 1.0 / core::sqrt_of(s.variance() + eps));
}
ONORM_DEV core::NormCoefs state_coefs(const core::SumSq<float>& s, double eps) {
  return core::norm_coefs_f32(0.0f, s.rstd(static_cast<float>(eps)));
}

// The mean and rstd of the row x[0, n) in double, read again from global memory (two passes:
// the mean, then the squared deviations; RMSNorm: the squares), as scaled finish coefficients.
// The rare path of rows whose statistics failed their test: correctness, not speed. Every
// thread of the block must call it (block reductions with barriers): callers decide on a
// block-uniform state. Its own shared array (BLOCK / WARP doubles; split_chunk's StateScratch
// is not assumed free or large enough). Fixed per-thread order (thread t sums columns t,
// t + BLOCK, ...) and a fixed tree: every block that recomputes one row (each chunk of a split
// row does) gets the same bits.
// Not inlined: inlined into staged_kernel it cost the hot path registers and spills (ptxas,
// sm_90a); as a call the float paths keep (about) their allocation.
// In place (y == x): a row held by one block (staged K == 1) is read whole before that block
// writes it; the two-read schedule takes its statistics in a launch of their own before the
// finish (norm_stats_kernel); the CUDA cluster kernel holds every block at a cluster barrier,
// and the cooperative staged schedule at a group barrier (coop_barrier), until all have read
// the row.
struct RowMoments {
  double mean, m2;  // LayerNorm: mean and the sum of squared deviations; RMSNorm: 0, the sum of squares
};
template <typename In, int WARP, int BLOCK>
__device__ __noinline__ RowMoments row_moments_f64(const In* x, int64_t n, bool rms) {
  __shared__ double red[BLOCK / WARP];
  double md = 0.0;
  if (!rms) {
    double t = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += BLOCK) t += static_cast<double>(io<In>::load1(x + i));
    md = block_allreduce<WARP, BLOCK>(t, red, AddOp{}) / static_cast<double>(n);
  }
  double q = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += BLOCK) {
    const double d = static_cast<double>(io<In>::load1(x + i)) - md;
    q += d * d;
  }
  q = block_allreduce<WARP, BLOCK>(q, red, AddOp{});
  return RowMoments{md, q};
}
// The scaled finish coefficients from row_moments_f64 (kept out of the call: a small return
// value stays in registers).
template <typename In, int WARP, int BLOCK>
ONORM_DEV core::NormCoefs row_stats_f64(const In* x, int64_t n, double eps, bool rms) {
  const RowMoments r = row_moments_f64<In, WARP, BLOCK>(x, n, rms);
  return core::norm_coefs_scaled(r.mean, 1.0 / core::sqrt_of(r.m2 / static_cast<double>(n) + eps));
}

// The finish coefficients of a row from its merged state `fin`, which must be the same in
// every thread of the block (the decision to read the row again is then block-uniform).
template <int OP, typename In, int WARP, int BLOCK, typename S>
ONORM_DEV core::NormCoefs row_norm_stats(const RowArgs& a, int64_t row, const S& fin) {
  if (!state_ok(fin, a.eps))
    return row_stats_f64<In, WARP, BLOCK>(static_cast<const In*>(a.x) + row * a.xs, a.cols, a.eps, OP == kOpRmsNorm);
  return state_coefs(fin, a.eps);
}

// rows_kernel's fallback: the rows k whose float statistics failed their test (ok[k] false)
// get mean and rstd again in double, from the register-held values (their conversion to
// double is exact), two passes, reduced over the row's TPR lanes in the same fixed trees as
// the float path (deterministic), and scaled finish coefficients cf[k]. Every lane of the warp
// takes part in every shuffle: the decision is made warp-uniform (TPR < WARP: several row
// groups share a warp and may disagree; their flags are or-ed over the warp) or is
// block-uniform already (TPR == WARP: one group per warp; TPR == BLOCK: every thread holds the
// row's statistics). Rows that passed keep their float coefficients (bitwise unchanged): a
// row's result does not depend on its neighbours.
template <typename In, int WARP, int TPR, int ITEMS, int BLOCK, int RPG>
ONORM_DEV void rows_norm_f64(const float (*v)[ITEMS * io<In>::kVec], const int* n, int lane, bool rms, double eps,
                             const bool* ok, core::NormCoefs* cf) {
  constexpr int VEC = io<In>::kVec;
  bool any = false;
#pragma unroll
  for (int k = 0; k < RPG; ++k) any = any || !ok[k];
  if constexpr (TPR < WARP) {
    // The flag is uniform within a group; a butterfly over the group bits of the lane index
    // gives every lane the count of the warp's groups that failed (small integers: exact).
    float f = any ? 1.0f : 0.0f;
#pragma unroll
    for (int o = WARP / 2; o >= TPR; o >>= 1) f += shim::shfl_xor(f, o, WARP);
    any = f != 0.0f;
  }
  if (!any) return;  // warp-uniform (block-uniform for TPR == BLOCK)
  __shared__ double red[TPR > WARP ? BLOCK / WARP : 1];
  double md[RPG], qd[RPG];
#pragma unroll
  for (int k = 0; k < RPG; ++k) {
    double t = 0.0;
    if (!rms) {
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const int c = (lane + i * TPR) * VEC;
#pragma unroll
        for (int j = 0; j < VEC; ++j) t += c + j < n[k] ? static_cast<double>(v[k][i * VEC + j]) : 0.0;
      }
    }
    md[k] = t;
  }
  if (!rms) {
#pragma unroll
    for (int k = 0; k < RPG; ++k)
      md[k] = row_allreduce<WARP, TPR, BLOCK>(md[k], lane, red, AddOp{}) / static_cast<double>(n[k] > 0 ? n[k] : 1);
  }
#pragma unroll
  for (int k = 0; k < RPG; ++k) {
    double t = 0.0;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int c = (lane + i * TPR) * VEC;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const double d = static_cast<double>(v[k][i * VEC + j]) - md[k];
        t += c + j < n[k] ? d * d : 0.0;
      }
    }
    qd[k] = t;
  }
#pragma unroll
  for (int k = 0; k < RPG; ++k) qd[k] = row_allreduce<WARP, TPR, BLOCK>(qd[k], lane, red, AddOp{});
#pragma unroll
  for (int k = 0; k < RPG; ++k) {
    if (!ok[k])
      cf[k] = core::norm_coefs_scaled(md[k], 1.0 / core::sqrt_of(qd[k] / static_cast<double>(n[k]) + eps));
  }
}

// ------------------------------------------------------------------ regimes (a) and (b)
// Each group of TPR lanes handles RPG rows (rows base + k * groups_per_block), all loaded
// before any is reduced, so that more bytes are in flight per thread for short rows.
// Register cap: 64 per thread where the rows fit (16 floats per thread, softmax), else 128.
template <int FAM, typename In, int ITEMS, int BLOCK, int RPG>
constexpr int rows_min_blocks() {
  return BLOCK > 256 ? 1 : (FAM == kFamNorm || RPG * ITEMS * io<In>::kVec > 16 ? 2 : 4) * (256 / BLOCK);
}

template <int FAM, typename In, int WARP, int TPR, int ITEMS, int BLOCK, int RPG>
__global__ void __launch_bounds__(BLOCK, (rows_min_blocks<FAM, In, ITEMS, BLOCK, RPG>())) rows_kernel(RowArgs a) {
  constexpr int VEC = io<In>::kVec;
  constexpr int E = ITEMS * VEC;
  constexpr int GPB = BLOCK / TPR;  // groups per block
  static_assert(TPR <= WARP || (TPR == BLOCK && RPG == 1), "row group");
  __shared__ float scratch[BLOCK / WARP];
  const int lane = static_cast<int>(threadIdx.x) % TPR;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * GPB * RPG + static_cast<int>(threadIdx.x) / TPR;
  float v[RPG][E];
  int n[RPG];
  int64_t rr[RPG];
#pragma unroll
  for (int k = 0; k < RPG; ++k) {
    const int64_t row = base + int64_t(k) * GPB;
    // Inactive groups (past the last row) take part in the shuffles with an empty row.
    n[k] = row < a.rows ? static_cast<int>(a.cols) : 0;
    rr[k] = row < a.rows ? row : 0;
    load_items<In, ITEMS, TPR>(static_cast<const In*>(a.x) + rr[k] * a.xs, n[k], lane, v[k], a.x_vec != 0,
                               FAM == kFamSoftmax ? kNegInf : 0.0f);
  }
  if constexpr (FAM == kFamSoftmax) {
    const bool lg = a.op == kOpLogSoftmax;
    float m[RPG], s[RPG];
#pragma unroll
    for (int k = 0; k < RPG; ++k) {
      m[k] = kNegInf;
#pragma unroll
      for (int e = 0; e < E; ++e) m[k] = core::nan_max(m[k], v[k][e]);
    }
#pragma unroll
    for (int k = 0; k < RPG; ++k) m[k] = row_allreduce<WARP, TPR, BLOCK>(m[k], lane, scratch, MaxOp{});
#pragma unroll
    for (int k = 0; k < RPG; ++k) {
      const float mm = m[k] == kNegInf ? 0.0f : m[k];  // all -inf (or empty): the masked row
      s[k] = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const float ex = fast_exp(v[k][e] - mm);
        s[k] += ex;
        if (!lg) v[k][e] = ex;
      }
    }
#pragma unroll
    for (int k = 0; k < RPG; ++k) s[k] = row_allreduce<WARP, TPR, BLOCK>(s[k], lane, scratch, AddOp{});
#pragma unroll
    for (int k = 0; k < RPG; ++k) {
      // All -inf (dead): log-softmax (x - 0) - inf = -inf, softmax exp(-inf) * 0 = 0; no
      // per-element select (it cost registers: bench/cuda/NOTES.md v5).
      const bool dead = m[k] == kNegInf;
      if (lg) {
        const float mk = dead ? 0.0f : m[k];
        const float lnd = dead ? -kNegInf : core::log_of(s[k]);
#pragma unroll
        for (int e = 0; e < E; ++e) v[k][e] = (v[k][e] - mk) - lnd;
      } else {
        const float inv = dead ? 0.0f : 1.0f / s[k];
#pragma unroll
        for (int e = 0; e < E; ++e) v[k][e] *= inv;
      }
    }
  } else {
    const bool rms = a.op == kOpRmsNorm;
    const float eps = eps_f32(a);
    __shared__ Sums2 scratch2[TPR > WARP ? BLOCK / WARP : 1];
    // LayerNorm: the pivot p (the float mean), then the corrected two-pass sums around it,
    // reduced together; RMSNorm: p = 0 and the sum of squares alone.
    float p[RPG];
#pragma unroll
    for (int k = 0; k < RPG; ++k) p[k] = 0.0f;
    if (!rms) {
#pragma unroll
      for (int k = 0; k < RPG; ++k) {
        float t = 0.0f;
#pragma unroll
        for (int e = 0; e < E; ++e) t += v[k][e];
        p[k] = t;
      }
#pragma unroll
      for (int k = 0; k < RPG; ++k)
        p[k] = row_allreduce<WARP, TPR, BLOCK>(p[k], lane, scratch, AddOp{}) / static_cast<float>(n[k]);
    }
    Sums2 q[RPG];
#pragma unroll
    for (int k = 0; k < RPG; ++k) q[k] = pivot_sums_items<In, ITEMS, TPR>(v[k], n[k], lane, p[k]);
    if (!rms) {
#pragma unroll
      for (int k = 0; k < RPG; ++k) q[k] = row_allreduce<WARP, TPR, BLOCK>(q[k], lane, scratch2, AddOp{});
    } else {
#pragma unroll
      for (int k = 0; k < RPG; ++k) q[k].s2 = row_allreduce<WARP, TPR, BLOCK>(q[k].s2, lane, scratch, AddOp{});
    }
    core::NormCoefs cf[RPG];
    bool ok[RPG];
#pragma unroll
    for (int k = 0; k < RPG; ++k) {
      float mean = 0.0f, var = 0.0f, sums = 0.0f;
      if (rms) {
        var = core::SumSq<float>::of(n[k], q[k].s2).mean_square();
        sums = q[k].s2;
      } else {
        const core::Welford<float> w = core::Welford<float>::of_pivot(n[k], p[k], q[k].s1, q[k].s2);
        mean = w.mean;
        var = w.variance();
        // s2, not m2: of_pivot clamps m2 = s2 - s1 * s1 / n at 0, which turns the NaN of an
        // overflowed inf - inf into 0 (and m2 <= s2, so a finite s2 covers m2).
        sums = q[k].s2 + w.mean;
      }
      const float var_eps = var + eps;
      // Inactive groups (n == 0, p = 0 / 0) never count.
      ok[k] = n[k] == 0 || core::norm_float_stats_ok(sums, var_eps);
      cf[k] = core::norm_coefs_f32(mean, 1.0f / core::sqrt_of(var_eps));
    }
    // Rows whose float statistics failed: mean and rstd again in double (every lane calls it).
    rows_norm_f64<In, WARP, TPR, ITEMS, BLOCK, RPG>(v, n, lane, rms, a.eps, ok, cf);
#pragma unroll
    for (int k = 0; k < RPG; ++k) {
      if (n[k] > 0 && lane == 0) {
        if (a.mean && !rms) a.mean[rr[k]] = cf[k].mean;
        if (a.rstd) a.rstd[rr[k]] = cf[k].rstd;
      }
      norm_finish_items<In, ITEMS, TPR>(a, 0, n[k], lane, v[k], rms, cf[k]);
    }
  }
#pragma unroll
  for (int k = 0; k < RPG; ++k) store_any<In, ITEMS, TPR>(a, rr[k], 0, n[k], lane, v[k]);
}

// ------------------------------------------------------------------ regime (c)
// A slice of a row held in registers by a block (ITEMS vectors per thread, BLOCK threads):
// its state, and its finish once the row's merged state is known (split_chunk below; the CUDA
// cluster kernel).
//  - softmax: the slice max m_c, then v = exp(v - m_c) in place and their sum: the finish
//    scales by exp(m_c - M) / D, one exp per element in all;
//  - log-softmax: v stays x; the finish writes (x - M) - log D;
//  - LayerNorm: exact two-pass (mean, then squared deviations) within the slice, Chan merges;
//  - RMSNorm: the sum of squares.

// Shared memory of a block's reductions: floats, states, pairs of sums or doubles (BLOCK / WARP <= 32).
template <typename S>
union StateScratch {
  float f[32];
  S s[32];
  Sums2 p[32];
  double d[32];
};

// A block's merge of one state per thread, every thread getting the same bits: the core
// combine in a fixed tree; LayerNorm's double states by block_merge (Chan's formula for all
// states at once), which needs fewer registers.
template <int WARP, int BLOCK, typename S>
ONORM_DEV S block_merge_states(const S& s, StateScratch<S>& scratch) {
  return block_allreduce<WARP, BLOCK>(s, scratch.s, CombineOp<S>{});
}
template <int WARP, int BLOCK>
ONORM_DEV core::Welford<double> block_merge_states(const core::Welford<double>& s,
                                                   StateScratch<core::Welford<double>>& scratch) {
  return block_merge<WARP, BLOCK>(s, scratch.d);
}

template <int OP, typename In, int WARP, int ITEMS, int BLOCK>
ONORM_DEV typename op_state<OP>::type slice_state(float* v, int n, int lane,
                                                  StateScratch<typename op_state<OP>::type>& scratch, float& m_c) {
  using S = typename op_state<OP>::type;
  constexpr int E = ITEMS * io<In>::kVec;
  if constexpr (OP == kOpSoftmax || OP == kOpLogSoftmax) {
    float m = kNegInf;
#pragma unroll
    for (int e = 0; e < E; ++e) m = core::nan_max(m, v[e]);
    m_c = block_allreduce<WARP, BLOCK>(m, scratch.f, MaxOp{});
    const float mm = m_c == kNegInf ? 0.0f : m_c;
    float d = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float ex = fast_exp(v[e] - mm);
      d += ex;
      if (OP == kOpSoftmax) v[e] = ex;
    }
    d = block_allreduce<WARP, BLOCK>(d, scratch.f, AddOp{});
    return m_c == kNegInf ? S::identity() : S::of(m_c, d);
  } else {
    if constexpr (OP == kOpLayerNorm) {
      // The pivot (the float slice mean), then the corrected two-pass sums around it, reduced
      // together; the state keeps mean = p + s1 / n in double.
      float sum = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e) sum += v[e];
      const float p = block_allreduce<WARP, BLOCK>(sum, scratch.f, AddOp{}) / static_cast<float>(n);
      const Sums2 q =
          block_allreduce<WARP, BLOCK>(pivot_sums_items<In, ITEMS, BLOCK>(v, n, lane, p), scratch.p, AddOp{});
      return S::of_pivot(n, p, q.s1, q.s2);
    } else {
      float q = pivot_sums_items<In, ITEMS, BLOCK>(v, n, lane, 0.0f).s2;
      q = block_allreduce<WARP, BLOCK>(q, scratch.f, AddOp{});
      return S::of(n, q);
    }
  }
}

// Finishes the slice [col0, col0 + n) of `row` with the row's state `fin` and stores it;
// norms take the row's finish coefficients from the caller (row_norm_stats: a row whose
// statistics failed their test has them from double). `first` (the slice holding column 0)
// writes the mean / rstd outputs.
template <int OP, typename In, int ITEMS, int BLOCK, typename S>
ONORM_DEV void slice_finish(const RowArgs& a, int64_t row, int64_t col0, int n, int lane, float* v, const S& fin,
                            float m_c, const core::NormCoefs& cf, bool first) {
  constexpr int E = ITEMS * io<In>::kVec;
  if constexpr (OP == kOpSoftmax) {
    float scale = m_c == kNegInf ? 0.0f : core::exp_of(m_c - fin.m) / fin.d;
    if (fin.m == kNegInf) scale = 0.0f;
    if (core::is_nan(fin.m) || core::is_nan(fin.d)) scale = fin.m + fin.d;  // NaN
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] *= scale;
  } else if constexpr (OP == kOpLogSoftmax) {
    // All -inf: every output -inf, as (x - 0) - inf, without a per-element select (which
    // cost 26 more registers for 16-bit inputs).
    const bool dead = fin.m == kNegInf;
    const float m = dead ? 0.0f : fin.m;
    const float lnd = dead ? -kNegInf : core::log_of(fin.d);
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] = (v[e] - m) - lnd;
  } else {
    if (first && lane == 0) {
      if (a.mean && OP == kOpLayerNorm) a.mean[row] = cf.mean;
      if (a.rstd) a.rstd[row] = cf.rstd;
    }
    norm_finish_items<In, ITEMS, BLOCK>(a, col0, n, lane, v, OP == kOpRmsNorm, cf);
  }
  store_any<In, ITEMS, BLOCK>(a, row, col0, n, lane, v);
}

// One chunk of one row: load, reduce to the chunk's state, obtain the row's state from
// `row_state` (merge / workspace), finish and store. In the stats schedule `row_state` is
// not called and the chunk state is written instead.
enum : int { kModeCoop = 0, kModeStats = 1, kModeFinish = 2 };

template <int OP, typename In, int WARP, int ITEMS, int BLOCK, int MODE, typename RowState>
ONORM_DEV void split_chunk(const RowArgs& a, const SplitArgs& s, int64_t row, int64_t chunk, void* scratch,
                           RowState row_state) {
  using S = typename op_state<OP>::type;
  constexpr int E = ITEMS * io<In>::kVec;
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t col0 = chunk * s.chunk;
  const int n = static_cast<int>(a.cols - col0 < s.chunk ? a.cols - col0 : s.chunk);
  float v[E];
  load_items<In, ITEMS, BLOCK>(static_cast<const In*>(a.x) + row * a.xs + col0, n, lane, v, a.x_vec != 0,
                               OP == kOpSoftmax || OP == kOpLogSoftmax ? kNegInf : 0.0f);
  float m_c = 0.0f;
  const S st = slice_state<OP, In, WARP, ITEMS, BLOCK>(v, n, lane, *static_cast<StateScratch<S>*>(scratch), m_c);
  if constexpr (MODE == kModeStats) {
    if (lane == 0) static_cast<S*>(s.entries)[(row - s.row0) * s.chunks + chunk] = st;
    return;
  } else {
    const S fin = row_state(st, static_cast<StateScratch<S>*>(scratch)->s);
    // fin is the same in every thread of the block (row_state's contract): a row whose
    // statistics fail their test is read again in double by every block of the row,
    // block-uniformly.
    core::NormCoefs cf{};
    if constexpr (OP == kOpLayerNorm || OP == kOpRmsNorm) {
      if (s.norm_stats) {  // two-read: taken before the finish launch (safe in place)
        cf = static_cast<const core::NormCoefs*>(s.norm_stats)[row - s.row0];
      } else {
        cf = row_norm_stats<OP, In, WARP, BLOCK>(a, row, fin);
      }
    }
    slice_finish<OP, In, ITEMS, BLOCK>(a, row, col0, n, lane, v, fin, m_c, cf, chunk == 0);
  }
}

// Flags: entry slot (round % slots) of this block carries its state of `round`, released
// with the tag (epoch << 32 | round); entries hold slots * gridDim.x Entry.
ONORM_DEV uint64_t coop_tag(uint64_t epoch, int64_t round) {
  return (epoch << 32) | static_cast<uint64_t>(round & 0xffffffff);
}

template <typename S>
ONORM_DEV void coop_publish(const S& mine, Entry* entries, int64_t round, uint64_t epoch, int slots) {
  if (threadIdx.x == 0) {
    Entry* e = entries + (round % slots) * static_cast<int64_t>(gridDim.x) + blockIdx.x;
    static_assert(sizeof(S) <= sizeof(e->words), "state fits an entry");
    *reinterpret_cast<S*>(e->words) = mine;
    shim::store_release_u64(&e->tag, coop_tag(epoch, round));
  }
}

// Waits for the K states of `round` of the row group starting at block `first` and merges
// them in a fixed order (every block of the group gets the same bits).
template <int WARP, int BLOCK, typename S>
ONORM_DEV S coop_collect(Entry* entries, int64_t round, uint64_t epoch, int64_t first, int64_t K, int slots,
                         StateScratch<S>& scratch) {
  const uint64_t tag = coop_tag(epoch, round);
  const Entry* buf = entries + (round % slots) * static_cast<int64_t>(gridDim.x);
  S acc = S::identity();
  for (int64_t k = threadIdx.x; k < K; k += BLOCK) {
    const Entry* e = buf + first + k;
    while (shim::load_acquire_u64(&e->tag) != tag) {
    }
    acc = S::combine(acc, *reinterpret_cast<const S*>(e->words));
  }
  return block_merge_states<WARP, BLOCK>(acc, scratch);
}

// Publishes this block's state of `round` and merges its row group's (co-resident) states.
template <int WARP, int BLOCK, typename S>
ONORM_DEV S coop_merge(const S& mine, Entry* entries, int64_t round, uint64_t epoch, int64_t first, int64_t K,
                       int slots, StateScratch<S>& scratch) {
  coop_publish(mine, entries, round, epoch, slots);
  return coop_collect<WARP, BLOCK>(entries, round, epoch, first, K, slots, scratch);
}

// A barrier of the K co-resident blocks of a row group, for rows whose norm statistics are
// read again from global memory (row_norm_stats): in place, no block may write its chunk
// before every block of the row has read the row. Its flags follow the state slots
// (entries + slots * gridDim.x): two per block, alternating with the block's count of such
// barriers, `count` (the same in every block of a group: the decision is the merged state's).
// A block can be one barrier ahead of the slowest of its group, never two, so the slot it
// overwrites has been seen; tags are (epoch, round), compared exactly like the states'.
ONORM_DEV void coop_barrier(Entry* entries, int slots, int64_t count, int64_t round, uint64_t epoch, int64_t first,
                            int64_t K) {
  Entry* bar = entries + (slots + (count & 1)) * static_cast<int64_t>(gridDim.x);
  const uint64_t tag = coop_tag(epoch, round);
  shim::sync_threads();  // every thread of this block is done reading the row
  if (threadIdx.x == 0) shim::store_release_u64(&bar[blockIdx.x].tag, tag);
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x)
    while (shim::load_acquire_u64(&bar[first + k].tag) != tag) {
    }
  shim::sync_threads();
}

// Loads VEC elements at i of a shared-memory chunk of n elements (pad past the end).
template <typename In>
ONORM_DEV void smem_vec(const In* c, int i, int n, float pad, float* o) {
  constexpr int VEC = io<In>::kVec;
  if (i + VEC <= n) {
    io<In>::load_vec(c + i, o);
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) o[j] = i + j < n ? io<In>::load1(c + i + j) : pad;
  }
}

// Norms: the row's finish coefficients, from row_norm_stats (staged_output_any).
template <int OP, typename In, typename Out, int BLOCK, typename S>
ONORM_DEV void staged_output(const RowArgs& a, const In* c, int n, int64_t row, int64_t col0, const S& fin,
                             float m_c, const core::NormCoefs& cf) {
  constexpr int VEC = io<In>::kVec;
  Out* y = static_cast<Out*>(a.y) + row * a.ys + col0;
  const bool yal = a.y_vec != 0;
  if constexpr (OP == kOpSoftmax) {
    float scale = m_c == kNegInf ? 0.0f : core::exp_of(m_c - fin.m) / fin.d;
    if (fin.m == kNegInf) scale = 0.0f;
    if (core::is_nan(fin.m) || core::is_nan(fin.d)) scale = fin.m + fin.d;  // NaN
    const float mm = m_c == kNegInf ? 0.0f : m_c;
#pragma unroll 4
    for (int i = static_cast<int>(threadIdx.x) * VEC; i < n; i += BLOCK * VEC) {
      float o[VEC];
      smem_vec<In>(c, i, n, kNegInf, o);
#pragma unroll
      for (int j = 0; j < VEC; ++j) o[j] = fast_exp(o[j] - mm) * scale;
      store_one_item<Out, VEC>(y, i, n, yal, o);
    }
  } else if constexpr (OP == kOpLogSoftmax) {
    const float lnd = core::log_of(fin.d);
    const bool dead = fin.m == kNegInf;
#pragma unroll 4
    for (int i = static_cast<int>(threadIdx.x) * VEC; i < n; i += BLOCK * VEC) {
      float o[VEC];
      smem_vec<In>(c, i, n, kNegInf, o);
#pragma unroll
      for (int j = 0; j < VEC; ++j) o[j] = dead ? kNegInf : (o[j] - fin.m) - lnd;
      store_one_item<Out, VEC>(y, i, n, yal, o);
    }
  } else {
    constexpr bool kRms = OP == kOpRmsNorm;
    if (col0 == 0 && threadIdx.x == 0) {
      if (a.mean && !kRms) a.mean[row] = cf.mean;
      if (a.rstd) a.rstd[row] = cf.rstd;
    }
    const In* g = a.gamma ? static_cast<const In*>(a.gamma) + col0 : nullptr;
    const In* b = a.beta && !kRms ? static_cast<const In*>(a.beta) + col0 : nullptr;
    const bool gal = a.gb_vec != 0;
#pragma unroll 2
    for (int i = static_cast<int>(threadIdx.x) * VEC; i < n; i += BLOCK * VEC) {
      float o[VEC], gv[VEC], bv[VEC];
      smem_vec<In>(c, i, n, 0.0f, o);
      if (g) load_one_item<In>(g, i, n, gal, 1.0f, gv);
      else
#pragma unroll
        for (int j = 0; j < VEC; ++j) gv[j] = 1.0f;
      if (b) load_one_item<In>(b, i, n, gal, 0.0f, bv);
      else
#pragma unroll
        for (int j = 0; j < VEC; ++j) bv[j] = 0.0f;
#pragma unroll
      for (int j = 0; j < VEC; ++j) o[j] = core::norm_finish(o[j], cf, gv[j], bv[j]);
      store_one_item<Out, VEC>(y, i, n, yal, o);
    }
  }
}

// The state of a staged chunk c[0, n) (shared memory): two passes, exact within the chunk.
// m_c receives the chunk maximum (softmax family).
template <int OP, typename In, int WARP, int BLOCK, typename S>
ONORM_DEV S staged_stats(const In* c, int n, StateScratch<S>& scratch, float& m_c) {
  constexpr int VEC = io<In>::kVec;
  const int tid = static_cast<int>(threadIdx.x);
  if constexpr (OP == kOpSoftmax || OP == kOpLogSoftmax) {
    float m = kNegInf;
#pragma unroll 4
    for (int i = tid * VEC; i < n; i += BLOCK * VEC) {
      float o[VEC];
      smem_vec<In>(c, i, n, kNegInf, o);
#pragma unroll
      for (int j = 0; j < VEC; ++j) m = core::nan_max(m, o[j]);
    }
    m_c = block_allreduce<WARP, BLOCK>(m, scratch.f, MaxOp{});
    const float mm = m_c == kNegInf ? 0.0f : m_c;
    float d = 0.0f;
#pragma unroll 4
    for (int i = tid * VEC; i < n; i += BLOCK * VEC) {
      float o[VEC];
      smem_vec<In>(c, i, n, kNegInf, o);
#pragma unroll
      for (int j = 0; j < VEC; ++j) d += fast_exp(o[j] - mm);
    }
    d = block_allreduce<WARP, BLOCK>(d, scratch.f, AddOp{});
    return m_c == kNegInf ? S::identity() : S::of(m_c, d);
  } else if constexpr (OP == kOpLayerNorm) {
    // The pivot (the float chunk mean), then the corrected two-pass sums around it, reduced
    // together; the state keeps mean = p + s1 / n in double.
    float t = 0.0f;
#pragma unroll 4
    for (int i = tid * VEC; i < n; i += BLOCK * VEC) {
      float o[VEC];
      smem_vec<In>(c, i, n, 0.0f, o);
#pragma unroll
      for (int j = 0; j < VEC; ++j) t += o[j];
    }
    const float p = block_allreduce<WARP, BLOCK>(t, scratch.f, AddOp{}) / static_cast<float>(n);
    Sums2 q{0.0f, 0.0f};
#pragma unroll 4
    for (int i = tid * VEC; i < n; i += BLOCK * VEC) {
      float o[VEC];
      smem_vec<In>(c, i, n, p, o);  // pad with the pivot: no contribution
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float d = o[j] - p;
        q.s1 += d;
        q.s2 += d * d;
      }
    }
    q = block_allreduce<WARP, BLOCK>(q, scratch.p, AddOp{});
    return S::of_pivot(n, p, q.s1, q.s2);
  } else {
    float q = 0.0f;
#pragma unroll 4
    for (int i = tid * VEC; i < n; i += BLOCK * VEC) {
      float o[VEC];
      smem_vec<In>(c, i, n, 0.0f, o);
#pragma unroll
      for (int j = 0; j < VEC; ++j) q += o[j] * o[j];
    }
    q = block_allreduce<WARP, BLOCK>(q, scratch.f, AddOp{});
    return S::of(n, q);
  }
}

// Every thread of the block calls it with the same fin (norms: a row whose statistics fail
// their test is read again from global memory in double, with block reductions:
// row_stats_f64; then `reread_done()` holds this block until every block of the row has read
// it: coop_barrier). Norms: thread 0 takes the test and the coefficients (double arithmetic)
// and shares them: every thread doing it cost the persistent loop registers and spills
// (ptxas sm_90a LayerNorm f32: 52 -> 20 bytes of spill stores). Their next writer is the next
// row's call, after the loop's own barriers.
template <int OP, typename In, int WARP, int BLOCK, typename S, typename ReReadDone>
ONORM_DEV void staged_output_any(const RowArgs& a, const In* c, int n, int64_t row, int64_t col0, const S& fin,
                                 float m_c, ReReadDone reread_done) {
  core::NormCoefs cf{};
  if constexpr (OP == kOpLayerNorm || OP == kOpRmsNorm) {
    __shared__ core::NormCoefs shared_cf;
    __shared__ int shared_ok;
    if (threadIdx.x == 0) {
      shared_ok = state_ok(fin, a.eps);
      if (shared_ok) shared_cf = state_coefs(fin, a.eps);
    }
    shim::sync_threads();
    if (shared_ok) {
      cf = shared_cf;
    } else {
      cf = row_stats_f64<In, WARP, BLOCK>(static_cast<const In*>(a.x) + row * a.xs, a.cols, a.eps, OP == kOpRmsNorm);
      reread_done();
    }
  }
  switch (a.out_dtype) {
    case kF32: staged_output<OP, In, float, BLOCK>(a, c, n, row, col0, fin, m_c, cf); break;
    case kF16: staged_output<OP, In, core::f16_bits, BLOCK>(a, c, n, row, col0, fin, m_c, cf); break;
    default: staged_output<OP, In, core::bf16_bits, BLOCK>(a, c, n, row, col0, fin, m_c, cf); break;
  }
}

// Regimes (b) and (c) with the chunk staged in shared memory: a persistent grid; block b
// serves chunk b % K of rows b / K, b / K + groups, ... The next row's chunk is copied
// (cp.async) while the current one is reduced, merged and written.
//  - K == 1 (s.stages == 2): a block per row, no merge; two buffers.
//  - K > 1, s.stages == 2: the blocks of a row publish their chunk states and merge them at
//    once (coop_merge; cooperative launch: all blocks resident).
//  - K > 1, s.stages == 3 (pipelined): round r publishes its state, then merges and writes
//    round r - 1, whose chunk is still staged; the merge's wait for the other blocks of the
//    row overlaps a whole chunk's reduction. Flags use 4 slots (round % 4): a block can be
//    one round ahead of the slowest block of its row group, never two.
// Dynamic shared memory: s.stages * s.chunk_alloc elements of In.
template <int OP, typename In, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 3) staged_kernel(RowArgs a, SplitArgs s) {
  using S = typename op_state<OP>::type;
  constexpr int VEC = io<In>::kVec;
  extern __shared__ __align__(16) unsigned char staged_smem[];
  __shared__ StateScratch<S> scratch;
  In* bufs = reinterpret_cast<In*>(staged_smem);
  const int64_t K = s.chunks;
  const int64_t chunk = blockIdx.x % K;
  const int64_t first = blockIdx.x - chunk;
  const int64_t col0 = chunk * s.chunk;
  const int n = static_cast<int>(a.cols - col0 < s.chunk ? a.cols - col0 : s.chunk);
  const int tid = static_cast<int>(threadIdx.x);
  Entry* entries = static_cast<Entry*>(s.entries);
  auto issue = [&](int64_t row, In* dst) {
    if (row < a.rows) {
      const In* src = static_cast<const In*>(a.x) + row * a.xs + col0;
      int done = 0;
      if (a.x_vec) {
        const int nv = n / VEC;
        for (int i = tid; i < nv; i += BLOCK) shim::cp_async_16(dst + i * VEC, src + i * VEC);
        done = nv * VEC;
      }
      for (int i = done + tid; i < n; i += BLOCK) dst[i] = src[i];
    }
    shim::cp_async_commit();  // one group per call, empty or not: wait<N> counts stay exact
  };
  const int64_t row0 = blockIdx.x / K;
  int64_t barriers = 0;  // coop_barrier's count
  auto reread_done = [&](int64_t round) {
    return [&, round] {
      if (K > 1) coop_barrier(entries, s.stages == 2 ? 2 : 4, barriers++, round, s.epoch, first, K);
    };
  };
  if (s.stages == 2) {
    issue(row0, bufs);
    int stage = 0;
    int64_t round = 0;
    for (int64_t row = row0; row < a.rows; row += s.groups, ++round) {
      issue(row + s.groups, bufs + (stage ^ 1) * s.chunk_alloc);
      shim::cp_async_wait<1>();
      shim::sync_threads();
      const In* c = bufs + stage * s.chunk_alloc;
      float m_c = 0.0f;
      const S st = staged_stats<OP, In, WARP, BLOCK>(c, n, scratch, m_c);
      const S fin = K > 1 ? coop_merge<WARP, BLOCK>(st, entries, round, s.epoch, first, K, 2, scratch) : st;
      staged_output_any<OP, In, WARP, BLOCK>(a, c, n, row, col0, fin, m_c, reread_done(round));
      shim::sync_threads();  // this buffer is refilled next round
      stage ^= 1;
    }
    return;
  }
  // Pipelined (K > 1, three buffers).
  issue(row0, bufs);
  issue(row0 + s.groups, bufs + s.chunk_alloc);
  float prev_m = 0.0f;
  int64_t round = 0;
  for (int64_t row = row0; row < a.rows; row += s.groups, ++round) {
    shim::cp_async_wait<1>();
    shim::sync_threads();
    const In* c = bufs + (round % 3) * s.chunk_alloc;
    float m_c = 0.0f;
    const S st = staged_stats<OP, In, WARP, BLOCK>(c, n, scratch, m_c);
    coop_publish(st, entries, round, s.epoch, 4);
    if (round > 0) {
      const S fin = coop_collect<WARP, BLOCK>(entries, round - 1, s.epoch, first, K, 4, scratch);
      staged_output_any<OP, In, WARP, BLOCK>(a, bufs + ((round - 1) % 3) * s.chunk_alloc, n, row - s.groups, col0,
                                             fin, prev_m, reread_done(round - 1));
    }
    prev_m = m_c;
    shim::sync_threads();  // buffer (round - 1) % 3 is free
    issue(row + 2 * s.groups, bufs + ((round + 2) % 3) * s.chunk_alloc);
  }
  if (round > 0) {
    const S fin = coop_collect<WARP, BLOCK>(entries, round - 1, s.epoch, first, K, 4, scratch);
    staged_output_any<OP, In, WARP, BLOCK>(a, bufs + ((round - 1) % 3) * s.chunk_alloc, n,
                                           row0 + (round - 1) * s.groups, col0, fin, prev_m, reread_done(round - 1));
  }
}

// Two-read schedule, one launch per phase over a batch of rows: grid (K, batch).
template <int OP, typename In, int WARP, int ITEMS, int BLOCK, int MODE>
__global__ void __launch_bounds__(BLOCK) split_chunk_kernel(RowArgs a, SplitArgs s) {
  using S = typename op_state<OP>::type;
  __shared__ StateScratch<S> scratch;
  const int64_t row = s.row0 + blockIdx.y;
  auto fetch = [&](const S&, S*) -> S { return static_cast<const S*>(s.final_states)[blockIdx.y]; };
  split_chunk<OP, In, WARP, ITEMS, BLOCK, MODE>(a, s, row, blockIdx.x, &scratch, fetch);
}

// Two-read schedule, norms: the finish coefficients of each batch row from its merged state,
// between the merge and the finish, so that a row whose statistics fail their test is read
// again (in double) before any finish block writes: in place is safe. grid (batch), one row
// per block.
template <int OP, typename In, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK) norm_stats_kernel(RowArgs a, SplitArgs s) {
  using S = typename op_state<OP>::type;
  const S fin = static_cast<const S*>(s.final_states)[blockIdx.x];
  const core::NormCoefs cf = row_norm_stats<OP, In, WARP, BLOCK>(a, s.row0 + blockIdx.x, fin);
  if (threadIdx.x == 0) static_cast<core::NormCoefs*>(s.norm_stats)[blockIdx.x] = cf;
}

// Merges each row's `count` states in groups of BLOCK (a fixed tree): out holds
// ceil(count / BLOCK) states per row. The host repeats it until one state per row is left.
template <int OP, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK) merge_states_kernel(const void* in, void* out, int64_t count) {
  using S = typename op_state<OP>::type;
  __shared__ StateScratch<S> scratch;
  const int64_t outs = (count + BLOCK - 1) / BLOCK;
  const int64_t k = static_cast<int64_t>(blockIdx.x) * BLOCK + threadIdx.x;
  const S* src = static_cast<const S*>(in) + blockIdx.y * count;
  S v = k < count ? src[k] : S::identity();
  v = block_allreduce<WARP, BLOCK>(v, scratch.s, CombineOp<S>{});
  if (threadIdx.x == 0) static_cast<S*>(out)[blockIdx.y * outs + blockIdx.x] = v;
}

}  // namespace gpu
}  // namespace onorm
