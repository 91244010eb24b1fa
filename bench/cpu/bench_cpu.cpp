// CPU benchmark of the row operators of the op list (core/ops/op_list.h) through the C ABI.
//
// Every case reads and writes 32 MB per row tensor of the op's signature (softmax: x read, y
// written; softmax backward: y, dy read, dx written), all of one dtype (f32, bf16; f16 for the
// row operators); the version-2 cases too: the norms' backward (x, dy read, dx written; gamma,
// dgamma, dbeta once) and the quantized norms (x read, one-byte codes and the row scales written).
// Each iteration times the operator and then a memcpy of the same bytes (split over the same
// number of OpenMP threads), interleaved, so that the ratio is taken under the same conditions
// on a noisy machine. Where CMake found oneDNN, its softmax, log-softmax and LayerNorm run on the
// same buffers as cases named "onednn:<op>/..." (onednn_peer.hpp). Counters:
//   GBps       effective bandwidth of the operator, (bytes of every row tensor) / time
//   memcpyGBps the same bytes through memcpy (read + write)
//   pct_memcpy GBps / memcpyGBps * 100
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "onlinenorm/core/convert.hpp"
#include "onlinenorm/core/ops/dispatch.hpp"
#include "onlinenorm/onlinenorm.h"
#if ONORM_BENCH_ONEDNN
#include "onednn_peer.hpp"
#endif

namespace {

constexpr size_t kBytesPerSide = size_t(32) << 20;  // per row tensor

onorm_context g_ctx = nullptr;

struct Buffers {
  void* x = nullptr;
  void* x2 = nullptr;  // the second input (softmax backward's dy)
  void* y = nullptr;
  void* gamma = nullptr;
  void* beta = nullptr;
  void* codes = nullptr;  // quantized y
  std::vector<float> mean, rstd, y_scale, dgamma, dbeta;
};
Buffers g_buf[3];  // [0]: f32, [1]: bf16, [2]: f16

int buf_index(onorm_dtype dt) { return dt == ONORM_F32 ? 0 : dt == ONORM_BF16 ? 1 : 2; }
const char* dt_name(onorm_dtype dt) { return dt == ONORM_F32 ? "f32" : dt == ONORM_BF16 ? "bf16" : "f16"; }
std::vector<float> g_scale_f32, g_shift_f32;  // gamma and beta in f32, as oneDNN takes them
void* g_copy_src = nullptr;  // the memcpy of the same bytes: up to two row tensors' worth
void* g_copy_dst = nullptr;

// A float as the 16-bit dtype of buffer k (1: bf16, 2: f16), rounded to nearest even.
uint16_t to_16(int k, float f) { return k == 1 ? onorm::core::f32_to_bf16(f) : onorm::core::f32_to_f16(f); }

void* aligned_buffer(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, 64, bytes) != 0) std::abort();
  return p;
}

void init_buffers() {
  std::mt19937 gen(1234);
  std::normal_distribution<float> normal(0.f, 2.f);
  for (int k = 0; k < 3; ++k) {
    Buffers& b = g_buf[k];
    b.x = aligned_buffer(kBytesPerSide);
    b.x2 = aligned_buffer(kBytesPerSide);
    b.y = aligned_buffer(kBytesPerSide);
    const size_t esz = k == 0 ? 4 : 2;
    const size_t n = kBytesPerSide / esz;
    // First touch from the threads that will use the memory.
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < static_cast<int64_t>(kBytesPerSide); i += 4096) {
      static_cast<char*>(b.x)[i] = 0;
      static_cast<char*>(b.x2)[i] = 0;
      static_cast<char*>(b.y)[i] = 0;
    }
    for (size_t i = 0; i < n; ++i) {
      const float v = normal(gen), v2 = normal(gen);
      if (k == 0) {
        static_cast<float*>(b.x)[i] = v;
        static_cast<float*>(b.x2)[i] = v2;
      } else {
        static_cast<uint16_t*>(b.x)[i] = to_16(k, v);
        static_cast<uint16_t*>(b.x2)[i] = to_16(k, v2);
      }
    }
    const size_t max_cols = size_t(1) << 20;
    b.gamma = aligned_buffer(max_cols * esz);
    b.beta = aligned_buffer(max_cols * esz);
    for (size_t i = 0; i < max_cols; ++i) {
      const float g = 1.0f + 0.001f * static_cast<float>(i % 97), be = 0.01f * static_cast<float>(i % 13);
      if (k == 0) {
        static_cast<float*>(b.gamma)[i] = g;
        static_cast<float*>(b.beta)[i] = be;
      } else {
        static_cast<uint16_t*>(b.gamma)[i] = to_16(k, g);
        static_cast<uint16_t*>(b.beta)[i] = to_16(k, be);
      }
    }
    b.mean.resize(kBytesPerSide / esz / 128 + 1);
    b.rstd.resize(kBytesPerSide / esz / 128 + 1);
    b.y_scale.resize(kBytesPerSide / esz / 128 + 1);
    b.dgamma.resize(max_cols);
    b.dbeta.resize(max_cols);
    b.codes = aligned_buffer(kBytesPerSide);
    std::memset(b.codes, 0, kBytesPerSide);
  }
  g_scale_f32.resize(size_t(1) << 20);
  g_shift_f32.resize(size_t(1) << 20);
  for (size_t i = 0; i < g_scale_f32.size(); ++i) {
    g_scale_f32[i] = 1.0f + 0.001f * static_cast<float>(i % 97);
    g_shift_f32[i] = 0.01f * static_cast<float>(i % 13);
  }
  g_copy_src = aligned_buffer(2 * kBytesPerSide);
  g_copy_dst = aligned_buffer(2 * kBytesPerSide);
  std::memset(g_copy_src, 1, 2 * kBytesPerSide);
  std::memset(g_copy_dst, 0, 2 * kBytesPerSide);
}

// The version-2 cases (not ops of the row-op list).
enum class V2 {
  kNone, kLayerNormBackward, kRmsNormBackward, kRmsNormFp8, kRmsNormI8, kLayerNormFp8, kLayerNormI8, kAddRmsNorm, kAddLayerNorm
};
const char* v2_name(V2 c) {
  switch (c) {
    case V2::kLayerNormBackward: return "layer_norm_backward";
    case V2::kRmsNormBackward: return "rms_norm_backward";
    case V2::kRmsNormFp8: return "rms_norm_fp8";
    case V2::kRmsNormI8: return "rms_norm_i8";
    case V2::kLayerNormFp8: return "layer_norm_fp8";
    case V2::kLayerNormI8: return "layer_norm_i8";
    case V2::kAddRmsNorm: return "add_rms_norm";
    case V2::kAddLayerNorm: return "add_layer_norm";
    default: return "";
  }
}
bool v2_backward(V2 c) { return c == V2::kLayerNormBackward || c == V2::kRmsNormBackward; }
bool v2_layer(V2 c) {
  return c == V2::kLayerNormBackward || c == V2::kLayerNormFp8 || c == V2::kLayerNormI8 || c == V2::kAddLayerNorm;
}
// The residual add fused: x and residual read, y and residual_out written, in x's dtype.
bool v2_residual(V2 c) { return c == V2::kAddRmsNorm || c == V2::kAddLayerNorm; }

// Bytes a version-2 case moves: every tensor read and written once, gamma (and beta) once.
double v2_bytes(V2 c, int64_t rows, int64_t cols, size_t esz) {
  const double n = static_cast<double>(rows * cols), r = static_cast<double>(rows), k = static_cast<double>(cols);
  const int params = v2_layer(c) ? 2 : 1;
  if (v2_backward(c)) return 3 * n * esz + k * esz + params * k * 4 + params * r * 4;
  if (v2_residual(c)) return 4 * n * esz + params * k * esz;
  return n * esz + n + k * esz * params + r * 4;
}

void run_v2(V2 c, const onorm_rows& x, const onorm_rows& x2, const onorm_rows& y, int64_t rows, onorm_dtype dt,
            Buffers& b) {
  const onorm_norm_kind kind = v2_layer(c) ? ONORM_LAYER_NORM : ONORM_RMS_NORM;
  onorm_status s = ONORM_OK;
  if (v2_backward(c)) {
    onorm_norm_backward_args a;
    onorm_norm_backward_args_init(&a, kind);
    a.gamma = b.gamma;
    a.param_dtype = dt;
    a.mean = v2_layer(c) ? b.mean.data() : nullptr;
    a.rstd = b.rstd.data();
    a.dgamma = b.dgamma.data();
    a.dbeta = v2_layer(c) ? b.dbeta.data() : nullptr;
    s = onorm_norm_backward(g_ctx, &x, &x2, &a, &y);
  } else if (v2_residual(c)) {
    const onorm_rows h{b.codes, dt, rows, x.cols, x.cols};  // codes: kBytesPerSide bytes
    onorm_norm_args a;
    onorm_norm_args_init(&a, kind);
    a.gamma = b.gamma;
    a.beta = v2_layer(c) ? b.beta : nullptr;
    a.param_dtype = dt;
    a.eps = 1e-5;
    a.residual = &x2;
    a.residual_out = &h;
    s = onorm_norm(g_ctx, &x, &a, &y);
  } else {
    const bool fp8 = c == V2::kRmsNormFp8 || c == V2::kLayerNormFp8;
    const onorm_rows q{b.codes, fp8 ? ONORM_F8_E4M3 : ONORM_I8, rows, x.cols, x.cols};
    onorm_norm_args a;
    onorm_norm_args_init(&a, kind);
    a.gamma = b.gamma;
    a.beta = v2_layer(c) ? b.beta : nullptr;
    a.param_dtype = dt;
    a.eps = 1e-5;
    a.y_scale = b.y_scale.data();
    s = onorm_norm(g_ctx, &x, &a, &q);
  }
  if (s != ONORM_OK) {
    std::fprintf(stderr, "%s failed: %s\n", v2_name(c), onorm_last_error());
    std::abort();
  }
}

void parallel_memcpy(void* dst, const void* src, size_t bytes, int threads) {
  if (threads <= 1) {
    std::memcpy(dst, src, bytes);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const size_t per = (bytes / nt + 63) & ~size_t(63);
    const size_t b = std::min(bytes, per * t), e = std::min(bytes, per * (t + 1));
    if (e > b) std::memcpy(static_cast<char*>(dst) + b, static_cast<const char*>(src) + b, e - b);
  }
}

// The C ABI call of each op of the list; false for an op this bench does not call yet.
bool run_op(onorm_op op, const onorm_rows& x, const onorm_rows& x2, const onorm_rows& y, Buffers& b) {
  onorm_status s = ONORM_OK;
  switch (op) {
    case ONORM_OP_SOFTMAX: s = onorm_softmax(g_ctx, &x, &y); break;
    case ONORM_OP_LOG_SOFTMAX: s = onorm_log_softmax(g_ctx, &x, &y); break;
    case ONORM_OP_LAYER_NORM: s = onorm_layer_norm(g_ctx, &x, b.gamma, b.beta, 1e-5, &y, b.mean.data(), b.rstd.data()); break;
    case ONORM_OP_RMS_NORM: s = onorm_rms_norm(g_ctx, &x, b.gamma, 1e-5, &y, b.rstd.data()); break;
    case ONORM_OP_SOFTMAX_BACKWARD: s = onorm_softmax_backward(g_ctx, &x, &x2, &y); break;
    case ONORM_OP_LOG_SOFTMAX_BACKWARD: s = onorm_log_softmax_backward(g_ctx, &x, &x2, &y); break;
    default: return false;
  }
  if (s != ONORM_OK) {
    std::fprintf(stderr, "%s failed: %s\n", onorm::core::ops::name(op), onorm_last_error());
    std::abort();
  }
  return true;
}

// onednn: time oneDNN's op instead of the library's (softmax, log-softmax, LayerNorm).
void bench_case(benchmark::State& state, onorm_op op, V2 v2, onorm_dtype dt, int64_t cols, int threads,
                bool onednn = false) {
  Buffers& b = g_buf[buf_index(dt)];
  const size_t esz = dt == ONORM_F32 ? 4 : 2;
  const int64_t rows = static_cast<int64_t>(kBytesPerSide / esz) / cols;
  const onorm_rows x{b.x, dt, rows, cols, cols};
  const onorm_rows x2{b.x2, dt, rows, cols, cols};
  const onorm_rows y{b.y, dt, rows, cols, cols};
  const onorm::core::ops::Signature& sig = onorm::core::ops::signature(op);
  const double bytes = v2 != V2::kNone ? v2_bytes(v2, rows, cols, esz)
                                       : (sig.inputs + sig.outputs) * static_cast<double>(rows * cols) * static_cast<double>(esz);
  omp_set_num_threads(threads);
  if (v2_backward(v2)) {  // the statistics of the N(0, 2) input
    std::fill(b.mean.begin(), b.mean.end(), 0.0f);
    std::fill(b.rstd.begin(), b.rstd.end(), 0.5f);
  }
#if ONORM_BENCH_ONEDNN
  std::unique_ptr<onorm_bench::OneDnnCase> peer;
  if (onednn) {
    const onorm_bench::PeerOp p = op == ONORM_OP_SOFTMAX       ? onorm_bench::PeerOp::kSoftmax
                                  : op == ONORM_OP_LOG_SOFTMAX ? onorm_bench::PeerOp::kLogSoftmax
                                                               : onorm_bench::PeerOp::kLayerNorm;
    omp_set_num_threads(threads);  // oneDNN's OpenMP runtime reads it as the primitive is made
    peer.reset(new onorm_bench::OneDnnCase(p, dt == ONORM_BF16, rows, cols, b.x, b.y, g_scale_f32.data(),
                                           g_shift_f32.data()));
    if (!peer->ok()) {
      state.SkipWithError(("oneDNN: " + peer->error()).c_str());
      return;
    }
    state.SetLabel(peer->impl());
  }
#else
  (void)onednn;
#endif
  auto call = [&] {
#if ONORM_BENCH_ONEDNN
    if (peer) {
      peer->run();
      return true;
    }
#endif
    if (v2 != V2::kNone) {
      run_v2(v2, x, x2, y, rows, dt, b);
      return true;
    }
    return run_op(op, x, x2, y, b);
  };
  if (!call()) {  // warm up
    state.SkipWithError("no C ABI call for this op in the bench");
    return;
  }
  using clock = std::chrono::steady_clock;
  double op_seconds = 0, copy_seconds = 0;
  for (auto _ : state) {
    const auto t0 = clock::now();
    call();
    const auto t1 = clock::now();
    parallel_memcpy(g_copy_dst, g_copy_src, static_cast<size_t>(bytes / 2), threads);
    const auto t2 = clock::now();
    const double s_op = std::chrono::duration<double>(t1 - t0).count();
    op_seconds += s_op;
    copy_seconds += std::chrono::duration<double>(t2 - t1).count();
    state.SetIterationTime(s_op);
  }
  const double it = static_cast<double>(state.iterations());
  const double gbps = bytes * it / op_seconds / 1e9, copy_gbps = bytes * it / copy_seconds / 1e9;
  state.counters["rows"] = static_cast<double>(rows);
  state.counters["GBps"] = gbps;
  state.counters["memcpyGBps"] = copy_gbps;
  state.counters["pct_memcpy"] = 100.0 * gbps / copy_gbps;
}

}  // namespace

int main(int argc, char** argv) {
  if (onorm_create(ONORM_BACKEND_CPU, 0, &g_ctx) != ONORM_OK) {
    std::fprintf(stderr, "onorm_create: %s\n", onorm_last_error());
    return 1;
  }
  const int all = omp_get_max_threads();
  init_buffers();
  benchmark::AddCustomContext("onlinenorm_backend", onorm_backend_name(g_ctx));
  const int64_t widths[] = {128, 1024, 4096, 16384, 131072, 1048576};
  std::vector<int> thread_counts{1};
  if (all > 1) thread_counts.push_back(all);
  for (int op = 0; op < ONORM_OP_COUNT; ++op)
    for (onorm_dtype dt : {ONORM_F32, ONORM_BF16, ONORM_F16})
      for (int64_t w : widths)
        for (int t : thread_counts) {
          const std::string name = std::string(onorm::core::ops::name(static_cast<onorm_op>(op))) + "/" + dt_name(dt) + "/" +
                                   std::to_string(w) + "/threads:" + std::to_string(t);
          benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
            bench_case(s, static_cast<onorm_op>(op), V2::kNone, dt, w, t);
          })->UseManualTime()->Unit(benchmark::kMillisecond);
        }
#if ONORM_BENCH_ONEDNN
  for (onorm_op op : {ONORM_OP_SOFTMAX, ONORM_OP_LOG_SOFTMAX, ONORM_OP_LAYER_NORM})
    for (onorm_dtype dt : {ONORM_F32, ONORM_BF16})
      for (int64_t w : widths)
        for (int t : thread_counts) {
          const std::string name = std::string("onednn:") + onorm::core::ops::name(op) + "/" +
                                   dt_name(dt) + "/" + std::to_string(w) +
                                   "/threads:" + std::to_string(t);
          benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
            bench_case(s, op, V2::kNone, dt, w, t, true);
          })->UseManualTime()->Unit(benchmark::kMillisecond);
        }
#endif
  for (V2 c : {V2::kLayerNormBackward, V2::kRmsNormBackward, V2::kRmsNormFp8, V2::kRmsNormI8, V2::kLayerNormFp8,
               V2::kLayerNormI8, V2::kAddRmsNorm, V2::kAddLayerNorm})
    for (onorm_dtype dt : {ONORM_F32, ONORM_BF16})
      for (int64_t w : widths)
        for (int t : thread_counts) {
          const std::string name = std::string(v2_name(c)) + "/" + dt_name(dt) + "/" +
                                   std::to_string(w) + "/threads:" + std::to_string(t);
          benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
            bench_case(s, ONORM_OP_SOFTMAX, c, dt, w, t);
          })->UseManualTime()->Unit(benchmark::kMillisecond);
        }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  onorm_destroy(g_ctx);
  return 0;
}
