// onlinenorm: a header-only C++ layer over the C ABI (onlinenorm.h, docs/API.md).
//
//   onorm::Context ctx(ONORM_BACKEND_CPU);          // throws onorm::Error when unavailable
//   onorm::Buffer<float> x(ctx, n), y(ctx, n);       // memory where ctx computes
//   x.upload(host.data(), n);
//   ctx.softmax(onorm::Rows(x.data(), rows, cols), onorm::Rows(y.data(), rows, cols));
//   ctx.synchronize();
//   y.download(host.data(), n);
//
// Every failing call throws onorm::Error, which carries the onorm_status and the text of
// onorm_last_error() taken on the failing thread. Nothing here adds semantics to the C ABI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "onlinenorm/onlinenorm.h"

namespace onorm {

// ---- errors ---------------------------------------------------------------------------------

class Error : public std::runtime_error {
 public:
  Error(onorm_status status, const std::string& detail)
      : std::runtime_error(std::string(onorm_status_string(status)) + (detail.empty() ? "" : ": ") + detail),
        status_(status),
        detail_(detail) {}
  onorm_status status() const noexcept { return status_; }
  // onorm_last_error() as it was when the call failed.
  const std::string& detail() const noexcept { return detail_; }

 private:
  onorm_status status_;
  std::string detail_;
};

// Throws onorm::Error for anything but ONORM_OK.
inline void check(onorm_status status) {
  if (status != ONORM_OK) {
    const char* detail = onorm_last_error();
    throw Error(status, detail ? detail : "");
  }
}

// ---- element types and dtypes ---------------------------------------------------------------

// 16-bit storage wrappers: the bits of one bf16 / f16 value (no arithmetic on purpose).
struct bf16 {
  uint16_t bits;
};
struct f16 {
  uint16_t bits;
};

template <typename T> struct dtype_of;  // undefined for types the library does not take
template <> struct dtype_of<float> { static constexpr onorm_dtype value = ONORM_F32; };
template <> struct dtype_of<double> { static constexpr onorm_dtype value = ONORM_F64; };
template <> struct dtype_of<bf16> { static constexpr onorm_dtype value = ONORM_BF16; };
template <> struct dtype_of<f16> { static constexpr onorm_dtype value = ONORM_F16; };
template <> struct dtype_of<int8_t> { static constexpr onorm_dtype value = ONORM_I8; };  // quantized norm output
template <typename T> struct dtype_of<const T> : dtype_of<T> {};

inline std::size_t dtype_size(onorm_dtype dtype) { return onorm_dtype_size(dtype); }

namespace detail {
template <typename I>
struct is_size : std::integral_constant<bool, std::is_integral<I>::value && !std::is_same<I, bool>::value> {};
}  // namespace detail

// ---- row views ------------------------------------------------------------------------------

// A non-owning view of rows x cols elements, row_stride elements apart (onorm_rows).
// Input views may be built from const pointers: the library never writes through an input.
class Rows {
 public:
  Rows() : r_{nullptr, ONORM_F32, 0, 0, 0} {}
  // Untyped: the dtype is given.
  Rows(const void* data, onorm_dtype dtype, int64_t rows, int64_t cols)
      : Rows(data, dtype, rows, cols, cols) {}
  Rows(const void* data, onorm_dtype dtype, int64_t rows, int64_t cols, int64_t row_stride)
      : r_{const_cast<void*>(data), dtype, rows, cols, row_stride} {}
  // Typed: the dtype is deduced from T (float, double, onorm::bf16, onorm::f16). The sizes
  // must be integers (an onorm_dtype in second place picks the untyped form above).
  template <typename T, typename R, typename C, typename = typename std::enable_if<
                                                    detail::is_size<R>::value && detail::is_size<C>::value,
                                                    decltype(dtype_of<T>::value)>::type>
  Rows(T* data, R rows, C cols) : Rows(data, rows, cols, cols) {}
  template <typename T, typename R, typename C, typename S,
            typename = typename std::enable_if<detail::is_size<R>::value && detail::is_size<C>::value &&
                                                   detail::is_size<S>::value,
                                               decltype(dtype_of<T>::value)>::type>
  Rows(T* data, R rows, C cols, S row_stride)
      : r_{const_cast<void*>(static_cast<const void*>(data)), dtype_of<T>::value, static_cast<int64_t>(rows),
           static_cast<int64_t>(cols), static_cast<int64_t>(row_stride)} {}
  explicit Rows(const onorm_rows& r) : r_(r) {}

  const onorm_rows* get() const noexcept { return &r_; }
  const onorm_rows& raw() const noexcept { return r_; }
  void* data() const noexcept { return r_.data; }
  onorm_dtype dtype() const noexcept { return r_.dtype; }
  int64_t rows() const noexcept { return r_.rows; }
  int64_t cols() const noexcept { return r_.cols; }
  int64_t row_stride() const noexcept { return r_.row_stride; }
  // Elements spanned from the first to one past the last (0 when empty).
  int64_t span() const noexcept { return r_.rows > 0 && r_.cols > 0 ? (r_.rows - 1) * r_.row_stride + r_.cols : 0; }

 private:
  onorm_rows r_;
};

// ---- norms with options (onorm_norm) -------------------------------------------------------

// The options of Context::norm, typed: the C struct's fields with their defaults (LayerNorm,
// eps 1e-5, nothing else). Row tensors are Rows views; an empty view (no data) is "not given".
struct NormArgs {
  onorm_norm_kind kind = ONORM_LAYER_NORM;
  const void* gamma = nullptr;           // cols elements of param_dtype, or NULL (1)
  const void* beta = nullptr;            // LayerNorm only, or NULL (0)
  onorm_dtype param_dtype = ONORM_F32;   // ignored when gamma and beta are NULL
  double eps = 1e-5;
  double weight_offset = 0;              // the scale is weight_offset + gamma_j
  Rows residual;                         // h = x + residual
  Rows residual_out;                     // receives h (needs residual)
  float* mean = nullptr;                 // LayerNorm only
  float* rstd = nullptr;
  float* y_scale = nullptr;              // quantized y, dynamic: rows floats
  double y_static_scale = 0;             // quantized y, static: > 0
  // The C struct; the row tensors it points at live in this object.
  onorm_norm_args c_args() const {
    onorm_norm_args a;
    onorm_norm_args_init(&a, kind);
    a.gamma = gamma;
    a.beta = beta;
    a.param_dtype = param_dtype;
    a.eps = eps;
    a.weight_offset = weight_offset;
    a.residual = residual.data() ? residual.get() : nullptr;
    a.residual_out = residual_out.data() ? residual_out.get() : nullptr;
    a.mean = mean;
    a.rstd = rstd;
    a.y_scale = y_scale;
    a.y_static_scale = y_static_scale;
    return a;
  }
};

// The arguments of Context::norm_backward (onorm_norm_backward), typed, with the C struct's
// defaults (LayerNorm, nothing set). An empty dresidual view is "not given".
struct NormBackwardArgs {
  onorm_norm_kind kind = ONORM_LAYER_NORM;
  const void* gamma = nullptr;           // cols elements of param_dtype, or NULL (1)
  onorm_dtype param_dtype = ONORM_F32;   // ignored when gamma is NULL
  double weight_offset = 0;              // the scale is weight_offset + gamma_j
  const float* mean = nullptr;           // LayerNorm: the forward's mean (required)
  const float* rstd = nullptr;           // the forward's rstd (required)
  Rows dresidual;                        // the gradient at residual_out, added to dx
  float* dgamma = nullptr;               // cols floats, overwritten
  float* dbeta = nullptr;                // LayerNorm only: cols floats, overwritten
  // The C struct; dresidual's view lives in this object.
  onorm_norm_backward_args c_args() const {
    onorm_norm_backward_args a;
    onorm_norm_backward_args_init(&a, kind);
    a.gamma = gamma;
    a.param_dtype = param_dtype;
    a.weight_offset = weight_offset;
    a.mean = mean;
    a.rstd = rstd;
    a.dresidual = dresidual.data() ? dresidual.get() : nullptr;
    a.dgamma = dgamma;
    a.dbeta = dbeta;
    return a;
  }
};

// The arguments of Context::cross_entropy (onorm_cross_entropy), typed, with the C struct's
// defaults (ignore_index -100, grad_scale 1, nothing else). An empty dlogits view is "not given".
struct CrossEntropyArgs {
  const int64_t* targets = nullptr;      // rows class indices (device memory on GPUs)
  int64_t ignore_index = -100;           // rows aiming here: loss 0, gradient 0
  double label_smoothing = 0;            // in [0, 1]
  double z_loss = 0;                     // >= 0: adds z_loss * lse^2
  float* loss = nullptr;                 // required: rows floats
  float* lse = nullptr;                  // optional: rows floats
  Rows dlogits;                          // optional gradient; may be the logits exactly
  double grad_scale = 1;                 // the gradient is of sum_r grad_scale * loss_r
  // The C struct; dlogits' view lives in this object.
  onorm_cross_entropy_args c_args() const {
    onorm_cross_entropy_args a;
    onorm_cross_entropy_args_init(&a);
    a.targets = targets;
    a.ignore_index = ignore_index;
    a.label_smoothing = label_smoothing;
    a.z_loss = z_loss;
    a.loss = loss;
    a.lse = lse;
    a.dlogits = dlogits.data() ? dlogits.get() : nullptr;
    a.grad_scale = grad_scale;
    return a;
  }
};

// The partial row states (onorm_softmax_state, onorm_moments_state), by their C names.
using SoftmaxState = onorm_softmax_state;
using MomentsState = onorm_moments_state;

// ---- backends -------------------------------------------------------------------------------

inline int device_count(onorm_backend backend) { return onorm_backend_device_count(backend); }
inline std::string unavailable_reason(onorm_backend backend) { return onorm_backend_unavailable_reason(backend); }

// The CPU SIMD targets this machine can run, best first.
inline std::vector<std::string> cpu_targets() {
  const int n = onorm_cpu_targets(nullptr, 0);
  std::vector<const char*> names(static_cast<std::size_t>(n > 0 ? n : 0));
  const int got = n > 0 ? onorm_cpu_targets(names.data(), n) : 0;
  std::vector<std::string> out;
  for (int i = 0; i < got && i < n; ++i) out.emplace_back(names[static_cast<std::size_t>(i)]);
  return out;
}

// ---- the context ----------------------------------------------------------------------------

// Owns an onorm_context. Move-only.
class Context {
 public:
  explicit Context(onorm_backend backend = ONORM_BACKEND_AUTO, int device = 0) {
    check(onorm_create(backend, device, &ctx_));
  }
  // Adopts a context made through the C ABI (takes ownership).
  static Context adopt(onorm_context ctx) { return Context(ctx); }

  Context(Context&& other) noexcept : ctx_(std::exchange(other.ctx_, nullptr)) {}
  Context& operator=(Context&& other) noexcept {
    if (this != &other) {
      onorm_destroy(ctx_);
      ctx_ = std::exchange(other.ctx_, nullptr);
    }
    return *this;
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context() { onorm_destroy(ctx_); }

  onorm_context get() const noexcept { return ctx_; }
  onorm_context release() noexcept { return std::exchange(ctx_, nullptr); }
  explicit operator bool() const noexcept { return ctx_ != nullptr; }

  std::string name() const { return onorm_backend_name(ctx_); }
  onorm_backend backend() const { return onorm_context_backend(ctx_); }

  void set_stream(void* stream) { check(onorm_set_stream(ctx_, stream)); }
  void synchronize() { check(onorm_synchronize(ctx_)); }

  // Memory where this context computes (device memory on CUDA/HIP).
  void* malloc(std::size_t bytes) {
    void* p = nullptr;
    check(onorm_malloc(ctx_, bytes, &p));
    return p;
  }
  void free(void* ptr) { check(onorm_free(ctx_, ptr)); }
  void copy(void* dst, const void* src, std::size_t bytes, onorm_copy_kind kind) {
    check(onorm_memcpy(ctx_, dst, src, bytes, kind));
  }
  void upload(void* device_dst, const void* host_src, std::size_t bytes) {
    copy(device_dst, host_src, bytes, ONORM_COPY_HOST_TO_DEVICE);
  }
  void download(void* host_dst, const void* device_src, std::size_t bytes) {
    copy(host_dst, device_src, bytes, ONORM_COPY_DEVICE_TO_HOST);
  }

  // ---- the operators (asynchronous on GPU backends: synchronize() before reading y) ----
  void softmax(const Rows& x, const Rows& y) { check(onorm_softmax(ctx_, x.get(), y.get())); }
  void log_softmax(const Rows& x, const Rows& y) { check(onorm_log_softmax(ctx_, x.get(), y.get())); }
  // gamma/beta: cols elements of x's dtype, or NULL (1 and 0). mean/rstd: rows floats or NULL.
  void layer_norm(const Rows& x, const Rows& y, const void* gamma = nullptr, const void* beta = nullptr,
                  double eps = 1e-5, float* mean = nullptr, float* rstd = nullptr) {
    check(onorm_layer_norm(ctx_, x.get(), gamma, beta, eps, y.get(), mean, rstd));
  }
  void rms_norm(const Rows& x, const Rows& y, const void* gamma = nullptr, double eps = 1e-6,
                float* rstd = nullptr) {
    check(onorm_rms_norm(ctx_, x.get(), gamma, eps, y.get(), rstd));
  }
  // LayerNorm or RMSNorm with options (residual add, weight offset, parameter dtype, quantized
  // y): onorm_norm.
  void norm(const Rows& x, const Rows& y, const NormArgs& args) {
    const onorm_norm_args a = args.c_args();
    check(onorm_norm(ctx_, x.get(), &a, y.get()));
  }
  // The norms' backward (onorm_norm_backward): dx, and the column sums dgamma / dbeta.
  void norm_backward(const Rows& x, const Rows& dy, const Rows& dx, const NormBackwardArgs& args) {
    const onorm_norm_backward_args a = args.c_args();
    check(onorm_norm_backward(ctx_, x.get(), dy.get(), &a, dx.get()));
  }
  // dx_j = y_j * (dy_j - sum_k y_k dy_k) from the forward output y; dx may be y or dy exactly.
  void softmax_backward(const Rows& y, const Rows& dy, const Rows& dx) {
    check(onorm_softmax_backward(ctx_, y.get(), dy.get(), dx.get()));
  }
  // dx_j = dy_j - exp(y_j) * sum_k dy_k from the forward output y (log-probabilities); dx may be
  // y or dy exactly.
  void log_softmax_backward(const Rows& y, const Rows& dy, const Rows& dx) {
    check(onorm_log_softmax_backward(ctx_, y.get(), dy.get(), dx.get()));
  }

  // Cross-entropy of each row of logits against its target: loss (and lse, dlogits) as args say.
  void cross_entropy(const Rows& logits, const CrossEntropyArgs& args) {
    const onorm_cross_entropy_args a = args.c_args();
    check(onorm_cross_entropy(ctx_, logits.get(), &a));
  }
  // Per row the k largest entries (ties: the lower column): their softmax probabilities (over
  // the whole row, or over the k alone with renormalize) into values (rows x k) and their
  // columns into indices (rows * k).
  void softmax_topk(const Rows& x, int64_t k, const Rows& values, int64_t* indices, bool renormalize = false) {
    check(onorm_softmax_topk(ctx_, x.get(), k, renormalize ? 1 : 0, values.get(), indices));
  }
  // Partial row states: one state per row of the slice x (cols == 0: the identity).
  void softmax_stats(const Rows& x, SoftmaxState* states) { check(onorm_softmax_stats(ctx_, x.get(), states)); }
  void moments_stats(const Rows& x, MomentsState* states) { check(onorm_moments_stats(ctx_, x.get(), states)); }
  // Merges parts x rows states (part p's state of row r at in[p * rows + r]) into rows states;
  // out may be in exactly.
  void softmax_merge(int64_t parts, int64_t rows, const SoftmaxState* in, SoftmaxState* out) {
    check(onorm_softmax_merge(ctx_, parts, rows, in, out));
  }
  void moments_merge(int64_t parts, int64_t rows, const MomentsState* in, MomentsState* out) {
    check(onorm_moments_merge(ctx_, parts, rows, in, out));
  }
  // The softmax (log: log-softmax) of the slice x with each row's merged state.
  void softmax_finish(const Rows& x, const SoftmaxState* states, const Rows& y, bool log = false) {
    check(onorm_softmax_finish(ctx_, x.get(), states, log ? 1 : 0, y.get()));
  }
  // The norm of args.kind of the slice x with each row's merged moments (gamma/beta: the slice's
  // own columns; no residual, no dynamic quantization).
  void norm_finish(const Rows& x, const MomentsState* states, const Rows& y, const NormArgs& args) {
    const onorm_norm_args a = args.c_args();
    check(onorm_norm_finish(ctx_, x.get(), states, &a, y.get()));
  }

 private:
  explicit Context(onorm_context ctx) : ctx_(ctx) {}
  onorm_context ctx_ = nullptr;
};

// ---- memory ---------------------------------------------------------------------------------

// count elements of T in a context's memory, freed on destruction. The context must outlive it.
template <typename T>
class Buffer {
 public:
  Buffer() = default;
  // Throws onorm::Error (INVALID_ARGUMENT) when count elements do not fit in size_t bytes: a
  // wrapped product would allocate a few bytes and let upload() write past them.
  Buffer(Context& ctx, std::size_t count)
      : ctx_(&ctx), count_(count), data_(static_cast<T*>(ctx.malloc(bytes_of(count)))) {}
  Buffer(Buffer&& o) noexcept
      : ctx_(std::exchange(o.ctx_, nullptr)), count_(std::exchange(o.count_, 0)), data_(std::exchange(o.data_, nullptr)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      ctx_ = std::exchange(o.ctx_, nullptr);
      count_ = std::exchange(o.count_, 0);
      data_ = std::exchange(o.data_, nullptr);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }
  std::size_t bytes() const noexcept { return count_ * sizeof(T); }

  // Host <-> this buffer; count defaults to the whole buffer and is checked against it.
  void upload(const T* host, std::size_t count) {
    check_count("Buffer::upload", count);
    if (count) ctx_->upload(data_, host, count * sizeof(T));
  }
  void upload(const std::vector<T>& host) { upload(host.data(), host.size()); }
  void download(T* host, std::size_t count) const {
    check_count("Buffer::download", count);
    if (count) ctx_->download(host, data_, count * sizeof(T));
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    download(host.data(), count_);
    return host;
  }

  // A row view over this buffer.
  Rows rows(int64_t rows, int64_t cols) const { return Rows(data_, rows, cols); }
  Rows rows(int64_t rows, int64_t cols, int64_t row_stride) const { return Rows(data_, rows, cols, row_stride); }

 private:
  static std::size_t bytes_of(std::size_t count) {
    if (count > std::numeric_limits<std::size_t>::max() / sizeof(T))
      throw Error(ONORM_ERROR_INVALID_ARGUMENT, "Buffer: " + std::to_string(count) + " elements of " +
                                                    std::to_string(sizeof(T)) + " bytes overflow size_t");
    return count * sizeof(T);
  }
  void check_count(const char* what, std::size_t count) const {
    if (count > count_)
      throw Error(ONORM_ERROR_INVALID_ARGUMENT, std::string(what) + ": " + std::to_string(count) +
                                                    " elements, the buffer holds " + std::to_string(count_));
  }
  void reset() noexcept {
    if (ctx_ && data_) onorm_free(ctx_->get(), data_);
    data_ = nullptr;
    count_ = 0;
  }
  Context* ctx_ = nullptr;
  std::size_t count_ = 0;
  T* data_ = nullptr;
};

}  // namespace onorm
