// Shared pieces of the onorm tool: names, argument parsing, input generation, and running one
// operator on one backend with timing. Tables, JSON and output files: output.hpp.
#pragma once

#include <csignal>
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "onlinenorm/onlinenorm.h"
#include "ops.hpp"
#include "reference.hpp"

namespace onorm_tool {

// Exit statuses of the tool.
constexpr int kExitOk = 0;
constexpr int kExitError = 1;      // a runtime failure (backend error, unreadable input, ...)
constexpr int kExitUsage = 2;      // bad command line
constexpr int kExitBound = 3;      // compare/run: a backend's output violates the contract's bound
constexpr int kExitInterrupted = 130;

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct ToolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The user interrupted a long step (Ctrl-C): the caller keeps what it has and stops.
struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted") {}
};

// ---- names ----
bool parse_dtype(const std::string& s, onorm_dtype& out);
const char* dtype_name(onorm_dtype d);
size_t dtype_size(onorm_dtype d);

struct BackendSpec {
  onorm_backend kind = ONORM_BACKEND_CPU;
  int device = 0;
  std::string label() const;  // "cpu", "cuda:0", "hip:1" ("cpu:1" for a CPU index that is not 0)
};
bool parse_backend(const std::string& s, BackendSpec& out);
const char* backend_kind_name(onorm_backend b);

// ---- command line ----
struct OptionSpec {
  std::string name;   // without the leading "--"
  bool takes_value;
  bool hidden = false;
};
// Parses argv[first..argc) against specs; "--name value" and "--name=value". Throws UsageError.
std::map<std::string, std::string> parse_options(int argc, char** argv, int first,
                                                 const std::vector<OptionSpec>& specs);
int64_t parse_int(const std::string& opt, const std::string& text, int64_t lo, int64_t hi);
double parse_double(const std::string& opt, const std::string& text);
std::vector<std::string> split_list(const std::string& s);

// ---- problems and inputs ----
enum class Dist { normal, uniform, large_offset, special };
bool parse_dist(const std::string& s, Dist& out);
const char* dist_name(Dist d);

struct Problem {
  ToolOp op;
  int64_t rows = 0, cols = 0;
  onorm_dtype in = ONORM_F32, out = ONORM_F32;  // out: y's (dx's) dtype, the quantized ops' own
  onorm_dtype param = ONORM_F32;                // gamma/beta's dtype: x's, or --param-dtype (norm ops)
  double eps = 1e-5;
  double weight_offset = 0;                     // norm ops: the scale is weight_offset + gamma
  std::vector<unsigned char> x;            // rows * cols elements of `in`, dense
  std::vector<unsigned char> second;       // the second input of two-input ops, like x: dy of the
                                           // backward passes, the residual of add_rms_norm/add_layer_norm
  std::vector<unsigned char> gamma, beta;  // cols elements of `param` (norms only; empty otherwise)
  std::vector<float> mean, rstd;           // the norms' backward: the forward's statistics, an input
  int64_t k = 0;                           // softmax_topk: entries per row (--k)
  double label_smoothing = 0, z_loss = 0;  // cross_entropy (--label-smoothing, --z-loss)
  std::vector<int64_t> targets;            // cross_entropy: rows class indices, some ignore_index
  int inputs() const { return row_inputs(op); }
  // y's columns: k for softmax_topk's values, else cols.
  int64_t y_cols() const { return op.row == RowOp::softmax_topk ? k : cols; }
  size_t x_bytes() const { return static_cast<size_t>(rows * cols) * dtype_size(in); }
  size_t y_bytes() const { return static_cast<size_t>(rows * y_cols()) * dtype_size(out); }
  // Bytes one run moves for the bandwidth figure (ops.hpp: what is counted).
  double moved_bytes() const { return onorm_tool::moved_bytes(op, rows, cols, in, out, param, k); }
};

// Fills p.x (rows, cols, in set) from dist and seed. Works a row at a time (no float copy of
// the whole input); when *cancel becomes non-zero it stops and throws Interrupted.
void generate_input(Problem& p, Dist dist, uint64_t seed, const volatile sig_atomic_t* cancel = nullptr);
// Fills p.second for two-input ops (nothing otherwise) like x, from another stream of the seed.
void generate_second_input(Problem& p, Dist dist, uint64_t seed, const volatile sig_atomic_t* cancel = nullptr);
// Fills gamma (and beta) of the norms, in p.param.
void generate_params(Problem& p, uint64_t seed);
// The norms' backward: fills p.mean and p.rstd with the float64 forward's statistics of x, rounded
// to float, so that every backend gets the same inputs (nothing for the other ops).
void generate_statistics(Problem& p);
// cross_entropy: fills p.targets with classes in [0, cols) from the seed, every 7th row (from
// the 4th) the ignore_index -100 (nothing for the other ops).
void generate_targets(Problem& p, uint64_t seed);
// Encodes float values into a buffer of dtype (round to nearest even).
void encode_floats(const float* src, size_t n, onorm_dtype dtype, unsigned char* dst);

// ---- running ----
struct Timing {
  double median_s = 0;  // per call
  int samples = 0;
  int batch = 1;        // calls per timed sample
};

// Times fn (one call + nothing else); each sample runs `batch` calls then synchronize.
// batch is chosen so that a sample lasts at least min_sample_s. Returns false if fn fails.
Timing time_calls(onorm_context ctx, const std::function<onorm_status()>& fn, int samples,
                  double min_sample_s = 2e-4);

// Host copies of what one run wrote (empty where the op writes nothing of the kind).
struct Outputs {
  std::vector<unsigned char> y;             // y, or dx for the backward passes
  std::vector<float> mean, rstd;            // the statistics the forward norms write
  std::vector<unsigned char> residual_out;  // h = x + residual, in x's dtype
  std::vector<float> y_scale;               // the quantized ops' per-row scale
  std::vector<float> dgamma, dbeta;         // the norms' backward
  std::vector<float> loss, lse;             // cross_entropy
  std::vector<int64_t> indices;             // softmax_topk
};

// An open context with the problem's buffers on the device.
class DeviceRun {
 public:
  // stats_rows: room for the per-row floats (mean, rstd, y_scale) of that many rows, p.rows at
  // least. also: the tensors of other ops the run is reshaped to (bench), allocated too; the
  // inputs among them (a second input, gamma, beta, the backward's statistics) come from p.
  DeviceRun(const BackendSpec& spec, const Problem& p, int64_t stats_rows = 0, const Tensors& also = {});
  ~DeviceRun();
  DeviceRun(const DeviceRun&) = delete;
  DeviceRun& operator=(const DeviceRun&) = delete;
  const std::string& device_name() const { return name_; }
  onorm_context ctx() const { return ctx_; }
  onorm_status call();          // runs the op once (asynchronous on GPUs)
  void run_once();              // call + synchronize, throws ToolError with the library's message
  Timing time(int samples);     // warm-up once, then timed samples
  // Views the same buffers as another op and shape (bench): rows*cols within p's, a norm's cols
  // within p's gamma, rows within the per-row floats, the op's tensors allocated.
  void reshape(const ToolOp& op, int64_t rows, int64_t cols);
  // Host copies of what the op wrote (current shape); not the statistics the backward reads.
  void fetch(Outputs& out);

 private:
  void release();
  void* alloc(size_t bytes);
  void* alloc_copy(const std::vector<unsigned char>& host, const char* what);
  float* alloc_floats(int64_t n, const std::vector<float>& host);
  void upload(void* dst, const void* src, size_t bytes);
  void download(void* dst, const void* src, size_t bytes);
  const Problem& p_;
  std::string label_, name_;
  ToolOp op_;
  onorm_dtype out_;  // y's dtype for op_
  Tensors allocated_;
  int64_t rows_, cols_, capacity_ = 0, stats_capacity_ = 0, param_cols_ = 0;
  onorm_context ctx_ = nullptr;
  void *x_ = nullptr, *second_ = nullptr, *y_ = nullptr, *gamma_ = nullptr, *beta_ = nullptr,
       *residual_out_ = nullptr;
  float *mean_ = nullptr, *rstd_ = nullptr, *y_scale_ = nullptr, *dgamma_ = nullptr, *dbeta_ = nullptr;
  float *loss_ = nullptr, *lse_ = nullptr;
  int64_t *targets_ = nullptr, *indices_ = nullptr;
};

[[noreturn]] void throw_status(const std::string& what, onorm_status s);

}  // namespace onorm_tool
