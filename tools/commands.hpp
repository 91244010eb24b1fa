// The commands of onorm, one file each (cmd_info.cpp, cmd_run.cpp, cmd_compare.cpp,
// cmd_bench.cpp), and their usage texts. Each returns the tool's exit status (tool_common.hpp)
// or throws UsageError / ToolError.
#pragma once

#include "onlinenorm/core/ops/op_list.h"
#include "ops.hpp"

// " softmax log_softmax ...": the op list's names, for the usage texts; then the norm ops'.
#define ONORM_TOOL_OP_NAME(ID, name, Type) " " #name
#define ONORM_TOOL_OP_NAMES ONORM_OP_LIST(ONORM_TOOL_OP_NAME)
#define ONORM_TOOL_FORWARD_NAME(name, kind, residual, quantized) " " #name
#define ONORM_TOOL_BACKWARD_NAME(name, kind) " " #name
#define ONORM_TOOL_NORM_FORWARD_NAMES ONORM_TOOL_NORM_FORWARD_OPS(ONORM_TOOL_FORWARD_NAME)
#define ONORM_TOOL_NORM_BACKWARD_NAMES ONORM_TOOL_NORM_BACKWARD_OPS(ONORM_TOOL_BACKWARD_NAME)

// The usage texts' pieces that run and compare share: --op, the norm ops' options, what the
// norm ops do.
#define ONORM_TOOL_OP_USAGE                                                                \
  "  --op OP            one of" ONORM_TOOL_OP_NAMES "\n"                                   \
  "                     or a norm with options:" ONORM_TOOL_NORM_FORWARD_NAMES "\n"        \
  "                     or a norm's backward:" ONORM_TOOL_NORM_BACKWARD_NAMES "\n"       \
  "                     or a row op: cross_entropy softmax_topk\n"
#define ONORM_TOOL_NORM_OPTIONS_USAGE                                                      \
  "  --weight-offset W  norm ops: the scale is W + gamma (1: Gemma)      [0]\n"             \
  "  --param-dtype T    norm ops: gamma/beta dtype, as --dtype           [same as --dtype]\n"
#define ONORM_TOOL_ROW_OPTIONS_USAGE                                                       \
  "  --k K              softmax_topk: entries per row                   [min(8, cols)]\n"   \
  "  --label-smoothing L  cross_entropy: in [0, 1]                       [0]\n"             \
  "  --z-loss Z         cross_entropy: adds Z lse^2 to each row's loss   [0]\n"
#define ONORM_TOOL_ROW_OPS_HELP                                                            \
  "cross_entropy runs onorm_cross_entropy over x as logits, the targets generated from the\n" \
  "seed (every 7th row, from the 4th, ignore_index -100), and checks loss, lse and dlogits\n" \
  "(y); softmax_topk runs onorm_softmax_topk and checks the values (y, rows x k) and the\n"  \
  "indices (exactly).\n"
#define ONORM_TOOL_NORM_OPS_HELP                                                           \
  "The norm ops run onorm_norm and onorm_norm_backward: add_rms_norm and add_layer_norm\n"  \
  "normalize h = x + residual (the residual generated like x; h written to residual_out,\n"  \
  "x's dtype); *_fp8 and *_i8 quantize y to f8_e4m3 / i8 with a per-row y_scale; the\n"     \
  "backward passes read x, dy (generated like x) and the float64 forward's mean and rstd of\n" \
  "x rounded to float, and write dx, dgamma (and dbeta).\n"

namespace onorm_tool {

extern const char* const kMainUsage;
extern const char* const kInfoUsage;
extern const char* const kRunUsage;
extern const char* const kCompareUsage;
extern const char* const kBenchUsage;

int cmd_info(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_compare(int argc, char** argv);
int cmd_bench(int argc, char** argv);

}  // namespace onorm_tool
