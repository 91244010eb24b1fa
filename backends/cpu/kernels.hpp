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
  int mode;  // kFinite, kAllZero (softmax of an all -inf row) / kAllNegInf, kAllNaN
  float a;   // softmax: M; log_softmax: M; layer_norm: mean; rms_norm: unused
  float b;   // softmax: 1/D; log_softmax: log D; layer_norm / rms_norm: rstd
};
enum RowMode { kFinite = 0, kAllZero = 1, kAllNegInf = 2, kAllNaN = 3 };

// Chunk states of every op, as stored by ChunkStats (the member for q.op is filled).
union ChunkState {
  core::MaxSum<float> ms;
  core::Welford<float> w;
  core::SumSq<float> ss;
};

// Folds the merged state of row r into its RowFinal (inline: it runs once per row).
inline RowFinal final_of(const onorm_request& q, const ChunkState& s, int64_t r) {
  const float eps = static_cast<float>(q.eps);
  const bool overflowed = (q.op == ONORM_OP_LAYER_NORM && !std::isfinite(s.w.m2 + s.w.mean)) ||
                          (q.op == ONORM_OP_RMS_NORM && !std::isfinite(s.ss.s));
  if (overflowed) {
    // f32 sums overflow for |x| beyond ~1e19 (or the row holds inf/NaN): redo in double.
    RowFinal f{kFinite, 0, 0};
    scalar_norm_stats_f64(q, r, f.a, f.b);
    return f;
  }
  if (q.op == ONORM_OP_LAYER_NORM) return RowFinal{kFinite, s.w.mean, s.w.rstd(eps)};
  if (q.op == ONORM_OP_RMS_NORM) return RowFinal{kFinite, 0, s.ss.rstd(eps)};
  const core::MaxSum<float>& ms = s.ms;
  if (ms.m != ms.m || ms.d != ms.d) return RowFinal{kAllNaN, 0, 0};
  if (ms.is_identity()) return RowFinal{q.op == ONORM_OP_SOFTMAX ? kAllZero : kAllNegInf, 0, 0};
  if (q.op == ONORM_OP_SOFTMAX) return RowFinal{kFinite, ms.m, ms.inv_d()};
  return RowFinal{kFinite, ms.m, core::log_of(ms.d)};
}
// The factor that turns a softmax chunk's exp(x - m_chunk) into exp(x - M) / D.
inline float chunk_scale(const RowFinal& fin, float chunk_max) {
  if (fin.mode == kAllNaN) return std::numeric_limits<float>::quiet_NaN();
  if (fin.mode == kAllZero || chunk_max == core::neg_infinity<float>()) return 0.0f;
  if (chunk_max == fin.a) return fin.b;  // exp(0) = 1: skip the call, same value
  return core::exp_of(chunk_max - fin.a) * fin.b;
}

// Merges the chunk states of one row in the fixed pairwise tree (clobbers the array).
ChunkState merge_states_many(onorm_op op, ChunkState* states, int64_t count);
inline ChunkState merge_states(onorm_op op, ChunkState* states, int64_t count) {
  return count == 1 ? states[0] : merge_states_many(op, states, count);
}

// Options of a call, a bit mask. The defaults (stream for large outputs, prefetch, one exp
// per element for softmax rows that fit the scratch row) are the fast ones; the others exist
// so that the benchmark can measure each optimisation against its absence in one process
// (ONLINENORM_CPU_TUNE=nostream,noprefetch,twoexp). kOptTwoExp changes softmax's rounding,
// never the thread-count independence.
enum : unsigned { kOptStream = 1u, kOptPrefetch = 2u, kOptTwoExp = 4u };

// Per-target entry points (index from target_index()).
bool simd_supports(size_t target_index, onorm_dtype in, onorm_dtype out);
// Whole rows [r0, r1): statistics and write while the row is in cache.
void simd_run_rows(size_t target_index, const onorm_request& q, int64_t r0, int64_t r1, unsigned opts);
// States of chunks [k0, k1) of row r into states[0 .. k1-k0).
// With scratch_row (softmax, cols <= kScratchCols), exp(x - m_chunk) goes to scratch_row[col].
void simd_chunk_stats(size_t target_index, const onorm_request& q, int64_t r, int64_t k0, int64_t k1,
                      ChunkState* states, unsigned opts, float* scratch_row);
// Write pass of columns [c0, c1) of row r.
// With scratch_row, y = scratch_row[col] * scale instead (softmax, [c0, c1) within one chunk).
void simd_write_cols(size_t target_index, const onorm_request& q, int64_t r, int64_t c0, int64_t c1,
                     const RowFinal& f, unsigned opts, const float* scratch_row, float scale);

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
