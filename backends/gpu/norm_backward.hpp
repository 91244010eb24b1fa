// The norms' backward pass on GPUs (core/ops/norm_backward.hpp; API.md, "backward passes"),
// shared by CUDA and HIP. Rows of one dtype, aligned, up to kBackwardRegisterCols long: one read
// (norm_backward_registers.hpp); longer ones on CUDA sm_90+: one read over a thread-block cluster
// (cuda/cluster_norm_backward.cuh). The others:
//   column_partials_kernel     dgamma / dbeta: a thread per column sums a group of rows in
//                              double, in row order;
//   column_finish_kernel       the groups' partials summed in group order, rounded to float
//                              (skipped when one group holds every row);
//   norm_backward_rows_kernel  dx: a warp or a block per row (by the row length only, so a row
//                              gives the same bits in any batch), its two sums in double in a
//                              fixed tree, the finish in float.
// The column sums run first: dx may overwrite x or dy. No atomics: the same call gives the
// same bits run after run.
#pragma once

#include "column_merge.hpp"
#include "launcher.hpp"
#include "norm_backward_registers.hpp"

namespace onorm {
namespace gpu {

constexpr int kColumnBlock = 256;

// A thread sums V consecutive columns (V = Elems<T>::kVec with a.vec, else 1).
template <typename Op, typename T, int V>
ONORM_DEV void column_partials(const NormBackwardArgs& a, int64_t j, int direct) {
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * a.rows_per_group;
  const int64_t r1 = r0 + a.rows_per_group < a.rows ? r0 + a.rows_per_group : a.rows;
  double sums[V][2] = {};
#pragma unroll 2
  for (int64_t r = r0; r < r1; ++r) {
    const auto row = Op::template row<double>(a.row_in, r);
    float xv[V], dyv[V];
    load_group<T, V>(a.x, a.xt, r * a.sx + j, xv);
    load_group<T, V>(a.dy, a.dyt, r * a.sdy + j, dyv);
#pragma unroll
    for (int i = 0; i < V; ++i) Op::column(sums[i], row, static_cast<double>(xv[i]), static_cast<double>(dyv[i]));
  }
#pragma unroll
  for (int k = 0; k < Op::kColOuts; ++k)
#pragma unroll
    for (int i = 0; i < V; ++i) {
      if (direct) {
        if (a.col_out[k]) a.col_out[k][j + i] = static_cast<float>(sums[i][k]);
      } else {
        a.partial[(static_cast<int64_t>(blockIdx.y) * Op::kColOuts + k) * a.cols + j + i] = sums[i][k];
      }
    }
}

template <typename Op, typename T>
__global__ void __launch_bounds__(kColumnBlock) column_partials_kernel(NormBackwardArgs a, int direct) {
  constexpr int V = Elems<T>::kVec;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kColumnBlock + threadIdx.x;
  if (V > 1 && a.vec) {
    if (t * V < a.cols) column_partials<Op, T, V>(a, t * V, direct);
  } else if (t < a.cols) {
    column_partials<Op, T, 1>(a, t, direct);
  }
}

template <int K>
__global__ void __launch_bounds__(kColumnBlock) column_finish_kernel(NormBackwardArgs a, int groups) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColumnBlock + threadIdx.x;
  if (j >= a.cols) return;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (!a.col_out[k]) continue;
    double s = 0;
    for (int g = 0; g < groups; ++g) s += a.partial[(static_cast<int64_t>(g) * K + k) * a.cols + j];
    a.col_out[k][j] = static_cast<float>(s);
  }
}

template <typename Op, typename T, int WARP, int TPR, int BLOCK>
__global__ void __launch_bounds__(BLOCK) norm_backward_rows_kernel(NormBackwardArgs a) {
  constexpr int GPB = BLOCK / TPR;  // rows per block
  __shared__ Vals<double, 2> scratch[BLOCK / WARP];
  const int lane = static_cast<int>(threadIdx.x) % TPR;
  // The loop's bounds are the block's, so every thread takes part in each row's reduction.
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * GPB; first < a.rows;
       first += static_cast<int64_t>(gridDim.x) * GPB) {
    const int64_t row = first + static_cast<int>(threadIdx.x) / TPR;
    const bool active = row < a.rows;
    const int64_t rr = active ? row : 0;
    const int64_t n = active ? a.cols : 0;
    const auto rv = Op::template row<double>(a.row_in, rr);
    typename Op::template Sums<double> s{0, 0};
    constexpr int V = Elems<T>::kVec;
    if (V > 1 && a.vec) {
#pragma unroll 2
      for (int64_t j = lane * V; j < n; j += TPR * V) {
        float xv[V], dyv[V];
        Elems<T>::load_vec(a.x, rr * a.sx + j, xv);
        Elems<T>::load_vec(a.dy, rr * a.sdy + j, dyv);
#pragma unroll
        for (int i = 0; i < V; ++i)
          Op::accumulate(s, rv, static_cast<double>(xv[i]), static_cast<double>(dyv[i]), static_cast<double>(scale_at<Op>(a, j + i)));
      }
    } else {
#pragma unroll 4
      for (int64_t j = lane; j < n; j += TPR)
        Op::accumulate(s, rv, static_cast<double>(Elems<T>::load(a.x, a.xt, rr * a.sx + j)),
                       static_cast<double>(Elems<T>::load(a.dy, a.dyt, rr * a.sdy + j)),
                       static_cast<double>(scale_at<Op>(a, j)));
    }
    Vals<double, 2> v{{s.g, s.gc}};
    v = row_allreduce<WARP, TPR, BLOCK>(v, lane, scratch, AddOp{});
    const auto c = Op::template coefs<float>(typename Op::template Sums<double>{v.v[0], v.v[1]}, rv, a.cols);
    // Each element is read by the thread that writes it: dx may be x or dy.
    if (V > 1 && a.vec) {
      for (int64_t j = lane * V; j < n; j += TPR * V) {
        float xv[V], dyv[V], out[V];
        Elems<T>::load_vec(a.x, rr * a.sx + j, xv);
        Elems<T>::load_vec(a.dy, rr * a.sdy + j, dyv);
#pragma unroll
        for (int i = 0; i < V; ++i) {
          const float d = a.dres ? load_dtype(a.dres, a.drt, rr * a.sdres + j + i) : 0.0f;
          out[i] = Op::dx(c, xv[i], dyv[i], scale_at<Op>(a, j + i), d);
        }
        Elems<T>::store_vec(a.dx, rr * a.sdx + j, out);
      }
      continue;
    }
#pragma unroll 4
    for (int64_t j = lane; j < n; j += TPR) {
      const float d = a.dres ? load_dtype(a.dres, a.drt, rr * a.sdres + j) : 0.0f;
      const float out = Op::dx(c, Elems<T>::load(a.x, a.xt, rr * a.sx + j), Elems<T>::load(a.dy, a.dyt, rr * a.sdy + j),
                               scale_at<Op>(a, j), d);
      Elems<T>::store(a.dx, a.dxt, rr * a.sdx + j, out);
    }
  }
}

// Rows of up to this many columns take a warp each, longer ones a block.
constexpr int64_t kWarpRowCols = 1024;
constexpr int kRowsBlock = 256;
// The column partials' scratch stays under this; fewer row groups otherwise.
constexpr int64_t kPartialBytes = int64_t(64) << 20;

// The register shapes of the one-read backward (norm_backward_registers.hpp), smallest first:
// TRY(threads per row, 16-byte vectors per thread and input, block); the comment is the widest
// row each holds. Groups of up to 32 lanes (both warp widths), then a block per row.
#define ONORM_GPU_BACKWARD_SHAPES_VEC4(TRY) \
  TRY(16, 1, 256)    /* 64 */               \
  TRY(32, 1, 256)    /* 128 */              \
  TRY(32, 2, 256)    /* 256 */              \
  TRY(32, 4, 256)    /* 512 */              \
  TRY(256, 1, 256)   /* 1024 */             \
  TRY(256, 2, 256)   /* 2048 */             \
  TRY(512, 2, 512)   /* 4096 */             \
  TRY(512, 4, 512)   /* 8192 */
#define ONORM_GPU_BACKWARD_SHAPES_VEC8(TRY) \
  TRY(8, 1, 256)     /* 64 */               \
  TRY(16, 1, 256)    /* 128 */              \
  TRY(32, 1, 256)    /* 256 */              \
  TRY(32, 2, 256)    /* 512 */              \
  TRY(128, 1, 128)   /* 1024 */             \
  TRY(128, 2, 128)   /* 2048 */             \
  TRY(256, 2, 256)   /* 4096 */             \
  TRY(512, 2, 512)   /* 8192 */

// The rows each block (cluster) of the one-read backward walks: spread evenly over whole waves of
// the `resident` ones the device holds at once, at most `cap` (the float column sums' chain), a
// multiple of `multiple` (a block's row groups). Capping the resident blocks' even share alone
// can leave a last wave of a few blocks, each with a whole run (bench/RESULTS.md). Past one wave
// a run holds more than cap / 2 rows.
inline int64_t rows_per_run(int64_t rows, int64_t resident, int64_t cap, int64_t multiple) {
  const int64_t waves = (rows + resident * cap - 1) / (resident * cap);
  const int64_t per = (rows + waves * resident - 1) / (waves * resident);
  return (per + multiple - 1) / multiple * multiple;
}

// A one-read backward of `runs` runs of rows (launch(a): its kernel's launch, a status) and its
// column sums: one partial row per run in the workspace, added in run order by
// column_merge_kernel after it; a single run writes dgamma / dbeta itself.
template <int K, typename Rt, typename Launch>
onorm_status launch_with_column_merge(Rt& rt, Launcher<Rt>& l, NormBackwardArgs a, int64_t runs, Launch&& launch) {
  const bool merge = (a.col_out[0] || a.col_out[1]) && runs > 1;
  a.direct = runs == 1;
  if (merge) {
    onorm_status s = ONORM_OK;
    a.partial_f32 = static_cast<float*>(l.workspace(static_cast<size_t>(runs * K * a.cols * 4), s));
    if (s != ONORM_OK) return s;
  }
  if (onorm_status s = launch(a)) return s;
  if (merge) {
    const int C = merge_columns_per_block(a.cols, runs, rt.caps().sms);
    column_merge_kernel<K><<<unsigned((a.cols + C - 1) / C), kMergeThreads, 0, rt.stream()>>>(a, int(runs), C);
    if (onorm_status s = rt.check("column merge launch")) return s;
  }
  return l.finish();
}

// The one-read backward with shape (TPR, ITEMS, BLOCK): a block per run of rows, as many blocks
// as the device holds at once, each run at most kBackwardChainRows rows per group. The partial
// rows take at most K * cols * 4 bytes per 64 rows: 1/16 (K = 2) of x's size in bf16, or the
// resident blocks' rows.
template <typename Op, typename T, int WARP, int TPR, int ITEMS, int BLOCK, typename Rt>
onorm_status launch_backward_registers(Rt& rt, Launcher<Rt>& l, NormBackwardArgs a) {
  constexpr int E = ITEMS * Elems<T>::kVec, GPB = BLOCK / TPR, K = Op::kColOuts;
  const int64_t resident = int64_t(rt.caps().sms) * backward_min_blocks<E, ITEMS, K, BLOCK>();
  const int64_t per_block = rows_per_run(a.rows, resident, kBackwardChainRows * GPB, GPB);
  a.rows_per_group = per_block;
  const int64_t blocks = (a.rows + per_block - 1) / per_block;
  return launch_with_column_merge<K>(rt, l, a, blocks, [&](const NormBackwardArgs& b) {
    norm_backward_register_kernel<Op, T, WARP, TPR, ITEMS, BLOCK><<<unsigned(blocks), BLOCK, 0, rt.stream()>>>(b);
    return rt.check("norm backward register launch");
  });
}

// The first register shape that holds the row (false: none does).
template <typename Op, typename T, int WARP, typename Rt>
bool place_backward_registers(Rt& rt, Launcher<Rt>& l, const NormBackwardArgs& a, onorm_status& status) {
  constexpr int V = Elems<T>::kVec;
#define ONORM_TRY_BACKWARD(TPR, ITEMS, BLOCK)                                                  \
  if (a.cols <= int64_t(TPR) * (ITEMS) * V) {                                                  \
    status = launch_backward_registers<Op, T, WARP, TPR, ITEMS, BLOCK>(rt, l, a);              \
    return true;                                                                               \
  }
  if constexpr (V == 4) {
    ONORM_GPU_BACKWARD_SHAPES_VEC4(ONORM_TRY_BACKWARD)
  } else {
    ONORM_GPU_BACKWARD_SHAPES_VEC8(ONORM_TRY_BACKWARD)
  }
#undef ONORM_TRY_BACKWARD
  return false;
}

// The cluster shapes of the one-read backward (cluster_norm_backward.cuh; runtimes with
// kClusters): TRY(16-byte vectors per thread and input, block); a block's slice holds up to
// BLOCK * ITEMS vectors, a cluster up to cluster_max (16) slices; the comment is the widest row.
#define ONORM_GPU_BACKWARD_CLUSTER_SHAPES_VEC4(TRY) \
  TRY(4, 256)  /* 65536 */                          \
  TRY(4, 512)  /* 131072 */                         \
  TRY(8, 512)  /* 262144 (one row staged at a time) */
#define ONORM_GPU_BACKWARD_CLUSTER_SHAPES_VEC8(TRY) \
  TRY(2, 256)  /* 65536 */                          \
  TRY(2, 512)  /* 131072 */                         \
  TRY(4, 512)  /* 262144 */

// The one-read backward over clusters of C blocks with shape (ITEMS, BLOCK): as many clusters
// as the device holds at once, each a run of at most kBackwardChainRows rows, one partial row of
// column sums per cluster. False where no such cluster fits (nothing launched).
template <typename Op, typename T, int WARP, int ITEMS, int BLOCK, typename Rt>
bool launch_backward_cluster(Rt& rt, Launcher<Rt>& l, NormBackwardArgs a, int C, onorm_status& status) {
  constexpr int V = Elems<T>::kVec, K = Op::kColOuts;
  const int chunk = static_cast<int>(((a.cols + C - 1) / C + V - 1) / V * V);
  int stages = 0;
  const int resident = rt.template backward_clusters<Op, T, WARP, ITEMS, BLOCK>(C, chunk, stages, status);
  if (status != ONORM_OK) return true;
  if (resident < 1) return false;
  const int64_t per_cluster = rows_per_run(a.rows, resident, kBackwardChainRows, 1);
  a.rows_per_group = per_cluster;
  const int64_t clusters = (a.rows + per_cluster - 1) / per_cluster;
  status = launch_with_column_merge<K>(rt, l, a, clusters, [&](const NormBackwardArgs& b) {
    return rt.template backward_cluster<Op, T, WARP, ITEMS, BLOCK>(unsigned(clusters), C, chunk, stages, b);
  });
  return true;
}

// The first cluster shape that holds the row and fits (false: none; CUDA sm_90+ only).
template <typename Op, typename T, int WARP, typename Rt>
bool place_backward_cluster(Rt& rt, Launcher<Rt>& l, const NormBackwardArgs& a, onorm_status& status) {
  if constexpr (!Rt::kClusters) {
    (void)rt, (void)l, (void)a, (void)status;
    return false;
  } else {
    constexpr int V = Elems<T>::kVec;
    if (!rt.caps().cluster) return false;
#define ONORM_TRY_BACKWARD_CLUSTER(ITEMS, BLOCK)                                                        \
  {                                                                                                     \
    const int64_t C = (a.cols + int64_t(BLOCK) * (ITEMS) * V - 1) / (int64_t(BLOCK) * (ITEMS) * V);     \
    if (C <= rt.caps().cluster_max && launch_backward_cluster<Op, T, WARP, ITEMS, BLOCK>(rt, l, a, int(C), status)) \
      return true;                                                                                      \
  }
    if constexpr (V == 4) {
      ONORM_GPU_BACKWARD_CLUSTER_SHAPES_VEC4(ONORM_TRY_BACKWARD_CLUSTER)
    } else {
      ONORM_GPU_BACKWARD_CLUSTER_SHAPES_VEC8(ONORM_TRY_BACKWARD_CLUSTER)
    }
#undef ONORM_TRY_BACKWARD_CLUSTER
    return false;
  }
}

template <typename Op, typename T, int WARP, typename Rt>
onorm_status launch_norm_backward(Rt& rt, NormBackwardArgs a) {
  Launcher<Rt> l(rt);
  if constexpr (!std::is_void<T>::value) {
    onorm_status status = ONORM_OK;
    // Up to 2^29 rows: the grid stays under max_blocks (a block or cluster takes more than 64
    // rows there: rows_per_run past one wave).
    if (a.vec && a.rows <= (int64_t(1) << 29) &&
        (a.cols <= kBackwardRegisterCols ? place_backward_registers<Op, T, WARP>(rt, l, a, status)
                                         : place_backward_cluster<Op, T, WARP>(rt, l, a, status)))
      return status;
  }
  const PlanCaps& caps = rt.caps();
  const int64_t per_thread = a.vec ? Elems<T>::kVec : 1;
  const int64_t tiles = (a.cols + kColumnBlock * per_thread - 1) / (kColumnBlock * per_thread);
  if (a.col_out[0] || a.col_out[1]) {
    // Row groups: enough blocks to fill the device, each at least 64 rows long.
    int64_t groups = (int64_t(8) * caps.sms + tiles - 1) / tiles;
    const int64_t most_rows = (a.rows + 63) / 64;
    if (groups > most_rows) groups = most_rows;
    const int64_t per_group_bytes = int64_t(Op::kColOuts) * a.cols * 8;
    if (groups * per_group_bytes > kPartialBytes) groups = kPartialBytes / per_group_bytes;
    if (groups < 1) groups = 1;
    a.rows_per_group = (a.rows + groups - 1) / groups;
    groups = (a.rows + a.rows_per_group - 1) / a.rows_per_group;
    if (groups > 1) {
      onorm_status s = ONORM_OK;
      a.partial = static_cast<double*>(l.workspace(static_cast<size_t>(groups * per_group_bytes), s));
      if (s != ONORM_OK) return s;
    }
    column_partials_kernel<Op, T><<<dim3(unsigned(tiles), unsigned(groups)), kColumnBlock, 0, rt.stream()>>>(a, groups == 1);
    if (onorm_status s = rt.check("column partials launch")) return s;
    if (groups > 1) {
      const int64_t finish_tiles = (a.cols + kColumnBlock - 1) / kColumnBlock;
      column_finish_kernel<Op::kColOuts><<<unsigned(finish_tiles), kColumnBlock, 0, rt.stream()>>>(a, int(groups));
      if (onorm_status s = rt.check("column finish launch")) return s;
    }
  }
  const int64_t grid_cap = int64_t(32) * caps.sms;
  if (a.cols <= kWarpRowCols) {
    constexpr int GPB = kRowsBlock / WARP;
    const int64_t blocks = (a.rows + GPB - 1) / GPB;
    norm_backward_rows_kernel<Op, T, WARP, WARP, kRowsBlock>
        <<<unsigned(blocks < grid_cap ? blocks : grid_cap), kRowsBlock, 0, rt.stream()>>>(a);
  } else {
    norm_backward_rows_kernel<Op, T, WARP, kRowsBlock, kRowsBlock>
        <<<unsigned(a.rows < grid_cap ? a.rows : grid_cap), kRowsBlock, 0, rt.stream()>>>(a);
  }
  if (onorm_status s = rt.check("norm backward rows launch")) return s;
  return l.finish();
}

// Runs a validated request of a column op (core/ops/op_list.h) on warp width WARP.
template <int WARP, typename Rt>
onorm_status run_norm_backward(Rt& rt, const onorm_request& q) {
  NormBackwardArgs a{};
  const onorm_rows &x = q.in[0], &dy = q.in[1], &dx = q.out[0];
  a.x = x.data;
  a.dy = dy.data;
  a.dx = dx.data;
  a.dres = q.inputs > 2 ? q.in[2].data : nullptr;
  a.gamma = q.col[0];
  a.rows = x.rows;
  a.cols = x.cols;
  a.sx = x.row_stride;
  a.sdy = dy.row_stride;
  a.sdx = dx.row_stride;
  a.sdres = q.inputs > 2 ? q.in[2].row_stride : 0;
  a.xt = x.dtype;
  a.dyt = dy.dtype;
  a.dxt = dx.dtype;
  a.drt = q.inputs > 2 ? static_cast<int>(q.in[2].dtype) : static_cast<int>(kF32);
  a.gt = q.col_dtype;
  a.offset = static_cast<float>(q.col_offset[0]);
  for (int k = 0; k < 2; ++k) {
    a.row_in[k] = q.row_in[k];
    a.col_out[k] = q.col_out[k];
  }
  return core::ops::visit_column_op(q.op, [&](auto op) {
    using Op = decltype(op);
    // One element type for x, dy and dx: typed loads; otherwise each by its run-time dtype.
    if (x.dtype == dy.dtype && x.dtype == dx.dtype) {
      a.vec = rows_aligned16(x) && rows_aligned16(dy) && rows_aligned16(dx) && x.cols % (16 / dtype_size(x.dtype)) == 0;
      if (x.dtype == ONORM_F32) return launch_norm_backward<Op, float, WARP>(rt, a);
      if (x.dtype == ONORM_F16) return launch_norm_backward<Op, core::f16_bits, WARP>(rt, a);
      return launch_norm_backward<Op, core::bf16_bits, WARP>(rt, a);
    }
    return launch_norm_backward<Op, void, WARP>(rt, a);
  });
}

}  // namespace gpu
}  // namespace onorm
