// Where a cross-entropy request runs on GPUs, shared by CUDA and HIP: rows of up to 8192
// columns a block each in registers (ce_rows_kernel, cross_entropy_rows.hpp; a warp a row up to
// WARP * 32 columns; 16-bit rows past 2048 columns 64 elements a thread; CUDA: 16-bit rows of
// up to 16384 streamed through single blocks where they allow), longer rows over a
// thread-block cluster where the device has them (CUDA: cluster_cross_entropy.cuh; 16-bit rows
// streamed through resident clusters where they allow), slices of 8192 columns up to 16 blocks,
// then of 16384 (64 elements a thread); longer rows, when fewer than the multiprocessors, over
// clusters whose blocks read their slices twice; else (and without clusters, and a slice's
// partial states) two reads of the row by one block (cross_entropy_kernel, cross_entropy.hpp).
#pragma once

#include "cross_entropy.hpp"
#include "cross_entropy_rows.hpp"
#include "row_plan.hpp"

namespace onorm {
namespace gpu {

// Whether the copy engine can stream the request's rows through shared memory (cluster_stream:
// 16-bit rows, 16-byte aligned, whole 16-byte units; f32 rows measured slower streamed at
// 16384-131072 columns, bench/RESULTS.md).
template <typename In, typename L>
bool streams_rows(L& l, const CrossEntropyArgs& a) {
  return sizeof(In) == 2 && l.caps().cluster_stream && a.x_vec && (a.cols * int64_t(sizeof(In))) % 16 == 0;
}

// Rows over a cluster of blocks of 256 threads with E elements each: false where the row needs
// more blocks than the device's clusters take, or none fits.
template <typename In, int WARP, int E, typename L>
bool try_cross_entropy_cluster(L& l, const CrossEntropyArgs& a, onorm_status& status) {
  constexpr int VEC = io<In>::kVec;
  constexpr int64_t kSlice = int64_t(256) * E;
  const int64_t K = (a.cols + kSlice - 1) / kSlice;
  if (K > l.caps().cluster_max) return false;
  const int64_t chunk = slice_columns(a.cols, K, VEC);
  // Streamed through resident clusters where the rows allow: the next row's slice lands while
  // the block finishes this one.
  if (streams_rows<In>(l, a)) {
    if (l.template cross_entropy_cluster_stream<In, WARP, E / VEC, 256>(static_cast<int>(K), chunk, a, status) ||
        status != ONORM_OK)
      return true;
  }
  return l.template cross_entropy_cluster<In, WARP, E / VEC, 256>(static_cast<int>(K), chunk, a, status);
}

// Rows of up to 256 * E columns a block, streamed (the next row lands in shared memory while
// the block finishes this one) on resident clusters of one block, where the rows allow it
// (streams_rows); false where not (or none fits).
template <typename In, int WARP, int E, typename L>
bool stream_one_block(L& l, const CrossEntropyArgs& a, onorm_status& status) {
  constexpr int VEC = io<In>::kVec;
  if (!streams_rows<In>(l, a)) return false;
  return l.template cross_entropy_cluster_stream<In, WARP, E / VEC, 256>(1, slice_columns(a.cols, 1, VEC), a, status) ||
         status != ONORM_OK;
}

// Rows longer than the register clusters take, fewer than the device has multiprocessors
// (CUDA): clusters of 16 blocks (8, the portable size, where the device holds none of 16) of
// kCeRereadBlock threads, four a multiprocessor, each block reading its slice twice, on every
// resident cluster. Blocks of 512 and 1024 threads, clusters of 8, and fewer clusters (leaving
// their rows in L2), or the next row's slices prefetched into L2, measured slower (bench/RESULTS.md).
// False where none fits.
constexpr int kCeRereadBlock = 256;
template <typename In, int WARP, typename L>
bool try_cross_entropy_reread(L& l, const CrossEntropyArgs& a, onorm_status& status) {
  constexpr int VEC = io<In>::kVec;
  if (a.rows >= l.caps().sms) return false;
  const int sizes[] = {16, 8};
  for (int K : sizes) {
    if (K > l.caps().cluster_max) continue;
    const int64_t chunk = slice_columns(a.cols, K, VEC);
    if (l.template cross_entropy_cluster_reread<In, WARP, kCeRereadBlock>(K, chunk, a, status) || status != ONORM_OK)
      return true;
  }
  return false;
}

// Runs the request's kernels (a: its arguments, first input In).
template <typename In, int WARP, typename L>
onorm_status place_cross_entropy(L& l, const CrossEntropyArgs& a) {
  constexpr int VEC = io<In>::kVec;
  const int64_t c = a.cols;
  if (a.stage == ONORM_STAGE_WHOLE && c > 0) {
    // Rows of up to 2048 columns: a warp a row up to WARP * 32 columns (its reductions without
    // a barrier), else blocks of 64, on up to 64 blocks a multiprocessor looping over the rows:
    // more rows in flight than blocks of 128 on 16 a multiprocessor (bench/RESULTS.md).
    const unsigned short_grid = static_cast<unsigned>(std::min<int64_t>(a.rows, int64_t(64) * l.caps().sms));
    if (c <= WARP * 16) return l.template cross_entropy_rows<In, WARP, 16 / VEC, WARP>(short_grid, a);
    if (c <= WARP * 32) return l.template cross_entropy_rows<In, WARP, 32 / VEC, WARP>(short_grid, a);
    if (c <= 64 * 32) return l.template cross_entropy_rows<In, WARP, 32 / VEC, 64>(short_grid, a);
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>(row_blocks(a.rows, l.caps().sms), max_blocks<256>()));
    // 16-bit rows past 2048 columns: 64 elements a thread (the row engine's dense shapes), four
    // to eight blocks a multiprocessor; measured faster than 32 (bench/RESULTS.md).
    if (sizeof(In) == 2 && c <= 64 * 64) return l.template cross_entropy_rows<In, WARP, 64 / VEC, 64>(grid, a);
    if (sizeof(In) == 2 && c <= 128 * 64) return l.template cross_entropy_rows<In, WARP, 64 / VEC, 128>(grid, a);
    if (c <= 128 * 32) return l.template cross_entropy_rows<In, WARP, 32 / VEC, 128>(grid, a);
    if (c <= 256 * 32) return l.template cross_entropy_rows<In, WARP, 32 / VEC, 256>(grid, a);
    if constexpr (L::kClusters) {
      if (l.caps().cluster) {
        onorm_status status = ONORM_OK;
        // 16-bit rows of up to 16384 columns stream through resident blocks (clusters of one) of
        // 64 elements a thread where they allow: measured faster than clusters of two.
        if (c <= 256 * 64 && stream_one_block<In, WARP, 64>(l, a, status)) return status;
        if (try_cross_entropy_cluster<In, WARP, 32>(l, a, status) || status != ONORM_OK) return status;
        if (try_cross_entropy_cluster<In, WARP, 64>(l, a, status) || status != ONORM_OK) return status;
        if (try_cross_entropy_reread<In, WARP>(l, a, status) || status != ONORM_OK) return status;
      }
    }
  }
  return l.template cross_entropy<In, WARP>(row_blocks(a.rows, l.caps().sms), a);
}

// Runs a validated cross-entropy request on warp width WARP with launcher l (launcher.hpp).
template <int WARP, typename L>
onorm_status run_cross_entropy(L& l, const onorm_request& q) {
  const onorm_rows& x = q.in[0];
  CrossEntropyArgs a{};
  a.x = x.data;
  a.x_stride = x.row_stride;
  a.x_vec = rows_aligned16(x);
  if (q.outputs > 0) {
    const onorm_rows& y = q.out[0];
    a.dx = y.data;
    a.dx_stride = y.row_stride;
    a.dx_dtype = y.dtype;
    // row_args' rule: VEC elements of x's vectors a store, at most 16 bytes.
    const int64_t vec = 16 / dtype_size(x.dtype);
    const int64_t store = std::min<int64_t>(vec * dtype_size(y.dtype), 16);
    a.dx_vec = reinterpret_cast<uintptr_t>(y.data) % static_cast<uintptr_t>(store) == 0 && y.row_stride % vec == 0;
  }
  a.targets = q.targets;
  a.ignore_index = q.ignore_index;
  a.loss = q.row_out[0];
  a.lse = q.row_out[1];
  for (int p = 0; p < ONORM_REQUEST_PARAMS; ++p) a.param[p] = q.param[p];
  a.rows = x.rows;
  a.cols = x.cols;
  a.stage = q.stage;
  a.state_out = q.state_out;
  a.state_in = q.state_in;
  a.cols_offset = q.cols_offset;
  return visit_dtype(
      x.dtype, [&](auto in) { return place_cross_entropy<typename decltype(in)::type, WARP>(l, a); }, nullptr, 0);
}
}  // namespace gpu
}  // namespace onorm
