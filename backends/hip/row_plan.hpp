// Which shared row kernel (backends/gpu/row_kernels.hpp) runs a request on the HIP backend, and
// with which shape, for warp width W; independent of the runtime that launches it. The HIP
// backend plugs in a launcher over hipLaunchKernelGGL (hip_rows.hpp); the wave64 tests
// (tests/hip) plug in the host SIMT emulator, so that this very selection, with its 64-lane
// shapes, is what they check.
//
// Launcher interface (L):
//   template <int FAM, typename In, int W, int TPR, int ITEMS, int BLOCK, int RPG>
//     onorm_status rows(unsigned grid, const gpu::RowArgs&)                  rows_kernel
//   template <int OP, typename In, int W, int ITEMS, int BLOCK, int MODE>
//     onorm_status split(unsigned gx, unsigned gy, const gpu::RowArgs&, const gpu::SplitArgs&)
//   template <int OP, int W, int BLOCK>
//     onorm_status merge(unsigned gx, unsigned gy, const void* in, void* out, int64_t count)
//   void* workspace(size_t bytes, onorm_status& status)    device scratch for split rows
//   int64_t l2_bytes() const
//
// Regimes by row length (VEC = 16 / sizeof(In) elements per 16-byte vector):
//   short rows:  a group of TPR <= W lanes per row, several rows per block;
//   medium rows: a block per row, up to 32 floats per thread in registers;
//   long rows:   chunks of kSplitBlock * ITEMS * VEC columns, one block each, in the two-read
//                schedule (chunk states, a fixed merge tree, then the finish), row batches sized
//                to half the L2. The cooperative single-read schedule of the CUDA backend waits
//                on other blocks' flags; it is not used here (its forward progress on AMD GPUs
//                could not be checked).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "backend_interface.h"
#include "gpu/register_shapes.hpp"
#include "gpu/row_kernels.hpp"

namespace onorm {
namespace hip {

constexpr int kSplitBlock = 512;

template <typename In>
struct SplitShape {
  static constexpr int kItems = gpu::io<In>::kVec == 4 ? 8 : 4;  // 32 floats per thread
  static constexpr int64_t kChunk = int64_t(kSplitBlock) * kItems * gpu::io<In>::kVec;
};

// Launches rows_kernel over rows [0, a.rows) in pieces small enough for one grid.
template <int FAM, typename In, int W, int TPR, int ITEMS, int BLOCK, int RPG, typename L>
onorm_status plan_rows(const gpu::RowArgs& a0, L& launcher) {
  constexpr int64_t kRpb = BLOCK / TPR * RPG;
  // Grid x times block size stays below 2^31 (HIP on AMD counts work-items in 32 bits).
  constexpr int64_t kMaxRows = (int64_t(0x7fffffff) / BLOCK) * kRpb;
  for (int64_t r0 = 0; r0 < a0.rows; r0 += kMaxRows) {
    const gpu::RowArgs a = gpu::rows_from<In>(a0, r0, std::min(kMaxRows, a0.rows - r0));
    const unsigned grid = static_cast<unsigned>((a.rows + kRpb - 1) / kRpb);
    if (onorm_status s = launcher.template rows<FAM, In, W, TPR, ITEMS, BLOCK, RPG>(grid, a)) return s;
  }
  return ONORM_OK;
}

// The register regimes. Shapes per warp width: a row group never exceeds the warp, blocks are
// whole warps, and one thread holds at most 32 floats. One row per group (RPG 1): on the H200
// several rows per group collapsed 16-bit short rows (bench/cuda/NOTES.md, v2; measured again
// through HIP: bf16 at 64-256 columns fell to about 40% of the copy with RPG 4). W = 32: NVIDIA (HIP on NVIDIA) and RDNA;
// W = 64: CDNA (gfx90a, gfx940), whose wider waves take 64-lane groups up to 1K-2K columns.
template <int FAM, typename In, int W, typename L>
bool plan_registers(const gpu::RowArgs& a, L& launcher, onorm_status& status) {
  constexpr int V = gpu::io<In>::kVec;
  const int64_t c = a.cols;
#define ONORM_HIP_TRY_SHAPE(TPR, ITEMS, BLOCK, RPG)                                 \
  if (c <= int64_t(TPR) * ITEMS * V) {                                              \
    status = plan_rows<FAM, In, W, TPR, ITEMS, BLOCK, RPG>(a, launcher);            \
    return true;                                                                    \
  }
  if constexpr (W == 64 && V == 4) {
    ONORM_HIP_TRY_SHAPE(8, 1, 256, 1)       // 32
    ONORM_HIP_TRY_SHAPE(16, 1, 256, 1)      // 64
    ONORM_HIP_TRY_SHAPE(32, 1, 256, 1)      // 128
    ONORM_HIP_TRY_SHAPE(64, 1, 256, 1)      // 256
    ONORM_HIP_TRY_SHAPE(64, 2, 256, 1)      // 512
    ONORM_HIP_TRY_SHAPE(64, 4, 256, 1)      // 1024
    ONORM_HIP_TRY_SHAPE(128, 4, 128, 1)     // 2048
    ONORM_HIP_TRY_SHAPE(256, 4, 256, 1)     // 4096
    ONORM_HIP_TRY_SHAPE(512, 4, 512, 1)     // 8192
    ONORM_HIP_TRY_SHAPE(512, 8, 512, 1)     // 16384
  } else if constexpr (W == 64) {
    ONORM_HIP_TRY_SHAPE(4, 1, 256, 1)       // 32
    ONORM_HIP_TRY_SHAPE(8, 1, 256, 1)       // 64
    ONORM_HIP_TRY_SHAPE(16, 1, 256, 1)      // 128
    ONORM_HIP_TRY_SHAPE(32, 1, 256, 1)      // 256
    ONORM_HIP_TRY_SHAPE(64, 1, 256, 1)      // 512
    ONORM_HIP_TRY_SHAPE(64, 2, 256, 1)      // 1024
    ONORM_HIP_TRY_SHAPE(64, 4, 256, 1)      // 2048
    ONORM_HIP_TRY_SHAPE(256, 2, 256, 1)     // 4096
    ONORM_HIP_TRY_SHAPE(512, 2, 512, 1)     // 8192
    ONORM_HIP_TRY_SHAPE(512, 4, 512, 1)     // 16384
  } else if constexpr (V == 4) {
    static_assert(W == 32, "warp widths 32 and 64");
    ONORM_GPU_W32_SHAPES_VEC4(ONORM_HIP_TRY_SHAPE)  // the CUDA backend's shapes
  } else {
    ONORM_GPU_W32_SHAPES_VEC8(ONORM_HIP_TRY_SHAPE)
  }
#undef ONORM_HIP_TRY_SHAPE
  return false;
}

// Long rows: chunk states, merge tree, [norms: statistics], finish, in row batches.
template <int OP, typename In, int W, typename L>
onorm_status plan_split(const gpu::RowArgs& a, L& launcher) {
  using S = typename gpu::op_state<OP>::type;
  using Shape = SplitShape<In>;
  constexpr int kItems = Shape::kItems;
  const int64_t K = (a.cols + Shape::kChunk - 1) / Shape::kChunk;
  const int64_t row_bytes = a.cols * int64_t(sizeof(In));
  int64_t batch = std::max<int64_t>(1, (launcher.l2_bytes() / 2) / row_bytes);
  batch = std::min<int64_t>({batch, a.rows, 65535});
  const int64_t level1 = (K + kSplitBlock - 1) / kSplitBlock;
  constexpr bool kNorm = OP == gpu::kOpLayerNorm || OP == gpu::kOpRmsNorm;
  const size_t buf0 = size_t(batch * K) * sizeof(S);
  const size_t buf1 = size_t(batch * level1) * sizeof(S);
  const size_t buf2 = kNorm ? size_t(batch) * sizeof(core::NormCoefs) : 0;
  onorm_status status = ONORM_OK;
  char* b0 = static_cast<char*>(launcher.workspace(buf0 + buf1 + buf2, status));
  if (status != ONORM_OK) return status;
  char* b1 = b0 + buf0;
  for (int64_t r0 = 0; r0 < a.rows; r0 += batch) {
    const int64_t nb = std::min(batch, a.rows - r0);
    gpu::SplitArgs s{};
    s.chunk = Shape::kChunk;
    s.chunks = K;
    s.row0 = r0;
    s.entries = b0;
    const unsigned gx = static_cast<unsigned>(K), gy = static_cast<unsigned>(nb);
    if (onorm_status e = launcher.template split<OP, In, W, kItems, kSplitBlock, gpu::kModeStats>(gx, gy, a, s))
      return e;
    char* in = b0;
    char* out = b1;
    for (int64_t count = K; count > 1; count = (count + kSplitBlock - 1) / kSplitBlock) {
      const int64_t outs = (count + kSplitBlock - 1) / kSplitBlock;
      if (onorm_status e = launcher.template merge<OP, W, kSplitBlock>(static_cast<unsigned>(outs), gy, in, out, count))
        return e;
      std::swap(in, out);
    }
    s.final_states = in;
    if constexpr (kNorm) {  // statistics before the finish writes (in place: row_kernels.hpp)
      s.norm_stats = b1 + buf1;
      if (onorm_status e = launcher.template norm_stats<OP, In, W, kSplitBlock>(gy, a, s)) return e;
    }
    if (onorm_status e = launcher.template split<OP, In, W, kItems, kSplitBlock, gpu::kModeFinish>(gx, gy, a, s))
      return e;
  }
  return ONORM_OK;
}

// Every request with input dtype In on warp width W.
template <typename In, int W, typename L>
onorm_status plan_request(const gpu::RowArgs& a, L& launcher) {
  onorm_status status = ONORM_OK;
  const bool softmax = a.op == gpu::kOpSoftmax || a.op == gpu::kOpLogSoftmax;
  if (softmax ? plan_registers<gpu::kFamSoftmax, In, W>(a, launcher, status)
              : plan_registers<gpu::kFamNorm, In, W>(a, launcher, status))
    return status;
  switch (a.op) {
    case gpu::kOpSoftmax: return plan_split<gpu::kOpSoftmax, In, W>(a, launcher);
    case gpu::kOpLogSoftmax: return plan_split<gpu::kOpLogSoftmax, In, W>(a, launcher);
    case gpu::kOpLayerNorm: return plan_split<gpu::kOpLayerNorm, In, W>(a, launcher);
    default: return plan_split<gpu::kOpRmsNorm, In, W>(a, launcher);
  }
}

// The kernel arguments of a validated request (the same mapping as the CUDA backend's).
inline gpu::RowArgs row_args(const onorm_request& q) {
  gpu::RowArgs a{};
  a.x = q.in[0].data;
  a.y = q.out[0].data;
  a.rows = q.in[0].rows;
  a.cols = q.in[0].cols;
  a.xs = q.in[0].row_stride;
  a.ys = q.out[0].row_stride;
  a.gamma = q.col[0];
  a.beta = q.op == ONORM_OP_LAYER_NORM ? q.col[1] : nullptr;
  a.mean = mean_out(q);
  a.rstd = rstd_out(q);
  a.eps = q.param[0];
  a.op = q.op == ONORM_OP_SOFTMAX       ? gpu::kOpSoftmax
         : q.op == ONORM_OP_LOG_SOFTMAX ? gpu::kOpLogSoftmax
         : q.op == ONORM_OP_LAYER_NORM  ? gpu::kOpLayerNorm
                                        : gpu::kOpRmsNorm;
  a.out_dtype = q.out[0].dtype == ONORM_F32 ? gpu::kF32 : q.out[0].dtype == ONORM_F16 ? gpu::kF16 : gpu::kBF16;
  const size_t in_bytes = q.in[0].dtype == ONORM_F32 ? 4 : 2, out_bytes = q.out[0].dtype == ONORM_F32 ? 4 : 2;
  const int64_t vec = static_cast<int64_t>(16 / in_bytes);  // elements per input vector
  auto aligned = [](const void* p, size_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; };
  // Vector paths: every row start aligned for a VEC-element access.
  a.x_vec = aligned(a.x, 16) && a.xs % vec == 0;
  const size_t ystore = static_cast<size_t>(vec) * out_bytes < 16 ? static_cast<size_t>(vec) * out_bytes : 16;
  a.y_vec = aligned(a.y, ystore) && a.ys % vec == 0;
  a.gb_vec = aligned(a.gamma, 16) && aligned(a.beta, 16);
  return a;
}

// Dispatch on the input dtype.
template <int W, typename L>
onorm_status plan_any(const onorm_request& q, L& launcher, char* err, size_t err_len) {
  const gpu::RowArgs a = row_args(q);
  switch (q.in[0].dtype) {
    case ONORM_F32: return plan_request<float, W>(a, launcher);
    case ONORM_F16: return plan_request<core::f16_bits, W>(a, launcher);
    case ONORM_BF16: return plan_request<core::bf16_bits, W>(a, launcher);
    default:
      if (err && err_len) std::snprintf(err, err_len, "hip: input dtype %d is not supported", static_cast<int>(q.in[0].dtype));
      return ONORM_ERROR_UNSUPPORTED;
  }
}

}  // namespace hip
}  // namespace onorm
