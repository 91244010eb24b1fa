// Rows split over a thread-block cluster (sm_90+): the K blocks of a cluster hold one row,
// a slice each, in registers; each reduces its slice (gpu::slice_passes), the cluster merges
// the K merge states in rank order (a fixed tree: every block gets the same bits), and each
// block finishes and writes its slice. The states travel as stores into every peer's shared
// memory that complete on the peer's barrier (Mailbox). The row is read from global memory
// once, and no flag or workspace is involved. Two kernels:
//   cluster_rows_kernel    one cluster per row, the slice loaded into registers;
//   cluster_stream_kernel  a resident grid of clusters, each walking rows: the copy engine
//                          brings a block's slice of the next row into shared memory while
//                          the block reduces, merges and writes the current one (from the
//                          16-byte boundary at or below the slice's start: rows off a
//                          boundary stream too); the block's slice of gamma waits in shared
//                          memory for every row (read once per block, not once per row from
//                          L2). LayerNorm's 16-bit rows (aligned only) keep two stages and
//                          finish from shared memory.
// A register prefetch of the next row measured slower (twice the registers, fewer blocks
// resident; bench/cuda/NOTES.md); the shared-memory stage costs no registers.
// The norms' options (RowOptions) as in the register rows: the residual added as the slice
// loads, h stored before the finish, y quantized with the cluster's maximum.
// CUDA only (HIP has no clusters); the kernels are empty below sm_90 and the planner routes
// here only on devices of compute capability 9.0 or newer.
#pragma once

#include <cooperative_groups.h>

#include "bulk_copy.cuh"
#include "row_options.hpp"
#include "row_plan.hpp"
#include "slices.hpp"

namespace onorm {
namespace cuda {

// The finish reads the column vectors after the cluster's merge: ask for this thread's lines
// now, so that they arrive during the reductions and the merge.
template <typename R, int ITEMS, int BLOCK>
__device__ __forceinline__ void prefetch_cols(const gpu::RowArgs& a, int64_t col0, int n, int lane) {
  constexpr int VEC = R::kVec;
#pragma unroll
  for (int q = 0; q < R::Op::kCols; ++q) {
    const auto* col = static_cast<const typename R::Col*>(a.col[q]);
    if (!col) continue;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int c = (lane + i * BLOCK) * VEC;
      if (c < n) asm volatile("prefetch.global.L1 [%0];" ::"l"(col + col0 + c));
    }
  }
}

constexpr int kMaxCluster = 16;

// The slice states of a cluster's blocks for the row in hand, delivered into every block's
// shared memory by the peers' stores (bulk::store_to_peer), which complete on the receiver's
// barrier: a cluster barrier would release, and so wait for, the previous row's global stores.
// Two sets for alternate rows: a block is at most one row ahead of a peer (it needs the peer's
// state of the row before).
// The blocks' max |y| of a quantized row travel the same way (`max_slot`, `max_full`: rows with
// the norms' options run one row a cluster, one phase).
template <typename S>
struct Mailbox {
  static_assert(sizeof(S) % 4 == 0, "states travel in 4-byte words");
  S slot[2][kMaxCluster];
  uint64_t full[2];
  float max_slot[kMaxCluster];
  uint64_t max_full;
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// Every thread, at the start: the barriers (thread 0), then this block's arrival on the
// cluster's barrier; bulk::cluster_wait() before the first store into a peer.
template <typename S>
__device__ __forceinline__ void mailbox_open(Mailbox<S>& m) {
  if (threadIdx.x == 0) {
    bulk::init(&m.full[0]);
    bulk::init(&m.full[1]);
    bulk::init(&m.max_full);
  }
  bulk::cluster_arrive_relaxed();
}
#endif

// A quantized y (RowOptions): the row's max |y| over the cluster (each block's delivered into
// every block's mailbox; a cluster barrier would wait for the h stores), the dynamic scale
// (written by rank 0), the stores.
template <typename R, int WARP, int ITEMS, int BLOCK>
__device__ __forceinline__ void cluster_store_quantized(const gpu::RowArgs& a, int64_t row, int64_t col0, int n,
                                                        int lane, const float* y, int64_t K,
                                                        gpu::Scratch<typename R::Op, WARP, BLOCK>& scratch,
                                                        Mailbox<typename R::Op::Merged>& mail) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ float row_max;
  float scale = 0.0f;
  if (a.opt.y_scale) {
    const unsigned rank = cooperative_groups::this_cluster().block_rank();
    if (threadIdx.x == 0) bulk::arrive_expect(&mail.max_full, static_cast<uint32_t>(K * sizeof(float)));
    const float m = gpu::block_allreduce<WARP, BLOCK>(gpu::items_max_abs<R, ITEMS, BLOCK>(n, lane, y), scratch.f,
                                                      gpu::MaxOp{});
    if (threadIdx.x < K) {  // thread t delivers this block's maximum to block t
      const unsigned t = threadIdx.x;
      const uint32_t bits = __float_as_uint(m);
      bulk::store_to_peer(bulk::peer_address(&mail.max_slot[rank], t), &bits, 1, bulk::peer_address(&mail.max_full, t));
    }
    if (threadIdx.x < WARP) {
      bulk::wait(&mail.max_full, 0);
      float t = lane < K ? mail.max_slot[lane] : 0.0f;
      t = gpu::group_allreduce<WARP>(t, lane, gpu::MaxOp{});
      if (lane == 0) row_max = t;
    }
    __syncthreads();  // row_max visible
    scale = gpu::row_quant_scale(a, row_max);
    if (rank == 0 && threadIdx.x == 0) a.opt.y_scale[row] = scale;
  }
  gpu::store_quantized<R, ITEMS, BLOCK>(a, row, col0, n, lane, y, scale);
#endif
}

// The K states of a mailbox set merged by the first lanes of a warp (lane 0 gets the row's):
// the butterfly over the next power of two of lanes at or above K, not over the warp. The
// levels it leaves out combined the states with identities (the same bits), and each is a
// shuffle and a combine on every row's critical path (an exp for softmax, Chan's formula in
// double for LayerNorm).
template <int WARP, typename S>
__device__ __forceinline__ S merge_slots(const S* slot, int64_t K, int lane) {
  static_assert(kMaxCluster <= WARP, "a cluster's states in one warp");
  const S st = lane < K ? slot[lane] : S::identity();
  if (K <= 2) return gpu::group_merge<2>(st, lane % 2);
  if (K <= 4) return gpu::group_merge<4>(st, lane % 4);
  if (K <= 8) return gpu::group_merge<8>(st, lane % 8);
  return gpu::group_merge<kMaxCluster>(st, lane % kMaxCluster);
}

// Blocks per SM that the kernels' register cap leaves room for: 1024 threads' worth, or three
// blocks of 256 for the ops of two inputs (the backward passes), whose slices spill under the
// cap of four (ptxas, sm_90a). The norms spill too but measured slower with fewer blocks
// (bench/RESULTS.md, issue 11). Slices of 64 elements a thread: 512 threads' worth, as the
// dense register rows.
template <typename R, int ITEMS, int BLOCK>
constexpr int cluster_min_blocks() {
  if constexpr (ITEMS * R::kVec > 32) return 512 / BLOCK;
  return (R::Op::kInputs > 1 && BLOCK == 256 ? 768 : 1024) / BLOCK;
}

// The finish of a slice whose values wait in shared memory (`x`, the stream kernel's stage)
// rather than in registers: item by item, x and the column vectors loaded, finished and stored,
// so that no value of the slice is live across the cluster's merge. `cols`: the column vectors
// (from column 0 where kColsStaged, else from col0). x starts on 16 bytes (gpu::stream_rows).
template <typename R, int ITEMS, int BLOCK, bool kColsStaged>
__device__ __forceinline__ void finish_from_stage(const gpu::RowArgs& a, const gpu::RowArgs& cols, int64_t row,
                                                  int64_t col0, int n, int lane, const typename R::In* x,
                                                  const gpu::coefs_t<typename R::Op>& row_cf,
                                                  const gpu::ChunkStats<typename R::Op>& cs, bool first) {
  using Op = typename R::Op;
  constexpr int VEC = R::kVec;
  const gpu::coefs_t<Op> cf = gpu::slice_coefs<Op>(a, row, lane, row_cf, cs, first);
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int off = i * BLOCK * VEC;  // item i of every thread: one item of a block shifted by off
    float y[1][VEC];
    gpu::load_items<typename R::In, 1, BLOCK, VEC>(x + off, n - off, lane, y[0], true, Op::pad(0));
    gpu::finish_items<R, 1, BLOCK, false>(cols, (kColsStaged ? 0 : col0) + off, n - off, lane, y, cf);
    gpu::store_items_as<VEC, 1, BLOCK>(a.out, a.out_dtype, row * a.out_stride + col0 + off, n - off, lane, y[0],
                                       a.out_vec != 0);
  }
}

// The slice [col0, col0 + n) of the j-th row of this block (`row`) once loaded into v: its
// passes, the cluster's merge, the finish and the stores. `merged`: the row's state, shared.
// `staged`: the column vectors the finish reads (RowArgs::col), this slice's alone (from column
// 0) where kColsStaged, else a's. kReload: the finish reads the slice again from `stage` (v is
// dead after the passes). kStream: the stream kernel's rows (gpu::store_any's k16Bit).
template <typename R, int WARP, int ITEMS, int BLOCK, bool kColsStaged = false, bool kReload = false,
          bool kStream = false>
__device__ __forceinline__ void cluster_row(const gpu::RowArgs& a, const gpu::SplitArgs& s, int64_t row,
                                            uint32_t j, int64_t col0, int n, int lane,
                                            float (&v)[R::Op::kInputs][ITEMS * R::kVec],
                                            gpu::Scratch<typename R::Op, WARP, BLOCK>& scratch,
                                            Mailbox<typename R::Op::Merged>& mail, typename R::Op::Merged& merged,
                                            const gpu::RowArgs& staged, const typename R::In* stage = nullptr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  using Op = typename R::Op;
  using S = typename Op::Merged;
  cg::cluster_group cluster = cg::this_cluster();
  const int64_t K = s.chunks;
  const unsigned rank = cluster.block_rank();
  const unsigned set = j & 1u;
  if (threadIdx.x == 0) bulk::arrive_expect(&mail.full[set], static_cast<uint32_t>(K * sizeof(S)));
  // (A finish from the stage loads its columns item by item; the prefetches' addresses spilled.)
  if (!kColsStaged && !kReload && s.prefetch_cols) prefetch_cols<R, ITEMS, BLOCK>(a, col0, n, lane);
  const gpu::ChunkStats<Op> cs = gpu::slice_passes<R, WARP, ITEMS, BLOCK>(v, n, lane, scratch);
  if (threadIdx.x < K) {  // thread t delivers this block's state to block t
    const S mine = cs.merged();
    const unsigned t = threadIdx.x;
    bulk::store_to_peer(bulk::peer_address(&mail.slot[set][rank], t), reinterpret_cast<const uint32_t*>(&mine),
                        int(sizeof(S) / 4), bulk::peer_address(&mail.full[set], t));
  }
  if (threadIdx.x < WARP) {
    bulk::wait(&mail.full[set], (j >> 1) & 1u);
    const S st = merge_slots<WARP>(mail.slot[set], K, lane);
    if (lane == 0) merged = st;
  }
  __syncthreads();  // `merged` visible; the slots are read before the next row's stores into them
  bool reread;
  const gpu::coefs_t<Op> cf = gpu::merged_coefs<R, WARP, BLOCK>(a, row, merged, reread);
  // The row was read again in double (cluster-uniform: the same merged state everywhere). In
  // place, no block writes its slice before every block has read the row. (Loading v again
  // after the call, to keep it dead across it, cost more spills: ptxas, sm_90a.)
  if (reread) cluster.sync();
  if constexpr (R::kOptions) {
    gpu::store_h<R, ITEMS, BLOCK>(a, row, col0, n, lane, v[0]);
    if (gpu::is_quantized_dtype(a.out_dtype)) {
      gpu::slice_finish_values<R, ITEMS, BLOCK>(a, row, col0, n, lane, v, cf, cs, rank == 0);
      cluster_store_quantized<R, WARP, ITEMS, BLOCK>(a, row, col0, n, lane, v[0], K, scratch, mail);
      return;
    }
  }
  if constexpr (kReload) {
    finish_from_stage<R, ITEMS, BLOCK, kColsStaged>(a, staged, row, col0, n, lane, stage, cf, cs, rank == 0);
  } else {
    gpu::slice_finish_values<R, ITEMS, BLOCK>(staged, row, kColsStaged ? 0 : col0, n, lane, v, cf, cs, rank == 0);
    gpu::store_any<R, ITEMS, BLOCK, WARP, kStream>(a, row, col0, n, lane, v[0]);
  }
#endif
}

// grid.x = rows of this launch * K, cluster (K, 1, 1); s.chunk = columns per slice (a multiple
// of the vector width), s.chunks = K, s.row0 = the launch's first row.
template <typename R, int WARP, int ITEMS, int BLOCK>
__global__ void __launch_bounds__(BLOCK, (cluster_min_blocks<R, ITEMS, BLOCK>())) cluster_rows_kernel(gpu::RowArgs a, gpu::SplitArgs s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Op = typename R::Op;
  __shared__ gpu::Scratch<Op, WARP, BLOCK> scratch;
  __shared__ Mailbox<typename Op::Merged> mail;
  __shared__ typename Op::Merged merged;  // the row's state (separate from scratch: the finish reuses scratch)
  mailbox_open(mail);
  const int64_t K = s.chunks;
  const int64_t row = s.row0 + blockIdx.x / K;
  const int64_t col0 = static_cast<int64_t>(cooperative_groups::this_cluster().block_rank()) * s.chunk;
  const int n = static_cast<int>(a.cols - col0 < s.chunk ? a.cols - col0 : s.chunk);
  const int lane = static_cast<int>(threadIdx.x);
  float v[Op::kInputs][ITEMS * R::kVec];
  gpu::load_row_inputs<R, ITEMS, BLOCK, WARP>(a, row, col0, n, lane, v);
  bulk::cluster_wait();  // every block's barriers are ready for the stores
  cluster_row<R, WARP, ITEMS, BLOCK>(a, s, row, 0, col0, n, lane, v, scratch, mail, merged, a);
#endif
}

// Bytes of a shared-memory slice of `chunk` elements of T, rounded to a 128-byte line (the
// stream kernel's stage, then its column vectors' slices).
template <typename T>
__host__ __device__ constexpr size_t stream_slice_bytes(int64_t chunk) {
  return (static_cast<size_t>(chunk) * sizeof(T) + 127) / 128 * 128;
}
// A stage: a slice copied from the 16-byte boundary at or below its first element to the one at
// or above its last (the copy engine's alignment), so up to 15 bytes each side more.
template <typename In>
__host__ __device__ constexpr size_t stream_stage_bytes(int64_t chunk) {
  return (static_cast<size_t>(chunk) * sizeof(In) + 32 + 127) / 128 * 128;
}
// LayerNorm's 16-bit rows (gpu::kStreamReload) keep two stages: the next row lands in the other
// while the finish reads this one.
template <typename R>
constexpr int kStreamStages = gpu::kStreamReload<R> ? 2 : 1;
template <typename R>
constexpr bool kStreamStagedCols = !gpu::kStreamReload<R>;
// The stream kernel's dynamic shared memory: the stages and, for ops with column vectors
// (gamma, beta), the block's slice of each, read from there by every row the cluster streams.
template <typename R>
__host__ __device__ constexpr size_t stream_smem_bytes(int64_t chunk) {
  const int cols = kStreamStagedCols<R> ? R::Op::kCols : 0;
  return stream_stage_bytes<typename R::In>(chunk) * size_t(kStreamStages<R>) +
         stream_slice_bytes<typename R::Col>(chunk) * size_t(cols);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// Copies the block's slice [col0, col0 + n) of each given column vector into shared memory at
// `dst` (stream_slice_bytes apart) and returns the RowArgs whose col[q] point there.
template <typename R, int BLOCK>
__device__ __forceinline__ gpu::RowArgs stage_columns(const gpu::RowArgs& a, int64_t col0, int n, unsigned char* dst,
                                                      int64_t chunk) {
  using Col = typename R::Col;
  gpu::RowArgs c = a;
#pragma unroll
  for (int q = 0; q < R::Op::kCols; ++q) {
    if (!a.col[q]) continue;
    Col* to = reinterpret_cast<Col*>(dst + q * stream_slice_bytes<Col>(chunk));
    const Col* from = static_cast<const Col*>(a.col[q]) + col0;
    int done = 0;
    if (a.col_vec) {  // col0 is a multiple of x's vector width, and so of Col's
      constexpr int V = 16 / sizeof(Col);
      for (int i = threadIdx.x; i < n / V; i += BLOCK)
        reinterpret_cast<gpu::shim::Vec16*>(to)[i] = reinterpret_cast<const gpu::shim::Vec16*>(from)[i];
      done = n / V * V;
    }
    for (int i = done + static_cast<int>(threadIdx.x); i < n; i += BLOCK) to[i] = from[i];
    c.col[q] = to;
  }
  c.col_vec = 1;  // the slices start on a line
  return c;
}

// Where `row`'s slice starts in global memory, and its bytes past a 16-byte boundary: the
// slice's first element lies that far into its stage.
template <typename R>
__device__ __forceinline__ const typename R::In* slice_start(const gpu::RowArgs& a, int64_t row, int64_t col0) {
  return static_cast<const typename R::In*>(a.in[0]) + row * a.in_stride[0] + col0;
}
template <typename R>
__device__ __forceinline__ unsigned stage_offset(const gpu::RowArgs& a, int64_t row, int64_t col0) {
  return static_cast<unsigned>(reinterpret_cast<uintptr_t>(slice_start<R>(a, row, col0)) % 16u);
}

// Thread 0: the copy of `row`'s slice into the stage, landing on `landed`: the 16-byte vectors
// that cover it, where they lie inside the tensor's bytes (the rows of a view, the padding
// between them). The tensor's first and last bytes may not: there, the vectors inside the
// slice by the copy engine and its elements outside them one at a time (written before the
// barriers of cluster_row that precede the stage's next reads).
template <typename R>
__device__ __forceinline__ void stage_slice(const gpu::RowArgs& a, int64_t row, int64_t col0, int n,
                                            unsigned char* stage, uint64_t* landed) {
  using In = typename R::In;
  const In* from = slice_start<R>(a, row, col0);
  if constexpr (gpu::kStreamReload<R>) {  // aligned rows only (gpu::stream_rows): no registers for the rest
    const uint32_t bytes = static_cast<uint32_t>(n * int64_t(sizeof(In)));
    bulk::arrive_expect(landed, bytes);
    if (bytes) bulk::copy(stage, from, bytes, landed);
    return;
  }
  constexpr uintptr_t kSize = sizeof(In);
  const uintptr_t first = reinterpret_cast<uintptr_t>(from), end = first + uintptr_t(n) * kSize;
  const uintptr_t lo = first & ~uintptr_t(15), hi = (end + 15) & ~uintptr_t(15);
  const uintptr_t tensor_lo = reinterpret_cast<uintptr_t>(a.in[0]);
  const uintptr_t tensor_hi = tensor_lo + uintptr_t((a.rows - 1) * a.in_stride[0] + a.cols) * kSize;
  if (lo >= tensor_lo && hi <= tensor_hi) {
    const uint32_t bytes = n > 0 ? static_cast<uint32_t>(hi - lo) : 0u;
    bulk::arrive_expect(landed, bytes);
    if (bytes) bulk::copy(stage, reinterpret_cast<const void*>(lo), bytes, landed);
    return;
  }
  const uintptr_t in_lo = (first + 15) & ~uintptr_t(15), in_hi = end & ~uintptr_t(15);
  const uint32_t bytes = in_hi > in_lo ? static_cast<uint32_t>(in_hi - in_lo) : 0u;
  bulk::arrive_expect(landed, bytes);
  if (bytes) bulk::copy(stage + (in_lo - lo), reinterpret_cast<const void*>(in_lo), bytes, landed);
  In* to = reinterpret_cast<In*>(stage + (first - lo));
  const int head = bytes ? static_cast<int>((in_lo - first) / kSize) : n;
  const int tail = bytes ? static_cast<int>((in_hi - first) / kSize) : n;
  for (int i = 0; i < head; ++i) to[i] = from[i];
  for (int i = tail; i < n; ++i) to[i] = from[i];
}
#endif

// grid.x = clusters * K (every cluster resident), cluster (K, 1, 1); cluster c takes rows c,
// c + clusters, ...; s.chunk, s.chunks as for cluster_rows_kernel; dynamic shared memory:
// stream_smem_bytes<R>(s.chunk). Ops of one input.
template <typename R, int WARP, int ITEMS, int BLOCK>
__global__ void __launch_bounds__(BLOCK, (cluster_min_blocks<R, ITEMS, BLOCK>())) cluster_stream_kernel(gpu::RowArgs a, gpu::SplitArgs s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Op = typename R::Op;
  static_assert(Op::kInputs == 1, "one input staged");
  __shared__ gpu::Scratch<Op, WARP, BLOCK> scratch;
  __shared__ Mailbox<typename Op::Merged> mail;
  __shared__ typename Op::Merged merged;
  constexpr int kStages = kStreamStages<R>;
  __shared__ uint64_t landed[kStages];  // each stage's barrier: one phase per row it takes
  ONORM_DYNAMIC_SMEM(stage);
  const size_t slice = stream_stage_bytes<typename R::In>(s.chunk);
  const int64_t K = s.chunks;
  const int64_t col0 = static_cast<int64_t>(cooperative_groups::this_cluster().block_rank()) * s.chunk;
  const int n = static_cast<int>(a.cols - col0 < s.chunk ? a.cols - col0 : s.chunk);
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t step = gridDim.x / K;
  int64_t row = blockIdx.x / K;
  mailbox_open(mail);
  // Read by every row's finish; the barrier below orders these stores before the first.
  const gpu::RowArgs staged =
      kStreamStagedCols<R> ? stage_columns<R, BLOCK>(a, col0, n, stage + kStages * slice, s.chunk) : a;
  if (threadIdx.x == 0) {
    for (int b = 0; b < kStages; ++b) bulk::init(&landed[b]);
    if (row < a.rows) stage_slice<R>(a, row, col0, n, stage, &landed[0]);
  }
  __syncthreads();  // the stages' barriers are initialized
  bulk::cluster_wait();
  for (uint32_t j = 0; row < a.rows; row += step, ++j) {
    const uint32_t b = j % kStages;  // the stage of row j, and its phase: the how-manieth row it takes
    // (The ops that finish from the stage stream aligned rows only: their kernels keep one load.)
    const unsigned off = gpu::kStreamReload<R> ? 0u : stage_offset<R>(a, row, col0);
    const auto* x = reinterpret_cast<const typename R::In*>(stage + b * slice + off);
    bulk::wait(&landed[b], (j / kStages) & 1u);
    float v[Op::kInputs][ITEMS * R::kVec];
    if constexpr (gpu::kStreamReload<R>)
      gpu::load_items<typename R::In, ITEMS, BLOCK, R::kVec>(x, n, lane, v[0], true, Op::pad(0));
    else
      gpu::load_row_items<typename R::In, ITEMS, BLOCK, R::kVec, WARP>(x, n, lane, v[0], off == 0, Op::pad(0));
    // One stage: every thread holds its values. Two: every thread has finished the row before
    // from the other stage. Either way the next row may land there.
    __syncthreads();
    if (threadIdx.x == 0 && row + step < a.rows) {
      const uint32_t next = (j + 1) % kStages;
      bulk::fence_before_copy();
      stage_slice<R>(a, row + step, col0, n, stage + next * slice, &landed[next]);
    }
    cluster_row<R, WARP, ITEMS, BLOCK, kStreamStagedCols<R>, gpu::kStreamReload<R>, true>(
        a, s, row, j, col0, n, lane, v, scratch, mail, merged, staged, x);
  }
#endif
}

}  // namespace cuda
}  // namespace onorm
