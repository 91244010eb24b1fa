// A float64 reference for the row operators and the contract's accuracy bounds
// (docs/API.md). Deliberately independent of core/: plain two-pass double arithmetic over
// the rows, its own decoding of f16/bf16, no online merging. Tests and `onorm compare`
// judge every backend against it, so a bug in the algebra cannot hide behind itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "onlinenorm/core/ops/op_list.h"
#include "onlinenorm/onlinenorm.h"

namespace onorm_ref {

// The ops of the library's list (core/ops/op_list.h: only the list and the names are shared,
// none of core's math). Op::name and ONORM_OP_NAME have the same value.
enum class Op {
#define ONORM_REF_OP_ENTRY(ID, name, Type) name,
  ONORM_OP_LIST(ONORM_REF_OP_ENTRY)
#undef ONORM_REF_OP_ENTRY
};
constexpr int kOpCount = ONORM_OP_COUNT;

// Every op of the list, in its order.
const std::vector<Op>& all_ops();
const char* op_name(Op op);
bool parse_op(const std::string& text, Op& op);
// The names of every op, comma-separated ("softmax, log_softmax, ..."), for messages.
std::string op_names(const char* separator = ", ");
inline onorm_op to_onorm_op(Op op) { return static_cast<onorm_op>(op); }
// Row tensors the op reads (1: x; 2: softmax backward's y and dy).
int op_inputs(Op op);

// Value of element i of a buffer of dtype (f32, f16, bf16, f64; i8 and f8_e4m3), as a double.
double decode(const void* data, onorm_dtype dtype, int64_t index);
// Encodes v into element i (round to nearest even; used to build inputs).
void encode(double v, void* data, onorm_dtype dtype, int64_t index);

// The exact answer for host-resident rows x. gamma/beta hold cols elements of x's dtype or
// are NULL. y is rows x cols, dense; mean and rstd hold one value per row (LayerNorm: both;
// RMSNorm: rstd; softmax: empty). scale: per element of y, the magnitude the op's bound is
// relative to where it is not |y| (softmax backward: |y_j| (|dy_j| + sum_k |y_k dy_k|);
// log-softmax backward: |dy_j| + exp(y_j) sum_k |dy_k|).
struct Result {
  int64_t rows = 0, cols = 0;
  std::vector<double> y, mean, rstd, scale;
};
// Ops of one input (x).
Result compute(Op op, const onorm_rows& x, const void* gamma, const void* beta, double eps);
// Any op: in[0..op_inputs(op)) are its row tensors, all of one shape (the backward passes: y, dy).
// Throws std::invalid_argument when an input is missing or the shapes differ.
Result compute(Op op, const onorm_rows* in, int inputs, const void* gamma, const void* beta, double eps);

// One unit in the last place of v in dtype (for f16/bf16/f32; f64 gives f64's).
double ulp(double v, onorm_dtype dtype);

// The contract's bound on |y - ref| for one element. row_mean/row_rstd/gamma_j feed the
// LayerNorm term 2^-20 |mean| rstd |gamma_j|. Returns +inf where the contract states no
// bound (log_softmax with ref <= -80 is then held to 1e-5 relative instead).
// scale: Result::scale's element (the backward passes), 0 otherwise.
double bound(Op op, onorm_dtype out_dtype, double ref, double row_mean, double row_rstd, double gamma_j,
             double scale = 0);

// Whether got is dtype's rounding (to nearest even, overflow to +-inf included) of a value
// within b of want: an output is a value held to the F32 bound and then rounded once, so next to
// f16's overflow threshold a reference of -65519.99 with a bound of 0.7 may come back as -inf.
bool rounds_from_within(double got, double want, double b, onorm_dtype dtype);

// Compares a host copy of a backend's y (and optional mean/rstd it returned) with ref.
struct Report {
  int64_t checked = 0, violations = 0;
  double max_abs = 0, max_rel = 0, max_ulp = 0;
  int64_t first_row = -1, first_col = -1;  // first violation
  double first_got = 0, first_want = 0;
  std::string first_what;  // "y", "mean" or "rstd"
  bool ok() const { return violations == 0; }
  std::string describe() const;
  // Counts a violation; the first one is kept for describe().
  void violation(const char* what, int64_t row, int64_t col, double got, double want);
};
// Checks y (and mean / rstd) against the reference with the contract's bounds. An element of y
// equal to the reference rounded to y's dtype is always accepted: no output can be closer.
Report check(Op op, const Result& ref, const onorm_rows& y, const void* gamma, onorm_dtype gamma_dtype,
             const float* mean, const float* rstd);

// onorm_norm (API.md, "norms with options") for host-resident tensors: h = x, or
// round_H(x + residual) (the add in float, in double when x or the residual is f64); the norm
// of h with the scale s_j = weight_offset + gamma_j (gamma and beta of param_dtype, NULL: 1, 0);
// y the values v, or their quantization to I8 / F8_E4M3 with the dynamic (max|v| / Q per row)
// or the static scale.
struct NormSpec {
  bool layer = true;  // LayerNorm, else RMSNorm
  onorm_rows x{};
  const onorm_rows* residual = nullptr;
  onorm_dtype h_dtype = ONORM_F32;  // residual_out's dtype, else x's
  const void* gamma = nullptr;
  const void* beta = nullptr;
  onorm_dtype param_dtype = ONORM_F32;
  double eps = 1e-5;
  double weight_offset = 0;
};
struct NormResult {
  Result norm;             // y: the values v; mean, rstd
  std::vector<double> h;   // rows x cols, what residual_out receives
  std::vector<double> s;   // cols, the scale s_j
};
NormResult compute_norm(const NormSpec& spec);

// The quantized dtypes: the value of a stored element (decode covers them too), the largest
// magnitude Q, and the reference quantization of v / scale.
double quant_max(onorm_dtype dtype);
double quantize(double v, onorm_dtype dtype);

// Checks one backend's onorm_norm outputs (host copies): y (a float dtype against the norm's
// bound, or quantized: each q the reference's or a neighbour on the grid, from the backend's
// own scale), y_scale (dynamic: within 1e-5 relative; NULL otherwise, with static_scale),
// mean and rstd (NULL: not checked), residual_out (NULL: not checked; exact).
Report check_norm(const NormSpec& spec, const NormResult& ref, const onorm_rows& y, const float* y_scale,
                  double static_scale, const float* mean, const float* rstd, const onorm_rows* residual_out);

// onorm_norm_backward (API.md, "backward passes") for host-resident tensors, straight from the
// definition: s_j = weight_offset + gamma_j, g_j = dy_j s_j, xhat_j = (x_j - mean) rstd (RMSNorm:
// x_j rstd), the row means of g and g xhat, and the column sums over every row, all in double.
struct NormBackwardSpec {
  bool layer = true;
  onorm_rows x{}, dy{};
  const onorm_rows* dresidual = nullptr;
  const void* gamma = nullptr;  // cols of param_dtype, NULL: 1
  onorm_dtype param_dtype = ONORM_F32;
  double weight_offset = 0;
  const float* mean = nullptr;  // LayerNorm
  const float* rstd = nullptr;
};
struct NormBackwardResult {
  int64_t rows = 0, cols = 0;
  std::vector<double> dx, dx_bound;              // rows x cols: the value and the contract's bound
  std::vector<double> dgamma, dbeta;             // cols
  std::vector<double> dgamma_abs, dbeta_abs;     // cols: sum_r |dy xhat|, sum_r |dy|
};
NormBackwardResult compute_norm_backward(const NormBackwardSpec& spec);
// Checks dx (16-bit: plus one unit in the last place) and, where given, dgamma and dbeta.
Report check_norm_backward(const NormBackwardResult& ref, const onorm_rows& dx, const float* dgamma,
                           const float* dbeta);


// ---- API v2 part 2: cross-entropy, softmax top-k, partial row states ------------------------
// Plain long-double loops over each row (no online merging, nothing of core/): lse = M +
// log(sum exp(x - M)); the top k by a sort of (value descending, -0 == +0; column ascending);
// the moments by a two-pass mean and M2.

// onorm_cross_entropy (API.md, "cross-entropy"), per row of host-resident logits:
// lse = log sum_j exp(x_j), q_j = (1 - ls) [j == t] + ls / C (terms with q_j = 0 count as 0),
// loss = lse - sum_j q_j x_j + z lse^2, dlogits_j = gs ((1 + 2 z lse) softmax_j - q_j).
// ignore_index rows: loss 0, gradient 0, lse the row's. A target outside [0, C): NaN loss and
// gradient. A NaN in a row: NaN lse, loss and gradient (unless ignored).
struct CrossEntropySpec {
  onorm_rows logits{};
  const int64_t* targets = nullptr;  // host
  int64_t ignore_index = -100;
  double label_smoothing = 0, z_loss = 0, grad_scale = 1;
};
struct CrossEntropyResult {
  int64_t rows = 0, cols = 0;
  std::vector<double> loss, lse;          // rows
  std::vector<char> ignored;              // rows: target == ignore_index (loss exactly 0)
  std::vector<double> dlogits, dbound;    // rows x cols: the value and the contract's F32 bound
};
CrossEntropyResult compute_cross_entropy(const CrossEntropySpec& spec);
// Checks loss and lse (NULL: not checked) within 1e-6 (|lse| + 1) + 1e-6 |loss|, and dlogits
// (NULL: not checked) within the gradient bound (16-bit: plus one unit in the last place). A zero
// gradient (ignored rows) must be exactly +-0; NaN where the reference is NaN.
Report check_cross_entropy(const CrossEntropyResult& ref, const float* loss, const float* lse,
                           const onorm_rows* dlogits);

// onorm_softmax_topk (API.md, "softmax top-k"): per row the columns of the k largest entries
// (ties: the lower column; -0 and +0 tie), and their softmax over the whole row or, with
// renormalize, over the k selected. A NaN row: values NaN (nan_row set; its indices are any k
// distinct columns). An all -inf row: values 0, columns 0..k-1.
struct TopkResult {
  int64_t rows = 0, k = 0;
  std::vector<double> values;     // rows x k
  std::vector<int64_t> indices;   // rows x k
  std::vector<char> nan_row;      // rows
};
TopkResult compute_topk(const onorm_rows& x, int64_t k, bool renormalize);
// values within softmax's bound (16-bit: plus one ulp), indices exactly (NaN rows: k distinct
// columns in [0, cols)).
Report check_topk(const TopkResult& ref, int64_t cols, const onorm_rows& values, const int64_t* indices);

// Whole-row states from the definition: (max, sum exp(x - max)) and (count, mean, M2).
struct RowSoftmaxState {
  double max = 0, sum_exp = 0;
  bool nan = false;  // a NaN or +inf in the row
};
struct RowMoments {
  int64_t count = 0;
  double mean = 0, m2 = 0;
};
RowSoftmaxState softmax_state_of(const onorm_rows& x, int64_t row);
RowMoments moments_of(const onorm_rows& x, int64_t row);

}  // namespace onorm_ref
