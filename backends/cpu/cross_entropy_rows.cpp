#include "cross_entropy_rows.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "kernels.hpp"
#include "onlinenorm/core/ops/cross_entropy.hpp"
#include "onlinenorm/core/sum.hpp"
#include "partial_states.hpp"
#include "row_request.hpp"
#include "scalar_rows.hpp"

namespace onorm {
namespace cpu {
namespace {

using core::ops::CrossEntropy;
using core::ops::Softmax;
using Record = CrossEntropy::StateRecord;

// The sum of a row's logits: float sums (scaled: core::kLogitSumScale) over fixed chunks, merged
// pairwise in double.
template <typename In>
double logit_sum(const In* x, int64_t cols) {
  core::PairwiseFold<core::Sum<double>> fold;
  for (int64_t b = 0; b < cols; b += kScalarChunk) {
    const int64_t e = std::min(cols, b + kScalarChunk);
    float s = 0.0f;
    for (int64_t j = b; j < e; ++j) s += load_as<float>(x, j) * core::kLogitSumScale;
    fold.push(core::Sum<double>::of(s * core::kLogitSumUnscale));
  }
  return fold.result().s;
}


// Row r's state over the slice: softmax's statistics from the SIMD chunk kernels (the softmax
// call's chunks and merge tree) or the portable passes, the logit sum when smoothing needs it,
// and the target's logit when the slice holds it (read before anything is written).
Record slice_record(size_t target, const onorm_request& q, const onorm_request& s, int64_t r, bool simd) {
  const int64_t cols = q.in[0].cols;
  if (cols == 0) return Record::identity();
  const core::MaxSum<double> ms = softmax_row_state(target, s, simd);
  const void* x = row_of(q.in[0], r);
  double sum = 0.0;
  if (CrossEntropy::params(q.param).label_smoothing > 0.0)
    with_dtype(q.in[0].dtype, [&](auto tag) { sum = logit_sum(static_cast<const typename decltype(tag)::type*>(x), cols); });
  const int64_t t = q.targets[r], tl = t - q.cols_offset;
  const bool holds = t != q.ignore_index && tl >= 0 && tl < cols;
  return CrossEntropy::record_of(core::LogitStats<double>::of(ms, sum), cols, holds,
                                 holds ? static_cast<float>(load_at(x, q.in[0].dtype, tl)) : 0.0f);
}

// Row r's loss and lse from its (merged) state, and its slice of dlogits: softmax's SIMD finish
// exp(x - M) S into dlogits (f32) or the scratch row, the smoothing's shift taken off in float,
// the target's element from its saved logit, rounded once to dlogits' dtype.
void finish_row(size_t target, const onorm_request& q, const onorm_request& s, int64_t r, const Record& rec, bool simd,
                const float* lift) {
  const int64_t cols = q.in[0].cols, t = q.targets[r], tl = t - q.cols_offset;
  const CrossEntropy::Coefs c =
      CrossEntropy::row(CrossEntropy::stats_of(rec), rec.cols, t, q.ignore_index, rec.target_logit,
                        CrossEntropy::params(q.param), &q.row_out[0][r], q.row_out[1] ? &q.row_out[1][r] : nullptr);
  if (q.outputs == 0 || cols == 0) return;
  void* y = const_cast<void*>(row_of(q.out[0], r));
  const onorm_dtype yt = q.out[0].dtype, xt = q.in[0].dtype;
  if (c.zero) {
    for (int64_t j = 0; j < cols; ++j) store_at(y, yt, j, 0.0);
    return;
  }
  const bool target_here = c.target >= 0 && tl >= 0 && tl < cols;
  const core::ops::ScalarMath<float> m;
  if (simd) {
    const Softmax::Coefs<float> sc{c.pivot, c.scale};
    for (int64_t k = 0; k * kChunk < cols; ++k)
      simd_write_chunk(Softmax{}, target, s, 0, k, sc, simd_chunk_state(Softmax{}, target, s, 0, k, kOptPrefetch),
                       kOptPrefetch);
    if (yt == ONORM_F32) {
      // dlogits' row may start at any address: its floats move through memcpy.
      char* yb = static_cast<char*>(y);
      if (c.shift != 0.0f)
        for (int64_t j = 0; j < cols; ++j) {
          float v;
          std::memcpy(&v, yb + 4 * j, 4);
          v -= c.shift;
          std::memcpy(yb + 4 * j, &v, 4);
        }
    } else {
      for (int64_t j = 0; j < cols; ++j) store_at(y, yt, j, static_cast<double>(lift[j] - c.shift));
    }
  } else {
    // Dtypes the SIMD kernels do not take: every element in float, through memory once.
    const void* x = row_of(q.in[0], r);
    for (int64_t j = 0; j < cols; ++j)
      store_at(y, yt, j, static_cast<double>(CrossEntropy::grad(m, c, static_cast<float>(load_at(x, xt, j)), false)));
  }
  if (target_here) store_at(y, yt, tl, static_cast<double>(CrossEntropy::grad(m, c, rec.target_logit, true)));
}

void run_row(size_t target, const onorm_request& q, int64_t r, float* scratch) {
  // exp(x - M) S goes straight into an f32 dlogits row (the SIMD stores take any address), else
  // into the scratch row.
  const bool f32_out = q.outputs > 0 && q.out[0].dtype == ONORM_F32;
  void* lift = f32_out ? const_cast<void*>(row_of(q.out[0], r)) : scratch;
  const onorm_request s = softmax_row_request(q, r, lift);
  const bool simd = q.in[0].cols > 0 && simd_supports(target, s);
  switch (q.stage) {
    case ONORM_STAGE_STATS: {
      const Record rec = slice_record(target, q, s, r, simd);
      std::memcpy(static_cast<char*>(q.state_out) + r * static_cast<int64_t>(sizeof rec), &rec, sizeof rec);
      break;
    }
    case ONORM_STAGE_FINISH: {
      Record rec;
      std::memcpy(&rec, static_cast<const char*>(q.state_in) + r * static_cast<int64_t>(sizeof rec), sizeof rec);
      finish_row(target, q, s, r, rec, simd, static_cast<const float*>(scratch));
      break;
    }
    default: finish_row(target, q, s, r, slice_record(target, q, s, r, simd), simd, scratch);
  }
}

}  // namespace

void cross_entropy_run(size_t target, const onorm_request& q, int threads) {
  if (q.stage == ONORM_STAGE_MERGE) {
    merge_parts<Record>(q, 0, q.state_rows);
    return;
  }
  const int64_t rows = q.in[0].rows, cols = q.in[0].cols;
  const int nt = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, rows)));
  // A float row per thread for 16-bit (and f64) dlogits; allocated before anything is written.
  const bool scratch_rows = q.outputs > 0 && q.out[0].dtype != ONORM_F32;
  const size_t per_thread = scratch_rows ? static_cast<size_t>(cols) : 0;
  std::unique_ptr<float[]> scratch(per_thread ? new float[per_thread * static_cast<size_t>(nt)] : nullptr);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t r0 = rows * t / n, r1 = rows * (t + 1) / n;
    for (int64_t r = r0; r < r1; ++r) run_row(target, q, r, scratch.get() + per_thread * static_cast<size_t>(t));
  }
}

}  // namespace cpu
}  // namespace onorm
