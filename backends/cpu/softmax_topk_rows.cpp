#include "softmax_topk_rows.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <type_traits>
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

// The entries a row's selection keeps at once: its k first and k + kSpare candidates beyond them
// (each selection of the k first, an nth_element, then waits for k + kSpare new entries), or
// the whole row where that is shorter.
constexpr int64_t kSpare = 64;
int64_t kept_entries(int64_t cols, int64_t k) { return std::min(cols, 2 * k + kSpare); }

// The first column j in [from, cols) whose value beats `bar`: !(x[j] <= bar); cols where none
// does. In SIMD where the target loads the dtype (kernels_select.cpp).
template <typename In>
int64_t find_beating(size_t target, onorm_dtype dt, const In* x, int64_t from, int64_t cols, float bar) {
  const int64_t found = simd_find_beating(target, x, dt, from, cols, bar);
  if (found >= 0) return found;
  while (from < cols && load_as<float>(x, from) <= bar) ++from;
  return from;
}

// The scan both keepers share: an element enters only where it beats the bar, the k-th best
// value among the columns before it (an equal one loses the tie to k earlier columns). `keep(e)`
// takes an entry and returns true where entries[k - 1] is then the k-th best so far, whose value
// becomes the bar. Against a bar that is not NaN, a value beats it exactly where !(v <= bar)
// (keys order as the values, -0 as +0, a NaN above all), which the scan tests a vector at a
// time between entries (find_beating). A NaN bar (the k first are all NaN) ends the scan:
// nothing after them can enter. The row is scanned in consecutive pieces (scan(b, e), in column
// order, the bar carried over), so that each piece is scanned while the statistics' pass has
// it in L1.
template <typename In, typename Keep>
class FirstKScan {
 public:
  FirstKScan(size_t target, onorm_dtype dt, const In* x, int64_t k, const Entry* entries, Keep& keep)
      : target_(target), dt_(dt), x_(x), k_(k), entries_(entries), keep_(keep) {}
  // The same over the candidate columns c[0, n) (in column order; simd_topk_candidates) that
  // lie before e: the columns between them cannot enter. Returns how many it took, so that
  // the next piece starts after them.
  int64_t scan_candidates(const int32_t* c, int64_t n, int64_t e) {
    int64_t i = 0;
    for (; i < n && c[i] < e && !ended_; ++i) {
      const float v = load_as<float>(x_, c[i]);
      if (!(barred_ && v <= bar_)) take(c[i], v);
    }
    return i;
  }
  void scan(int64_t j, int64_t end) {
    for (; j < end && !ended_; ++j) {
      if (barred_ && (j = find_beating(target_, dt_, x_, j, end, bar_)) == end) return;
      take(j, load_as<float>(x_, j));
    }
  }

 private:
  // Column j (value v, past the bar) to the keeper; where it then holds k entries, their k-th's
  // value is the bar, and a NaN there ends the scan.
  void take(int64_t j, float v) {
    if (!keep_(Entry{SoftmaxTopk::key(v), j})) return;
    if (entries_[k_ - 1].first == SoftmaxTopk::key(std::nanf(""))) ended_ = true;
    bar_ = load_as<float>(x_, entries_[k_ - 1].second);
    barred_ = true;
  }

  size_t target_;
  onorm_dtype dt_;
  const In* x_;
  int64_t k_;
  const Entry* entries_;
  Keep& keep_;
  bool barred_ = false, ended_ = false;
  float bar_ = 0.0f;
};

// Keeps the row's k first entries, in order, in entries[0, k) (room: kept_entries): the entries
// pile up, and when they fill up the k first of them stay (nth_element) and the k-th's value
// becomes the bar; finish() selects and orders the last pile.
class BatchedFirstK {
 public:
  BatchedFirstK(Entry* entries, int64_t k, int64_t cols) : entries_(entries), k_(k), cap_(kept_entries(cols, k)) {}
  bool operator()(const Entry& e) {
    entries_[n_++] = e;
    if (n_ < cap_) return false;
    std::nth_element(entries_, entries_ + (k_ - 1), entries_ + n_, entry_before);
    n_ = k_;
    return true;
  }
  void finish() {
    if (k_ < n_) std::nth_element(entries_, entries_ + k_, entries_ + n_, entry_before);
    std::sort(entries_, entries_ + k_, entry_before);
  }

 private:
  Entry* entries_;
  int64_t k_, cap_, n_ = 0;
};

// The same for small k (kSortedMaxK): the k best so far kept in order in entries[0, k), each
// element that beats the bar moved into its place and the k-th dropped. Its cost is O(k) an
// entry and no selection, against BatchedFirstK's nth_element over 2k + kSpare entries, which
// short rows pay in full before the bar exists.
constexpr int64_t kSortedMaxK = 64;
class SortedFirstK {
 public:
  SortedFirstK(Entry* entries, int64_t k) : entries_(entries), k_(k) {}
  bool operator()(const Entry& e) {
    int64_t i = n_ < k_ ? n_++ : k_ - 1;  // a new last place, or the k-th's
    for (; i > 0 && entry_before(e, entries_[i - 1]); --i) entries_[i] = entries_[i - 1];
    entries_[i] = e;
    return n_ == k_;
  }
  void finish() {}

 private:
  Entry* entries_;
  int64_t k_, n_ = 0;
};

// Rows up to this long select from their candidates (simd_topk_candidates) rather than by the
// scan: their entries come a few columns apart, and each restart of the scan cost more than
// the columns it skipped (bench/RESULTS.md).
constexpr int64_t kCandidateMaxCols = 4096;
// The smallest k whose candidates the SIMD keeper (simd_topk_of_candidates) takes: without a
// branch an entry, it beats the sorted keeper's mispredicted insertions at k = 8 and 16, and
// loses at k = 4 (slightly) and k = 2, whose few candidates the sorted keeper takes in a few
// predictable steps (bench/RESULTS.md).
constexpr int64_t kSimdKeeperMinK = 8;

void run_row(size_t target, const onorm_request& q, int64_t r, Entry* entries, int32_t* candidates) {
  const int64_t cols = q.in[0].cols, k = q.k;
  const onorm_dtype xt = q.in[0].dtype;
  const void* x = row_of(q.in[0], r);
  float placeholder = 0.0f;
  const onorm_request s = softmax_row_request(q, r, &placeholder);

  // The selection scans each chunk of the row right after the statistics' pass has read it;
  // a short row whose k first the lanes hold, k from kSimdKeeperMinK, takes them from its
  // candidates in SIMD first.
  const int64_t nc = candidates ? simd_topk_candidates(target, x, xt, cols, k, candidates) : -1;
  uint32_t keys[kSortedMaxK];
  int64_t picked_cols[kSortedMaxK];
  const int64_t picked = nc >= 0 && k >= kSimdKeeperMinK && k <= kSortedMaxK
                             ? simd_topk_of_candidates(target, x, xt, candidates, nc, k, keys, picked_cols)
                             : -1;
  for (int64_t i = 0; i < picked; ++i) entries[i] = Entry{keys[i], picked_cols[i]};
  core::MaxSum<double> ms;
  if (picked >= 0) {
    if (!q.renormalize) ms = softmax_row_state(target, s, simd_supports(target, s));
  } else {
    with_dtype(xt, [&](auto tag) {
      using In = typename decltype(tag)::type;
      const auto select = [&](auto&& keeper) {
        FirstKScan<In, std::remove_reference_t<decltype(keeper)>> first_k(target, xt, static_cast<const In*>(x), k, entries,
                                                                           keeper);
        const int32_t* c = candidates;
        int64_t left = nc;
        const auto chunk = [&](int64_t b, int64_t e) {
          if (left < 0) return first_k.scan(b, e);
          const int64_t used = first_k.scan_candidates(c, left, e);
          c += used, left -= used;
        };
        if (q.renormalize) {
          chunk(0, cols);
        } else {
          ms = softmax_row_state(target, s, simd_supports(target, s), chunk);
        }
        keeper.finish();
      };
      if (k <= kSortedMaxK) select(SortedFirstK(entries, k));
      else select(BatchedFirstK(entries, k, cols));
    });
  }

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
  // Room for every column and a vector past them: a compressed store may load and store the
  // whole last vector of the list (Highway's BlendedStore on targets without masked stores).
  const size_t room = cols <= kCandidateMaxCols ? static_cast<size_t>(cols) + 64 : 0;
  std::unique_ptr<int32_t[]> candidates(room ? new int32_t[room * static_cast<size_t>(nt)] : nullptr);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t r0 = rows * t / n, r1 = rows * (t + 1) / n;
    for (int64_t r = r0; r < r1; ++r)
      run_row(target, q, r, scratch.get() + kept * static_cast<size_t>(t),
              room ? candidates.get() + room * static_cast<size_t>(t) : nullptr);
  }
}

}  // namespace cpu
}  // namespace onorm
