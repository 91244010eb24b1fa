// The norms' backward pass on the CPU (API.md, "backward passes"; the math in
// core/ops/norm_backward.hpp): dx per row, and the column sums dgamma and dbeta over every row.
// Rows whose x, dy, dx (and dresidual) share a dtype the SIMD kernels take run
// norm_backward_simd-inl.h: one read of a row for its sums, dx from cache, the column sums in
// float over blocks of kBackwardBlockRows rows, added in double per group of rows, the groups
// merged in order (groups depend on the shape only: the same sums for any thread count). Other
// rows run portable code in double: the tensors read by their run-time dtypes, each column
// summed over the rows in order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend_interface.h"

namespace onorm {
namespace cpu {

// Runs one validated request of a column op (core/ops/op_list.h) on `threads` threads with the
// SIMD kernels of target `target_index` where they take it.
void norm_backward_run(size_t target_index, const onorm_request& q, int threads);

// What every SIMD row of a call shares: the scale s_j = weight_offset + gamma_j rounded to
// float (cols of them), max_j |s_j| in double (NaN or inf when a scale is), and whether dx is
// written with streaming stores (too large to stay in cache).
struct BackwardCall {
  const float* scale;
  double max_scale;
  bool stream;
};

// Rows whose column contributions add up in float before a double sum takes them: the float
// sums' error stays within the contract's 1e-5 of sum_r |dy xhat|.
constexpr int kBackwardBlockRows = 32;

// Floats per column sum in a block of float partials: cols rounded up to whole vectors, and a
// vector more (the tiles start at dx's first aligned column: the last one, partial, may reach a
// vector past cols). 64 floats: any vector Highway has.
inline size_t backward_accumulator_pitch(int64_t cols) { return static_cast<size_t>((cols + 63) / 64 * 64 + 64); }

// group[k * cols + j] += block[k * pitch + j] (= where `started` is false: the group's memory
// is not zeroed before its first flush), then the block is zeroed; k < outs. Sets started.
void flush_backward_block(float* block, double* group, int64_t cols, int outs, bool& started);

// Zeroes group (outs x cols doubles) before its first use, unless started; sets started.
void start_backward_group(double* group, int64_t cols, int outs, bool& started);

// Row r of q entirely in double (dx, and its column contributions added to group unless
// nullptr): the SIMD rows' path for rows the float finish does not take.
void norm_backward_row_in_double(const onorm_request& q, int64_t r, double* group);

}  // namespace cpu
}  // namespace onorm
