// The commands of onorm, one file each (cmd_info.cpp, cmd_run.cpp, cmd_compare.cpp,
// cmd_bench.cpp), and their usage texts. Each returns the tool's exit status (tool_common.hpp)
// or throws UsageError / ToolError.
#pragma once

#include "onlinenorm/core/ops/op_list.h"

// " softmax log_softmax ...": the op list's names, for the usage texts.
#define ONORM_TOOL_OP_NAME(ID, name, Type) " " #name
#define ONORM_TOOL_OP_NAMES ONORM_OP_LIST(ONORM_TOOL_OP_NAME)

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
