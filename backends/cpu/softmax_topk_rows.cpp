#include "softmax_topk_rows.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "kernels.hpp"
#include "onlinenorm/core/ops/softmax_topk.hpp"
#include "row_request.hpp"
#include "scalar_rows.hpp"

namespace onorm {
namespace cpu {
namespace {

using core::ops::Softmax;
using core::ops::SoftmaxTopk;
using Entry = std::pair<uint32_t, int64_t>;  // (key, column)

bool entry_before(const Entry& a, const Entry& b) { return SoftmaxTopk::before(a.first, a.second, b.first, b.second); }

void run_row(size_t target, const onorm_request& q, int64_t r, Entry* entries) {
  const int64_t cols = q.in[0].cols, k = q.k;
  const onorm_dtype xt = q.in[0].dtype;
  const void* x = row_of(q.in[0], r);
  float placeholder = 0.0f;
  const onorm_request s = softmax_row_request(q, r, &placeholder);

  core::MaxSum<double> ms;
  if (!q.renormalize) ms = softmax_row_state(target, s, simd_supports(target, s));
  with_dtype(xt, [&](auto tag) {
    using In = typename decltype(tag)::type;
    const In* xr = static_cast<const In*>(x);
    for (int64_t j = 0; j < cols; ++j) entries[j] = Entry{SoftmaxTopk::key(load_as<float>(xr, j)), j};
  });
  if (k < cols) std::nth_element(entries, entries + k, entries + cols, entry_before);
  std::sort(entries, entries + k, entry_before);

  // The values: the whole row's softmax (Softmax's rules: a NaN or +inf row is NaN, an all
  // -inf row 0), or the softmax over the selected logits, the first of which is their maximum.
  if (q.renormalize) {
    ms = core::MaxSum<double>::identity();
    for (int64_t i = 0; i < k; ++i)
      ms = core::MaxSum<double>::combine(ms, core::MaxSum<double>::of(load_at(x, xt, entries[i].second), 1.0));
  }
  bool ok = true;
  const Softmax::Coefs<double> c = Softmax::coefs(ms, Softmax::Params{}, ok);
  void* v = const_cast<void*>(row_of(q.out[0], r));
  int64_t* idx = q.indices + r * k;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t j = entries[i].second;
    idx[i] = j;
    store_at(v, q.out[0].dtype, i, std::exp(load_at(x, xt, j) - c.pivot) * c.scale);
  }
}

}  // namespace

void softmax_topk_run(size_t target, const onorm_request& q, int threads) {
  const int64_t rows = q.in[0].rows, cols = q.in[0].cols;
  const int nt = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, rows)));
  std::unique_ptr<Entry[]> scratch(new Entry[static_cast<size_t>(cols) * static_cast<size_t>(nt)]);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t r0 = rows * t / n, r1 = rows * (t + 1) / n;
    for (int64_t r = r0; r < r1; ++r) run_row(target, q, r, scratch.get() + static_cast<size_t>(cols) * static_cast<size_t>(t));
  }
}

}  // namespace cpu
}  // namespace onorm
