// The bench's PNG: tools/plot_bench.py run through a python3 that has matplotlib.
#pragma once

#include <string>
#include <vector>

namespace onorm_tool {

// Runs argv as a child process; returns its exit status (or -1 when it could not start).
int run_process(const std::vector<std::string>& args, bool quiet);
// Draws png_path from the bench JSON at json_path; throws ToolError saying what is missing.
void plot_png(const std::string& json_path, const std::string& png_path);

}  // namespace onorm_tool
