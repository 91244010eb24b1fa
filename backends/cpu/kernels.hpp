// The CPU backend's SIMD kernels as seen from the target-independent code: one table of
// functions per Highway target (kernels*.cpp compile the -inl.h files once per target), chosen
// per context by table index, so contexts with different target caps coexist in a process.
// Every kernel is generic over the op (core/ops/row_op.hpp); the per-op entry points below are
// expanded from the op list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend_interface.h"
#include "norm_backward_rows.hpp"
#include "onlinenorm/core/ops/dispatch.hpp"
#include "validate.hpp"

namespace onorm {
namespace cpu {

// Fixed partition of a row into chunks whose states merge pairwise (core::PairwiseFold).
// It never depends on the thread count or the target, so results are bitwise reproducible.
constexpr int64_t kChunk = 4096;
// Rows of ops that keep their lift (Op::kKeepsLift: softmax's exp(x - m_chunk)) up to this
// many columns keep it in an f32 scratch row (1 MB at most) and finish from it; longer rows
// compute it again in the write pass. The kept lift pays only while it and the row stay in
// L2 (2 MB a core on the Xeon measured): a scratch row that spills is written to and read
// back from L3, which costs more than the exp it saves (bench/RESULTS.md). Depends only on
// cols, so every thread count takes the same path.
constexpr int64_t kScratchCols = int64_t(1) << 18;
constexpr int64_t kMaxScratchChunks = kScratchCols / kChunk;

// Short rows of a 16-bit type, and short f32 LayerNorm rows, run kRowGroup at a time
// (row_drivers-inl.h, RowGroup): a short row's scalar work is a chain of dependent steps, and
// the chains of a group overlap. Only where that chain is long: the 16-bit conversions, and
// LayerNorm's double statistics (two divisions and a square root); the other f32 rows of that
// length run near memory speed already and lose to the grouping. Only rows up to 1024 columns
// (at 4096 a group and its kept lift outgrow L1). Measured in bench/RESULTS.md.
constexpr int64_t kRowGroup = 4;
constexpr int64_t kRowGroupCols = 1024;
inline bool row_groups(const onorm_request& q) {
  if (q.in[0].cols > kRowGroupCols) return false;
  return q.in[0].dtype == ONORM_BF16 || q.in[0].dtype == ONORM_F16 || q.op == ONORM_OP_LAYER_NORM;
}

// Streaming (non-temporal) stores once the output is too large to stay in cache.
constexpr int64_t kStreamBytes = int64_t(16) << 20;

// Options of a call, a bit mask. The defaults (stream for large outputs, prefetch, the kept
// lift for rows that fit the scratch row) are the fast ones; the others exist so that the
// benchmark can measure each optimisation against its absence in one process
// (ONLINENORM_TUNE=stream=0,prefetch=0,twoexp=1; src/tune.hpp). kOptTwoExp (no kept lift)
// changes softmax's rounding, never the thread-count independence.
// kOptNextRow (set per call where next_row_fits says so): the write pass prefetches the next
// row's columns rather than the next chunk's.
enum : unsigned { kOptStream = 1u, kOptPrefetch = 2u, kOptTwoExp = 4u, kOptNextRow = 8u };

// Scratch floats per thread that simd_run_rows needs for this request (0: none): the row's
// kept lift, a group's for rows of one chunk.
template <class Op>
inline int64_t kept_scratch_cols(const onorm_request& q, unsigned opts) {
  if (!Op::kKeepsLift || q.in[0].cols > kScratchCols || (opts & kOptTwoExp)) return 0;
  return row_groups(q) ? kRowGroup * q.in[0].cols : q.in[0].cols;
}

// Whether a row's write pass should fetch the next row (whole rows, one thread each). A row of
// more than one chunk reads memory only in its chunk passes, and its write pass (x again from
// L2, y out) leaves the read side of memory idle: fetching the next row meanwhile keeps both
// directions busy, as a copy does. Only where the next row fits in half of L2 beside this row
// and its column vectors; beyond that it would evict what the write pass reads. Shorter rows'
// next chunk is a row or more ahead already. Only the norms: softmax and log-softmax wait on
// their exp, not on memory, and lose the prefetches' issue slots.
template <class Op>
inline bool next_row_fits(const onorm_request& q, int64_t l2_bytes) {
  if (q.op != ONORM_OP_LAYER_NORM && q.op != ONORM_OP_RMS_NORM) return false;
  const int64_t cols = q.in[0].cols, in_bytes = static_cast<int64_t>(dtype_size(q.in[0].dtype));
  return cols > kChunk && cols * (2 + Op::kCols) * in_bytes <= l2_bytes / 2;
}

// The norms' residual add done inside simd_run_rows (residual_add-inl.h): row r of the
// request's in[0] (h: residual_out's rows or scratch, written) is round(x + residual) of row
// row0 + r, added a chunk (a group of short rows) at a time just before the passes that read
// it, so that x and the residual are read once and the passes read h from L1. x, residual and
// h are of one dtype.
struct ResidualSum {
  onorm_rows x, residual;
  int64_t row0;
};

// Per-target entry points (index from target_index()).
// Whether the SIMD kernels take this request's dtypes (the others run scalar_run_rows).
bool simd_supports(size_t target_index, const onorm_request& q);
// Whether the target's kernels load and store dtype t (f16 needs F16C or its like; the scalar
// target has none of the 16-bit types in SIMD).
bool simd_loads(size_t target_index, onorm_dtype t);
// Whole rows [r0, r1): statistics and write while the row is in cache. scratch: the
// kept_scratch_cols floats, allocated by the caller (no allocation inside). sum: in[0] is
// computed as it is read (ResidualSum), or nullptr.
void simd_run_rows(size_t target_index, const onorm_request& q, int64_t r0, int64_t r1, unsigned opts,
                   float* scratch, const ResidualSum* sum = nullptr);
// Rows [r0, r0 + n) of a quantized norm output (I8 or F8_E4M3; core/quantize.hpp's rules, with
// the dynamic scales into q.y_scale) from their float values: n rows of cols floats in v, which
// is overwritten where the rule divides.
void simd_quantize_rows(size_t target_index, const onorm_request& q, int64_t r0, int64_t n, float* v);

// The norms' residual add (residual_add-inl.h) of a block of rows before the norm reads them:
// rows [r0, r0 + n) of x and res into rows [h0, h0 + n) of h, all of x's dtype; in SIMD where
// the target loads that dtype (simd_loads), else by the portable loop; h by streaming stores
// where `stream` (h is residual_out, written to memory whether or not the norm finds it in cache).
void simd_add_rows(size_t target_index, const onorm_rows& x, const onorm_rows& res, const onorm_rows& h, int64_t r0,
                   int64_t h0, int64_t n, bool stream);

// Softmax top-k's scan (kernels_select.cpp): the first column j in [from, cols) of a row x of
// dtype dt with !(x[j] <= bar) (bar not NaN); cols where there is none; -1 where the target has
// no SIMD loads of dt (the caller scans itself).
int64_t simd_find_beating(size_t target_index, const void* x, onorm_dtype dt, int64_t from, int64_t cols, float bar);
// A short row's candidates for its k first (kernels_select.cpp): the columns, in order, that
// can be among them, written to out (room for cols + 64 int32); how many. Every column of the k
// first is one; the others are few on most rows. -1 where the target has no SIMD loads of dt
// or k is more than its f32 lanes (the caller scans itself).
int64_t simd_topk_candidates(size_t target_index, const void* x, onorm_dtype dt, int64_t cols, int64_t k, int32_t* out);
// The k first of a row's candidates c[0, n) (simd_topk_candidates' list), in the selection
// order: their keys (SoftmaxTopk::key) and columns; returns how many (min(k, n)), or -1 where
// the target has no SIMD loads of dt or k is more than its 32-bit lanes (the caller selects).
int64_t simd_topk_of_candidates(size_t target_index, const void* x, onorm_dtype dt, const int32_t* c, int64_t n,
                                int64_t k, uint32_t* keys, int64_t* cols);

// The norms' backward (a column op): whether the SIMD rows take q (x, dy, dx and dresidual of
// one dtype they vectorize), and rows [r0, r1) of it (norm_backward_simd-inl.h says what block
// and group hold).
bool simd_backward_supports(size_t target_index, const onorm_request& q);
void simd_backward_rows(size_t target_index, const onorm_request& q, const BackwardCall& cols, int64_t r0,
                        int64_t r1, float* block, double* group);
// Per op: the state of chunk k of row r, and the write pass of chunk k of row r from the row's
// coefficients (row_coefs) and the chunk's state. Rows that simd_run_rows finishes from the
// kept lift are written with the chunk's coefficients (Op::chunk_coefs) from the lift computed
// again: the same bits as the scratch holds, so a row split over threads equals the same row
// in a batch.
#define ONORM_CPU_DECLARE_CHUNK_KERNELS(ID, name, Type)                                                       \
  core::ops::Type::Merged simd_chunk_state(core::ops::Type, size_t target_index, const onorm_request& q,     \
                                           int64_t r, int64_t k, unsigned opts);                              \
  void simd_write_chunk(core::ops::Type, size_t target_index, const onorm_request& q, int64_t r, int64_t k, \
                        const core::ops::Type::Coefs<float>& row, const core::ops::Type::Merged& chunk,     \
                        unsigned opts);
ONORM_OP_LIST(ONORM_CPU_DECLARE_CHUNK_KERNELS)
#undef ONORM_CPU_DECLARE_CHUNK_KERNELS

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
