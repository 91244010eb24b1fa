// The CPU backend's entry in the registry: the module table, the choice of SIMD target per
// context, and the spreading of a request over OpenMP threads.
//
// Threads: rows are spread over threads when there are at least as many rows as threads;
// otherwise long rows are split into their fixed chunks, whose states are computed in
// parallel, merged in the fixed tree, and written in parallel. Which path runs never changes
// the arithmetic (same chunks, same merge tree, same per-element formula), so the result is
// bitwise the same for every thread count.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "backend_interface.h"
#include "kernels.hpp"
#include "onlinenorm/core/pairwise.hpp"
#include "row_coefs.hpp"
#include "norm_backward_rows.hpp"
#include "option_blocks.hpp"
#include "option_rows.hpp"
#include "partial_states.hpp"
#include "softmax_topk_rows.hpp"
#include "cross_entropy_rows.hpp"
#include "folded_columns.hpp"
#include "request_form.hpp"
#include "scalar_rows.hpp"
#include "tune.hpp"
#include "widened_rows.hpp"

namespace onorm {
namespace cpu {
namespace {

// Rows at least this long are split over threads when there are fewer rows than threads.
constexpr int64_t kSplitCols = 4 * kChunk;

struct CpuContext {
  TargetInfo target;
  int64_t l2_bytes;  // one core's L2 (next_row_fits)
  unsigned tune_off = 0;  // options switched by ONLINENORM_TUNE (benchmarking only; kOptTwoExp: on)
  size_t index;  // entry in the HWY_EXPORT tables
  std::string name;
};

// Where the system does not say (sysconf 0 or -1): the smallest L2 of the x86 cores measured.
constexpr int64_t kL2BytesUnknown = int64_t(1) << 20;

int64_t l2_cache_bytes() {
#ifdef _SC_LEVEL2_CACHE_SIZE
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (l2 > 0) return l2;
#endif
  return kL2BytesUnknown;
}

int device_count(char*, size_t) { return 1; }

onorm_status open(int device, void** impl, char* err, size_t err_len) {
  if (device != 0) {
    std::snprintf(err, err_len, "cpu backend has one device (0); asked for %d", device);
    return ONORM_ERROR_BACKEND_UNAVAILABLE;
  }
  const char* cap = std::getenv("ONLINENORM_CPU_TARGET");
  TargetInfo target;
  if (!choose_target(cap, target)) {
    std::snprintf(err, err_len, "ONLINENORM_CPU_TARGET='%s' is not a Highway target name; valid names: %s", cap,
                  known_target_names().c_str());
    return ONORM_ERROR_INVALID_ARGUMENT;
  }
  auto* ctx = new CpuContext;
  ctx->target = target;
  ctx->l2_bytes = l2_cache_bytes();
  if (!tune::get("stream", 1)) ctx->tune_off |= kOptStream;
  if (!tune::get("prefetch", 1)) ctx->tune_off |= kOptPrefetch;
  if (tune::get("twoexp", 0)) ctx->tune_off |= kOptTwoExp;
  ctx->index = target_index(target.bit);
  // A cap this build or machine does not have runs the next lower target: say which, so that
  // ONLINENORM_CPU_TARGET=EMU128 (not compiled where SCALAR is) never silently means SCALAR.
  std::string capped;
  if (cap && *cap && std::strcmp(cap, target.name) != 0) capped = std::string("; ") + cap + " not available here";
  ctx->name = std::string("cpu (") + target.name + ", " + std::to_string(omp_get_max_threads()) + " threads" + capped +
              ")";
  *impl = ctx;
  return ONORM_OK;
}

void close(void* impl) { delete static_cast<CpuContext*>(impl); }
const char* name(void* impl) { return static_cast<CpuContext*>(impl)->name.c_str(); }
onorm_status set_stream(void*, void*, char*, size_t) { return ONORM_OK; }
onorm_status synchronize(void*, char*, size_t) { return ONORM_OK; }

int supports_dtype(void*, onorm_dtype dtype, int is_input) {
  if (!is_input && (dtype == ONORM_I8 || dtype == ONORM_F8_E4M3)) return 1;  // quantized norm outputs
  return dtype == ONORM_F32 || dtype == ONORM_F16 || dtype == ONORM_BF16 || dtype == ONORM_F64;
}

// Problems this small run on the calling thread: waking the OpenMP team costs more than the
// work, and a team whose threads are busy elsewhere can stall a tiny call for milliseconds.
constexpr int64_t kSerialElements = int64_t(1) << 15;

int threads_for(const onorm_request& q) {
  return q.in[0].rows * q.in[0].cols < kSerialElements ? 1 : omp_get_max_threads();
}

// Rows spread over threads, each row whole on one: the scalar kernels (plain, or the norms'
// options).
void run_scalar(const onorm_request& q, int threads) {
  const int64_t rows = q.in[0].rows;
  const bool options = !version1_form(q);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int64_t r = 0; r < rows; ++r) {
    if (options) option_run_rows(q, r, r + 1);
    else scalar_run_rows(q, r, r + 1);
  }
}

// Fewer rows than threads and long rows: every chunk of every row is a task. Same chunks,
// same merge tree and same per-element arithmetic as simd_run_rows (rows that it finishes from
// the kept lift are written from the same lift computed again), so a row gives the same bits
// here as in a large batch. Scratch: one state per chunk, not a copy of the input.
template <class Op>
void run_split(const CpuContext& c, const onorm_request& q, unsigned opts, int threads) {
  const int64_t rows = q.in[0].rows, cols = q.in[0].cols;
  const int64_t chunks = (cols + kChunk - 1) / kChunk;
  const int64_t tasks = rows * chunks;
  std::vector<typename Op::Merged> states(static_cast<size_t>(tasks));
  std::vector<FloatCoefs<Op>> coefs(static_cast<size_t>(rows));
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t t = 0; t < tasks; ++t) states[static_cast<size_t>(t)] = simd_chunk_state(Op{}, c.index, q, t / chunks, t % chunks, opts);
  for (int64_t r = 0; r < rows; ++r) {
    core::PairwiseFold<typename Op::Merged> fold;
    for (int64_t k = 0; k < chunks; ++k) fold.push(states[static_cast<size_t>(r * chunks + k)]);
    coefs[static_cast<size_t>(r)] = row_coefs<Op>(q, fold.result(), r);
  }
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t r = t / chunks;
    simd_write_chunk(Op{}, c.index, q, r, t % chunks, coefs[static_cast<size_t>(r)], states[static_cast<size_t>(t)], opts);
  }
}

// Rows spread over threads; each thread's scratch row is allocated here, before the parallel
// region, so that an allocation failure is a status and not std::terminate.
void run_rows(const CpuContext& c, const onorm_request& q, unsigned opts, int threads) {
  const int64_t rows = q.in[0].rows;
  const int nt = static_cast<int>(std::min<int64_t>(threads, rows));
  const size_t per_thread = static_cast<size_t>(
      core::ops::visit(q.op, [&](auto op) { return kept_scratch_cols<decltype(op)>(q, opts); }));
  std::unique_ptr<float[]> scratch(per_thread ? new float[per_thread * static_cast<size_t>(nt)] : nullptr);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t r0 = rows * t / n, r1 = rows * (t + 1) / n;
    if (r1 > r0) simd_run_rows(c.index, q, r0, r1, opts, scratch.get() + per_thread * static_cast<size_t>(t));
  }
}

// The norms' options around the SIMD kernels (option_blocks.hpp): rows spread over threads,
// each thread's scratch blocks allocated before the parallel region.
void run_option_blocks(const CpuContext& c, const onorm_request& q, unsigned opts, int threads) {
  const int64_t rows = q.in[0].rows;
  const int nt = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, rows)));
  std::vector<std::unique_ptr<OptionBlockScratch>> scratch(static_cast<size_t>(nt));
  for (auto& s : scratch) s.reset(new OptionBlockScratch(q));
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t r0 = rows * t / n, r1 = rows * (t + 1) / n;
    if (r1 > r0) option_blocks_run(c.index, q, r0, r1, opts, *scratch[static_cast<size_t>(t)]);
  }
}

onorm_status run(void* impl, const onorm_request* request, char* err, size_t err_len) {
  const CpuContext& c = *static_cast<const CpuContext*>(impl);
  const onorm_request& q = *request;
  const int threads = threads_for(q);
  try {
    if (core::ops::is_column_op(q.op)) {
      norm_backward_run(c.index, q, threads);
      return ONORM_OK;
    }
    if (q.op == ONORM_OP_CROSS_ENTROPY) {
      cross_entropy_run(c.index, q, threads);
      return ONORM_OK;
    }
    if (q.op == ONORM_OP_SOFTMAX_TOPK) {
      softmax_topk_run(c.index, q, threads);
      return ONORM_OK;
    }
    // Partial row states; finishes the SIMD kernels do not take read their states in the
    // portable kernels (below).
    if (q.stage != ONORM_STAGE_WHOLE && !(q.stage == ONORM_STAGE_FINISH && !simd_finish_fits(c.index, q))) {
      partial_states_run(c.index, q, threads, kOptPrefetch);
      return ONORM_OK;
    }
    // Columns of another dtype or with an offset: folded into f32 first (f32 rows, and 16-bit
    // rows widened a block at a time).
    std::unique_ptr<FoldedColumns> folded;
    if (FoldedColumns::applies(c.index, q)) folded.reset(new FoldedColumns(q));
    const onorm_request& w = folded ? folded->request() : q;
    const int64_t rows = w.in[0].rows, cols = w.in[0].cols;
    const int64_t out_bytes = rows * cols * static_cast<int64_t>(w.out[0].dtype == ONORM_F32 ? 4 : 2);
    unsigned opts = kOptPrefetch | (out_bytes >= kStreamBytes ? kOptStream : 0u);
    opts = (opts & ~c.tune_off) | (c.tune_off & kOptTwoExp);
    if (folded && w.in[0].dtype != ONORM_F32) {  // FoldedColumns::applies took it for widened_rows
      widened_rows_run(c.index, w, opts, threads);
      return ONORM_OK;
    }
    if (w.stage == ONORM_STAGE_WHOLE && !version1_form(w) && option_blocks_fit(c.index, w)) {
      run_option_blocks(c, w, opts, threads);
      return ONORM_OK;
    }
    // f64, f16 without F16C, inputs of mixed dtypes; the norms' other options.
    if (w.stage == ONORM_STAGE_FINISH || !version1_form(w) || !simd_supports(c.index, w)) {
      run_scalar(w, threads);
      return ONORM_OK;
    }
    if (rows < threads && cols >= kSplitCols)
      core::ops::visit(w.op, [&](auto op) { run_split<decltype(op)>(c, w, opts, threads); });
    else {
      if (core::ops::visit(w.op, [&](auto op) { return next_row_fits<decltype(op)>(w, c.l2_bytes); }))
        opts |= kOptNextRow;
      run_rows(c, w, opts, threads);
    }
  } catch (const std::bad_alloc&) {
    // Scratch is taken before any output is written: nothing was written.
    std::snprintf(err, err_len, "cpu: out of memory for the scratch of a %lld x %lld call",
                  static_cast<long long>(q.in[0].rows), static_cast<long long>(q.in[0].cols));
    return ONORM_ERROR_OUT_OF_MEMORY;
  }
  return ONORM_OK;
}

onorm_status alloc(void*, size_t bytes, void** out, char* err, size_t err_len) {
  *out = std::malloc(bytes ? bytes : 1);
  if (*out) return ONORM_OK;
  std::snprintf(err, err_len, "cpu: could not allocate %zu bytes", bytes);
  return ONORM_ERROR_OUT_OF_MEMORY;
}
onorm_status release(void*, void* ptr, char*, size_t) {
  std::free(ptr);
  return ONORM_OK;
}
onorm_status copy(void*, void* dst, const void* src, size_t bytes, onorm_copy_kind, char*, size_t) {
  std::memmove(dst, src, bytes);
  return ONORM_OK;
}

const onorm_backend_module kModule = {
    ONORM_BACKEND_MODULE_ABI, ONORM_BACKEND_CPU, "cpu", device_count, open, close, name,
    set_stream, synchronize, supports_dtype, run, alloc, release, copy};

}  // namespace
}  // namespace cpu

extern "C" const onorm_backend_module* onorm_cpu_backend_module(void) { return &cpu::kModule; }

}  // namespace onorm

extern "C" ONORM_API int onorm_cpu_targets(const char** names, int capacity) {
  const std::vector<onorm::cpu::TargetInfo>& list = onorm::cpu::available_targets();
  const int count = static_cast<int>(list.size());
  for (int i = 0; i < count && i < capacity && names; ++i) names[i] = list[static_cast<size_t>(i)].name;
  return count;
}
