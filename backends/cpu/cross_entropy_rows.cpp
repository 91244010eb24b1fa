#include "cross_entropy_rows.hpp"

#include <omp.h>

#include <algorithm>
#include <memory>

#include "kernels.hpp"
#include "onlinenorm/core/ops/cross_entropy.hpp"
#include "onlinenorm/core/sum.hpp"
#include "row_request.hpp"
#include "scalar_rows.hpp"

namespace onorm {
namespace cpu {
namespace {

using core::ops::CrossEntropy;
using core::ops::Softmax;

// The sum of row r's logits: float sums over fixed chunks, merged pairwise in double.
template <typename In>
double logit_sum(const In* x, int64_t cols) {
  core::PairwiseFold<core::Sum<double>> fold;
  for (int64_t b = 0; b < cols; b += kScalarChunk) {
    const int64_t e = std::min(cols, b + kScalarChunk);
    float s = 0.0f;
    for (int64_t j = b; j < e; ++j) s += load_as<float>(x, j);
    fold.push(core::Sum<double>::of(s));
  }
  return fold.result().s;
}

void run_row(size_t target, const onorm_request& q, int64_t r, float* scratch) {
  const int64_t cols = q.in[0].cols;
  const onorm_dtype xt = q.in[0].dtype;
  const bool grad = q.outputs > 0;
  const bool f32_out = grad && q.out[0].dtype == ONORM_F32;
  void* y = grad ? const_cast<void*>(row_of(q.out[0], r)) : nullptr;
  float* lift = f32_out ? static_cast<float*>(y) : scratch;
  const onorm_request s = softmax_row_request(q, r, lift);
  const bool simd = simd_supports(target, s);
  const auto params = CrossEntropy::params(q.param);

  core::MaxSum<double> ms;
  if (simd) {
    core::PairwiseFold<core::MaxSum<float>> fold;
    for (int64_t k = 0; k * kChunk < cols; ++k) fold.push(simd_chunk_state(Softmax{}, target, s, 0, k, kOptPrefetch));
    const core::MaxSum<float> m = fold.result();
    ms = core::MaxSum<double>::of(m.m, m.d);
  } else {
    ms = scalar_state_of_row<Softmax, double>(s, 0);
  }
  double sum = 0.0;
  const void* x = row_of(q.in[0], r);
  if (params.label_smoothing > 0.0)
    with_dtype(xt, [&](auto tag) { sum = logit_sum(static_cast<const typename decltype(tag)::type*>(x), cols); });
  const int64_t t = q.targets[r];
  const bool reads = CrossEntropy::reads_target(t, cols, q.ignore_index);
  const double x_t = reads ? load_at(x, xt, t) : 0.0;
  const CrossEntropy::Coefs c = CrossEntropy::row(core::LogitStats<double>::of(ms, sum), cols, t, q.ignore_index, x_t,
                                                  params, &q.row_out[0][r], q.row_out[1] ? &q.row_out[1][r] : nullptr);
  if (!grad) return;
  const onorm_dtype yt = q.out[0].dtype;
  if (c.zero) {
    for (int64_t j = 0; j < cols; ++j) store_at(y, yt, j, 0.0);
    return;
  }
  const core::ops::ScalarMath<float> m;
  if (simd) {
    // exp(x - M) S by softmax's finish (its chunks' kept lift: the same bits as softmax), into
    // dlogits (f32) or the scratch row; then the shift, and the target from its saved logit.
    const Softmax::Coefs<float> sc{c.pivot, c.scale};
    for (int64_t k = 0; k * kChunk < cols; ++k)
      simd_write_chunk(Softmax{}, target, s, 0, k, sc, simd_chunk_state(Softmax{}, target, s, 0, k, kOptPrefetch),
                       kOptPrefetch);
    if (f32_out) {
      if (c.shift != 0.0f)
        for (int64_t j = 0; j < cols; ++j) lift[j] -= c.shift;
    } else {
      for (int64_t j = 0; j < cols; ++j) store_at(y, yt, j, static_cast<double>(lift[j] - c.shift));
    }
  } else {
    // Dtypes the SIMD kernels do not take: every element in float, through memory once.
    for (int64_t j = 0; j < cols; ++j)
      store_at(y, yt, j, static_cast<double>(CrossEntropy::grad(m, c, static_cast<float>(load_at(x, xt, j)), false)));
  }
  if (c.target >= 0) store_at(y, yt, c.target, static_cast<double>(CrossEntropy::grad(m, c, static_cast<float>(x_t), true)));
}

}  // namespace

void cross_entropy_run(size_t target, const onorm_request& q, int threads) {
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
