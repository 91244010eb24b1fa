// The CPU backend's SIMD kernels as seen from the target-independent code: one table of
// functions per Highway target (kernels.cpp compiles kernels-inl.h once per target), chosen
// per context by table index, so contexts with different target caps coexist in a process.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backend_interface.h"
#include "onlinenorm/core/algebra.hpp"
#include "scalar_rows.hpp"

namespace onorm {
namespace cpu {

// Fixed partition of a row into chunks whose statistics merge pairwise (core::merge_pairwise).
// It never depends on the thread count or the target, so results are bitwise reproducible.
constexpr int64_t kChunk = 4096;
// Softmax rows up to this many columns keep exp(x - m_chunk) in an f32 scratch row (one exp
// per element; 4 MB at most, in L2 or L3); longer rows recompute exp in the write pass.
// Depends only on cols, so every thread count takes the same path.
constexpr int64_t kScratchCols = int64_t(1) << 20;

// What the write pass of one row needs, derived from the row's merged state.
struct RowFinal {
  int mode;  // softmax family: kFinite, kAllZero (all -inf row) / kAllNegInf, kAllNaN; norms: kFinite
  float a;   // softmax: M; log_softmax: M
  float b;   // softmax: 1/D; log_softmax: log D
  core::NormCoefs norm;  // norms: the finish and the mean / rstd outputs
};
enum RowMode { kFinite = 0, kAllZero = 1, kAllNegInf = 2, kAllNaN = 3 };

// Chunk states of every op (the member for q.op is filled). The norms' chunk sums are float;
// their merge runs in double so that Chan's between-chunk term keeps offset data's digits.
union ChunkState {
  core::MaxSum<float> ms;
  core::Welford<double> w;
  core::SumSq<double> ss;
};

// A chunk state with its op, the element type of core::PairwiseFold: the chunk states of one
// row merge in the fixed pairwise tree as they arrive, with no array and no allocation.
struct OpState {
  onorm_op op;
  ChunkState s;
  static OpState identity();  // never merged: rows have at least one chunk
  static OpState combine(const OpState& a, const OpState& b);
};
using RowFold = core::PairwiseFold<OpState>;

// Folds the merged state of row r into its RowFinal (inline: it runs once per row, and short
// rows feel every nanosecond). Norms: rows whose statistics fit float finish from float mean
// and rstd (k = 1); the others (float chunk sums that overflowed or underflowed, eps beyond
// FLT_MAX; core/norm_stats.hpp) get them in double, re-read from the row where the sums
// themselves are lost, and finish scaled.
inline RowFinal final_of(const onorm_request& q, const OpState& st, int64_t r) {
  RowFinal f{kFinite, 0.0f, 0.0f, core::NormCoefs{1.0f, 0.0f, 0.0f, 0.0f, 0.0f}};
  if (q.op == ONORM_OP_LAYER_NORM || q.op == ONORM_OP_RMS_NORM) {
    const bool ln = q.op == ONORM_OP_LAYER_NORM;
    const double sums = ln ? st.s.w.m2 + st.s.w.mean : st.s.ss.s;
    const double var = ln ? st.s.w.variance() : st.s.ss.mean_square();
    double mean = ln ? st.s.w.mean : 0.0;
    const float var_eps = static_cast<float>(var) + static_cast<float>(q.param[0]);
    if (core::norm_float_stats_ok(static_cast<float>(sums), var_eps)) {
      f.norm = core::norm_coefs_f32(static_cast<float>(mean), 1.0f / std::sqrt(var_eps));
      return f;
    }
    double rstd = 1.0 / std::sqrt(var + q.param[0]);
    if (!core::norm_double_stats_ok(sums, var + q.param[0])) scalar_norm_stats_f64(q, r, mean, rstd);
    f.norm = core::norm_coefs_scaled(mean, rstd);
    return f;
  }
  const core::MaxSum<float>& ms = st.s.ms;
  if (ms.m != ms.m || ms.d != ms.d) return RowFinal{kAllNaN, 0, 0, f.norm};
  if (ms.is_identity()) return RowFinal{q.op == ONORM_OP_SOFTMAX ? kAllZero : kAllNegInf, 0, 0, f.norm};
  if (q.op == ONORM_OP_SOFTMAX) return RowFinal{kFinite, ms.m, ms.inv_d(), f.norm};
  return RowFinal{kFinite, ms.m, core::log_of(ms.d), f.norm};
}

// The factor that turns a softmax chunk's exp(x - m_chunk) into exp(x - M) / D.
inline float chunk_scale(const RowFinal& fin, float chunk_max) {
  if (fin.mode == kAllNaN) return std::numeric_limits<float>::quiet_NaN();
  if (fin.mode == kAllZero || chunk_max == core::neg_infinity<float>()) return 0.0f;
  if (chunk_max == fin.a) return fin.b;  // exp(0) = 1: skip the call, same value
  return core::exp_of(chunk_max - fin.a) * fin.b;
}

// Options of a call, a bit mask. The defaults (stream for large outputs, prefetch, one exp
// per element for softmax rows that fit the scratch row) are the fast ones; the others exist
// so that the benchmark can measure each optimisation against its absence in one process
// (ONLINENORM_TUNE=stream=0,prefetch=0,twoexp=1; src/tune.hpp). kOptTwoExp changes softmax's rounding,
// never the thread-count independence.
enum : unsigned { kOptStream = 1u, kOptPrefetch = 2u, kOptTwoExp = 4u };

// Per-target entry points (index from target_index()).
bool simd_supports(size_t target_index, onorm_dtype in, onorm_dtype out);
// Whole rows [r0, r1): statistics and write while the row is in cache. scratch: the
// softmax_scratch_cols floats, allocated by the caller (no allocation inside).
void simd_run_rows(size_t target_index, const onorm_request& q, int64_t r0, int64_t r1, unsigned opts,
                   float* scratch);
// State of chunk k of row r.
OpState simd_chunk_state(size_t target_index, const onorm_request& q, int64_t r, int64_t k, unsigned opts);
// Write pass of chunk k of row r. Softmax rows that simd_run_rows keeps in its scratch
// (softmax_scratch_cols) are written as exp(x - m_chunk) * chunk_scale, recomputed: the same
// bits as the scratch holds, so a row split over threads equals the same row in a batch.
void simd_write_chunk(size_t target_index, const onorm_request& q, int64_t r, int64_t k, const RowFinal& f,
                      unsigned opts, float chunk_max);

// Scratch floats per thread that simd_run_rows needs for this request (0: none): the row's
// exp(x - m_chunk) and each chunk's max.
inline int64_t softmax_scratch_cols(const onorm_request& q, unsigned opts) {
  if (q.op != ONORM_OP_SOFTMAX || q.in[0].cols > kScratchCols || (opts & kOptTwoExp)) return 0;
  return q.in[0].cols + (q.in[0].cols + kChunk - 1) / kChunk;
}

// Target bookkeeping (Highway bit masks; lower bit = better on x86).
struct TargetInfo {
  int64_t bit;       // Highway target bit
  const char* name;  // Highway's name (hwy::TargetName)
};
// Targets this machine can run and this build compiled, best first.
const std::vector<TargetInfo>& available_targets();
// Every target name Highway knows on this architecture (for error messages).
std::string known_target_names();
// Resolves a cap name to the best available target not better than it; false if unknown.
bool choose_target(const char* cap, TargetInfo& out);
size_t target_index(int64_t bit);

}  // namespace cpu
}  // namespace onorm
