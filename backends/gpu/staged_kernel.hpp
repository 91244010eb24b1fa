// Rows staged in shared memory: staged_kernel, a persistent grid; block b serves chunk b % K
// of rows b / K, b / K + groups, ... The next row's chunk of every input is copied (cp.async)
// while the current one is reduced, merged and written (two buffers).
//  - K == 1: a block per row, no merge;
//  - K > 1: the K blocks of a row publish their chunk states and merge them at once
//    (coop_merge: release/acquire flags in a workspace; cooperative launch: all resident).
// The row is read from global memory once.
#pragma once

#include <type_traits>

#include "f64_fallback.hpp"
#include "row_chunk.hpp"

namespace onorm {
namespace gpu {

// Flags: entry slot (round % 2) of this block carries its state of `round`, released with
// the tag (epoch << 32 | round); entries hold 2 * gridDim.x Entry, then the barrier flags.
constexpr int kCoopSlots = 2;

ONORM_DEV uint64_t coop_tag(uint64_t epoch, int64_t round) {
  return (epoch << 32) | static_cast<uint64_t>(round & 0xffffffff);
}

// Publishes this block's state of `round` and merges its row group's (co-resident) states
// in a fixed order: every block of the group gets the same bits.
template <int WARP, int BLOCK, typename Op>
ONORM_DEV typename Op::Merged coop_merge(const typename Op::Merged& mine, Entry* entries, int64_t round,
                                         uint64_t epoch, int64_t first, int64_t K, Scratch<Op, WARP, BLOCK>& sc) {
  using S = typename Op::Merged;
  static_assert(sizeof(S) <= sizeof(Entry::words), "a merge state fits an entry");
  const uint64_t tag = coop_tag(epoch, round);
  Entry* buf = entries + (round % kCoopSlots) * static_cast<int64_t>(gridDim.x);
  if (threadIdx.x == 0) {
    *reinterpret_cast<S*>(buf[blockIdx.x].words) = mine;
    shim::store_release_u64(&buf[blockIdx.x].tag, tag);
  }
  S acc = S::identity();
  for (int64_t k = threadIdx.x; k < K; k += BLOCK) {
    const Entry* e = buf + first + k;
    while (shim::load_acquire_u64(&e->tag) != tag) {
    }
    acc = S::combine(acc, *reinterpret_cast<const S*>(e->words));
  }
  return block_merge<WARP, BLOCK>(acc, sc.s, sc.d);
}

// A barrier of the K co-resident blocks of a row group, for rows read again from global
// memory (the float64 fallback): in place, no block may write its chunk before every block
// of the row has read the row. Its flags follow the state slots: two per block, alternating
// with the block's count of such barriers, `count` (the same in every block of a group: the
// decision is the merged state's). A block can be one barrier ahead of the slowest of its
// group, never two, so the slot it overwrites has been seen.
ONORM_DEV void coop_barrier(Entry* entries, int64_t count, int64_t round, uint64_t epoch, int64_t first, int64_t K) {
  Entry* bar = entries + (kCoopSlots + (count & 1)) * static_cast<int64_t>(gridDim.x);
  const uint64_t tag = coop_tag(epoch, round);
  shim::sync_threads();  // every thread of this block is done reading the row
  if (threadIdx.x == 0) shim::store_release_u64(&bar[blockIdx.x].tag, tag);
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x)
    while (shim::load_acquire_u64(&bar[first + k].tag) != tag) {
    }
  shim::sync_threads();
}

// The staged chunk of input k: chunk_alloc elements of its type per input, inputs in order.
template <typename R, int K>
ONORM_DEV const input_t<R, K>* staged_input(const unsigned char* stage, int64_t chunk_alloc) {
  return reinterpret_cast<const input_t<R, K>*>(stage + (K == 0 ? 0 : chunk_alloc * sizeof(typename R::In)));
}
template <typename R>
constexpr int64_t staged_bytes_per_element() {
  return sizeof(typename R::In) + (R::Op::kInputs > 1 ? sizeof(typename R::In1) : 0);
}

// The loops over a staged chunk take step_vecs() vectors per thread and input at a time, all
// loaded before any math: one bounds test per step, the loads in flight together. 32 floats
// per thread over the inputs (and, in the finish, the column vectors).
template <typename R, bool kFinish>
constexpr int step_vecs() {
  constexpr int floats = 32 / (R::Op::kInputs + (kFinish ? R::Op::kCols : 0));
  return floats / R::kVec > 0 ? floats / R::kVec : 1;
}

// Step `base` of every input's staged chunk of n elements: this thread's U vectors of each
// (pad past the end).
template <typename R, int U, int BLOCK>
ONORM_DEV void staged_step(const unsigned char* stage, int64_t chunk_alloc, int base, int n, const float* pad,
                           float (&o)[R::Op::kInputs][U * R::kVec]) {
  constexpr int VEC = R::kVec;
  const int tid = static_cast<int>(threadIdx.x);
  load_items<typename R::In, U, BLOCK, VEC>(staged_input<R, 0>(stage, chunk_alloc) + base, n - base, tid, o[0],
                                            true, pad[0]);
  if constexpr (R::Op::kInputs > 1)
    load_items<typename R::In1, U, BLOCK, VEC>(staged_input<R, 1>(stage, chunk_alloc) + base, n - base, tid, o[1],
                                               true, pad[1]);
}

// The op's passes over a staged chunk (block reductions).
template <typename R, int WARP, int BLOCK>
ONORM_DEV ChunkStats<typename R::Op> staged_passes(const unsigned char* stage, int64_t chunk_alloc, int n,
                                                   Scratch<typename R::Op, WARP, BLOCK>& sc) {
  using Op = typename R::Op;
  constexpr int U = step_vecs<R, false>(), E = U * R::kVec, NI = Op::kInputs, STEP = BLOCK * E;
  const GpuMath m;
  float pad[NI];
#pragma unroll
  for (int k = 0; k < NI; ++k) pad[k] = Op::pad(k);
  ChunkStats<Op> cs;
  cs.n = n;
  cs.r1 = 0.0f;
  if constexpr (Op::kPass1 != core::ops::Pass1::kNone) {
    float r = pass1_identity<Op, float>();
    for (int base = 0; base < n; base += STEP) {
      float o[NI][E];
      staged_step<R, U, BLOCK>(stage, chunk_alloc, base, n, pad, o);
      r = pass1_fold<Op>(r, pass1_local<Op, E>(o[0]));
    }
    if constexpr (kPass1Max<Op>) cs.r1 = block_allreduce<WARP, BLOCK>(r, sc.f, MaxOp{});
    else cs.r1 = block_allreduce<WARP, BLOCK>(r, sc.f, AddOp{});
  }
  cs.p = Op::pivot(cs.r1, n);
  if constexpr (Op::kPadWithPivot) pad[0] = cs.p;  // padding adds nothing
  sums_t<Op> acc;
#pragma unroll
  for (int q = 0; q < Op::kSums; ++q) acc.v[q] = 0.0f;
  for (int base = 0; base < n; base += STEP) {
    float o[NI][E];
    staged_step<R, U, BLOCK>(stage, chunk_alloc, base, n, pad, o);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      float x[NI];
      element_of(o, e, x);
      Op::accumulate(m, acc.v, cs.p, x);
    }
  }
  cs.s = block_allreduce<WARP, BLOCK>(acc, sc.v, AddOp{});
  return cs;
}

// Finishes the staged chunk [col0, col0 + n) of `row` with the chunk's coefficients.
template <typename R, typename Out, int BLOCK>
ONORM_DEV void staged_output(const RowArgs& a, const unsigned char* stage, int64_t chunk_alloc, int n, int64_t row,
                             int64_t col0, const coefs_t<typename R::Op>& cf) {
  using Op = typename R::Op;
  constexpr int U = step_vecs<R, true>(), VEC = R::kVec, E = U * VEC, NI = Op::kInputs, STEP = BLOCK * E;
  constexpr int NC = Op::kCols > 0 ? Op::kCols : 1;
  const GpuMath m;
  const int tid = static_cast<int>(threadIdx.x);
  Out* y = static_cast<Out*>(a.out) + row * a.out_stride + col0;
  const bool yal = a.out_vec != 0;
  float pad[NI];
#pragma unroll
  for (int k = 0; k < NI; ++k) pad[k] = Op::pad(k);
  for (int base = 0; base < n; base += STEP) {
    float o[NI][E], cv[NC][E];
    staged_step<R, U, BLOCK>(stage, chunk_alloc, base, n, pad, o);
#pragma unroll
    for (int q = 0; q < Op::kCols; ++q) load_col_items<R, U, BLOCK>(a, q, col0 + base, n - base, tid, cv[q]);
    float r[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
      float x[NI], cols[NC];
      element_of(o, e, x);
#pragma unroll
      for (int q = 0; q < NC; ++q) cols[q] = Op::kCols > 0 ? cv[q][e] : 0.0f;
      r[e] = Op::finish(m, cf, x, cols);
    }
    store_items<Out, VEC, U, BLOCK>(y + base, n - base, tid, r, yal);
  }
}

// Every thread of the block calls it with the same merged state fin (a row whose statistics
// the op does not trust is read again from global memory in double: row_state_f64; then
// `reread_done()` holds this block until every block of the row has read it). Ops with a
// float64 fallback: thread 0 takes the coefficients (double arithmetic) and shares them:
// every thread doing it cost the persistent loop registers and spills (ptxas sm_90a).
template <typename R, int WARP, int BLOCK, typename ReReadDone>
ONORM_DEV void staged_finish(const RowArgs& a, const unsigned char* stage, int64_t chunk_alloc, int n, int64_t row,
                             int64_t col0, const typename R::Op::Merged& fin, const ChunkStats<typename R::Op>& cs,
                             ReReadDone reread_done) {
  using Op = typename R::Op;
  coefs_t<Op> row_cf;
  if constexpr (Op::kF64Fallback) {
    __shared__ coefs_t<Op> shared_cf;
    __shared__ int shared_ok;
    if (threadIdx.x == 0) {
      bool ok;
      shared_cf = Op::narrow(Op::coefs(fin, Op::params(a.param), ok));
      shared_ok = ok;
    }
    shim::sync_threads();
    if (shared_ok) {
      row_cf = shared_cf;
    } else {
      row_cf = row_coefs_f64<R, WARP, BLOCK>(a, row, Op::params(a.param));
      reread_done();
    }
  } else {
    bool ok;
    row_cf = Op::narrow(Op::coefs(fin, Op::params(a.param), ok));
  }
  if (col0 == 0 && threadIdx.x == 0) Op::write_row_outputs(row_cf, a.row_out, row);
  const coefs_t<Op> cf = Op::chunk_coefs(row_cf, cs.template state<float>());
  switch (a.out_dtype) {
    case kF32: staged_output<R, float, BLOCK>(a, stage, chunk_alloc, n, row, col0, cf); break;
    case kF16: staged_output<R, core::f16_bits, BLOCK>(a, stage, chunk_alloc, n, row, col0, cf); break;
    default: staged_output<R, core::bf16_bits, BLOCK>(a, stage, chunk_alloc, n, row, col0, cf); break;
  }
}

// Dynamic shared memory: 2 * s.chunk_alloc * staged_bytes_per_element<R>() bytes.
template <typename R, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 3) staged_kernel(RowArgs a, SplitArgs s) {
  using Op = typename R::Op;
  ONORM_DYNAMIC_SMEM(staged_smem);
  __shared__ Scratch<Op, WARP, BLOCK> scratch;
  const int64_t K = s.chunks;
  const int64_t chunk = blockIdx.x % K;
  const int64_t first = blockIdx.x - chunk;
  const int64_t col0 = chunk * s.chunk;
  const int n = static_cast<int>(a.cols - col0 < s.chunk ? a.cols - col0 : s.chunk);
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t stage_bytes = s.chunk_alloc * staged_bytes_per_element<R>();
  Entry* entries = static_cast<Entry*>(s.entries);
  auto copy_input = [&](auto* dst, const auto* src, bool vec) {
    using T = typename std::remove_const<typename std::remove_pointer<decltype(src)>::type>::type;
    constexpr int TV = io<T>::kVec;
    int done = 0;
    if (vec) {
      const int nv = n / TV;
      for (int i = tid; i < nv; i += BLOCK) shim::cp_async_16(dst + i * TV, src + i * TV);
      done = nv * TV;
    }
    for (int i = done + tid; i < n; i += BLOCK) dst[i] = src[i];
  };
  auto issue = [&](int64_t row, unsigned char* stage) {
    if (row < a.rows) {
      copy_input(reinterpret_cast<typename R::In*>(stage),
                 static_cast<const typename R::In*>(a.in[0]) + row * a.in_stride[0] + col0, a.in_vec[0] != 0);
      if constexpr (Op::kInputs > 1)
        copy_input(reinterpret_cast<typename R::In1*>(stage + s.chunk_alloc * sizeof(typename R::In)),
                   static_cast<const typename R::In1*>(a.in[1]) + row * a.in_stride[1] + col0, a.in_vec[1] != 0);
    }
    shim::cp_async_commit();  // one group per call, empty or not: wait<N> counts stay exact
  };
  const int64_t row0 = blockIdx.x / K;
  int64_t barriers = 0;  // coop_barrier's count
  issue(row0, staged_smem);
  int buf = 0;
  int64_t round = 0;
  for (int64_t row = row0; row < a.rows; row += s.groups, ++round) {
    issue(row + s.groups, staged_smem + (buf ^ 1) * stage_bytes);
    shim::cp_async_wait<1>();
    shim::sync_threads();
    const unsigned char* stage = staged_smem + buf * stage_bytes;
    const ChunkStats<Op> cs = staged_passes<R, WARP, BLOCK>(stage, s.chunk_alloc, n, scratch);
    const typename Op::Merged mine = cs.merged();
    const typename Op::Merged fin =
        K > 1 ? coop_merge<WARP, BLOCK, Op>(mine, entries, round, s.epoch, first, K, scratch) : mine;
    staged_finish<R, WARP, BLOCK>(a, stage, s.chunk_alloc, n, row, col0, fin, cs, [&] {
      if (K > 1) coop_barrier(entries, barriers++, round, s.epoch, first, K);
    });
    shim::sync_threads();  // this buffer is refilled next round
    buf ^= 1;
  }
}

}  // namespace gpu
}  // namespace onorm
