// The norms' backward in one read (core/ops/norm_backward.hpp): rows of one 16-bit or f32 dtype
// whose x, dy and dx are 16-byte aligned and at most kBackwardRegisterCols long. A group of
// TPR lanes holds a row's x and dy in registers (ITEMS 16-byte vectors of each per thread), takes
// its two sums over the group, writes dx, and adds the row to the column sums of its columns;
// a block walks a contiguous run of rows, so its column sums cover them all:
//   dx           float sums per thread, a fixed tree over the group (row_allreduce): the same
//                bits for a row whatever its batch (the shape depends on the width only);
//   dgamma/dbeta float sums of at most kBackwardChainRows rows per thread, the groups of a
//                block added in group order through shared memory, one float partial row per
//                block, then column_merge_kernel adds the blocks' partials in double in a
//                fixed order (column_merge.hpp). No atomics: the same call gives the same
//                bits run after run.
// The row's sums in float over at most 16 elements per thread and a tree, and column chains of
// at most 128 + 8 terms, keep within API.md's bounds (1e-5 relative to the sums of |terms|).
#pragma once

#include <type_traits>

#include "norm_backward_args.hpp"
#include "onlinenorm/core/ops/norm_backward.hpp"
#include "reduce.hpp"

namespace onorm {
namespace gpu {

// The longest row a block holds, and the most rows a thread's column sums take in float.
constexpr int64_t kBackwardRegisterCols = 8192;
constexpr int64_t kBackwardChainRows = 128;

// Registers a thread keeps (E columns: x and dy as floats, the scale and K column sums; with
// the next D rows' x and dy loaded ahead as 16-byte vectors, 8 registers per item and row, while
// this row reduces: the loads of the rows ahead overlap this row's reduction; and the next
// row's statistics, K floats).
ONORM_HD constexpr int backward_floats_at(int E, int ITEMS, int K, int D) {
  return E * (3 + K) + 8 * ITEMS * D + K;
}
// Threads resident per multiprocessor the kernels are built for: 1024 (64 registers), 768 (85)
// or 512 (128). A block of 1024 threads gets 64 registers: E = 16 spills there (ptxas, sm_90a),
// hence rows up to 8192 (16 f32 or 8 16-bit elements a thread in blocks of 512).
ONORM_HD constexpr int backward_threads_for(int floats) {
  return floats <= 32 ? 1024 : floats <= 56 ? 768 : 512;
}
// Rows loaded ahead: as many as fit in 100 floats (up to 3) without fewer resident threads than
// one row ahead has; none where even one does not fit. Measured faster for the shortest 16-bit
// rows, the same elsewhere (bench/RESULTS.md).
template <int E, int ITEMS, int K>
ONORM_HD constexpr int backward_prefetch_rows() {
  const int one = backward_floats_at(E, ITEMS, K, 1);
  if (one > 100) return 0;
  int d = 1;
  for (int t = 2; t <= 3; ++t) {
    const int floats = backward_floats_at(E, ITEMS, K, t);
    if (floats <= 100 && backward_threads_for(floats) == backward_threads_for(one)) d = t;
  }
  return d;
}
template <int E, int ITEMS, int K>
ONORM_HD constexpr int backward_floats() {
  return backward_floats_at(E, ITEMS, K, backward_prefetch_rows<E, ITEMS, K>());
}
template <int E, int ITEMS, int K>
constexpr int backward_threads_per_sm() {
  return backward_threads_for(backward_floats<E, ITEMS, K>());
}
template <int E, int ITEMS, int K, int BLOCK>
constexpr int backward_min_blocks() {
  return backward_threads_per_sm<E, ITEMS, K>() >= 2 * BLOCK ? backward_threads_per_sm<E, ITEMS, K>() / BLOCK : 1;
}

// A thread's ITEMS 16-byte vectors of a row from p (the row's first element of the thread:
// vector i is TPR vectors further on, an immediate offset), zero where the row is inactive or
// the vector past the row (has[i] false).
template <typename T, int ITEMS, int TPR>
ONORM_DEV void load_raw_items(const T* p, bool active, const bool (&has)[ITEMS], shim::Vec16 (&raw)[ITEMS]) {
  constexpr int V = Elems<T>::kVec;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    if (active && has[i]) {
      raw[i] = *reinterpret_cast<const shim::Vec16*>(p + i * TPR * V);
    } else {
      raw[i].x = raw[i].y = raw[i].z = raw[i].w = 0u;
    }
  }
}

template <typename Op, typename T, int WARP, int TPR, int ITEMS, int BLOCK>
__global__ void __launch_bounds__(BLOCK, (backward_min_blocks<ITEMS * Elems<T>::kVec, ITEMS, Op::kColOuts, BLOCK>()))
    norm_backward_register_kernel(NormBackwardArgs a) {
  constexpr int V = Elems<T>::kVec, E = ITEMS * V, GPB = BLOCK / TPR, K = Op::kColOuts;
  constexpr int D = backward_prefetch_rows<E, ITEMS, K>();
  static_assert(TPR <= WARP || TPR == BLOCK, "row group");
  using Row = typename Op::template Row<float>;
  // Two scratch buffers, alternating by row: one barrier per row (block_allreduce).
  __shared__ Vals<float, 2> scratch[2][BLOCK / WARP];
  const int lane = static_cast<int>(threadIdx.x) % TPR, group = static_cast<int>(threadIdx.x) / TPR;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * a.rows_per_group;
  const int64_t r1 = r0 + a.rows_per_group < a.rows ? r0 + a.rows_per_group : a.rows;
  // A thread's columns: vector i starts at lane * V + i * TPR * V; cols is a multiple of V and
  // at most kBackwardRegisterCols, so int holds them.
  const int cols = static_cast<int>(a.cols), col0 = lane * V;
  bool has[ITEMS];
  float scale[E], col[E][K];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    has[i] = col0 + i * TPR * V < cols;
#pragma unroll
    for (int e = 0; e < V; ++e) {
      scale[i * V + e] = has[i] ? scale_at<Op>(a, col0 + i * TPR * V + e) : 0.0f;
#pragma unroll
      for (int k = 0; k < K; ++k) col[i * V + e][k] = 0.0f;
    }
  }
  // The group's rows through pointers advanced a row group at a time: recomputing
  // row * stride + column in 64 bits for every vector made IMAD a fifth of the instructions
  // (ncu, bench/RESULTS.md). Pointers past the run are formed but never dereferenced.
  const int64_t first_row = r0 + group;
  const T* x_row = static_cast<const T*>(a.x) + first_row * a.sx + col0;
  const T* dy_row = static_cast<const T*>(a.dy) + first_row * a.sdy + col0;
  T* dx_row = static_cast<T*>(a.dx) + first_row * a.sdx + col0;
  int64_t dres_at = first_row * a.sdres + col0;
  const int64_t step_x = GPB * a.sx, step_dy = GPB * a.sdy, step_dx = GPB * a.sdx, step_dres = GPB * a.sdres;
  // Block-uniform bounds: every thread takes part in each row's reduction. ahead_*[d] holds
  // the group's row d + 1 runs after the current one (one extra slot keeps the arrays legal at
  // D = 0); x_ahead / dy_ahead point at the next row to load ahead. next_rv holds the next
  // row's mean / rstd: loaded a row ahead, their latency is not exposed in the reduction's
  // chain (D rows ahead spilled at 80 registers; ptxas, sm_90a).
  shim::Vec16 ahead_x[D + 1][ITEMS], ahead_dy[D + 1][ITEMS];
  const T* x_ahead = x_row;
  const T* dy_ahead = dy_row;
  Row next_rv = Op::template row<float>(a.row_in, first_row < r1 ? first_row : r0);
#pragma unroll
  for (int d = 0; d < D; ++d) {
    const bool live = first_row + d * GPB < r1;
    load_raw_items<T, ITEMS, TPR>(x_ahead, live, has, ahead_x[d]);
    load_raw_items<T, ITEMS, TPR>(dy_ahead, live, has, ahead_dy[d]);
    x_ahead += step_x;
    dy_ahead += step_dy;
  }
  int parity = 0;
  for (int64_t row = first_row; row - group < r1; row += GPB, parity ^= 1) {
    const bool active = row < r1;
    const Row rv = next_rv;
    next_rv = Op::template row<float>(a.row_in, row + GPB < r1 ? row + GPB : r0);
    float x[E], dy[E];
    typename Op::template Sums<float> s{0.0f, 0.0f};
    if constexpr (D > 0) {
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        io<T>::unpack(ahead_x[0][i], x + i * V);
        io<T>::unpack(ahead_dy[0][i], dy + i * V);
      }
#pragma unroll
      for (int d = 0; d + 1 < D; ++d)
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
          ahead_x[d][i] = ahead_x[d + 1][i];
          ahead_dy[d][i] = ahead_dy[d + 1][i];
        }
      const bool live = row + D * GPB < r1;
      load_raw_items<T, ITEMS, TPR>(x_ahead, live, has, ahead_x[D - 1]);
      load_raw_items<T, ITEMS, TPR>(dy_ahead, live, has, ahead_dy[D - 1]);
      x_ahead += step_x;
      dy_ahead += step_dy;
    } else {
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        if (active && has[i]) {
          io<T>::load_vec(x_row + i * TPR * V, x + i * V);
          io<T>::load_vec(dy_row + i * TPR * V, dy + i * V);
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) x[i * V + e] = dy[i * V + e] = 0.0f;
        }
      }
    }
#pragma unroll
    for (int e = 0; e < E; ++e) Op::accumulate(s, rv, x[e], dy[e], scale[e]);
    const Vals<float, 2> sums = row_allreduce<WARP, TPR, BLOCK, false>(Vals<float, 2>{{s.g, s.gc}}, lane, scratch[parity], AddOp{});
    const auto c = Op::template coefs<float>(typename Op::template Sums<float>{sums.v[0], sums.v[1]}, rv, a.cols);
    // dx and the column sums; the test for dresidual once a row, not once an element.
    const auto write = [&](auto with_dres) {
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        if (!active || !has[i]) continue;
        float out[V];
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const float d = with_dres ? load_dtype(a.dres, a.drt, dres_at + i * TPR * V + e) : 0.0f;
          out[e] = Op::dx(c, x[i * V + e], dy[i * V + e], scale[i * V + e], d);
          Op::column(col[i * V + e], rv, x[i * V + e], dy[i * V + e]);
        }
        store_vec<T, V>(dx_row + i * TPR * V, out);
      }
    };
    if (a.dres) {
      write(std::true_type{});
    } else {
      write(std::false_type{});
    }
    x_row += step_x;
    dy_row += step_dy;
    dx_row += step_dx;
    dres_at += step_dres;
  }
  if (!a.col_out[0] && !a.col_out[1]) return;
  // The block's groups in group order: group 0 stores, each next group adds, then group
  // GPB - 1 writes the block's partial row. A group's lanes sit side by side, [k][e][lane]:
  // [k][lane][e] had E-way bank conflicts (ncu; bench/RESULTS.md).
  if constexpr (GPB > 1) {
    __shared__ float block_cols[K][E][TPR];
#pragma unroll 1
    for (int g = 0; g < GPB; ++g) {
      if (group == g) {
#pragma unroll
        for (int e = 0; e < E; ++e)
#pragma unroll
          for (int k = 0; k < K; ++k) {
            float& slot = block_cols[k][e][lane];
            col[e][k] = g == 0 ? col[e][k] : slot + col[e][k];
            slot = col[e][k];
          }
      }
      __syncthreads();
    }
    if (group != GPB - 1) return;
  }
  float* const partial = a.partial_f32 + static_cast<int64_t>(blockIdx.x) * K * a.cols;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const int j = col0 + i * TPR * V + e;
      if (!has[i]) continue;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        if (a.direct) {
          if (a.col_out[k]) a.col_out[k][j] = col[i * V + e][k];
        } else {
          partial[k * a.cols + j] = col[i * V + e][k];
        }
      }
    }
}

}  // namespace gpu
}  // namespace onorm
