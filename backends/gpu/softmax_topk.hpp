// Softmax top-k on GPUs (core/ops/softmax_topk.hpp; API.md, "softmax top-k"), shared by CUDA
// and HIP: softmax_topk_kernel, a block per row (a grid-stride loop over the rows), k up to
// SoftmaxTopk::kGpuMaxK:
//   1. the row's softmax coefficients from its MaxSum (row_logit_stats.hpp), unless renormalized;
//   2. a radix select of the k-th largest key (SoftmaxTopk::key), 8 bits a pass from the top,
//      with a shared-memory histogram (integer atomics: exact in any order);
//   3. the candidates in shared memory: every key above the k-th, and the k-th's ties in
//      column order, tile by tile, until enough are held (a tile's ties all enter: the sort
//      keeps the lowest columns); a shared slot counter (the order of arrival does not
//      matter: step 4 orders them);
//   4. a bitonic sort of the candidates by (key descending, column ascending): SoftmaxTopk::before;
//   5. the first k: their columns, and their softmax over the row (exp(x - M) / D), or with
//      renormalize over the k selected (their max, the sum of exp in the block's fixed tree).
// An all -inf row gives values 0 and columns 0..k-1 (all keys tie); a NaN row NaN values
// (NaN keys come first) and k distinct columns. A row's results depend on that row alone.
#pragma once

#include "vendor_shim.hpp"  // first: the vendor runtime defines __host__ / __device__

#include <algorithm>
#include <cstdint>

#include "onlinenorm/core/ops/softmax.hpp"
#include "onlinenorm/core/ops/softmax_topk.hpp"
#include "row_args.hpp"
#include "row_logit_stats.hpp"

namespace onorm {
namespace gpu {

constexpr int kTopkBlock = 256;
// Candidates held at once: the keys above the k-th (k - need), ties up to need - 1 before the
// last tile, and that tile's (at most a block's): under k + kTopkBlock, a power of two above.
constexpr int kTopkSlots = 2048;
static_assert(core::ops::SoftmaxTopk::kGpuMaxK + kTopkBlock <= kTopkSlots, "the candidates fit");
constexpr int kRadixBits = 8;
constexpr int kRadixBins = 1 << kRadixBits;

struct TopkArgs {
  const void* x;
  int64_t x_stride;
  int x_vec;  // every row 16-byte aligned
  void* values;
  int64_t values_stride;
  int values_dtype;
  int64_t* indices;
  int64_t rows, cols, k;
  int renormalize;
};

// The shared memory of a block's row.
template <int WARP, int BLOCK>
struct TopkShared {
  unsigned long long hist[kRadixBins];
  uint32_t keys[kTopkSlots];
  int64_t cols[kTopkSlots];
  core::LogitStats<double> stats[BLOCK / WARP];
  float sums[BLOCK / WARP];
  uint32_t prefix;
  int64_t need;
  int count, ties;
};

// Step 2: the k-th largest key of the row and how many of its ties the top k hold (need, >= 1).
template <typename In, int BLOCK, typename Sh>
ONORM_DEV uint32_t kth_key(const In* x, int64_t cols, int64_t k, Sh& sh, int64_t& need_out) {
  using Topk = core::ops::SoftmaxTopk;
  const int tid = static_cast<int>(threadIdx.x);
  uint32_t prefix = 0;
  int64_t need = k;
  for (int shift = 32 - kRadixBits; shift >= 0; shift -= kRadixBits) {
    for (int b = tid; b < kRadixBins; b += BLOCK) sh.hist[b] = 0;
    shim::sync_threads();
    const uint32_t high = shift + kRadixBits >= 32 ? 0u : ~0u << (shift + kRadixBits);  // the digits chosen
    // A thread counts a run of one bin before its atomic: rows of many equal keys (masked,
    // all -inf) would otherwise queue every element on one counter.
    int run_bin = -1;
    unsigned long long run = 0;
    for (int64_t c = tid; c < cols; c += BLOCK) {
      const uint32_t key = Topk::key(io<In>::load1(x + c));
      if ((key & high) != prefix) continue;
      const int bin = static_cast<int>((key >> shift) & (kRadixBins - 1));
      if (bin != run_bin) {
        if (run) atomicAdd(&sh.hist[run_bin], run);
        run_bin = bin;
        run = 0;
      }
      ++run;
    }
    if (run) atomicAdd(&sh.hist[run_bin], run);
    shim::sync_threads();
    if (tid == 0) {
      // From the top bin down: the bin where the count reaches `need`.
      int64_t above = 0;
      int b = kRadixBins - 1;
      for (; b > 0; --b) {
        const int64_t h = static_cast<int64_t>(sh.hist[b]);
        if (above + h >= need) break;
        above += h;
      }
      sh.prefix = prefix | (static_cast<uint32_t>(b) << shift);
      sh.need = need - above;
    }
    shim::sync_threads();
    prefix = sh.prefix;
    need = sh.need;
  }
  need_out = need;
  return prefix;
}

// Step 3: the candidates into sh.keys / sh.cols; returns their count.
template <typename In, int BLOCK, typename Sh>
ONORM_DEV int gather_candidates(const In* x, int64_t cols, int64_t k, uint32_t kth, int64_t need, Sh& sh) {
  using Topk = core::ops::SoftmaxTopk;
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) sh.count = sh.ties = 0;
  shim::sync_threads();
  bool ties_open = true;  // fewer than `need` ties held before this tile
  for (int64_t base = 0; base < cols; base += BLOCK) {
    const int64_t c = base + tid;
    if (c < cols) {
      const uint32_t key = Topk::key(io<In>::load1(x + c));
      if (key > kth || (key == kth && ties_open)) {
        const int slot = atomicAdd(&sh.count, 1);
        if (key == kth) atomicAdd(&sh.ties, 1);
        if (slot < kTopkSlots) {  // always (kTopkSlots): never out of bounds
          sh.keys[slot] = key;
          sh.cols[slot] = c;
        }
      }
    }
    shim::sync_threads();
    const int64_t ties = sh.ties, above = sh.count - ties;
    shim::sync_threads();  // every thread has read the counts before the next tile's atomics
    ties_open = ties < need;
    if (!ties_open && above >= k - need) break;  // block-uniform: every key above the k-th is held
  }
  return sh.count < kTopkSlots ? sh.count : kTopkSlots;
}

// Step 4: sorts the n candidates by SoftmaxTopk::before (padded to a power of two with entries
// that come last: key 0 is no value's key, NaN's being the largest).
template <int BLOCK, typename Sh>
ONORM_DEV void sort_candidates(int n, Sh& sh) {
  using Topk = core::ops::SoftmaxTopk;
  const int tid = static_cast<int>(threadIdx.x);
  int n2 = 1;
  while (n2 < n) n2 <<= 1;
  for (int i = n + tid; i < n2; i += BLOCK) {
    sh.keys[i] = 0;
    sh.cols[i] = INT64_MAX;
  }
  shim::sync_threads();
  for (int size = 2; size <= n2; size <<= 1)
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = tid; i < n2; i += BLOCK) {
        const int j = i ^ stride;
        if (j <= i) continue;
        const bool forward = (i & size) == 0;  // this pair's run is in `before` order
        const bool j_first = Topk::before(sh.keys[j], sh.cols[j], sh.keys[i], sh.cols[i]);
        if (j_first == forward) {
          const uint32_t tk = sh.keys[i];
          sh.keys[i] = sh.keys[j];
          sh.keys[j] = tk;
          const int64_t tc = sh.cols[i];
          sh.cols[i] = sh.cols[j];
          sh.cols[j] = tc;
        }
      }
      shim::sync_threads();
    }
}

template <typename In, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK) softmax_topk_kernel(TopkArgs a) {
  using Sm = core::ops::Softmax;
  __shared__ TopkShared<WARP, BLOCK> sh;
  const GpuMath m;
  const int tid = static_cast<int>(threadIdx.x);
  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const In* x = static_cast<const In*>(a.x) + row * a.x_stride;
    Sm::Coefs<float> cf{0.0f, 0.0f};
    bool ok;
    if (!a.renormalize) cf = Sm::narrow(Sm::coefs(block_logit_stats<In, WARP, BLOCK>(x, a.cols, a.x_vec != 0, sh.stats).ms,
                                                  Sm::Params{}, ok));
    int64_t need = 0;
    const uint32_t kth = kth_key<In, BLOCK>(x, a.cols, a.k, sh, need);
    const int n = gather_candidates<In, BLOCK>(x, a.cols, a.k, kth, need, sh);
    sort_candidates<BLOCK>(n, sh);
    if (a.renormalize) {
      // The softmax of the k selected: their max is the first's value (NaN first, if any).
      const float top = io<In>::load1(x + sh.cols[0]);
      const float p = Sm::pivot(top, a.k);
      float d = 0.0f;
      for (int64_t i = tid; i < a.k; i += BLOCK) d += m.exp(io<In>::load1(x + sh.cols[i]) - p);
      d = block_allreduce<WARP, BLOCK>(d, sh.sums, AddOp{});
      cf = Sm::narrow(Sm::coefs(Sm::state<float>(a.k, top, p, &d), Sm::Params{}, ok));
    }
    for (int64_t i = tid; i < a.k; i += BLOCK) {
      const int64_t c = sh.cols[i];
      const float v = io<In>::load1(x + c);
      store_dtype(a.values, a.values_dtype, row * a.values_stride + i, Sm::finish(m, cf, &v, &v));
      a.indices[row * a.k + i] = c;
    }
    shim::sync_threads();  // the shared arrays are the next row's
  }
}

// Runs a validated softmax top-k request with k <= SoftmaxTopk::kGpuMaxK on warp width WARP
// with launcher l (launcher.hpp).
template <int WARP, typename L>
onorm_status run_softmax_topk(L& l, const onorm_request& q) {
  const onorm_rows &x = q.in[0], &v = q.out[0];
  TopkArgs a{};
  a.x = x.data;
  a.x_stride = x.row_stride;
  a.x_vec = rows_aligned16(x);
  a.values = v.data;
  a.values_stride = v.row_stride;
  a.values_dtype = v.dtype;
  a.indices = q.indices;
  a.rows = x.rows;
  a.cols = x.cols;
  a.k = q.k;
  a.renormalize = q.renormalize;
  const unsigned grid = row_blocks(a.rows, l.caps().sms);
  switch (x.dtype) {
    case ONORM_F32: return l.template softmax_topk<float, WARP>(grid, a);
    case ONORM_F16: return l.template softmax_topk<core::f16_bits, WARP>(grid, a);
    default: return l.template softmax_topk<core::bf16_bits, WARP>(grid, a);
  }
}

}  // namespace gpu
}  // namespace onorm
