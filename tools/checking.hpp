// A backend's outcome against the float64 reference (reference/): the report with the
// contract's bounds, bitwise differences between backends, and a deliberate fault for tests.
#pragma once

#include <string>
#include <vector>

#include "tool_common.hpp"

namespace onorm_tool {

struct Outcome {
  std::string label, device;
  Timing timing;
  std::vector<unsigned char> y;
  std::vector<float> mean, rstd;
  onorm_ref::Report report;
  double gbps = 0;
  std::string error;  // the backend failed to run (e.g. a dtype it does not take): no results
};

onorm_ref::Report check_outcome(const Problem& p, const onorm_ref::Result& ref, const Outcome& o);
// The float64 reference of the problem's inputs (x, and dy for two-input ops).
onorm_ref::Result reference_of(const Problem& p);
// Moves one element of y by `ulps` units in the last place (a deliberate fault, for testing
// that violations are caught): the element where |ref| is largest.
void perturb(const Problem& p, const onorm_ref::Result& ref, std::vector<unsigned char>& y, int64_t ulps);
// Elements of `elem` bytes that differ between a and b.
int64_t bitwise_diff(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, size_t elem);
std::string shape_text(const Problem& p);  // "softmax 8x128 f32 -> bf16"
std::string bound_text(const onorm_ref::Report& r);  // "ok" or "FAIL(n)"

}  // namespace onorm_tool
