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

// The entries a row's selection keeps at once: its k first and a block's worth of candidates
// beyond them (2k + kBlock), or the whole row where that is shorter.
constexpr int64_t kBlock = 64;
int64_t kept_entries(int64_t cols, int64_t k) { return std::min(cols, 2 * k + kBlock); }

// The row's k first entries, in order, into entries[0, k) (room: kept_entries). One scan: an
// element enters only where it beats the bar, the k-th best value among the columns before it
// (an equal one loses the tie to k earlier columns); when the entries fill up, the k first of
// them stay and the k-th's value becomes the bar. Against a bar that is not NaN, a value beats
// it exactly where !(v <= bar) (keys order as the values, -0 as +0, a NaN above all), a test
// without branches: a block of columns none of which beats the bar is passed over whole. A NaN
// bar (the k first are all NaN) ends the scan: nothing after them can enter.
template <typename In>
void select_first_k(const In* x, int64_t cols, int64_t k, Entry* entries) {
  const int64_t cap = kept_entries(cols, k);
  int64_t n = 0;
  bool barred = false;
  float bar = 0.0f;
  float v[kBlock];
  for (int64_t j0 = 0; j0 < cols; j0 += kBlock) {
    const int64_t m = std::min(kBlock, cols - j0);
    bool beats = !barred;
    for (int64_t i = 0; i < m; ++i) {
      v[i] = load_as<float>(x, j0 + i);
      beats |= !(v[i] <= bar);
    }
    if (!beats) continue;
    for (int64_t i = 0; i < m; ++i) {
      if (barred && v[i] <= bar) continue;
      entries[n++] = Entry{SoftmaxTopk::key(v[i]), j0 + i};
      if (n < cap) continue;
      std::nth_element(entries, entries + (k - 1), entries + n, entry_before);
      n = k;
      if (entries[k - 1].first == SoftmaxTopk::key(std::nanf(""))) {
        j0 = cols;  // the scan ends
        break;
      }
      bar = load_as<float>(x, entries[k - 1].second);
      barred = true;
    }
  }
  if (k < n) std::nth_element(entries, entries + k, entries + n, entry_before);
  std::sort(entries, entries + k, entry_before);
}

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
    select_first_k(static_cast<const In*>(x), cols, k, entries);
  });

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
  const size_t kept = static_cast<size_t>(kept_entries(cols, q.k));
  std::unique_ptr<Entry[]> scratch(new Entry[kept * static_cast<size_t>(nt)]);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t r0 = rows * t / n, r1 = rows * (t + 1) / n;
    for (int64_t r = r0; r < r1; ++r) run_row(target, q, r, scratch.get() + kept * static_cast<size_t>(t));
  }
}

}  // namespace cpu
}  // namespace onorm
