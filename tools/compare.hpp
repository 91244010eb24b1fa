// The work of `onorm compare` without its command line: one op on several backends over the same
// input, each checked against the float64 reference, the bitwise differences between them, and
// the results as JSON (schema onorm-compare/1). The tool and the Python package's
// onlinenorm.compare both call it, so that the two cannot drift apart.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checking.hpp"
#include "npy.hpp"
#include "tool_common.hpp"

namespace onorm_tool {

// What to compare, checked: built from the command's options by compare_request.
struct CompareRequest {
  std::map<std::string, std::string> options;  // the options it came from (names without "--")
  std::optional<NpyArray> input_array;         // x in memory, in place of the file options["input"]
                                               // would name (the Python package's x=)
  Problem problem;                             // op, dtypes, eps, norm options; shape unless from the input
  std::vector<BackendSpec> backends;
  std::vector<std::string> labels;             // one per backend, unique: a repeat becomes "cpu#2"
  Dist dist = Dist::normal;
  uint64_t seed = 1;
  int iters = 10;
  int64_t perturb_ulps = 0;                    // the hidden --perturb-ulps N[@LABEL] (checking.hpp)
  std::string perturb_target;                  // "": the first backend
  bool has_input() const { return options.count("input") > 0; }
};

// Checks onorm compare's options (op, rows, cols, dtype, out-dtype, backends, dist, seed, input,
// iters, eps, weight-offset, param-dtype, perturb-ulps; others are ignored) and names the
// backends (every available one when none is given). With input_array, options["input"] must be
// set and names it in messages. Throws UsageError (its message ends with `usage`) for a bad
// option, ToolError for an unavailable backend. The input is read later, by run_compare.
CompareRequest compare_request(const std::map<std::string, std::string>& options, const char* usage,
                               std::optional<NpyArray> input_array = std::nullopt);

struct CompareResult {
  CompareRequest request;         // its problem now holds the inputs (input_array moved into it)
  std::vector<Outcome> outcomes;  // per backend, in the request's order
  std::vector<std::vector<int64_t>> diff;  // [i][j]: elements differing bitwise; -1 for i == j or a failed run
  bool bound_ok = true;           // every backend ran and holds the bound
  bool errors = false;            // some backend failed to run (its outcome's error says why)
};

// Reads or generates the inputs, runs each backend (one that fails gets its error and the others
// still run), checks them against the float64 reference and counts the bitwise differences.
// Throws ToolError for an input that cannot be read or does not fit the options.
CompareResult run_compare(CompareRequest request);

// The JSON document of tools/README.md ("onorm compare --json FILE"); input.source is "file",
// "generated", or "array" for an input_array.
std::string compare_json(const CompareResult& result);

}  // namespace onorm_tool
