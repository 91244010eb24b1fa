// The candidates of a row's top k in shared memory (softmax_topk.hpp): a buffer of (key, column)
// entries (core::ops::SoftmaxTopk::key), the filter an element must pass to enter it, and the
// steps on it: appending (a thread reserves its slots with one shared atomic: only threads that
// hold a candidate work), merging a short tail into the sorted top (the exact k-th, cheaply), the
// k-th entry by a radix select, the compaction to the top k, and their sort.
// Every step is exact and its result independent of the entries' order (the atomics' order
// varies run to run): the top k of a set of (key, column) pairs is unique (columns differ), and
// the merge and the sort place each entry by its rank, so a row's results are the same bits in
// any run and any batch.
#pragma once

#include "vendor_shim.hpp"  // first: the vendor runtime defines __host__ / __device__

#include <cstdint>

#include "onlinenorm/core/element.hpp"
#include "onlinenorm/core/ops/softmax_topk.hpp"
#include "reduce.hpp"

namespace onorm {
namespace gpu {

// Entries held: a full buffer is compacted to its top k (k <= SoftmaxTopk::kGpuMaxK), which
// frees at least kTopkSlots - kGpuMaxK slots each time.
constexpr int kTopkSlots = 2048;
static_assert(2 * core::ops::SoftmaxTopk::kGpuMaxK <= kTopkSlots, "a compaction frees half the buffer");
// The radix select's digits: 10 bits, so that a first digit below the keys' common high bits
// spreads a band of candidates over many bins (few atomics on one counter), and the block's
// shared memory stays under 32 KB (two blocks in a 64 KB CDNA LDS).
constexpr int kDigitBits = 10;
constexpr int kDigitBins = 1 << kDigitBits;

// The float a key stands for (SoftmaxTopk::key's inverse; -0 comes back as +0, NaN as a NaN).
ONORM_DEV float value_of_key(uint32_t key) {
  return core::float_of((key & 0x80000000u) ? (key ^ 0x80000000u) : ~key);
}

// What enters the buffer: a key above thr, or with ties, thr itself at a column c with
// (c >> shift) <= prefix (the lowest columns among thr's ties; every column: shift 0,
// prefix INT64_MAX).
struct TopkFilter {
  uint32_t thr;
  bool ties;
  int shift;
  int64_t prefix;

  ONORM_DEV bool pass(uint32_t key, int64_t c) const {
    return key > thr || (ties && key == thr && (c >> shift) <= prefix);
  }
  // A float f such that every value that passes has !(v < f) (NaN included): one compare per
  // element in the tile loop, the exact test only where some element of the block passed it.
  ONORM_DEV float floor() const {
    const uint64_t lo = ties ? uint64_t(thr) : uint64_t(thr) + 1;
    return value_of_key(static_cast<uint32_t>(lo < 0xff800000u ? lo : 0xff800000u));  // at most +inf's key
  }
};

template <int WARP, int BLOCK>
struct TopkCandidates {
  static_assert(kTopkSlots % BLOCK == 0 && kDigitBins % BLOCK == 0, "whole strides");
  uint32_t keys[kTopkSlots];
  int64_t cols[kTopkSlots];
  uint32_t hist[kDigitBins];  // a digit's histogram; the compaction's list of holes
  int64_t warp_sums[BLOCK / WARP];
  struct Bits {
    uint32_t all, any;  // AND and OR of keys
  } bits[BLOCK / WARP];
  uint64_t sel_prefix;
  int sel_need, sel_count;
  int count;  // entries appended (past kTopkSlots: some found no slot)
};

// The exclusive prefix of v over the block in thread order, and the total. Every thread calls
// it; a barrier must separate two calls (warp_sums).
template <int WARP, int BLOCK>
ONORM_DEV int block_exclusive_scan(int v, int& total, int64_t* warp_sums) {
  const int tid = static_cast<int>(threadIdx.x), lane = tid % WARP, warp = tid / WARP;
  int64_t pre = 0, sum = v;
#pragma unroll
  for (int o = 1; o < WARP; o <<= 1) {
    const int64_t other = shim::shfl_xor(sum, o, WARP);
    if (lane & o) pre += other;
    sum += other;
  }
  if (lane == 0) warp_sums[warp] = sum;
  shim::sync_threads();
  int64_t before = 0, all = 0;
#pragma unroll
  for (int w = 0; w < BLOCK / WARP; ++w) {
    const int64_t s = warp_sums[w];
    if (w < warp) before += s;
    all += s;
  }
  total = static_cast<int>(all);
  return static_cast<int>(pre + before);
}

struct KeyBitsOp {
  template <typename B>
  ONORM_DEV B operator()(const B& a, const B& b) const {
    return B{a.all & b.all, a.any | b.any};
  }
};

// One radix pass: the histogram of the digit (x >> shift) & (2^width - 1) over the entries whose
// x >> (shift + width) is `high` (x: the key, or with `by_column` the column among the keys equal
// to `key`), and the bin where the count from the top (from the bottom by column) reaches
// sh.sel_need, which it leaves in sh.sel_prefix (high and the bin), sh.sel_need (what that bin
// must still give) and sh.sel_count (its count).
template <int WARP, int BLOCK, typename Sh>
ONORM_DEV void radix_pass(Sh& sh, int n, bool by_column, uint32_t key, uint64_t high, int shift, int width) {
  constexpr int kPer = kDigitBins / BLOCK;
  const int tid = static_cast<int>(threadIdx.x);
  const int need = sh.sel_need;
  for (int b = tid; b < kDigitBins; b += BLOCK) sh.hist[b] = 0u;
  shim::sync_threads();
  const uint64_t mask = (uint64_t(1) << width) - 1;
  // A run of one bin is counted before its atomic: bands of equal digits queue less.
  int run_bin = -1;
  uint32_t run = 0;
  for (int i = tid; i < n; i += BLOCK) {
    const uint32_t k = sh.keys[i];
    uint64_t x;
    if (by_column) {
      if (k != key) continue;
      x = static_cast<uint64_t>(sh.cols[i]);
    } else {
      x = k;
    }
    if (((x >> shift) >> width) != high) continue;
    const int bin = static_cast<int>((x >> shift) & mask);
    if (bin != run_bin) {
      if (run) atomicAdd(&sh.hist[run_bin], run);
      run_bin = bin;
      run = 0;
    }
    ++run;
  }
  if (run) atomicAdd(&sh.hist[run_bin], run);
  shim::sync_threads();
  // Thread t holds kPer bins in scan order: from the top for keys, from the bottom for columns.
  uint32_t h[kPer];
  int sum = 0;
#pragma unroll
  for (int r = 0; r < kPer; ++r) {
    const int b = by_column ? kPer * tid + r : kDigitBins - 1 - (kPer * tid + r);
    h[r] = sh.hist[b];
    sum += static_cast<int>(h[r]);
  }
  int total;
  int before = block_exclusive_scan<WARP, BLOCK>(sum, total, sh.warp_sums);
#pragma unroll
  for (int r = 0; r < kPer; ++r) {
    const int c = static_cast<int>(h[r]);
    if (before < need && before + c >= need) {
      const int b = by_column ? kPer * tid + r : kDigitBins - 1 - (kPer * tid + r);
      sh.sel_prefix = (high << width) | static_cast<uint64_t>(b);
      sh.sel_need = need - before;
      sh.sel_count = c;
    }
    before += c;
  }
  shim::sync_threads();
}

// The filter that keeps exactly the top k of entries [0, n) (n >= k): the k-th's key thr and,
// where thr's ties are more than the top k take, the columns among them. keys_only: thr alone
// (ties: all; the columns may be unset). Every thread calls it; ends with a barrier.
template <int WARP, int BLOCK, typename Sh>
ONORM_DEV TopkFilter select_kth(Sh& sh, int n, int k, int64_t cols, bool keys_only) {
  const int tid = static_cast<int>(threadIdx.x);
  // The keys' common high bits: the first digit starts below them.
  if (tid == 0) {  // what the first pass looks for (the reduction's barriers publish it)
    sh.sel_need = k;
    sh.sel_count = n;
  }
  typename Sh::Bits b{~0u, 0u};
  for (int i = tid; i < n; i += BLOCK) {
    b.all &= sh.keys[i];
    b.any |= sh.keys[i];
  }
  b = block_allreduce<WARP, BLOCK>(b, sh.bits, KeyBitsOp{});
  const uint32_t varying = b.all ^ b.any;
  int hi = 0;
  while (hi < 32 && (varying >> hi) != 0u) ++hi;  // bits [hi, 32) are common
  uint64_t prefix = hi < 32 ? uint64_t(b.all >> hi) : 0u;
  while (hi > 0) {
    const int shift = hi > kDigitBits ? hi - kDigitBits : 0;
    radix_pass<WARP, BLOCK>(sh, n, false, 0u, prefix, shift, hi - shift);
    prefix = sh.sel_prefix;
    hi = shift;
  }
  const uint32_t thr = static_cast<uint32_t>(prefix);
  int need = sh.sel_need;
  int count = sh.sel_count;  // entries whose key is thr
  TopkFilter f{thr, true, 0, INT64_MAX};
  if (keys_only || count == need) return f;
  // The `need` lowest columns among thr's ties, digit by digit from the top of cols - 1.
  int top = 0;
  while (top < 63 && ((cols - 1) >> top) != 0) ++top;
  uint64_t cprefix = 0;
  int shift = top;
  while (count != need && shift > 0) {  // columns differ: at most the last digit
    const int s = shift > kDigitBits ? shift - kDigitBits : 0;
    radix_pass<WARP, BLOCK>(sh, n, true, thr, cprefix, s, shift - s);
    cprefix = sh.sel_prefix;
    need = sh.sel_need;
    count = sh.sel_count;
    shift = s;
  }
  f.shift = shift;
  f.prefix = static_cast<int64_t>(cprefix);
  return f;
}

// Moves the entries of [0, n) that pass f (exactly k: select_kth's filter) to [0, k): the r-th
// of those beyond k fills the r-th hole below k. Every thread calls it; ends with a barrier.
template <int WARP, int BLOCK, typename Sh>
ONORM_DEV void compact(Sh& sh, int n, int k, const TopkFilter& f) {
  const int tid = static_cast<int>(threadIdx.x);
  int holes = 0, movers = 0;
  for (int i = tid; i < n; i += BLOCK) {
    const bool keep = f.pass(sh.keys[i], sh.cols[i]);
    if (i < k) holes += !keep;
    else movers += keep;
  }
  int total;  // holes and movers side by side: each under 2^16
  const int pre = block_exclusive_scan<WARP, BLOCK>(holes | (movers << 16), total, sh.warp_sums);
  int h = pre & 0xffff, m = pre >> 16;
  for (int i = tid; i < k && i < n; i += BLOCK)
    if (!f.pass(sh.keys[i], sh.cols[i])) sh.hist[h++] = static_cast<uint32_t>(i);
  shim::sync_threads();
  for (int i = tid; i < n; i += BLOCK) {  // the counting loop's order
    if (i < k) continue;
    const uint32_t key = sh.keys[i];
    const int64_t c = sh.cols[i];
    if (!f.pass(key, c)) continue;
    const int dst = static_cast<int>(sh.hist[m++]);
    sh.keys[dst] = key;
    sh.cols[dst] = c;
  }
  shim::sync_threads();
}

// Appends this thread's elements (bit e of mask: value v[e] at column col(e)) to the buffer: one
// atomic reserves a run of slots. Returns the elements that found no slot (the buffer is full:
// the block compacts it, then appends them again).
template <int E, typename Col, typename Sh>
ONORM_DEV uint32_t append(Sh& sh, uint32_t mask, const float* v, Col col) {
  using Topk = core::ops::SoftmaxTopk;
  int slot = atomicAdd(&sh.count, __builtin_popcount(mask));
  uint32_t failed = 0;
#pragma unroll
  for (int e = 0; e < E; ++e)
    if ((mask >> e) & 1u) {
      if (slot < kTopkSlots) {
        sh.keys[slot] = Topk::key(v[e]);
        sh.cols[slot] = col(e);
      } else {
        failed |= 1u << e;
      }
      ++slot;
    }
  return failed;
}

// The most entries merge_tail takes: two a thread.
template <int BLOCK>
constexpr int kMergeMax = 2 * BLOCK;

// Merges the tail [held, n) (any order) into [0, held) (sorted by SoftmaxTopk::before): [0, min(k,
// n)) becomes the first min(k, n) of the n entries, sorted, and sh.count that number. Each entry
// goes to its rank: the sorted entries before it (its index, or a binary search), plus the tail's
// (a count: O(n - held) a thread). n <= kMergeMax. Every thread calls it; ends with a barrier.
template <int BLOCK, typename Sh>
ONORM_DEV void merge_tail(Sh& sh, int held, int n, int k) {
  using Topk = core::ops::SoftmaxTopk;
  const int tid = static_cast<int>(threadIdx.x);
  constexpr int R = kMergeMax<BLOCK> / BLOCK;
  uint32_t key[R];
  int64_t col[R];
  int rank[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int i = tid + r * BLOCK;
    key[r] = 0u;
    col[r] = 0;
    rank[r] = k;  // not stored
    if (i >= n) continue;
    key[r] = sh.keys[i];
    col[r] = sh.cols[i];
    int tail_before = 0;
    for (int j = held; j < n; ++j) tail_before += Topk::before(sh.keys[j], sh.cols[j], key[r], col[r]);
    int held_before = i;
    if (i >= held) {
      int lo = 0, hi = held;
      while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (Topk::before(sh.keys[mid], sh.cols[mid], key[r], col[r])) lo = mid + 1;
        else hi = mid;
      }
      held_before = lo;
    }
    rank[r] = held_before + tail_before;
  }
  shim::sync_threads();
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (rank[r] < k) {
      sh.keys[rank[r]] = key[r];
      sh.cols[rank[r]] = col[r];
    }
  if (tid == 0) sh.count = n < k ? n : k;
  shim::sync_threads();
}

// Sorts entries [0, n) by SoftmaxTopk::before (a bitonic sort over the next power of two, the
// padding last: key 0 is no value's key). Every thread calls it; ends with a barrier.
template <int BLOCK, typename Sh>
ONORM_DEV void sort_entries(Sh& sh, int n) {
  using Topk = core::ops::SoftmaxTopk;
  const int tid = static_cast<int>(threadIdx.x);
  int n2 = 1;
  while (n2 < n) n2 <<= 1;
  for (int i = n + tid; i < n2; i += BLOCK) {
    sh.keys[i] = 0u;
    sh.cols[i] = INT64_MAX;
  }
  shim::sync_threads();
  for (int size = 2; size <= n2; size <<= 1)
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int p = tid; p < n2 / 2; p += BLOCK) {
        const int i = 2 * stride * (p / stride) + p % stride, j = i + stride;
        const bool forward = (i & size) == 0;  // this pair's run is in `before` order
        const uint32_t ki = sh.keys[i], kj = sh.keys[j];
        const int64_t ci = sh.cols[i], cj = sh.cols[j];
        if (Topk::before(kj, cj, ki, ci) == forward) {
          sh.keys[i] = kj;
          sh.keys[j] = ki;
          sh.cols[i] = cj;
          sh.cols[j] = ci;
        }
      }
      shim::sync_threads();
    }
}

}  // namespace gpu
}  // namespace onorm
