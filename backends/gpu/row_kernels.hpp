// The row kernels shared by CUDA and HIP. Three regimes:
//  (a) short rows: a group of TPR <= WARP lanes per row, BLOCK / TPR rows per block;
//  (b) medium rows: a block per row (TPR == BLOCK);
//      both keep the row in registers (ITEMS 16-byte vectors per thread): one read, one write.
//  (c) long rows: a row split into chunks of CHUNK = BLOCK * ITEMS * VEC elements, one block
//      per chunk. Each block reduces its chunk to a core state; the states of a row are merged
//      in a fixed order (bitwise deterministic) and every block finishes its chunk from
//      registers. Two schedules:
//      - split_coop_kernel: a persistent co-resident grid (cooperative launch); the blocks of
//        a row publish their states in a workspace with release/acquire flags and each merges
//        all of them, so the row is read from memory once;
//      - split_chunk_kernel (stats, then finish) + merge_states_kernel: no co-residency
//        needed; the row is read twice, in row batches the host sizes so that the second
//        read hits L2.
// Accumulation is float for every dtype; special values follow the core algebra (API.md).
#pragma once

#include "dtype_io.hpp"
#include "math.hpp"
#include "onlinenorm/core/max_sum.hpp"
#include "onlinenorm/core/sum_sq.hpp"
#include "onlinenorm/core/welford.hpp"
#include "reduce.hpp"

namespace onorm {
namespace gpu {

enum : int { kOpSoftmax = 0, kOpLogSoftmax = 1, kOpLayerNorm = 2, kOpRmsNorm = 3 };
enum : int { kFamSoftmax = 0, kFamNorm = 1 };

struct RowArgs {
  const void* x;
  void* y;
  int64_t rows, cols;
  int64_t xs, ys;  // row strides in elements
  const void* gamma;
  const void* beta;
  float* mean;
  float* rstd;
  float eps;
  int op;         // kOp*
  int out_dtype;  // kF32 / kF16 / kBF16
  int x_vec;      // x rows 16-byte aligned
  int y_vec;      // y rows aligned for VEC-element stores
  int gb_vec;     // gamma / beta 16-byte aligned
};

struct SplitArgs {
  int64_t chunk;   // elements per chunk
  int64_t chunks;  // chunks per row (K)
  int64_t groups;  // coop: rows in flight (grid = groups * K)
  int64_t row0;    // two-read: first row of this batch
  uint64_t epoch;  // coop: this launch's tag (nonzero, unique per workspace use)
  void* entries;   // coop: 2 * grid Entry; two-read: stats output (batch * K states)
  const void* final_states;  // two-read finish: one state per batch row
};

// A published state: 16 bytes of state, then the tag that releases it.
struct alignas(16) Entry {
  uint32_t words[4];
  uint64_t tag;
  uint64_t pad;
};

template <int OP> struct op_state;
template <> struct op_state<kOpSoftmax> { using type = core::MaxSum<float>; };
template <> struct op_state<kOpLogSoftmax> { using type = core::MaxSum<float>; };
template <> struct op_state<kOpLayerNorm> { using type = core::Welford<float>; };
template <> struct op_state<kOpRmsNorm> { using type = core::SumSq<float>; };

constexpr float kNegInf = -__builtin_huge_valf();

// Finishes the register-held row (values in v, softmax family already exponentiated or not),
// then stores it as Out.
template <typename Out, typename In, int ITEMS, int STRIDE>
ONORM_DEV void store_items(Out* y, int n, int lane, const float* v, bool aligned) {
  constexpr int VEC = io<In>::kVec;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
    store_one_item<Out, VEC>(y, (lane + i * STRIDE) * VEC, n, aligned, v + i * VEC);
}

template <typename In, int ITEMS, int STRIDE>
ONORM_DEV void store_any(const RowArgs& a, int64_t row, int64_t col0, int n, int lane, const float* v) {
  const bool al = a.y_vec != 0;
  switch (a.out_dtype) {
    case kF32:
      store_items<float, In, ITEMS, STRIDE>(static_cast<float*>(a.y) + row * a.ys + col0, n, lane, v, al);
      break;
    case kF16:
      store_items<core::f16_bits, In, ITEMS, STRIDE>(static_cast<core::f16_bits*>(a.y) + row * a.ys + col0, n,
                                                     lane, v, al);
      break;
    default:
      store_items<core::bf16_bits, In, ITEMS, STRIDE>(static_cast<core::bf16_bits*>(a.y) + row * a.ys + col0,
                                                      n, lane, v, al);
      break;
  }
}

// y = norm(x) * gamma (+ beta) for the register-held items; `col0` is the first column of
// this piece of the row (gamma and beta are indexed by column).
template <typename In, int ITEMS, int STRIDE>
ONORM_DEV void norm_finish_items(const RowArgs& a, int64_t col0, int n, int lane, float* v, bool rms,
                                 float mean, float rstd) {
  constexpr int VEC = io<In>::kVec;
  const In* g = static_cast<const In*>(a.gamma);
  const In* b = static_cast<const In*>(a.beta);
  const bool al = a.gb_vec != 0;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int c = (lane + i * STRIDE) * VEC;
    float gv[VEC], bv[VEC];
    if (g) load_one_item<In>(g + col0, c, n, al, 1.0f, gv);
    else
#pragma unroll
      for (int j = 0; j < VEC; ++j) gv[j] = 1.0f;
    if (rms) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[i * VEC + j] = core::rms_norm_finish(v[i * VEC + j], rstd, gv[j]);
    } else {
      if (b) load_one_item<In>(b + col0, c, n, al, 0.0f, bv);
      else
#pragma unroll
        for (int j = 0; j < VEC; ++j) bv[j] = 0.0f;
#pragma unroll
      for (int j = 0; j < VEC; ++j)
        v[i * VEC + j] = core::layer_norm_finish(v[i * VEC + j], mean, rstd, gv[j], bv[j]);
    }
  }
}

// Sum of squared deviations from `mean` over the valid elements of the items.
template <typename In, int ITEMS, int STRIDE>
ONORM_DEV float sq_dev_items(const float* v, int n, int lane, float mean) {
  constexpr int VEC = io<In>::kVec;
  float q = 0.0f;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int c = (lane + i * STRIDE) * VEC;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float d = v[i * VEC + j] - mean;
      q += c + j < n ? d * d : 0.0f;
    }
  }
  return q;
}

// ------------------------------------------------------------------ regimes (a) and (b)
template <int FAM, typename In, int WARP, int TPR, int ITEMS, int BLOCK>
__global__ void __launch_bounds__(BLOCK) rows_kernel(RowArgs a) {
  constexpr int VEC = io<In>::kVec;
  constexpr int E = ITEMS * VEC;
  constexpr int RPB = BLOCK / TPR;
  static_assert(TPR <= WARP || TPR == BLOCK, "row group");
  __shared__ float scratch[BLOCK / WARP];
  const int lane = static_cast<int>(threadIdx.x) % TPR;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * RPB + static_cast<int>(threadIdx.x) / TPR;
  const bool active = row < a.rows;
  // Inactive groups (past the last row) take part in the shuffles with an empty row.
  const int n = active ? static_cast<int>(a.cols) : 0;
  const int64_t r = active ? row : 0;
  const In* x = static_cast<const In*>(a.x) + r * a.xs;
  float v[E];
  if constexpr (FAM == kFamSoftmax) {
    const bool lg = a.op == kOpLogSoftmax;
    load_items<In, ITEMS, TPR>(x, n, lane, v, a.x_vec != 0, kNegInf);
    float m = kNegInf;
#pragma unroll
    for (int e = 0; e < E; ++e) m = core::nan_max(m, v[e]);
    m = row_allreduce<WARP, TPR, BLOCK>(m, lane, scratch, MaxOp{});
    const bool dead = m == kNegInf;  // all -inf (or empty): the masked-row convention
    const float mm = dead ? 0.0f : m;
    float s = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float ex = fast_exp(v[e] - mm);
      s += ex;
      if (!lg) v[e] = ex;
    }
    s = row_allreduce<WARP, TPR, BLOCK>(s, lane, scratch, AddOp{});
    if (lg) {
      const float lnd = core::log_of(s);
#pragma unroll
      for (int e = 0; e < E; ++e) v[e] = dead ? kNegInf : (v[e] - m) - lnd;
    } else {
      const float inv = 1.0f / s;
#pragma unroll
      for (int e = 0; e < E; ++e) v[e] = dead ? 0.0f : v[e] * inv;
    }
  } else {
    const bool rms = a.op == kOpRmsNorm;
    load_items<In, ITEMS, TPR>(x, n, lane, v, a.x_vec != 0, 0.0f);
    float mean = 0.0f;
    if (!rms) {
      float s = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e) s += v[e];
      s = row_allreduce<WARP, TPR, BLOCK>(s, lane, scratch, AddOp{});
      mean = s / static_cast<float>(n);
    }
    float q = sq_dev_items<In, ITEMS, TPR>(v, n, lane, mean);
    q = row_allreduce<WARP, TPR, BLOCK>(q, lane, scratch, AddOp{});
    const float rstd = rms ? core::SumSq<float>::of(n, q).rstd(a.eps)
                           : core::Welford<float>::of(n, mean, q).rstd(a.eps);
    if (active && lane == 0) {
      if (a.mean && !rms) a.mean[row] = mean;
      if (a.rstd) a.rstd[row] = rstd;
    }
    norm_finish_items<In, ITEMS, TPR>(a, 0, n, lane, v, rms, mean, rstd);
  }
  store_any<In, ITEMS, TPR>(a, r, 0, n, lane, v);
}

// ------------------------------------------------------------------ regime (c)
// One chunk of one row: load, reduce to the chunk's state, obtain the row's state from
// `row_state` (merge / workspace), finish and store. In the stats schedule `row_state` is
// not called and the chunk state is written instead.
enum : int { kModeCoop = 0, kModeStats = 1, kModeFinish = 2 };

template <int OP, typename In, int WARP, int ITEMS, int BLOCK, int MODE, typename RowState>
ONORM_DEV void split_chunk(const RowArgs& a, const SplitArgs& s, int64_t row, int64_t chunk, void* scratch,
                           RowState row_state) {
  using S = typename op_state<OP>::type;
  constexpr int VEC = io<In>::kVec;
  constexpr int E = ITEMS * VEC;
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t col0 = chunk * s.chunk;
  const int n = static_cast<int>(a.cols - col0 < s.chunk ? a.cols - col0 : s.chunk);
  const In* x = static_cast<const In*>(a.x) + row * a.xs + col0;
  float* fs = static_cast<float*>(scratch);
  float v[E];
  S st;
  float m_c = 0.0f, mean_c = 0.0f;
  if constexpr (OP == kOpSoftmax || OP == kOpLogSoftmax) {
    load_items<In, ITEMS, BLOCK>(x, n, lane, v, a.x_vec != 0, kNegInf);
    m_c = kNegInf;
#pragma unroll
    for (int e = 0; e < E; ++e) m_c = core::nan_max(m_c, v[e]);
    m_c = block_allreduce<WARP, BLOCK>(m_c, fs, MaxOp{});
    const float mm = m_c == kNegInf ? 0.0f : m_c;
    float d = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float ex = fast_exp(v[e] - mm);
      d += ex;
      if (OP == kOpSoftmax) v[e] = ex;
    }
    d = block_allreduce<WARP, BLOCK>(d, fs, AddOp{});
    st = m_c == kNegInf ? S::identity() : S::of(m_c, d);
  } else {
    load_items<In, ITEMS, BLOCK>(x, n, lane, v, a.x_vec != 0, 0.0f);
    if constexpr (OP == kOpLayerNorm) {
      float sum = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e) sum += v[e];
      sum = block_allreduce<WARP, BLOCK>(sum, fs, AddOp{});
      mean_c = sum / static_cast<float>(n);
    }
    float q = sq_dev_items<In, ITEMS, BLOCK>(v, n, lane, mean_c);
    q = block_allreduce<WARP, BLOCK>(q, fs, AddOp{});
    if constexpr (OP == kOpLayerNorm) st = S::of(n, mean_c, q);
    else st = S::of(n, q);
  }
  if constexpr (MODE == kModeStats) {
    if (lane == 0) static_cast<S*>(s.entries)[(row - s.row0) * s.chunks + chunk] = st;
    return;
  } else {
    const S fin = row_state(st, static_cast<S*>(scratch));
    if constexpr (OP == kOpSoftmax) {
      float scale = m_c == kNegInf ? 0.0f : core::exp_of(m_c - fin.m) / fin.d;
      if (fin.m == kNegInf) scale = 0.0f;
      if (core::is_nan(fin.m) || core::is_nan(fin.d)) scale = fin.m + fin.d;  // NaN
#pragma unroll
      for (int e = 0; e < E; ++e) v[e] *= scale;
    } else if constexpr (OP == kOpLogSoftmax) {
      const float lnd = core::log_of(fin.d);
      const bool dead = fin.m == kNegInf;
#pragma unroll
      for (int e = 0; e < E; ++e) v[e] = dead ? kNegInf : (v[e] - fin.m) - lnd;
    } else {
      const float rstd = fin.rstd(a.eps);
      float mean = 0.0f;
      if constexpr (OP == kOpLayerNorm) mean = fin.mean;
      if (chunk == 0 && lane == 0) {
        if (a.mean && OP == kOpLayerNorm) a.mean[row] = mean;
        if (a.rstd) a.rstd[row] = rstd;
      }
      norm_finish_items<In, ITEMS, BLOCK>(a, col0, n, lane, v, OP == kOpRmsNorm, mean, rstd);
    }
    store_any<In, ITEMS, BLOCK>(a, row, col0, n, lane, v);
  }
}

template <typename S>
union StateScratch {
  float f[32];
  S s[32];
};

// Persistent cooperative schedule: block b serves chunk b % K of rows b / K, b / K + groups, ...
// Requires every block of the grid to be resident at once (cooperative launch).
template <int OP, typename In, int WARP, int ITEMS, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 2) split_coop_kernel(RowArgs a, SplitArgs s) {
  using S = typename op_state<OP>::type;
  __shared__ StateScratch<S> scratch;
  const int64_t K = s.chunks;
  const int64_t chunk = blockIdx.x % K;
  const int64_t first = blockIdx.x - chunk;  // this row group's first block
  Entry* entries = static_cast<Entry*>(s.entries);
  int64_t round = 0;
  for (int64_t row = blockIdx.x / K; row < a.rows; row += s.groups, ++round) {
    const uint64_t tag = (s.epoch << 32) | static_cast<uint64_t>(round & 0xffffffff);
    Entry* buf = entries + (round & 1) * static_cast<int64_t>(gridDim.x);
    const int64_t next = row + s.groups;
    auto merge = [&](const S& mine, S* sc) -> S {
      if (threadIdx.x == 0) {
        Entry* e = buf + blockIdx.x;
        static_assert(sizeof(S) <= sizeof(e->words), "state fits an entry");
        *reinterpret_cast<S*>(e->words) = mine;
        shim::store_release_u64(&e->tag, tag);
      }
      // Overlap the wait with the next chunk's read: pull it into L2.
      if (next < a.rows) {
        const char* nx = reinterpret_cast<const char*>(static_cast<const In*>(a.x) + next * a.xs + chunk * s.chunk);
        const int64_t bytes = (a.cols - chunk * s.chunk < s.chunk ? a.cols - chunk * s.chunk : s.chunk) *
                              static_cast<int64_t>(sizeof(In));
        for (int64_t off = static_cast<int64_t>(threadIdx.x) * 128; off < bytes; off += 128 * BLOCK)
          shim::prefetch_l2(nx + off);
      }
      S acc = S::identity();
      for (int64_t k = threadIdx.x; k < K; k += BLOCK) {
        const Entry* e = buf + first + k;
        while (shim::load_acquire_u64(&e->tag) != tag) {
        }
        acc = S::combine(acc, *reinterpret_cast<const S*>(e->words));
      }
      return block_allreduce<WARP, BLOCK>(acc, sc, CombineOp<S>{});
    };
    split_chunk<OP, In, WARP, ITEMS, BLOCK, kModeCoop>(a, s, row, chunk, &scratch, merge);
  }
}

// Two-read schedule, one launch per phase over a batch of rows: grid (K, batch).
template <int OP, typename In, int WARP, int ITEMS, int BLOCK, int MODE>
__global__ void __launch_bounds__(BLOCK) split_chunk_kernel(RowArgs a, SplitArgs s) {
  using S = typename op_state<OP>::type;
  __shared__ StateScratch<S> scratch;
  const int64_t row = s.row0 + blockIdx.y;
  auto fetch = [&](const S&, S*) -> S { return static_cast<const S*>(s.final_states)[blockIdx.y]; };
  split_chunk<OP, In, WARP, ITEMS, BLOCK, MODE>(a, s, row, blockIdx.x, &scratch, fetch);
}

// Merges each row's `count` states in groups of BLOCK (a fixed tree): out holds
// ceil(count / BLOCK) states per row. The host repeats it until one state per row is left.
template <int OP, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK) merge_states_kernel(const void* in, void* out, int64_t count) {
  using S = typename op_state<OP>::type;
  __shared__ StateScratch<S> scratch;
  const int64_t outs = (count + BLOCK - 1) / BLOCK;
  const int64_t k = static_cast<int64_t>(blockIdx.x) * BLOCK + threadIdx.x;
  const S* src = static_cast<const S*>(in) + blockIdx.y * count;
  S v = k < count ? src[k] : S::identity();
  v = block_allreduce<WARP, BLOCK>(v, scratch.s, CombineOp<S>{});
  if (threadIdx.x == 0) static_cast<S*>(out)[blockIdx.y * outs + blockIdx.x] = v;
}

}  // namespace gpu
}  // namespace onorm
