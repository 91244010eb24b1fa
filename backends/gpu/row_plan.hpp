// The GPU planner, shared by CUDA and HIP: which placement runs a request, with which shape.
// The placements, in order; the first that accepts the row (op, dtypes, width, device
// capabilities) runs it (column vectors of another form: folded_columns.hpp):
//   cluster     rows split over a thread-block cluster, slices in registers (capability
//               `cluster`: CUDA sm_90+; the launcher has kClusters); rows the copy engine can
//               stage stream through a resident grid of clusters (`cluster_stream`);
//   registers   a group of lanes, or a block, per row, the row in registers
//               (register_shapes.hpp: the 32- and 64-lane tables);
//   staged      the row (or chunks of staged_chunk_bytes) in shared memory, a persistent grid;
//               K > 1 chunks of a row merge across a co-resident group (capability `coop`:
//               cooperative launch; the launcher has kStaged);
//   two-read    chunk states, a fixed merge tree, then the finish, in row batches sized to
//               half the L2: any row.
// A backend gives a launcher L (its runtime calls only):
//   const PlanCaps& caps()
//   rows<R, W, TPR, ITEMS, BLOCK>(grid, a)                       rows_kernel
//   stage_rows<R, W, TPR, ITEMS, BLOCK, STAGE>(grid, a, s)       stage_rows_kernel (partial states)
//   cluster_fits<R, W, ITEMS, BLOCK>(K, status), cluster<...>(grid, K, a, s),
//   cluster_stream<...>(K, a, s, status): false where no cluster of it fits    (kClusters)
//   staged_per_sm<R, W, BLOCK>(smem, status), staged<R, W, BLOCK>(grid, smem, coop, a, s)  (kStaged)
//   split<R, W, ITEMS, BLOCK, MODE>(gx, gy, a, s), row_coefs<R, W, BLOCK>(gx, a, s),
//   merge<S, W, BLOCK>(gx, gy, in, out, count)                 the two-read kernels
//   workspace(bytes, status): device scratch ordered after its previous user; next_epoch()
//   column_workspace(bytes, status), fold_columns(grid, f): the folded column vectors
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "backend_interface.h"
#include "folded_columns.hpp"
#include "onlinenorm/core/ops/dispatch.hpp"
#include "register_shapes.hpp"
#include "request_form.hpp"
#include "row_args.hpp"
#include "rows_kernel.hpp"
#include "staged_kernel.hpp"
#include "two_read.hpp"
#include "visit_dtype.hpp"

namespace onorm {
namespace gpu {

// What the planner may use on a device (from its properties, then ONLINENORM_TUNE).
struct PlanCaps {
  int sms = 1;
  int64_t l2_bytes = int64_t(4) << 20;
  bool cluster = false;                  // thread-block clusters
  bool coop = false;                     // cooperative launch (co-resident grids)
  bool force_two_read = false;           // long rows: skip the single-read placements
  bool short_wide = false;               // 32-lane short rows: the wide shape entries first
  int64_t dense_min_cols_16 = 0;         // shortest row in the dense 16-bit shapes; 0: the op's (kDenseMinCols)
  int64_t reg_max_cols_f32 = 16384;      // longest f32 row kept in registers
  int64_t reg_max_cols_16 = 16384;       // longest f16/bf16 row kept in registers
  int64_t reg_max_cols_16_one_pass = 16384;  // the same for ops without pass 1 (one block reduction)
  int64_t reg_max_cols_16_dense = 16384;     // the same for the dense shapes' ops (kDenseRows)
  int64_t staged_chunk_bytes = 32768;    // one shared-memory stage of the staged kernel
  int64_t smem_max = 0;                  // dynamic shared memory a block may have
  int64_t cluster_min_cols_f32 = 16384;  // shortest f32 row split over a cluster
  int64_t cluster_min_cols_16 = 16384;   // shortest f16/bf16 row split over a cluster
  int cluster_max = 16;                  // largest cluster (blocks per row)
  int cluster_min_tier = 0;              // smallest slice tried (ClusterTiers)
  bool cluster_prefetch = true;          // prefetch the column vectors before the cluster merge
  bool cluster_stream = true;            // resident clusters walking rows through a shared-memory stage
  int backward_stages = 0;               // the norms' backward over clusters: rows staged at once (0: by dtype)
};

constexpr int kSplitBlock = 512;   // two-read chunks: a block of 512 threads
constexpr int kStagedBlock = 256;  // staged kernel

// Grid pieces: grid x times block size stays below 2^31 (HIP on AMD counts work-items in 32 bits).
template <int BLOCK>
constexpr int64_t max_blocks() {
  return int64_t(0x7fffffff) / BLOCK;
}

// ------------------------------------------------------------------ registers
// What a register placement does with its rows: the whole op (rows_kernel), or one stage of the
// partial row states on each row's slice (partial_rows.hpp: stage_rows_kernel).
enum : int { kStageWhole = 0, kStageStats = 1, kStageFinish = 2 };

// s: the stages' states and coefficients, indexed from s.row0 (set here per launch).
template <typename R, int W, int TPR, int ITEMS, int BLOCK, int STAGE, typename L>
onorm_status launch_rows(const RowArgs& a0, L& l, const SplitArgs& s0) {
  constexpr int64_t kRpb = BLOCK / TPR;
  constexpr int64_t kMaxRows = max_blocks<BLOCK>() * kRpb;
  for (int64_t r0 = 0; r0 < a0.rows; r0 += kMaxRows) {
    const RowArgs a = rows_from<R>(a0, r0, std::min(kMaxRows, a0.rows - r0));
    const unsigned grid = static_cast<unsigned>((a.rows + kRpb - 1) / kRpb);
    onorm_status s;
    if constexpr (STAGE == kStageWhole) {
      s = l.template rows<R, W, TPR, ITEMS, BLOCK>(grid, a);
    } else {
      SplitArgs st = s0;
      st.row0 = s0.row0 + r0;
      s = l.template stage_rows<R, W, TPR, ITEMS, BLOCK, STAGE>(grid, a, st);
    }
    if (s) return s;
  }
  return ONORM_OK;
}

// The dense 16-bit shapes (register_shapes.hpp) take the rows of ops of one input without the
// norms' options (the others measured slower with them) from kDenseMinCols<R> + 1 columns:
// 2049, or 65 for an op whose finish reads two column vectors (LayerNorm), where they measured
// faster on an H200; at 64 columns a whole row in one thread is slower than the wide shapes
// (bench/RESULTS.md, issue 11).
template <typename R>
constexpr bool kDenseRows = R::kVec == 8 && R::Op::kInputs == 1 && !R::kOptions;
template <typename R>
constexpr int64_t kDenseMinCols = R::Op::kCols >= 2 ? 64 : 2048;

// The longest row the register placement holds for R on this device.
template <typename R>
int64_t register_max_cols(const PlanCaps& caps) {
  if (R::kVec == 4) return caps.reg_max_cols_f32;
  if (kDenseRows<R>) return caps.reg_max_cols_16_dense;
  return R::Op::kPass1 == core::ops::Pass1::kNone ? caps.reg_max_cols_16_one_pass : caps.reg_max_cols_16;
}

// max_cols: the longest row taken (-1: register_max_cols). STAGE, s: launch_rows.
template <typename R, int W, int STAGE = kStageWhole, typename L>
bool place_registers(const RowArgs& a, L& l, onorm_status& status, int64_t max_cols = -1,
                     const SplitArgs& s = SplitArgs{}) {
  constexpr int V = R::kVec;
  const PlanCaps& caps = l.caps();
  const int64_t c = a.cols;
  if (c > (max_cols < 0 ? register_max_cols<R>(caps) : max_cols)) return false;
#define ONORM_GPU_TRY_SHAPE(TPR, ITEMS, BLOCK)                     \
  if (c <= int64_t(TPR) * ITEMS * V) {                             \
    status = launch_rows<R, W, TPR, ITEMS, BLOCK, STAGE>(a, l, s); \
    return true;                                                   \
  }
// Dense shapes no longer than the op's kDenseMinCols are not compiled: by default no row takes
// them (dense_cols below that reaches the next one).
#define ONORM_GPU_TRY_DENSE_SHAPE(TPR, ITEMS, BLOCK)               \
  if constexpr (int64_t(TPR) * ITEMS * V > kDenseMinCols<R>) {     \
    ONORM_GPU_TRY_SHAPE(TPR, ITEMS, BLOCK)                         \
  }
  if constexpr (W == 32 && V == 4) {
    if (caps.short_wide) {
      ONORM_GPU_W32_WIDE_SHAPES_VEC4(ONORM_GPU_TRY_SHAPE)
    }
    if constexpr (R::Op::kCols >= 2 && !R::kOptions) {
      if (c > 5120) {
        ONORM_GPU_W32_TWO_COLUMN_SHAPES_VEC4(ONORM_GPU_TRY_SHAPE)
      }
    }
    ONORM_GPU_W32_SHAPES_VEC4(ONORM_GPU_TRY_SHAPE)
  } else if constexpr (W == 32) {
    if constexpr (kDenseRows<R>) {
      if (c > (caps.dense_min_cols_16 > 0 ? caps.dense_min_cols_16 - 1 : kDenseMinCols<R>)) {
        ONORM_GPU_W32_DENSE_SHAPES_VEC8(ONORM_GPU_TRY_DENSE_SHAPE)
      }
    }
    if (caps.short_wide) {
      ONORM_GPU_W32_WIDE_SHAPES_VEC8(ONORM_GPU_TRY_SHAPE)
    }
    if constexpr (R::kOptions) {
      if (c > 3072) {
        ONORM_GPU_W32_OPTIONS_SHAPES_VEC8(ONORM_GPU_TRY_SHAPE)
      }
    }
    ONORM_GPU_W32_SHAPES_VEC8(ONORM_GPU_TRY_SHAPE)
  } else if constexpr (V == 4) {
    static_assert(W == 64, "warp widths 32 and 64");
    ONORM_GPU_W64_SHAPES_VEC4(ONORM_GPU_TRY_SHAPE)
  } else {
    ONORM_GPU_W64_SHAPES_VEC8(ONORM_GPU_TRY_SHAPE)
  }
#undef ONORM_GPU_TRY_DENSE_SHAPE
#undef ONORM_GPU_TRY_SHAPE
  return false;
}

// ------------------------------------------------------------------ cluster
// Slices from small to large, (BLOCK threads, E elements per thread): 32 elements per thread,
// then twice the threads; 16-bit softmax and log-softmax twice the elements instead (the dense
// register shapes' load, two blocks an SM). Measured on an H200 (bench/RESULTS.md, issue 11):
// faster so for softmax and log-softmax; slower for the norms (RMSNorm's gamma slice staged
// beside x), and for every op where such slices replaced the smaller tier.
struct ClusterTier {
  int block, elems;
};
template <typename R>
struct ClusterTiers {
  static constexpr bool kDense = kDenseRows<R> && R::Op::kCols == 0;
  static constexpr int kCount = 2;
  static constexpr ClusterTier kTier[2] = {ClusterTier{256, 32}, kDense ? ClusterTier{256, 64} : ClusterTier{512, 32}};
  static constexpr int64_t cols(int t) { return int64_t(kTier[t].block) * kTier[t].elems; }
};

// Rows that stream through resident clusters (cluster_stream): rows of one input without the norms'
// options, of kStreamMinSlices slices or more (stream_rows: which rows off a 16-byte boundary).
// Measured on an H200 (bench/RESULTS.md, issue 11): softmax and log-softmax faster streamed from 8
// slices in f32 and from 4 in 16-bit; RMSNorm (its gamma slice kept in shared memory across the
// rows) from 4 in 16-bit and from 16 in f32 (slower at 8); LayerNorm from 4 in 16-bit, finishing
// from a second stage (cluster_rows.cuh), and per row in f32 (streamed with its values in registers
// it spilled more under the register cap and was slower in both); the norms' residual staged beside
// x slower too.
template <typename R>
constexpr bool kStreamOp =
    R::Op::kInputs == 1 && !R::kOptions && (R::Op::kCols <= 1 || sizeof(typename R::In) == 2);
// LayerNorm's 16-bit rows finish from the stage (finish_from_stage) and so keep two stages: the
// next row lands in the other while the finish reads this one; gamma and beta come from L2
// (staged beside the two stages they leave three blocks an SM, or one of 512 threads: no faster,
// and slower at 262144 columns). The other ops hold their values in registers from the passes to
// the finish, the next row landing in the one stage as soon as they are loaded: RMSNorm and
// log-softmax measured slower finishing from the stage (bench/RESULTS.md, issue 11); f32
// LayerNorm's two stages would take 64 KB a block (not tried).
template <typename R>
constexpr bool kStreamReload = !R::Op::kKeepsLift && R::Op::kCols > 1 && sizeof(typename R::In) == 2;
template <typename R>
constexpr int64_t kStreamMinSlices = R::kVec == 8 ? 4 : R::Op::kCols > 0 ? 16 : 8;
// Rows off a 16-byte boundary (the stage then starts at the boundary below the slice) stream
// where the finish reads registers only, from 5 slices: 16-bit LayerNorm's finish from the
// stage lost 9-12 points at aligned widths when it took the row's offset, and at 4 slices the
// stream of such rows was slower than a cluster a row (bench/RESULTS.md, issue 11).
template <typename R>
bool stream_rows(const RowArgs& a, int64_t K) {
  if (a.in_vec[0] && (a.cols * int64_t(sizeof(typename R::In))) % 16 == 0) return true;
  return !kStreamReload<R> && K >= 5;
}

// Columns a slice of a row of `cols` split into K equal slices (the last may be shorter), each
// starting on a whole vector of `vec` elements.
inline int64_t slice_columns(int64_t cols, int64_t K, int64_t vec) { return ((cols + K - 1) / K + vec - 1) / vec * vec; }

template <typename R, int W, int TIER, typename L>
bool cluster_tier(const RowArgs& a, int K, L& l, onorm_status& status) {
  constexpr int kBlock = ClusterTiers<R>::kTier[TIER].block;
  constexpr int kItems = ClusterTiers<R>::kTier[TIER].elems / R::kVec;
  SplitArgs s{};
  s.chunks = K;
  s.chunk = slice_columns(a.cols, K, R::kVec);
  s.prefetch_cols = l.caps().cluster_prefetch;
  // Streamed first: where its kernel fits (it checks), the per-row kernel's fit is not needed.
  if constexpr (kStreamOp<R>) {
    if (l.caps().cluster_stream && K >= kStreamMinSlices<R> && stream_rows<R>(a, K) &&
        (l.template cluster_stream<R, W, kItems, kBlock>(K, a, s, status) || status != ONORM_OK))
      return true;
  }
  if (!l.template cluster_fits<R, W, kItems, kBlock>(K, status)) return status != ONORM_OK;
  const int64_t max_rows = max_blocks<kBlock>() / K;
  for (int64_t r0 = 0; r0 < a.rows && status == ONORM_OK; r0 += max_rows) {
    s.row0 = r0;
    const unsigned grid = static_cast<unsigned>(std::min(max_rows, a.rows - r0) * K);
    status = l.template cluster<R, W, kItems, kBlock>(grid, K, a, s);
  }
  return true;
}

// The shortest row split over a cluster (per input width).
template <typename R>
int64_t cluster_min_cols(const PlanCaps& caps) {
  if (sizeof(typename R::In) == 4) return caps.cluster_min_cols_f32;
  // The rows the dense shapes hold stay in registers.
  return kDenseRows<R> ? std::max(caps.cluster_min_cols_16, caps.reg_max_cols_16_dense + 1) : caps.cluster_min_cols_16;
}

// Rows from min_cols to 16 slices of the largest tier: the smallest slice whose cluster size K
// fits cluster_max (a slice is at most a vector longer than the row's share and holds >= 8192
// columns: no block is empty).
template <typename R, int W, typename L>
bool place_cluster(const RowArgs& a, L& l, onorm_status& status, int64_t min_cols) {
  if constexpr (!L::kClusters) {
    (void)a, (void)l, (void)status, (void)min_cols;
    return false;
  } else {
    using T = ClusterTiers<R>;
    const PlanCaps& caps = l.caps();
    if (!caps.cluster || a.cols < min_cols) return false;
    for (int tier = std::min(caps.cluster_min_tier, T::kCount - 1); tier < T::kCount; ++tier) {
      const int64_t K = (a.cols + T::cols(tier) - 1) / T::cols(tier);
      // A cluster of one block may not use distributed shared memory (compute-sanitizer).
      if (K < 2 || K > caps.cluster_max) continue;
      if (tier == 0 ? cluster_tier<R, W, 0>(a, int(K), l, status) : cluster_tier<R, W, T::kCount - 1>(a, int(K), l, status))
        return true;
    }
    return false;
  }
}

// ------------------------------------------------------------------ staged (single read)
template <typename R, int W, typename L>
bool place_staged(const RowArgs& a, L& l, onorm_status& status) {
  if constexpr (!L::kStaged) {
    (void)a, (void)l, (void)status;
    return false;
  } else {
    const PlanCaps& caps = l.caps();
    if (caps.force_two_read) return false;
    const int64_t stage_max = caps.staged_chunk_bytes / int64_t(sizeof(typename R::In));
    const int64_t chunk = a.cols <= stage_max ? a.cols : stage_max;
    const int64_t K = (a.cols + chunk - 1) / chunk;
    const int64_t alloc = (chunk + 7) / 8 * 8;  // every input's buffer 16-byte aligned
    const size_t smem = size_t(2 * alloc * staged_bytes_per_element<R>());
    if (int64_t(smem) > caps.smem_max) return false;
    const int per_sm = l.template staged_per_sm<R, W, kStagedBlock>(smem, status);
    if (status != ONORM_OK) return true;
    const int64_t resident = int64_t(per_sm) * caps.sms;
    if (per_sm <= 0 || !(K == 1 || (caps.coop && K <= resident))) return false;
    const int64_t groups = std::min<int64_t>(std::max<int64_t>(resident / K, 1), a.rows);
    const int64_t grid = groups * K;
    SplitArgs s{};
    s.chunk = chunk;
    s.chunks = K;
    s.groups = groups;
    s.chunk_alloc = alloc;
    if (K > 1) {  // the state slots, then two barrier flags per block (coop_barrier)
      s.entries = l.workspace(size_t((kCoopSlots + 2) * grid) * sizeof(Entry), status);
      if (status != ONORM_OK) return true;
      s.epoch = l.next_epoch();
    }
    status = l.template staged<R, W, kStagedBlock>(static_cast<unsigned>(grid), smem, K > 1, a, s);
    return true;
  }
}

// ------------------------------------------------------------------ two reads
template <typename R>
struct SplitShape {
  static constexpr int kItems = R::kVec == 4 ? 8 : 4;  // 32 floats per thread and input
  static constexpr int64_t kChunk = int64_t(kSplitBlock) * kItems * R::kVec;
};

// Rows per two-read batch: a batch's rows fit half the L2 (they are read twice), and grid y
// holds at most 65535.
template <typename R, typename L>
int64_t two_read_batch(const RowArgs& a, L& l) {
  const int64_t row_bytes = std::max<int64_t>(1, a.cols * staged_bytes_per_element<R>());
  const int64_t batch = std::max<int64_t>(1, (l.caps().l2_bytes / 2) / row_bytes);
  return std::min<int64_t>({batch, a.rows, 65535});
}

// Bytes of the two buffers of a batch's chunk states (level 0: K per row; level 1: the first
// merge's outputs).
template <typename R>
void two_read_state_bytes(int64_t batch, int64_t K, size_t& buf0, size_t& buf1) {
  using S = typename R::Op::Merged;
  const int64_t level1 = (K + kSplitBlock - 1) / kSplitBlock;
  buf0 = size_t(batch * K) * sizeof(S);
  buf1 = size_t(batch * level1) * sizeof(S);
}

// The merged state of each of the gy rows from s.row0 (gx = K chunks a row): the chunk states
// into b0 (split_chunk_kernel<kModeStats>), merged per row in the fixed tree, b0 and b1 in
// turn; s.final_states receives the buffer left with one state per row.
template <typename R, int W, typename L>
onorm_status two_read_states(const RowArgs& a, L& l, SplitArgs& s, unsigned gx, unsigned gy, char* b0, char* b1) {
  using S = typename R::Op::Merged;
  constexpr int kItems = SplitShape<R>::kItems;
  s.entries = b0;
  if (onorm_status e = l.template split<R, W, kItems, kSplitBlock, kModeStats>(gx, gy, a, s)) return e;
  char* in = b0;
  char* out = b1;
  for (int64_t count = gx; count > 1; count = (count + kSplitBlock - 1) / kSplitBlock) {
    const unsigned outs = static_cast<unsigned>((count + kSplitBlock - 1) / kSplitBlock);
    if (onorm_status e = l.template merge<S, W, kSplitBlock>(outs, gy, in, out, count)) return e;
    std::swap(in, out);
  }
  s.final_states = in;
  return ONORM_OK;
}

template <typename R, int W, typename L>
onorm_status place_two_read(const RowArgs& a, L& l) {
  using Op = typename R::Op;
  using Shape = SplitShape<R>;
  constexpr int kItems = Shape::kItems;
  const int64_t K = (a.cols + Shape::kChunk - 1) / Shape::kChunk;
  const int64_t batch = two_read_batch<R>(a, l);
  size_t buf0, buf1;
  two_read_state_bytes<R>(batch, K, buf0, buf1);
  const size_t buf2 = Op::kF64Fallback ? size_t(batch) * sizeof(coefs_t<Op>) : 0;
  onorm_status status = ONORM_OK;
  char* b0 = static_cast<char*>(l.workspace(buf0 + buf1 + buf2, status));
  if (status != ONORM_OK) return status;
  char* b1 = b0 + buf0;
  for (int64_t r0 = 0; r0 < a.rows; r0 += batch) {
    const int64_t nb = std::min(batch, a.rows - r0);
    SplitArgs s{};
    s.chunk = Shape::kChunk;
    s.chunks = K;
    s.row0 = r0;
    const unsigned gx = static_cast<unsigned>(K), gy = static_cast<unsigned>(nb);
    if (onorm_status e = two_read_states<R, W>(a, l, s, gx, gy, b0, b1)) return e;
    if constexpr (Op::kF64Fallback) {  // coefficients before the finish writes (in place)
      s.row_coefs = b1 + buf1;
      if (onorm_status e = l.template row_coefs<R, W, kSplitBlock>(gy, a, s)) return e;
    }
    if (onorm_status e = l.template split<R, W, kItems, kSplitBlock, kModeFinish>(gx, gy, a, s)) return e;
  }
  return ONORM_OK;
}

// ------------------------------------------------------------------ the plan
template <typename R, int W, typename L>
onorm_status plan_rows(const RowArgs& a, L& l) {
  onorm_status status = ONORM_OK;
  if (place_cluster<R, W>(a, l, status, cluster_min_cols<R>(l.caps())) || place_registers<R, W>(a, l, status) ||
      place_staged<R, W>(a, l, status))
    return status;
  return place_two_read<R, W>(a, l);
}

// The norms with their options inside the row kernels (RowArgs::opt; norm_options.hpp): the
// placements that hold a row in registers only, a cluster from the first width the registers
// do not hold; rows that one block of the smallest cluster slice holds stay register rows.
// false: neither takes the row.
template <typename R, int W, typename L>
bool place_with_options(const RowArgs& a, L& l, onorm_status& status) {
  const int64_t reg_cols = std::max(register_max_cols<R>(l.caps()), L::kClusters ? ClusterTiers<R>::cols(0) : int64_t(0));
  const int64_t min_cols = std::min(cluster_min_cols<R>(l.caps()), reg_cols + 1);
  return place_cluster<R, W>(a, l, status, min_cols) || place_registers<R, W>(a, l, status, reg_cols);
}

// f(op, type_tag<In>{}) for a request's op and first input's element type: the unit a backend
// instantiates per translation unit.
template <typename F>
onorm_status visit_request(const onorm_request& q, F&& f, char* err, size_t err_len) {
  return core::ops::visit(q.op, [&](auto op) {
    return visit_dtype(q.in[0].dtype, [&](auto in) { return f(op, in); }, err, err_len);
  });
}

// The plan of op Op with first input In: the columns in a form the kernels take, the other
// inputs' element types, then plan_rows.
template <typename Op, typename In, int W, typename L>
onorm_status plan_op(const onorm_request& q0, L& l, char* err, size_t err_len) {
  onorm_status status = ONORM_OK;
  const onorm_request q = kernel_columns(q0, l, status);
  if (status != ONORM_OK) return status;
  const RowArgs a = row_args(q);
  if constexpr (Op::kInputs > 1) {
    return visit_dtype(q.in[1].dtype, [&](auto in1) {
      return plan_rows<Row<Op, In, typename decltype(in1)::type>, W>(a, l);
    }, err, err_len);
  } else {
    return visit_column_row<Op, In, false>(q, [&](auto row) { return plan_rows<typename decltype(row)::type, W>(a, l); });
  }
}

// Every request on warp width W in one unit (tests; backends split by op and dtype).
template <int W, typename L>
onorm_status plan_any(const onorm_request& q, L& l, char* err, size_t err_len) {
  return visit_request(q, [&](auto op, auto in) {
    return plan_op<decltype(op), typename decltype(in)::type, W>(q, l, err, err_len);
  }, err, err_len);
}

}  // namespace gpu
}  // namespace onorm
