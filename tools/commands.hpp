// The commands of onorm, one file each (cmd_info.cpp, cmd_run.cpp, cmd_compare.cpp,
// cmd_bench.cpp), and their usage texts. Each returns the tool's exit status (tool_common.hpp)
// or throws UsageError / ToolError.
#pragma once

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
