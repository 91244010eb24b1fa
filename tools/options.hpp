// The options the commands share: backends, dtypes, the op, the input distribution, the
// problem's shape and parameters, the seed, and an input read from a .npy file.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "npy.hpp"
#include "tool_common.hpp"

namespace onorm_tool {

// Throws UsageError with the message and the command's usage text.
[[noreturn]] void usage_error(const std::string& msg, const char* usage);

constexpr int64_t kMaxDim = int64_t{1} << 40;

// The first GPU backend with a device, else the CPU.
BackendSpec best_backend();
// Throws ToolError naming why the backend (or its device) cannot run.
void require_available(const BackendSpec& spec);
BackendSpec backend_option(const std::string& text, const char* usage);
onorm_dtype dtype_option(const std::string& opt, const std::string& text, const char* usage);
ToolOp op_option(const std::map<std::string, std::string>& o, const char* usage);
// --op's value, or an element of --ops: a usage error names every op.
ToolOp parse_op_or_usage(const std::string& text, const char* usage);
Dist dist_option(const std::map<std::string, std::string>& o, const char* usage);
// Builds the problem (not yet generated) from --op/--rows/--cols/--dtype/--out-dtype/--eps and
// the norm ops' --weight-offset/--param-dtype.
Problem problem_from_options(const std::map<std::string, std::string>& o, const char* usage, bool shape_required);
// softmax_topk: --k defaults to min(8, cols) once cols is known; a k above cols is a usage error.
void check_k(Problem& p, const char* usage);
uint64_t seed_option(const std::map<std::string, std::string>& o);
// Loads --input into p.x (shape and dtype from the file, checked against the options given); the
// output and parameter dtypes not given follow the file's.
void load_input(Problem& p, const std::map<std::string, std::string>& o);
// The same from an array already in memory (the Python package's x), named `name` in messages.
void load_input_array(Problem& p, NpyArray a, const std::string& name, const std::map<std::string, std::string>& o);

}  // namespace onorm_tool
