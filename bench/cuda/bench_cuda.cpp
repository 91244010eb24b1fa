// CUDA benchmark and smoke check, through the library's C ABI (the same module users load).
//
//   onorm_bench_cuda [--csv FILE] [--quick] [--back-to-back] [--widths a,b,..] [--ops a,b,..]
//        time every op (or those named, as the table names them) in f32 and bf16
//        over the widths, each case moving >= 256 MB, against a device-to-device copy of the same
//        bytes measured in the same run (the faster of cudaMemcpyAsync and a kernel of 16-byte
//        vectors: copy_tbps; both in the CSV); CUDA events around each call, median of many runs, buffer
//        sets rotated. --back-to-back: events around 20 calls queued at once (no host latency in
//        the time), and each case's host time per call on stderr ("host_us").
//   onorm_bench_cuda --check [--big]          compare against the float64 reference (reference/)
//        over dtypes, widths, strides, in-place, special values; bitwise determinism.
//   onorm_bench_cuda --check --hard [--big]   the hard norm data alone (offsets, outliers at
//        chunk boundaries, tiny rows with eps 0, +-3e38, eps 1e39), e.g. under another routing
//        (ONLINENORM_TUNE=cluster=0,tworead=1: scripts/gpu.sh check).
// Exit code: 0 ok, 1 failure, 77 no CUDA device (CTest's skip code).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "onlinenorm/onlinenorm.h"
#include "hard_rows.hpp"
#include "reference.hpp"
#include "vector_copy.hpp"

namespace {

#define CK(expr)                                                                                  \
  do {                                                                                            \
    cudaError_t e_ = (expr);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)
#define OK(expr)                                                                                   \
  do {                                                                                             \
    onorm_status s_ = (expr);                                                                      \
    if (s_ != ONORM_OK) {                                                                          \
      std::fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #expr, onorm_status_string(s_), \
                   onorm_last_error());                                                            \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

using onorm_ref::Op;
const Op kOps[] = {Op::softmax, Op::log_softmax, Op::layer_norm, Op::rms_norm};
const Op kBackwardOps[] = {Op::softmax_backward, Op::log_softmax_backward};

onorm_status run_op(onorm_context ctx, Op op, const onorm_rows& x, const onorm_rows& y, const void* g,
                    const void* b, float* mean, float* rstd, double eps = 1e-5) {
  switch (op) {
    case Op::softmax: return onorm_softmax(ctx, &x, &y);
    case Op::log_softmax: return onorm_log_softmax(ctx, &x, &y);
    case Op::layer_norm: return onorm_layer_norm(ctx, &x, g, b, eps, &y, mean, rstd);
    default: return onorm_rms_norm(ctx, &x, g, eps, &y, rstd);
  }
}

onorm_status run_backward_op(onorm_context ctx, Op op, const onorm_rows& y, const onorm_rows& dy, const onorm_rows& dx) {
  return op == Op::softmax_backward ? onorm_softmax_backward(ctx, &y, &dy, &dx)
                                    : onorm_log_softmax_backward(ctx, &y, &dy, &dx);
}

const char* dtype_name(onorm_dtype d) {
  return d == ONORM_F32 ? "f32" : d == ONORM_F16 ? "f16" : d == ONORM_BF16 ? "bf16" : "?";
}

// ------------------------------------------------------------------------------ benchmark
// Whether `name` is in the comma-separated list (every name when there is no list).
bool listed(const char* list, const char* name) {
  if (!list) return true;
  const size_t n = std::strlen(name);
  for (const char* p = list; *p;) {
    const char* e = std::strchr(p, ',');
    const size_t len = e ? size_t(e - p) : std::strlen(p);
    if (len == n && !std::strncmp(p, name, n)) return true;
    if (!e) break;
    p = e + 1;
  }
  return false;
}

int bench(onorm_context ctx, const char* csv_path, bool quick, bool back_to_back, const char* width_list,
          const char* op_list) {
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::vector<int64_t> widths = {64, 128, 512, 1024, 4096, 8192, 16384, 32768, 131072, 262144, 1048576};
  if (width_list) {
    widths.clear();
    for (const char* p = width_list; *p;) {
      widths.push_back(std::atoll(p));
      while (*p && *p != ',') ++p;
      if (*p == ',') ++p;
    }
  }
  const size_t kTarget = size_t(256) << 20;  // bytes moved (x read + y written) per call
  const int kSets = 2, kIters = quick ? 5 : 20;
  FILE* csv = csv_path ? std::fopen(csv_path, "w") : nullptr;
  if (csv) std::fprintf(csv, "device,op,dtype,cols,rows,ms,tbps,copy_tbps,pct_copy,memcpy_tbps,vector_copy_tbps\n");
  std::printf("%-12s %-5s %8s %8s %9s %7s %7s %6s\n", "op", "dtype", "cols", "rows", "ms", "TB/s", "copy", "%copy");
  for (onorm_dtype dt : {ONORM_F32, ONORM_BF16}) {
    const size_t es = onorm_dtype_size(dt);
    const size_t max_bytes = kTarget / 2 + size_t(1048576) * es;
    std::vector<void*> xs(kSets), ys(kSets);
    std::vector<unsigned char> host(max_bytes);
    std::mt19937 rng(42);
    std::uniform_real_distribution<double> u(-4, 4);
    for (size_t i = 0; i < max_bytes / es; ++i) onorm_ref::encode(u(rng), host.data(), dt, int64_t(i));
    for (int s = 0; s < kSets; ++s) {
      CK(cudaMalloc(&xs[s], max_bytes));
      CK(cudaMalloc(&ys[s], max_bytes));
      CK(cudaMemcpy(xs[s], host.data(), max_bytes, cudaMemcpyHostToDevice));
    }
    void *g = nullptr, *b = nullptr;
    CK(cudaMalloc(&g, size_t(1048576) * es));
    CK(cudaMalloc(&b, size_t(1048576) * es));
    CK(cudaMemcpy(g, host.data(), size_t(1048576) * es, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, host.data() + 4096, size_t(1048576) * es, cudaMemcpyHostToDevice));
    // gamma in f32 beside x's dtype (param_dtype other than x's: rms_norm_f32w).
    std::vector<float> host_gf(1048576);
    for (size_t i = 0; i < host_gf.size(); ++i) host_gf[i] = float(u(rng));
    void* gf = nullptr;
    CK(cudaMalloc(&gf, host_gf.size() * sizeof(float)));
    CK(cudaMemcpy(gf, host_gf.data(), host_gf.size() * sizeof(float), cudaMemcpyHostToDevice));
    float *mean = nullptr, *rstd = nullptr, *col_sums = nullptr;
    CK(cudaMalloc(&mean, sizeof(float) << 22));
    CK(cudaMalloc(&rstd, sizeof(float) << 22));
    CK(cudaMalloc(&col_sums, sizeof(float) << 21));
    CK(cudaMemset(mean, 0, sizeof(float) << 22));
    CK(cudaMemset(rstd, 0, sizeof(float) << 22));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int64_t cols : widths) {
      const int64_t rows = std::max<int64_t>(1, int64_t((kTarget / 2 + cols * es - 1) / (cols * es)));
      const size_t bytes = size_t(rows * cols) * es;
      auto time_it = [&](auto&& body) {
        for (int i = 0; i < 3; ++i) body(i % kSets);
        if (back_to_back) {  // kIters calls between two events (steady state), 5 times
          std::vector<float> ms;
          for (int k = 0; k < 5; ++k) {
            CK(cudaDeviceSynchronize());
            CK(cudaEventRecord(e0, 0));
            for (int i = 0; i < kIters; ++i) body(i % kSets);
            CK(cudaEventRecord(e1, 0));
            CK(cudaEventSynchronize(e1));
            float t = 0;
            CK(cudaEventElapsedTime(&t, e0, e1));
            ms.push_back(t / kIters);
          }
          std::sort(ms.begin(), ms.end());
          CK(cudaDeviceSynchronize());
          double host = 1e30;  // host enqueue time per call (GPU idle at the start)
          for (int k = 0; k < 5; ++k) {
            auto t0 = std::chrono::steady_clock::now();
            body(k % kSets);
            auto t1 = std::chrono::steady_clock::now();
            host = std::min(host, std::chrono::duration<double, std::micro>(t1 - t0).count());
            CK(cudaDeviceSynchronize());
          }
          std::fprintf(stderr, "host_us %.2f\n", host);
          return double(ms[ms.size() / 2]);
        }
        std::vector<float> ms;
        for (int i = 0; i < kIters; ++i) {
          CK(cudaEventRecord(e0, 0));
          body(i % kSets);
          CK(cudaEventRecord(e1, 0));
          CK(cudaEventSynchronize(e1));
          float t = 0;
          CK(cudaEventElapsedTime(&t, e0, e1));
          ms.push_back(t);
        }
        std::sort(ms.begin(), ms.end());
        return double(ms[ms.size() / 2]);
      };
      const double memcpy_ms = time_it([&](int s) { CK(cudaMemcpyAsync(ys[s], xs[s], bytes, cudaMemcpyDeviceToDevice, 0)); });
      const double kernel_ms = time_it([&](int s) { CK(vector_copy(ys[s], xs[s], bytes, 0)); });
      const double memcpy_tbps = 2.0 * bytes / (memcpy_ms * 1e-3) / 1e12, vector_tbps = 2.0 * bytes / (kernel_ms * 1e-3) / 1e12;
      const double copy_tbps = std::max(memcpy_tbps, vector_tbps);
      // One line of the table (and the CSV) for op taking ms to move `moved` bytes.
      auto report = [&](const char* op, double ms, double moved) {
        const double tbps = moved / (ms * 1e-3) / 1e12;
        std::printf("%-12s %-5s %8lld %8lld %9.4f %7.3f %7.3f %5.1f%%\n", op, dtype_name(dt),
                    (long long)cols, (long long)rows, ms, tbps, copy_tbps, 100.0 * tbps / copy_tbps);
        if (csv)
          std::fprintf(csv, "%s,%s,%s,%lld,%lld,%.5f,%.4f,%.4f,%.2f,%.4f,%.4f\n", prop.name, op,
                       dtype_name(dt), (long long)cols, (long long)rows, ms, tbps, copy_tbps, 100.0 * tbps / copy_tbps,
                       memcpy_tbps, vector_tbps);
      };
      for (Op op : kOps) {
        if (!listed(op_list, onorm_ref::op_name(op))) continue;
        const double ms = time_it([&](int s) {
          onorm_rows x{xs[s], dt, rows, cols, cols};
          onorm_rows y{ys[s], dt, rows, cols, cols};
          OK(run_op(ctx, op, x, y, g, b, rows <= (1 << 22) ? mean : nullptr, rows <= (1 << 22) ? rstd : nullptr));
        });
        report(onorm_ref::op_name(op), ms, 2.0 * bytes);
      }
      for (Op op : kBackwardOps) {  // reads y and dy, writes dx (1.5x the bytes of a forward op)
        if (!listed(op_list, onorm_ref::op_name(op))) continue;
        const double ms = time_it([&](int s) {
          onorm_rows y{xs[s], dt, rows, cols, cols}, dy{xs[s ^ 1], dt, rows, cols, cols}, dx{ys[s], dt, rows, cols, cols};
          OK(run_backward_op(ctx, op, y, dy, dx));
        });
        report(onorm_ref::op_name(op), ms, 3.0 * bytes);
      }
      // RMSNorm and LayerNorm (beta given) with the residual add: read x and the residual, write
      // h (residual_out) and y (4x the bytes of x); RMSNorm to E4M3 with a dynamic per-row scale:
      // reads x, writes a byte per element.
      const bool stats_fit = rows <= (1 << 22);
      for (bool layer : {false, true}) {
        if (!listed(op_list, layer ? "add_layer_norm" : "add_rms_norm")) continue;
        const double ms = time_it([&](int s) {
          onorm_rows x{xs[s], dt, rows, cols, cols}, r{xs[s ^ 1], dt, rows, cols, cols}, h{ys[s ^ 1], dt, rows, cols, cols},
              y{ys[s], dt, rows, cols, cols};
          onorm_norm_args a;
          onorm_norm_args_init(&a, layer ? ONORM_LAYER_NORM : ONORM_RMS_NORM);
          a.gamma = g;
          a.beta = layer ? b : nullptr;
          a.param_dtype = dt;
          a.eps = 1e-5;
          a.residual = &r;
          a.residual_out = &h;
          a.mean = layer && stats_fit ? mean : nullptr;
          a.rstd = stats_fit ? rstd : nullptr;
          OK(onorm_norm(ctx, &x, &a, &y));
        });
        report(layer ? "add_layer_norm" : "add_rms_norm", ms, 4.0 * bytes);
      }
      if (stats_fit && listed(op_list, "rms_norm_fp8")) {
        const double ms = time_it([&](int s) {
          onorm_rows x{xs[s], dt, rows, cols, cols}, y{ys[s], ONORM_F8_E4M3, rows, cols, cols};
          onorm_norm_args a;
          onorm_norm_args_init(&a, ONORM_RMS_NORM);
          a.gamma = g;
          a.param_dtype = dt;
          a.eps = 1e-5;
          a.y_scale = mean;
          OK(onorm_norm(ctx, &x, &a, &y));
        });
        report("rms_norm_fp8", ms, double(bytes) + double(rows * cols));
      }
      // RMSNorm with Gemma's weight offset (y = x * rstd * (1 + gamma)) and with gamma in f32
      // beside 16-bit x: columns other than x's dtype (reads x, writes y).
      for (bool gemma : {true, false}) {
        if (!listed(op_list, gemma ? "rms_norm_gemma" : "rms_norm_f32w") || (!gemma && dt == ONORM_F32)) continue;
        const double ms = time_it([&](int s) {
          onorm_rows x{xs[s], dt, rows, cols, cols}, y{ys[s], dt, rows, cols, cols};
          onorm_norm_args a;
          onorm_norm_args_init(&a, ONORM_RMS_NORM);
          a.gamma = gemma ? g : gf;
          a.param_dtype = gemma ? dt : ONORM_F32;
          a.weight_offset = gemma ? 1.0 : 0.0;
          a.eps = 1e-5;
          a.rstd = stats_fit ? rstd : nullptr;
          OK(onorm_norm(ctx, &x, &a, &y));
        });
        report(gemma ? "rms_norm_gemma" : "rms_norm_f32w", ms, 2.0 * bytes);
      }
      // The norms' backward: reads x and dy, writes dx (3x the bytes of x), and the column sums
      // dgamma (and dbeta) of every row.
      for (bool layer : {true, false}) {
        if (!listed(op_list, layer ? "layer_norm_backward" : "rms_norm_backward")) continue;
        const double ms = time_it([&](int s) {
          onorm_rows x{xs[s], dt, rows, cols, cols}, dy{xs[s ^ 1], dt, rows, cols, cols}, dx{ys[s], dt, rows, cols, cols};
          onorm_norm_backward_args a;
          onorm_norm_backward_args_init(&a, layer ? ONORM_LAYER_NORM : ONORM_RMS_NORM);
          a.gamma = g;
          a.param_dtype = dt;
          a.mean = layer ? mean : nullptr;
          a.rstd = rstd;
          a.dgamma = col_sums;
          a.dbeta = layer ? col_sums + 1048576 : nullptr;
          OK(onorm_norm_backward(ctx, &x, &dy, &a, &dx));
        });
        report(layer ? "layer_norm_backward" : "rms_norm_backward", ms, 3.0 * bytes);
      }
      std::fflush(stdout);
    }
    for (int s = 0; s < kSets; ++s) {
      CK(cudaFree(xs[s]));
      CK(cudaFree(ys[s]));
    }
    CK(cudaFree(g));
    CK(cudaFree(b));
    CK(cudaFree(gf));
    CK(cudaFree(mean));
    CK(cudaFree(rstd));
    CK(cudaFree(col_sums));
  }
  if (csv) std::fclose(csv);
  return 0;
}

// ------------------------------------------------------------------------------ check
struct Case {
  Op op;
  onorm_dtype in, out;
  int64_t rows, cols, xstride, ystride;
  bool in_place;
  int special;  // 0 random, 1 masked rows/NaN/inf, 2 large values, 3 offset (1e4 + noise),
                // 4..6 hard norm data (onorm_ref::hard_value, set special - 4)
  bool gamma;
};

int failures = 0;

// Hard norm data (the same sets as tests/hip/wave_rows_test.cpp), by row r % 8:
//  special 4 (eps 1e-5): 300 outliers at column 0, at every multiple of 512 and the column
//    before it (every slice / chunk boundary of the widths checked: cluster slices, staged
//    chunks, two-read chunks) and the last column; 1e3, 1e5, 1e6 + N(0,1); the constant row
//    1e6 + 0.125 (rstd exactly 1/sqrt(eps)); {3e38, -3e38, -3e38, -3e38} repeated (double
//    statistics, a finish that must not form x - mean in float); 1e6 + N(0,1) with outliers;
//  special 5 (eps 0): 1e-30 * N(0,1) rows (squares underflow float) between ordinary rows;
//  special 6 (eps 1e39, beyond FLT_MAX): 1e6 + N(0,1) and ordinary rows.
void run_case(onorm_context ctx, const Case& c, std::mt19937& rng) {
  const size_t ies = onorm_dtype_size(c.in), oes = onorm_dtype_size(c.out);
  const int64_t xs = c.in_place ? std::max(c.xstride, c.ystride) : c.xstride;
  const int64_t ys = c.in_place ? xs : c.ystride;
  std::vector<unsigned char> hx(size_t(c.rows * xs) * ies);
  std::uniform_real_distribution<double> u(-3, 3);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t j = 0; j < xs; ++j) {
      double v = u(rng);
      if (c.special == 2) v = (c.in == ONORM_F32 ? 3.0e38 : c.in == ONORM_F16 ? 6.0e4 : 3.0e38) * (0.5 + v / 12);
      if (c.special == 3) v = 1e4 + v;
      if (c.special >= 4) v = onorm_ref::hard_value(c.special - 4, r, j, c.cols, rng);
      if (c.special == 1) {
        const int kind = int(r % 5);
        if (kind == 1) v = -INFINITY;                               // masked row
        if (kind == 2 && j == c.cols / 2) v = NAN;                  // NaN row
        if (kind == 3 && j == c.cols - 1) v = INFINITY;             // +inf row
        if (kind == 4 && j % 3 == 0) v = -INFINITY;                 // partly masked
      }
      onorm_ref::encode(v, hx.data(), c.in, r * xs + j);
    }
  std::vector<unsigned char> hg(size_t(c.cols) * ies), hb(size_t(c.cols) * ies);
  for (int64_t j = 0; j < c.cols; ++j) {
    onorm_ref::encode(0.5 + u(rng) / 3, hg.data(), c.in, j);
    onorm_ref::encode(u(rng), hb.data(), c.in, j);
  }
  void *dx, *dy, *dg, *db;
  float *dm, *dr;
  OK(onorm_malloc(ctx, hx.size() + 16, &dx));
  OK(onorm_malloc(ctx, size_t(c.rows * ys) * oes + 16, &dy));
  OK(onorm_malloc(ctx, hg.size() + 16, &dg));
  OK(onorm_malloc(ctx, hb.size() + 16, &db));
  OK(onorm_malloc(ctx, size_t(c.rows) * 4, reinterpret_cast<void**>(&dm)));
  OK(onorm_malloc(ctx, size_t(c.rows) * 4, reinterpret_cast<void**>(&dr)));
  OK(onorm_memcpy(ctx, dx, hx.data(), hx.size(), ONORM_COPY_HOST_TO_DEVICE));
  OK(onorm_memcpy(ctx, dg, hg.data(), hg.size(), ONORM_COPY_HOST_TO_DEVICE));
  OK(onorm_memcpy(ctx, db, hb.data(), hb.size(), ONORM_COPY_HOST_TO_DEVICE));
  onorm_rows x{dx, c.in, c.rows, c.cols, xs};
  onorm_rows y{c.in_place ? dx : dy, c.out, c.rows, c.cols, ys};
  onorm_rows hxr{hx.data(), c.in, c.rows, c.cols, xs};
  const void* g = c.gamma ? dg : nullptr;
  const void* b = c.gamma ? db : nullptr;
  const double eps = c.special >= 4 ? onorm_ref::hard_eps(c.special - 4) : 1e-5;
  const onorm_ref::Result ref =
      onorm_ref::compute(c.op, hxr, c.gamma ? hg.data() : nullptr, c.gamma ? hb.data() : nullptr, eps);
  std::vector<unsigned char> out1(size_t(c.rows * ys) * oes), out2(out1.size());
  std::vector<float> m(c.rows), r(c.rows);
  for (int rep = 0; rep < 2; ++rep) {
    if (c.in_place && rep == 1) OK(onorm_memcpy(ctx, dx, hx.data(), hx.size(), ONORM_COPY_HOST_TO_DEVICE));
    OK(run_op(ctx, c.op, x, y, g, b, dm, dr, eps));
    OK(onorm_synchronize(ctx));
    OK(onorm_memcpy(ctx, rep ? out2.data() : out1.data(), y.data, out1.size(), ONORM_COPY_DEVICE_TO_HOST));
  }
  OK(onorm_memcpy(ctx, m.data(), dm, m.size() * 4, ONORM_COPY_DEVICE_TO_HOST));
  OK(onorm_memcpy(ctx, r.data(), dr, r.size() * 4, ONORM_COPY_DEVICE_TO_HOST));
  onorm_rows hy{out1.data(), c.out, c.rows, c.cols, ys};
  const bool norm = c.op == Op::layer_norm || c.op == Op::rms_norm;
  const onorm_ref::Report rep = onorm_ref::check(c.op, ref, hy, c.gamma ? hg.data() : nullptr, c.in,
                                                 c.op == Op::layer_norm ? m.data() : nullptr, norm ? r.data() : nullptr);
  bool same = true;
  for (int64_t rr = 0; rr < c.rows && same; ++rr)
    same = std::memcmp(out1.data() + rr * ys * oes, out2.data() + rr * ys * oes, c.cols * oes) == 0;
  // Hard data: every input is finite, so is every output; and API.md's own bounds on the
  // statistics (mean within 1e-6 (|mean| + 1/rstd), rstd within 1e-5 relative).
  std::string hard;
  for (int64_t rr = 0; c.special >= 4 && rr < c.rows && hard.empty(); ++rr) {
    char b[200];
    const double rs = ref.rstd[rr];
    if (!(std::fabs(r[rr] - rs) <= 1e-5 * rs)) std::snprintf(b, sizeof b, " [row %lld rstd %.9g want %.9g]", (long long)rr, r[rr], rs), hard = b;
    if (c.op == Op::layer_norm && !(std::fabs(m[rr] - ref.mean[rr]) <= 1e-6 * (std::fabs(ref.mean[rr]) + 1.0 / rs)))
      std::snprintf(b, sizeof b, " [row %lld mean %.9g want %.9g]", (long long)rr, m[rr], ref.mean[rr]), hard = b;
    for (int64_t j = 0; j < c.cols && hard.empty(); ++j)
      if (!std::isfinite(onorm_ref::decode(out1.data(), c.out, rr * ys + j)))
        std::snprintf(b, sizeof b, " [y[%lld][%lld] not finite]", (long long)rr, (long long)j), hard = b;
  }
  if (!rep.ok() || !same || !hard.empty()) {
    ++failures;
    std::printf("FAIL %s %s->%s rows=%lld cols=%lld xs=%lld ys=%lld inplace=%d special=%d gamma=%d: %s%s%s\n",
                onorm_ref::op_name(c.op), dtype_name(c.in), dtype_name(c.out), (long long)c.rows, (long long)c.cols,
                (long long)xs, (long long)ys, c.in_place, c.special, c.gamma, rep.describe().c_str(),
                same ? "" : " [NOT DETERMINISTIC]", hard.c_str());
  }
  for (void* p : {dx, dy, dg, db, static_cast<void*>(dm), static_cast<void*>(dr)}) OK(onorm_free(ctx, p));
}

// The backward passes (softmax: y probabilities; log-softmax: their logarithms), y / dy / dx of
// independent dtypes, checked against the float64 reference with API.md's bound (onorm_ref);
// a NaN in dy makes its row NaN; bitwise the same on a second call; dx may alias dy.
void run_backward(onorm_context ctx, Op op, onorm_dtype ydt, onorm_dtype dydt, onorm_dtype dxdt, int64_t rows,
                  int64_t cols, bool in_place, std::mt19937& rng) {
  if (in_place) dxdt = dydt;
  const int64_t ys = cols + 3, dys = cols + 8;
  const int64_t dxs = in_place ? dys : cols;
  std::vector<unsigned char> hy(size_t(rows * ys) * onorm_dtype_size(ydt)), hdy(size_t(rows * dys) * onorm_dtype_size(dydt));
  std::normal_distribution<double> n01(0.0, 1.0);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> e(cols);
    double sum = 0;
    for (auto& v : e) sum += (v = std::exp(2.0 * n01(rng)));
    for (int64_t k = 0; k < cols; ++k) {
      const double p = e[k] / sum;
      onorm_ref::encode(op == Op::log_softmax_backward ? std::log(p) : p, hy.data(), ydt, r * ys + k);
      onorm_ref::encode(r == 1 && k == cols / 2 ? NAN : n01(rng), hdy.data(), dydt, r * dys + k);
    }
  }
  void *dy_d, *y_d, *dx_d;
  const size_t dx_bytes = size_t(rows * dxs) * onorm_dtype_size(dxdt);
  OK(onorm_malloc(ctx, hy.size() + 16, &y_d));
  OK(onorm_malloc(ctx, hdy.size() + 16, &dy_d));
  OK(onorm_malloc(ctx, dx_bytes + 16, &dx_d));
  OK(onorm_memcpy(ctx, y_d, hy.data(), hy.size(), ONORM_COPY_HOST_TO_DEVICE));
  onorm_rows y{y_d, ydt, rows, cols, ys}, dy{dy_d, dydt, rows, cols, dys}, dx{in_place ? dy_d : dx_d, dxdt, rows, cols, dxs};
  std::vector<unsigned char> out1(dx_bytes), out2(dx_bytes);
  for (int rep = 0; rep < 2; ++rep) {
    OK(onorm_memcpy(ctx, dy_d, hdy.data(), hdy.size(), ONORM_COPY_HOST_TO_DEVICE));
    OK(run_backward_op(ctx, op, y, dy, dx));
    OK(onorm_synchronize(ctx));
    OK(onorm_memcpy(ctx, rep ? out2.data() : out1.data(), dx.data, dx_bytes, ONORM_COPY_DEVICE_TO_HOST));
  }
  const onorm_rows in[2] = {{hy.data(), ydt, rows, cols, ys}, {hdy.data(), dydt, rows, cols, dys}};
  const onorm_ref::Result ref = onorm_ref::compute(op, in, 2, nullptr, nullptr, 0.0);
  const onorm_ref::Report rep = onorm_ref::check(op, ref, {out1.data(), dxdt, rows, cols, dxs}, nullptr, ydt, nullptr, nullptr);
  std::string why = rep.ok() ? "" : rep.describe();
  if (why.empty() && rows > 1 && !std::isnan(onorm_ref::decode(out1.data(), dxdt, dxs)))
    why = "the row holding a NaN dy is not NaN";
  if (why.empty() && std::memcmp(out1.data(), out2.data(), dx_bytes) != 0) why = "NOT DETERMINISTIC";
  if (!why.empty()) {
    ++failures;
    std::printf("FAIL %s y %s dy %s dx %s rows=%lld cols=%lld inplace=%d: %s\n", onorm_ref::op_name(op), dtype_name(ydt),
                dtype_name(dydt), dtype_name(dxdt), (long long)rows, (long long)cols, in_place, why.c_str());
  }
  for (void* p : {y_d, dy_d, dx_d}) OK(onorm_free(ctx, p));
}

int check(onorm_context ctx, bool big, bool small, bool hard_only) {
  std::mt19937 rng(7);
  int cases = 0;
  // 61440 / 262143: clusters of 15 and 16 blocks (gpu/row_plan.hpp); 131077: 9 blocks of the largest slice.
  std::vector<int64_t> widths = {1, 3, 31, 64, 100, 127, 512, 1000, 1025, 2048, 4097, 9000, 16384, 16385, 40000,
                                 61440, 131077, 262143};
  std::vector<onorm_dtype> dtypes = {ONORM_F32, ONORM_F16, ONORM_BF16};
  std::vector<int64_t> special_widths = {5, 64, 1000, 5000, 40000};
  if (small) {  // under compute-sanitizer: every kernel family once, few elements (131077: 9 slices, streamed)
    widths = {3, 100, 1025, 4097, 40000, 131077};
    dtypes = {ONORM_F32, ONORM_BF16};
    special_widths = {5, 40000};
  }
  if (hard_only) widths.clear(), special_widths.clear();
  for (Op op : kOps)
    for (onorm_dtype in : dtypes)
      for (int64_t cols : widths) {
        const int64_t rows = cols > 10000 ? 5 : cols > 1000 ? 9 : 37;
        const onorm_dtype out = cols % 2 ? (in == ONORM_F32 ? ONORM_BF16 : ONORM_F32) : in;
        run_case(ctx, {op, in, out, rows, cols, cols, cols, false, 0, true}, rng);
        run_case(ctx, {op, in, in == ONORM_F32 ? ONORM_F16 : in, rows, cols, cols + 3, cols + 1, false, 0, cols % 3 == 0}, rng);
        run_case(ctx, {op, in, in, rows, cols, cols + 8, cols + 8, true, 0, true}, rng);
        cases += 3;
      }
  for (Op op : kOps)
    for (int64_t cols : special_widths)
      for (int special : {1, 2, 3}) {
        // special 2 (values near FLT_MAX): the norms' float sums overflow and take the double path.
        run_case(ctx, {op, ONORM_F32, ONORM_F32, 10, cols, cols, cols, false, special, false}, rng);
        run_case(ctx, {op, ONORM_BF16, ONORM_F32, 10, cols, cols, cols, false, special, false}, rng);
        cases += 2;
      }
  // Hard norm data (special 4..6) through every CUDA schedule, out of place and in place (the
  // double path reads a row again before any block writes it): register rows (row groups and
  // a block per row), cluster rows (f32 16384-262144: 2 to 16 slices; bf16 16384+), the staged
  // kernel (bf16 10000: a block per row; f32 1M: cooperative chunks); the
  // two-read schedule (6M f32) under --big.
  {
    std::vector<std::pair<onorm_dtype, int64_t>> hard = {
        {ONORM_F32, 4},      {ONORM_F32, 37},     {ONORM_F32, 300},     {ONORM_F32, 1000},    {ONORM_F32, 3000},
        {ONORM_F32, 8192},   {ONORM_F32, 16384},  {ONORM_F32, 65536},   {ONORM_F32, 131072},  {ONORM_F32, 262144},
        {ONORM_F32, 1048576}, {ONORM_BF16, 300},  {ONORM_BF16, 4096},   {ONORM_BF16, 10000},  {ONORM_BF16, 20000},
        {ONORM_BF16, 65536}, {ONORM_BF16, 262144}};
    if (small) hard = {{ONORM_F32, 300}, {ONORM_F32, 40000}, {ONORM_BF16, 10000}};
    if (big) hard = {{ONORM_F32, 6000000}};
    for (const auto& [dt, cols] : hard)
      for (Op op : {Op::layer_norm, Op::rms_norm})
        for (int special : {4, 5, 6})
          for (bool in_place : {false, true}) {
            if (big && special != 4 && !in_place) continue;  // 6M columns: in place is the harder half
            const int64_t rows = cols <= 256 ? 40 : 8;
            run_case(ctx, {op, dt, dt, rows, cols, cols, cols, in_place, special, true}, rng);
            ++cases;
          }
  }
  if (big && !hard_only) {
    // Rows longer than the co-resident grid take the two-read schedule; 2^24 + 7 columns
    // check the statistics past f32 integer range. Norms in place with values near FLT_MAX:
    // the double statistics are taken before the finish writes (row_coefs_kernel).
    // The same through the cooperative staged schedule (co-resident blocks, coop_barrier):
    // 1M f32 and 262144 bf16 columns.
    for (Op op : {Op::layer_norm, Op::rms_norm}) {
      run_case(ctx, {op, ONORM_F32, ONORM_F32, 2, 6000000, 6000000, 6000000, true, 2, true}, rng);
      run_case(ctx, {op, ONORM_F32, ONORM_F32, 5, 1048576, 1048576, 1048576, true, 2, true}, rng);
      run_case(ctx, {op, ONORM_BF16, ONORM_BF16, 7, 262144, 262144, 262144, true, 2, true}, rng);
      cases += 3;
    }
    for (Op op : kOps) {
      run_case(ctx, {op, ONORM_F32, ONORM_F32, 2, 6000000, 6000000, 6000000, false, 0, true}, rng);
      run_case(ctx, {op, ONORM_BF16, ONORM_BF16, 1, (int64_t(1) << 24) + 7, (int64_t(1) << 24) + 7,
                     (int64_t(1) << 24) + 7, false, op == Op::layer_norm ? 3 : 0, false}, rng);
      cases += 2;
    }
  }
  // The backward passes through every placement: register rows, clusters (f32 16384+, 16-bit
  // 32768+), the staged kernel (16-bit 4097-32767: a block per row; 1M: cooperative chunks),
  // two reads (6M under --big).
  if (!hard_only) {
    std::vector<int64_t> bw = {1, 3, 31, 64, 100, 512, 1000, 1025, 2048, 4097, 9000, 16384, 16385, 40000, 61440,
                               131077, 262143, 1048576};
    if (small) bw = {3, 1025, 9000, 40000};
    if (big) bw = {6000000};
    const onorm_dtype combos[][3] = {{ONORM_F32, ONORM_F32, ONORM_F32}, {ONORM_BF16, ONORM_BF16, ONORM_BF16},
                                     {ONORM_F16, ONORM_BF16, ONORM_F32}, {ONORM_BF16, ONORM_F32, ONORM_F16}};
    int index = 0;
    for (int64_t cols : bw)
      for (const auto& c : combos) {
        const int64_t rows = cols > 1000000 ? 3 : cols > 10000 ? 4 : cols > 1000 ? 9 : 37;
        for (Op op : kBackwardOps) {
          run_backward(ctx, op, c[0], c[1], c[2], rows, cols, (index++ % 3) == 2, rng);
          ++cases;
        }
      }
  }
  std::printf("check: %d cases, %d failures\n", cases, failures);
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* csv = nullptr;
  const char* width_list = nullptr;
  const char* op_list = nullptr;
  bool do_check = false, quick = false, back_to_back = false, big = false, small = false, hard_only = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--csv") && i + 1 < argc) csv = argv[++i];
    else if (!std::strcmp(argv[i], "--check")) do_check = true;
    else if (!std::strcmp(argv[i], "--widths") && i + 1 < argc) width_list = argv[++i];
    else if (!std::strcmp(argv[i], "--ops") && i + 1 < argc) op_list = argv[++i];
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--back-to-back")) back_to_back = true;
    else if (!std::strcmp(argv[i], "--big")) big = true;
    else if (!std::strcmp(argv[i], "--sanitize")) small = true;
    else if (!std::strcmp(argv[i], "--hard")) hard_only = true;
  }
  if (onorm_backend_device_count(ONORM_BACKEND_CUDA) <= 0) {
    std::printf("SKIP: no CUDA device: %s\n", onorm_backend_unavailable_reason(ONORM_BACKEND_CUDA));
    return 77;
  }
  onorm_context ctx = nullptr;
  OK(onorm_create(ONORM_BACKEND_CUDA, 0, &ctx));
  std::printf("backend: %s\n", onorm_backend_name(ctx));
  const int rc = do_check ? check(ctx, big, small, hard_only) : bench(ctx, csv, quick, back_to_back, width_list, op_list);
  onorm_destroy(ctx);
  return rc;
}
