// The launcher the planner (row_plan.hpp) drives, shared by CUDA and HIP: the kernels'
// launches (triple-chevron: nvcc and clang's HIP mode), the workspace (workspace.hpp) and its
// ordering. Rt is the backend's runtime, its vendor calls only:
//   kClusters, kStaged            capabilities the backend has kernels and calls for
//   stream(), check(what)         the stream; the last launch's error as a status
//   wait_event(), free(p), malloc(pp, n), zero(p, n), stream_wait_event(), record_event()
//   workspace(), column_workspace()  the context's gpu::Workspaces: the placements' scratch and
//                                 the folded column vectors (the caller holds their lock)
//   caps()                        the context's PlanCaps
//   (kStaged)   staged_per_sm<R, W, BLOCK>(smem, status), staged<R, W, BLOCK>(grid, smem, coop, a, s)
//   (kClusters) cluster_fits<R, W, ITEMS, BLOCK>(K, status), cluster<R, W, ITEMS, BLOCK>(grid, K, a, s),
//               cluster_stream<R, W, ITEMS, BLOCK>(K, a, s, status),
//               cross_entropy_cluster<In, W, ITEMS, BLOCK>(K, chunk, a, status),
//               cross_entropy_cluster_stream<In, W, ITEMS, BLOCK>(K, chunk, a, status),
//               cross_entropy_cluster_reread<In, W, BLOCK>(K, chunk, a, status)
#pragma once

#include "cross_entropy_plan.hpp"
#include "norm_options.hpp"
#include "partial_rows.hpp"
#include "partial_state.hpp"
#include "row_plan.hpp"
#include "softmax_topk.hpp"
#include "softmax_topk_warp.hpp"
#include "workspace.hpp"

namespace onorm {
namespace gpu {

template <typename Rt>
class Launcher {
 public:
  static constexpr bool kClusters = Rt::kClusters;
  static constexpr bool kStaged = Rt::kStaged;

  explicit Launcher(Rt& rt) : rt_(rt) {}
  const PlanCaps& caps() const { return rt_.caps(); }

  template <typename R, int W, int TPR, int ITEMS, int BLOCK>
  onorm_status rows(unsigned grid, const RowArgs& a) {
    rows_kernel<R, W, TPR, ITEMS, BLOCK><<<grid, BLOCK, 0, rt_.stream()>>>(a);
    return rt_.check("rows_kernel launch");
  }
  template <typename R, int W, int TPR, int ITEMS, int BLOCK, int STAGE>
  onorm_status stage_rows(unsigned grid, const RowArgs& a, const SplitArgs& s) {
    stage_rows_kernel<R, W, TPR, ITEMS, BLOCK, STAGE><<<grid, BLOCK, 0, rt_.stream()>>>(a, s);
    return rt_.check(STAGE == kStageStats ? "row stats launch" : "row finish launch");
  }
  template <typename R, int W, int ITEMS, int BLOCK, int MODE>
  onorm_status split(unsigned gx, unsigned gy, const RowArgs& a, const SplitArgs& s) {
    split_chunk_kernel<R, W, ITEMS, BLOCK, MODE><<<dim3(gx, gy), BLOCK, 0, rt_.stream()>>>(a, s);
    return rt_.check(MODE == kModeStats ? "split stats launch" : "split finish launch");
  }
  template <typename R, int W, int BLOCK>
  onorm_status row_coefs(unsigned gx, const RowArgs& a, const SplitArgs& s) {
    row_coefs_kernel<R, W, BLOCK><<<gx, BLOCK, 0, rt_.stream()>>>(a, s);
    return rt_.check("split coefficients launch");
  }
  template <typename S, int W, int BLOCK>
  onorm_status merge(unsigned gx, unsigned gy, const void* in, void* out, int64_t count) {
    merge_states_kernel<S, W, BLOCK><<<dim3(gx, gy), BLOCK, 0, rt_.stream()>>>(in, out, count);
    return rt_.check("split merge launch");
  }
  template <typename R, int W, int BLOCK>
  onorm_status state_out(unsigned gx, const RowArgs& a, const SplitArgs& s, void* states) {
    state_out_kernel<R, W, BLOCK><<<gx, BLOCK, 0, rt_.stream()>>>(a, s, states);
    return rt_.check("state out launch");
  }
  template <typename R>
  onorm_status state_coefs(int64_t n, const RowArgs& a, const SplitArgs& s, const void* states) {
    const unsigned grid = static_cast<unsigned>((n + kStateBlock - 1) / kStateBlock);
    state_coefs_kernel<R><<<grid, kStateBlock, 0, rt_.stream()>>>(a, s, states, n);
    return rt_.check("state coefficients launch");
  }
  template <typename S>
  onorm_status merge_parts(int64_t rows, int64_t parts, const void* in, void* out) {
    merge_parts_kernel<S><<<merge_parts_grid(rows), kStateBlock, 0, rt_.stream()>>>(in, out, parts, rows);
    return rt_.check("state merge launch");
  }
  template <typename In, int W>
  onorm_status cross_entropy(unsigned grid, const CrossEntropyArgs& a) {
    cross_entropy_kernel<In, W, kCrossEntropyBlock><<<grid, kCrossEntropyBlock, 0, rt_.stream()>>>(a);
    return rt_.check("cross entropy launch");
  }
  template <typename In, int W, int ITEMS, int BLOCK>
  onorm_status cross_entropy_rows(unsigned grid, const CrossEntropyArgs& a) {
    ce_rows_kernel<In, W, ITEMS, BLOCK><<<grid, BLOCK, 0, rt_.stream()>>>(a);
    return rt_.check("cross entropy rows launch");
  }
  template <typename In, int W, int ITEMS, int BLOCK>
  bool cross_entropy_cluster(int K, int64_t chunk, const CrossEntropyArgs& a, onorm_status& status) {
    return rt_.template cross_entropy_cluster<In, W, ITEMS, BLOCK>(K, chunk, a, status);
  }
  template <typename In, int W, int ITEMS, int BLOCK>
  bool cross_entropy_cluster_stream(int K, int64_t chunk, const CrossEntropyArgs& a, onorm_status& status) {
    return rt_.template cross_entropy_cluster_stream<In, W, ITEMS, BLOCK>(K, chunk, a, status);
  }
  template <typename In, int W, int BLOCK>
  bool cross_entropy_cluster_reread(int K, int64_t chunk, const CrossEntropyArgs& a, onorm_status& status) {
    return rt_.template cross_entropy_cluster_reread<In, W, BLOCK>(K, chunk, a, status);
  }
  template <typename In, int W>
  onorm_status softmax_topk(unsigned grid, const TopkArgs& a) {
    softmax_topk_kernel<In, W, kTopkBlock><<<grid, kTopkBlock, 0, rt_.stream()>>>(a);
    return rt_.check("softmax top-k launch");
  }
  template <typename In, int W>
  onorm_status softmax_topk_warp(unsigned grid, const TopkArgs& a) {
    if (a.slices > 1)
      softmax_topk_warp_kernel<In, W, kTopkWarpBlock, true><<<grid, kTopkWarpBlock, 0, rt_.stream()>>>(a);
    else
      softmax_topk_warp_kernel<In, W, kTopkWarpBlock, false><<<grid, kTopkWarpBlock, 0, rt_.stream()>>>(a);
    return rt_.check("softmax top-k (a warp per row) launch");
  }
  template <typename R, int W, int BLOCK>
  int staged_per_sm(size_t smem, onorm_status& status) {
    return rt_.template staged_per_sm<R, W, BLOCK>(smem, status);
  }
  template <typename R, int W, int BLOCK>
  onorm_status staged(unsigned grid, size_t smem, bool coop, const RowArgs& a, const SplitArgs& s) {
    return rt_.template staged<R, W, BLOCK>(grid, smem, coop, a, s);
  }
  template <typename R, int W, int ITEMS, int BLOCK>
  bool cluster_fits(int K, onorm_status& status) {
    return rt_.template cluster_fits<R, W, ITEMS, BLOCK>(K, status);
  }
  template <typename R, int W, int ITEMS, int BLOCK>
  onorm_status cluster(unsigned grid, int K, const RowArgs& a, const SplitArgs& s) {
    return rt_.template cluster<R, W, ITEMS, BLOCK>(grid, K, a, s);
  }
  template <typename R, int W, int ITEMS, int BLOCK>
  bool cluster_stream(int K, const RowArgs& a, const SplitArgs& s, onorm_status& status) {
    return rt_.template cluster_stream<R, W, ITEMS, BLOCK>(K, a, s, status);
  }

  onorm_status fold_columns(unsigned grid, const FoldArgs& f) {
    fold_columns_kernel<kFoldBlock><<<grid, kFoldBlock, 0, rt_.stream()>>>(f);
    return rt_.check("fold columns launch");
  }

  // The workspaces, at least `bytes`, ordered after their previous user.
  void* workspace(size_t bytes, onorm_status& status) { return take(rt_.workspace(), used_, bytes, status); }
  void* column_workspace(size_t bytes, onorm_status& status) {
    return take(rt_.column_workspace(), used_columns_, bytes, status);
  }
  uint64_t next_epoch() { return gpu::next_epoch(rt_.workspace()); }

  // Records the workspaces' release after the last launch that used them.
  onorm_status finish() {
    if (!used_ && !used_columns_) return ONORM_OK;
    const onorm_status s = rt_.record_event();
    if (s == ONORM_OK) {
      if (used_) rt_.workspace().recorded = true;
      if (used_columns_) rt_.column_workspace().recorded = true;
    }
    return s;
  }

 private:
  void* take(Workspace& w, bool& used, size_t bytes, onorm_status& status) {
    status = grow_workspace(w, bytes, rt_);
    if (status == ONORM_OK && w.recorded) status = rt_.stream_wait_event();
    used = used || status == ONORM_OK;
    return w.ptr;
  }

  Rt& rt_;
  bool used_ = false;
  bool used_columns_ = false;
};

// Runs a validated STATS or FINISH request of op Op with first input In on warp width W
// (rt: the backend's runtime; plan(p): a request of any input dtype, as launch_request takes it).
template <typename Op, typename In, int W, typename Rt, typename L, typename Plan>
onorm_status run_partial(Rt& rt, L& l, const onorm_request& q, Plan&& plan, char* err, size_t err_len) {
  if constexpr (!kPartialStates<Op>) {
    (void)rt, (void)l, (void)plan;
    if (err && err_len) std::snprintf(err, err_len, "gpu: %s has no partial row states", core::ops::name(q.op));
    return ONORM_ERROR_INTERNAL;
  } else {
    (void)rt, (void)plan;  // a finish of a quantized y only
    using R = Row<Op, In>;
    const RowArgs a = row_args(q);
    if (q.stage == ONORM_STAGE_STATS) {
      if constexpr (std::is_same<typename Op::Merged, partial_state_t<Op>>::value) {
        return place_stats<R, W>(a, l, q.state_out);
      } else {  // RMSNorm: its moments are LayerNorm's (onorm_moments_stats)
        if (err && err_len) std::snprintf(err, err_len, "gpu: %s stats are LayerNorm's moments", core::ops::name(q.op));
        return ONORM_ERROR_INTERNAL;
      }
    }
    if constexpr (kRowOptions<Op>) {  // (a slice of no columns writes the statistics only: place_finish)
      if (is_quantized(q.out[0].dtype) && a.cols > 0) return run_options_around_plan<W>(rt, q, plan);
    }
    onorm_status status = ONORM_OK;
    const onorm_request f = kernel_columns(q, l, status);
    if (status != ONORM_OK) return status;
    const RowArgs fa = row_args(f);
    return visit_column_row<Op, In, false>(
        f, [&](auto row) { return place_finish<typename decltype(row)::type, W>(fa, l, f.state_in); });
  }
}

// Runs a validated request of op Op with first input In through the plan on warp width W (the
// norms' residual add and quantized output: norm_options.hpp, with plan(p): the backend's entry
// for a request of any input dtype, the row kernels of each pair being in files of their own;
// the stats and finish of partial row states: partial_rows.hpp).
template <typename Op, typename In, int W, typename Rt, typename Plan>
onorm_status launch_request(Rt& rt, const onorm_request& q, char* err, size_t err_len, Plan&& plan) {
  Launcher<Rt> l(rt);
  onorm_status s;
  if (q.stage != ONORM_STAGE_WHOLE) {
    s = run_partial<Op, In, W>(rt, l, q, plan, err, err_len);
  } else if constexpr (kRowOptions<Op>) {
    s = needs_norm_options(q) ? run_norm_options<Op, In, W>(rt, l, q, plan) : plan_op<Op, In, W>(q, l, err, err_len);
  } else {
    (void)plan;
    s = plan_op<Op, In, W>(q, l, err, err_len);
  }
  const onorm_status f = l.finish();
  return s != ONORM_OK ? s : f;
}

}  // namespace gpu
}  // namespace onorm
