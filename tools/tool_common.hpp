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
#include "reference.hpp"

namespace onorm_tool {

using onorm_ref::Op;

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
  Op op = Op::softmax;
  int64_t rows = 0, cols = 0;
  onorm_dtype in = ONORM_F32, out = ONORM_F32;
  double eps = 1e-5;
  std::vector<unsigned char> x;            // rows * cols elements of `in`, dense
  std::vector<unsigned char> dy;           // the second input of two-input ops (softmax backward), like x
  std::vector<unsigned char> gamma, beta;  // cols elements of `in` (norms only; empty otherwise)
  int inputs() const { return onorm_ref::op_inputs(op); }
  size_t x_bytes() const { return static_cast<size_t>(rows * cols) * dtype_size(in); }
  size_t y_bytes() const { return static_cast<size_t>(rows * cols) * dtype_size(out); }
  // Bytes one run moves for the bandwidth figure: each input read once and y written once.
  double moved_bytes() const { return static_cast<double>(inputs() * x_bytes() + y_bytes()); }
  bool has_gamma() const { return op == Op::layer_norm || op == Op::rms_norm; }
};

// Fills p.x (rows, cols, in set) from dist and seed. Works a row at a time (no float copy of
// the whole input); when *cancel becomes non-zero it stops and throws Interrupted.
void generate_input(Problem& p, Dist dist, uint64_t seed, const volatile sig_atomic_t* cancel = nullptr);
// Fills p.dy for two-input ops (nothing otherwise) like x, from another stream of the seed.
void generate_second_input(Problem& p, Dist dist, uint64_t seed, const volatile sig_atomic_t* cancel = nullptr);
void generate_params(Problem& p, uint64_t seed);
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

// An open context with the problem's buffers on the device.
class DeviceRun {
 public:
  // stats_rows: room for mean/rstd of that many rows (for reshape); p.rows at least.
  DeviceRun(const BackendSpec& spec, const Problem& p, int64_t stats_rows = 0);
  ~DeviceRun();
  DeviceRun(const DeviceRun&) = delete;
  DeviceRun& operator=(const DeviceRun&) = delete;
  const std::string& device_name() const { return name_; }
  onorm_context ctx() const { return ctx_; }
  onorm_status call();          // runs the op once (asynchronous on GPUs)
  void run_once();              // call + synchronize, throws ToolError with the library's message
  Timing time(int samples);     // warm-up once, then timed samples
  // Views the same buffers as another shape (bench): rows*cols within p's, a norm's cols
  // within p's gamma, the op's parameters (and a second input) allocated.
  void reshape(Op op, int64_t rows, int64_t cols);
  // Copies of device buffers: y (current shape) and the statistics the op writes.
  void fetch(std::vector<unsigned char>& y, std::vector<float>& mean, std::vector<float>& rstd);

 private:
  void release();
  void* alloc(size_t bytes);
  void upload(void* dst, const void* src, size_t bytes);
  const Problem& p_;
  std::string label_, name_;
  Op op_;
  int64_t rows_, cols_, capacity_ = 0, stats_capacity_ = 0;
  onorm_context ctx_ = nullptr;
  void *x_ = nullptr, *dy_ = nullptr, *y_ = nullptr, *gamma_ = nullptr, *beta_ = nullptr;
  float *mean_ = nullptr, *rstd_ = nullptr;
};

[[noreturn]] void throw_status(const std::string& what, onorm_status s);

}  // namespace onorm_tool
