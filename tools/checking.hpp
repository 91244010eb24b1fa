// A backend's outcome against the float64 reference (reference/): the report with the
// contract's bounds, bitwise differences between backends, and a deliberate fault for tests.
#pragma once

#include <string>
#include <vector>

#include "tool_common.hpp"

namespace onorm_tool {

struct Outcome : Outputs {
  std::string label, device;
  Timing timing;
  onorm_ref::Report report;
  double gbps = 0;
  std::string error;  // the backend failed to run (e.g. a dtype it does not take): no results
};

// The float64 answer to a problem's inputs, whichever kind its op is: the list's ops
// (onorm_ref::compute), the norms with options (compute_norm) or the norms' backward
// (compute_norm_backward, from the statistics in p). Holds views of p, which must outlive it.
class Reference {
 public:
  explicit Reference(const Problem& p);
  Reference(const Reference&) = delete;
  Reference& operator=(const Reference&) = delete;
  // Checks everything o holds against the contract's bounds: y (dx), the statistics,
  // residual_out (exact), y_scale, dgamma, dbeta; cross_entropy's loss, lse and dlogits (y);
  // softmax_topk's values (y) and indices (exact). For a quantized y, max_abs and max_rel are those
  // of y dequantized with the backend's y_scale, max_ulp the distance in steps of y's grid.
  onorm_ref::Report check(const Outputs& o) const;
  // The exact values of the main output: y (before quantization), or dx.
  const std::vector<double>& main_output() const;

 private:
  onorm_ref::Report check_quantized(const Outputs& o) const;
  onorm_ref::Report check_backward(const Outputs& o) const;
  const Problem& p_;
  onorm_rows second_{};  // the residual the norm spec points to
  onorm_ref::NormSpec norm_spec_;
  onorm_ref::Result list_;
  onorm_ref::NormResult norm_;
  onorm_ref::NormBackwardResult backward_;
  onorm_ref::CrossEntropyResult cross_entropy_;
  onorm_ref::TopkResult topk_;
};

// Moves one element of y by `ulps` units in the last place (a deliberate fault, for testing
// that violations are caught): the element where |ref| is largest.
void perturb(const Problem& p, const Reference& ref, std::vector<unsigned char>& y, int64_t ulps);
// Elements of `elem` bytes that differ between a and b.
int64_t bitwise_diff(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, size_t elem);
// Output elements that differ bitwise between two runs of p: y, and residual_out, y_scale, dgamma,
// dbeta, loss, lse and indices where the op writes them (not the statistics).
int64_t outputs_differing(const Problem& p, const Outputs& a, const Outputs& b);
std::string shape_text(const Problem& p);  // "softmax 8x128 f32 -> bf16"
// The norm ops' options (", params bf16, weight offset 1"); "" for the list's ops.
std::string options_text(const Problem& p);
// How the error columns are measured: "ulp of f32", or for a quantized y its grid.
std::string error_text(const Problem& p);
std::string bound_text(const onorm_ref::Report& r);  // "ok" or "FAIL(n)"

}  // namespace onorm_tool
