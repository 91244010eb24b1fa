// The ops the tool runs: the library's op list (onorm_ref::Op), the norm ops of version 2
// that the list does not name: onorm_norm with options (residual add, quantized y) and
// onorm_norm_backward, and the row ops of version 2 part 2: onorm_cross_entropy and
// onorm_softmax_topk. What each op reads and writes, the bytes that moves, and its one call
// into the C ABI, so that no command switches over ops itself.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "onlinenorm/onlinenorm.h"
#include "reference.hpp"

// X(name, kind, residual, quantized): the norms with options (onorm_norm). residual: h = x +
// residual is normalized and stored to residual_out (x's dtype); quantized: y's dtype, quantized
// with a dynamic per-row y_scale, or std::nullopt for a float y of --out-dtype.
#define ONORM_TOOL_NORM_FORWARD_OPS(X)                       \
  X(add_rms_norm, ONORM_RMS_NORM, true, std::nullopt)        \
  X(add_layer_norm, ONORM_LAYER_NORM, true, std::nullopt)    \
  X(rms_norm_fp8, ONORM_RMS_NORM, false, ONORM_F8_E4M3)      \
  X(rms_norm_i8, ONORM_RMS_NORM, false, ONORM_I8)            \
  X(layer_norm_fp8, ONORM_LAYER_NORM, false, ONORM_F8_E4M3)  \
  X(layer_norm_i8, ONORM_LAYER_NORM, false, ONORM_I8)
// X(name, kind): the norms' backward passes (onorm_norm_backward): x and dy read, dx, dgamma
// (and dbeta) written, with the forward's mean and rstd as inputs.
#define ONORM_TOOL_NORM_BACKWARD_OPS(X)  \
  X(rms_norm_backward, ONORM_RMS_NORM)   \
  X(layer_norm_backward, ONORM_LAYER_NORM)

namespace onorm_tool {

using onorm_ref::Op;

// The ops of version 2 part 2 over rows of logits. cross_entropy: targets (generated) read;
// loss, lse and dlogits (as y, x's shape) written in one pass. softmax_topk: values (as y,
// rows x k) and indices written.
enum class RowOp { none, cross_entropy, softmax_topk };

struct NormOp {
  const char* name;
  onorm_norm_kind kind;
  bool backward;                          // onorm_norm_backward, else onorm_norm
  bool residual;                          // forward: the norm of h = x + residual
  std::optional<onorm_dtype> quantized;   // forward: y's quantized dtype (dynamic y_scale)
};

// An op of the tool: one of the library's list, or a norm op.
struct ToolOp {
  Op base = Op::softmax;         // the list's op; for a norm op the norm it is (layer_norm, rms_norm);
                                 // softmax for the row ops
  const NormOp* norm = nullptr;  // the norm op, NULL for the list's ops
  RowOp row = RowOp::none;       // a row op of part 2, none for the others
  const char* name() const;
};

// Every norm op, in the lists' order.
const std::vector<NormOp>& norm_ops();
// The library's list (bench's default).
std::vector<ToolOp> list_ops();
bool parse_tool_op(const std::string& text, ToolOp& out);
// Every op name, the list's first ("softmax, ..., layer_norm_backward, cross_entropy,
// softmax_topk"), for messages.
std::string tool_op_names(const char* separator = ", ");

// The tensors an op takes besides x (read) and y (written; dx for the backward passes).
struct Tensors {
  bool second = false;                 // read, x's shape and dtype: dy (backward passes) or the residual
  bool gamma = false, beta = false;    // read, cols elements of the parameter dtype
  bool mean = false, rstd = false;     // rows floats: the forward norms write them, the norms' backward reads them
  bool residual_out = false;           // written, x's shape and dtype: h
  bool y_scale = false;                // written, rows floats
  bool dgamma = false, dbeta = false;  // written, cols floats
  bool targets = false;                // read, rows int64 (cross_entropy)
  bool loss = false, lse = false;      // written, rows floats (cross_entropy)
  bool indices = false;                // written, rows x k int64 (softmax_topk)
  Tensors& operator|=(const Tensors& o);
  bool covers(const Tensors& o) const;  // every tensor of o is one of these
};
Tensors tensors_of(const ToolOp& op);
// Row tensors the op reads: x, and dy or the residual.
inline int row_inputs(const ToolOp& op) { return tensors_of(op).second ? 2 : 1; }
// Whether mean and rstd are outputs (the forward norms), not inputs (the norms' backward).
inline bool writes_statistics(const ToolOp& op) { return !(op.norm && op.norm->backward); }
// y's dtype: the quantized ops' own, else the float output dtype asked for.
onorm_dtype y_dtype(const ToolOp& op, onorm_dtype float_out);

// Bytes one call moves, for the bandwidth figure. The list's ops count x (and dy) read and y
// written, as the tool always has; the norm ops count every tensor they read or write once,
// gamma/beta and the per-row and per-column floats included.
double moved_bytes(const ToolOp& op, int64_t rows, int64_t cols, onorm_dtype in, onorm_dtype out,
                   onorm_dtype param, int64_t k = 0);
// What moved_bytes counts, for the output: "x read + y written once",
// "x, residual, gamma read + residual_out, y, rstd written once", ...
std::string moved_text(const ToolOp& op);

// One call's tensors where the context computes (device memory on GPUs), NULL where the op takes
// none. in: x's, dy's, the residual's and residual_out's dtype; out: y's (dx's).
struct OpCall {
  int64_t rows = 0, cols = 0;
  onorm_dtype in = ONORM_F32, out = ONORM_F32, param = ONORM_F32;
  double eps = 1e-5, weight_offset = 0;
  int64_t k = 0;                                 // softmax_topk
  double label_smoothing = 0, z_loss = 0;        // cross_entropy
  const int64_t* targets = nullptr;
  float *loss = nullptr, *lse = nullptr;
  int64_t* indices = nullptr;
  void *x = nullptr, *second = nullptr, *y = nullptr, *gamma = nullptr, *beta = nullptr, *residual_out = nullptr;
  float *mean = nullptr, *rstd = nullptr, *y_scale = nullptr, *dgamma = nullptr, *dbeta = nullptr;
};
// Runs op once (asynchronous on GPUs).
onorm_status call_op(onorm_context ctx, const ToolOp& op, const OpCall& c);

}  // namespace onorm_tool
