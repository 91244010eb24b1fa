// Shared helpers of the test suite: backend parameters, contexts that skip when a backend is
// unavailable, poisoned device buffers with guard zones, seeded random inputs, and the bridge
// to the float64 reference (reference/reference.hpp).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "onlinenorm/onlinenorm.h"
#include "reference.hpp"

namespace onorm_test {

using Op = onorm_ref::Op;

// ---- names ----------------------------------------------------------------------------------

inline const char* backend_name(onorm_backend b) {
  switch (b) {
    case ONORM_BACKEND_CPU: return "cpu";
    case ONORM_BACKEND_CUDA: return "cuda";
    case ONORM_BACKEND_HIP: return "hip";
    default: return "auto";
  }
}
inline const char* dtype_name(onorm_dtype d) {
  switch (d) {
    case ONORM_F32: return "f32";
    case ONORM_F16: return "f16";
    case ONORM_BF16: return "bf16";
    case ONORM_F64: return "f64";
    case ONORM_F8_E4M3: return "f8";
    case ONORM_I8: return "i8";
  }
  return "bad";
}
inline const std::vector<onorm_backend>& all_backends() {
  static const std::vector<onorm_backend> b = {ONORM_BACKEND_CPU, ONORM_BACKEND_CUDA, ONORM_BACKEND_HIP};
  return b;
}
inline const std::vector<onorm_dtype>& float_dtypes() {
  static const std::vector<onorm_dtype> d = {ONORM_F32, ONORM_F16, ONORM_BF16, ONORM_F64};
  return d;
}
// Every op of the library's list (core/ops/op_list.h, through the reference's Op).
inline const std::vector<Op>& all_ops() { return onorm_ref::all_ops(); }
// Row tensors an op reads: 1 (x), or 2 (softmax backward: y and dy).
using onorm_ref::op_inputs;
inline bool is_gpu(onorm_backend b) { return b == ONORM_BACKEND_CUDA || b == ONORM_BACKEND_HIP; }
// Dtypes a backend must take, by the contract (F64 only on the CPU).
inline bool contract_supports(onorm_backend b, onorm_dtype d) {
  return d == ONORM_F32 || d == ONORM_F16 || d == ONORM_BF16 || (d == ONORM_F64 && b == ONORM_BACKEND_CPU);
}

struct BackendName {
  std::string operator()(const ::testing::TestParamInfo<onorm_backend>& info) const {
    return backend_name(info.param);
  }
};

// ---- seeds ----------------------------------------------------------------------------------

// A fresh seed per test (ONORM_TEST_SEED=<n> replays one); SCOPED_TRACE prints it on failure.
inline uint64_t fresh_seed() {
  if (const char* s = std::getenv("ONORM_TEST_SEED")) return std::strtoull(s, nullptr, 0);
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}
#define ONORM_SEEDED_RNG(rng)                                                      \
  const uint64_t rng##_seed = ::onorm_test::fresh_seed();                          \
  SCOPED_TRACE("seed " + std::to_string(rng##_seed) + " (ONORM_TEST_SEED replays)"); \
  std::mt19937_64 rng(rng##_seed)

// ---- contexts -------------------------------------------------------------------------------

// Owns an onorm_context.
class Ctx {
 public:
  Ctx() = default;
  explicit Ctx(onorm_context c) : c_(c) {}
  Ctx(Ctx&& o) noexcept : c_(o.c_) { o.c_ = nullptr; }
  Ctx& operator=(Ctx&& o) noexcept {
    std::swap(c_, o.c_);
    return *this;
  }
  Ctx(const Ctx&) = delete;
  ~Ctx() { onorm_destroy(c_); }
  onorm_context get() const { return c_; }
  operator onorm_context() const { return c_; }

 private:
  onorm_context c_ = nullptr;
};

// Creates a context for backend (device 0). BACKEND_UNAVAILABLE becomes GTEST_SKIP (so GPU
// instances report SKIPPED on machines without a GPU); any other failure fails the test.
#define ONORM_OPEN_OR_SKIP(ctx, backend)                                                          \
  ::onorm_test::Ctx ctx;                                                                          \
  do {                                                                                            \
    onorm_context raw_ = nullptr;                                                                 \
    const onorm_status st_ = onorm_create((backend), 0, &raw_);                                   \
    if (st_ == ONORM_ERROR_BACKEND_UNAVAILABLE)                                                   \
      GTEST_SKIP() << ::onorm_test::backend_name(backend) << " unavailable: " << onorm_last_error(); \
    ASSERT_EQ(st_, ONORM_OK) << onorm_last_error();                                               \
    ASSERT_NE(raw_, nullptr);                                                                     \
    ctx = ::onorm_test::Ctx(raw_);                                                                \
  } while (0)

// ---- buffers --------------------------------------------------------------------------------

// Stores v into element i of a host buffer, rounded to the dtype. Builds inputs only: the
// reference decodes whatever bits land here, so this need not be the library's rounding, just
// fast (onorm_ref::encode searches). bf16: RNE of the f32 value; f16: the compiler's _Float16.
inline void fast_encode(double v, void* data, onorm_dtype dtype, int64_t i) {
  char* p = static_cast<char*>(data);
  switch (dtype) {
    case ONORM_F32: {
      const float f = static_cast<float>(v);
      std::memcpy(p + i * 4, &f, 4);
      return;
    }
    case ONORM_F64: std::memcpy(p + i * 8, &v, 8); return;
    case ONORM_BF16: {
      const float f = static_cast<float>(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      const uint16_t h = std::isnan(f) ? static_cast<uint16_t>((u >> 16) | 0x40)
                                       : static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
      std::memcpy(p + i * 2, &h, 2);
      return;
    }
    case ONORM_F16: {
      const _Float16 h = static_cast<_Float16>(v);
      std::memcpy(p + i * 2, &h, 2);
      return;
    }
    default: onorm_ref::encode(v, data, dtype, i); return;
  }
}

constexpr unsigned char kPoison = 0xFF;  // all-ones: a NaN pattern in every float format
constexpr size_t kGuard = 256;           // bytes of guard zone on each side

inline size_t esize(onorm_dtype d) { return onorm_dtype_size(d); }

// rows x cols elements with a row stride and an extra byte offset, in the memory of a context,
// surrounded by guard zones. A host image mirrors the whole allocation (guards included).
class Tensor {
 public:
  Tensor() = default;
  Tensor(onorm_context ctx, onorm_dtype dtype, int64_t rows, int64_t cols, int64_t stride = -1,
         size_t offset_bytes = 0)
      : ctx_(ctx), dtype_(dtype), rows_(rows), cols_(cols), stride_(stride < 0 ? cols : stride),
        offset_(offset_bytes), es_(esize(dtype)) {
    payload_ = rows_ > 0 ? static_cast<size_t>((rows_ - 1) * stride_ + cols_) * es_ : 0;
    total_ = 2 * kGuard + offset_ + payload_;
    image_.assign(total_, kPoison);
    const onorm_status s = onorm_malloc(ctx_, total_, &dev_);
    if (s != ONORM_OK) {
      ADD_FAILURE() << "onorm_malloc(" << total_ << ") failed: " << onorm_last_error();
      dev_ = nullptr;
    }
    upload();
  }
  Tensor(Tensor&& o) noexcept { *this = std::move(o); }
  Tensor& operator=(Tensor&& o) noexcept {
    std::swap(ctx_, o.ctx_);
    std::swap(dev_, o.dev_);
    dtype_ = o.dtype_;
    rows_ = o.rows_;
    cols_ = o.cols_;
    stride_ = o.stride_;
    offset_ = o.offset_;
    es_ = o.es_;
    payload_ = o.payload_;
    total_ = o.total_;
    image_.swap(o.image_);
    return *this;
  }
  ~Tensor() {
    if (dev_) onorm_free(ctx_, dev_);
  }

  bool ok() const { return dev_ != nullptr; }
  onorm_dtype dtype() const { return dtype_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t stride() const { return stride_; }
  size_t total_bytes() const { return total_; }

  // Pointers to element (0, 0): in the context's memory and in the host image.
  void* dev() const { return static_cast<char*>(dev_) + kGuard + offset_; }
  void* host() { return image_.data() + kGuard + offset_; }
  const void* host() const { return image_.data() + kGuard + offset_; }
  float* dev_f32() const { return static_cast<float*>(dev()); }
  const float* host_f32() const { return static_cast<const float*>(host()); }

  onorm_rows dev_rows() const { return onorm_rows{dev(), dtype_, rows_, cols_, stride_}; }
  onorm_rows host_rows() const { return onorm_rows{const_cast<void*>(host()), dtype_, rows_, cols_, stride_}; }

  int64_t index(int64_t r, int64_t c) const { return r * stride_ + c; }
  double get(int64_t r, int64_t c) const { return onorm_ref::decode(host(), dtype_, index(r, c)); }
  void set(int64_t r, int64_t c, double v) { fast_encode(v, host(), dtype_, index(r, c)); }

  void poison() {
    std::fill(image_.begin(), image_.end(), kPoison);
    upload();
  }
  // Fills every element (not the padding) with gen(r, c) and uploads.
  template <typename Gen>
  void fill(Gen&& gen) {
    for (int64_t r = 0; r < rows_; ++r)
      for (int64_t c = 0; c < cols_; ++c) set(r, c, gen(r, c));
    upload();
  }
  void upload() {
    if (dev_ && total_) {
      const onorm_status s = onorm_memcpy(ctx_, dev_, image_.data(), total_, ONORM_COPY_HOST_TO_DEVICE);
      if (s != ONORM_OK) ADD_FAILURE() << "upload failed: " << onorm_last_error();
    }
  }
  void download() {
    if (dev_ && total_) {
      const onorm_status s = onorm_memcpy(ctx_, image_.data(), dev_, total_, ONORM_COPY_DEVICE_TO_HOST);
      if (s != ONORM_OK) ADD_FAILURE() << "download failed: " << onorm_last_error();
    }
  }
  const std::vector<unsigned char>& image() const { return image_; }

  // Is byte b of the image inside an element (as opposed to a guard zone or stride padding)?
  bool is_element_byte(size_t b) const {
    if (b < kGuard + offset_ || b >= kGuard + offset_ + payload_) return false;
    const size_t rel = (b - kGuard - offset_) / es_;
    return static_cast<int64_t>(rel % static_cast<size_t>(stride_)) < cols_;
  }
  // Guard zones and stride padding still hold the poison.
  ::testing::AssertionResult outside_untouched(const char* what) const {
    auto check_range = [&](size_t b, size_t e) -> ::testing::AssertionResult {
      for (size_t k = b; k < e; ++k)
        if (image_[k] != kPoison) {
          const long long rel = static_cast<long long>(k) - static_cast<long long>(kGuard + offset_);
          return ::testing::AssertionFailure()
                 << what << ": byte " << rel << " relative to element (0,0) was written (outside the " << rows_ << "x"
                 << cols_ << " stride " << stride_ << " " << dtype_name(dtype_) << " rows)";
        }
      return ::testing::AssertionSuccess();
    };
    const size_t start = kGuard + offset_, row_bytes = static_cast<size_t>(cols_) * es_,
                 stride_bytes = static_cast<size_t>(stride_) * es_;
    if (auto r = check_range(0, start); !r) return r;
    for (int64_t r = 0; r + 1 < rows_; ++r) {
      const size_t b = start + static_cast<size_t>(r) * stride_bytes;
      if (auto res = check_range(b + row_bytes, b + stride_bytes); !res) return res;
    }
    return check_range(start + payload_, total_);
  }
  // Every element differs from the poison pattern.
  ::testing::AssertionResult all_written(const char* what) const {
    for (int64_t r = 0; r < rows_; ++r)
      for (int64_t c = 0; c < cols_; ++c) {
        const unsigned char* p = static_cast<const unsigned char*>(host()) + index(r, c) * es_;
        bool poisoned = true;
        for (size_t k = 0; k < es_; ++k) poisoned = poisoned && p[k] == kPoison;
        if (poisoned)
          return ::testing::AssertionFailure() << what << "[" << r << "][" << c << "] was not written";
      }
    return ::testing::AssertionSuccess();
  }
  // Every byte, guards and elements alike, still holds the poison (nothing was written).
  ::testing::AssertionResult all_poison(const char* what) const {
    for (size_t b = 0; b < total_; ++b)
      if (image_[b] != kPoison)
        return ::testing::AssertionFailure()
               << what << ": byte " << (static_cast<long long>(b) - static_cast<long long>(kGuard + offset_))
               << " relative to element (0,0) was written";
    return ::testing::AssertionSuccess();
  }
  // The whole image equals a saved one.
  ::testing::AssertionResult same_image(const std::vector<unsigned char>& saved, const char* what) const {
    if (saved.size() != image_.size()) return ::testing::AssertionFailure() << what << ": size differs";
    for (size_t b = 0; b < total_; ++b)
      if (saved[b] != image_[b])
        return ::testing::AssertionFailure()
               << what << ": byte " << (static_cast<long long>(b) - static_cast<long long>(kGuard + offset_))
               << " relative to element (0,0) changed";
    return ::testing::AssertionSuccess();
  }

 private:
  onorm_context ctx_ = nullptr;
  void* dev_ = nullptr;
  onorm_dtype dtype_ = ONORM_F32;
  int64_t rows_ = 0, cols_ = 0, stride_ = 0;
  size_t offset_ = 0, es_ = 4, payload_ = 0, total_ = 0;
  std::vector<unsigned char> image_;
};

// ---- inputs ---------------------------------------------------------------------------------

// A cheap bell-shaped deviate (Irwin-Hall of four 16-bit uniforms, unit variance, tails cut at
// +-3.46): one engine call per value, for the millions of inputs long rows need.
inline double cheap_normal(std::mt19937_64& rng, double mean, double sd) {
  const uint64_t u = rng();
  const double s = static_cast<double>(u & 0xffff) + static_cast<double>((u >> 16) & 0xffff) +
                   static_cast<double>((u >> 32) & 0xffff) + static_cast<double>(u >> 48);
  // Sum of 4 uniforms on [0, 65536): mean 2*65535.5... scaled to mean 0, variance 1.
  return mean + sd * (s / 65536.0 - 2.0) * 1.7320508075688772;
}

// Values typical for each op: softmax logits with a spread, normalization inputs with an offset.
struct InputDist {
  double center = 0, scale = 1;
};
inline InputDist input_dist(Op op, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  switch (op) {
    case Op::softmax:
    case Op::log_softmax: return {u(rng) * 8 - 4, 0.5 + 4 * u(rng)};
    case Op::layer_norm: return {u(rng) * 20 - 10, 0.1 + 3 * u(rng)};
    case Op::rms_norm: return {u(rng) * 2 - 1, 0.1 + 3 * u(rng)};
    case Op::softmax_backward: return {u(rng) * 2 - 1, 0.1 + 3 * u(rng)};  // dy; y: probabilities
    case Op::log_softmax_backward: return {u(rng) * 2 - 1, 0.1 + 3 * u(rng)};  // dy; y: log-probabilities
  }
  return {};
}

// ---- running one op through the C ABI -------------------------------------------------------

struct OpArgs {
  const onorm_rows* dy = nullptr;  // the backward passes' second input (x is y, the output dx)
  const void* gamma = nullptr;
  const void* beta = nullptr;
  double eps = 1e-5;
  float* mean = nullptr;
  float* rstd = nullptr;
};

inline onorm_status run_op(onorm_context ctx, Op op, const onorm_rows& x, const onorm_rows& y, const OpArgs& a) {
  switch (op) {
    case Op::softmax: return onorm_softmax(ctx, &x, &y);
    case Op::log_softmax: return onorm_log_softmax(ctx, &x, &y);
    case Op::layer_norm: return onorm_layer_norm(ctx, &x, a.gamma, a.beta, a.eps, &y, a.mean, a.rstd);
    case Op::rms_norm: return onorm_rms_norm(ctx, &x, a.gamma, a.eps, &y, a.rstd);
    case Op::softmax_backward: return onorm_softmax_backward(ctx, &x, a.dy, &y);
    case Op::log_softmax_backward: return onorm_log_softmax_backward(ctx, &x, a.dy, &y);
  }
  return ONORM_ERROR_INTERNAL;
}

inline bool has_mean(Op op) { return op == Op::layer_norm; }
inline bool has_rstd(Op op) { return op == Op::layer_norm || op == Op::rms_norm; }
inline bool has_gamma(Op op) { return op == Op::layer_norm || op == Op::rms_norm; }
inline bool has_beta(Op op) { return op == Op::layer_norm; }

inline std::string describe(onorm_backend b, Op op, onorm_dtype in, onorm_dtype out, int64_t rows, int64_t cols) {
  std::ostringstream s;
  s << backend_name(b) << " " << onorm_ref::op_name(op) << " " << dtype_name(in) << "->" << dtype_name(out) << " "
    << rows << "x" << cols;
  return s.str();
}

}  // namespace onorm_test
