// onlinenorm::nccl's scaling (issue 15): per shape, the split call on every GPU of the machine
// (one process per GPU, each holding cols / ranks columns of every row) against, on one GPU, the
// single call on the same cols / ranks columns plus one all-gather of rows x 8 bytes per rank
// (the split call's floor), the single call on the whole rows, and the split call's parts alone
// (stats, finish). Median of 20 timed calls
// after 5 warm-ups, cudaEvent timing on the context's stream. bf16 and f32 rows of N(0, 2).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "../../tests/nccl/ranks.hpp"
#include "onlinenorm/core/convert.hpp"
#include "onlinenorm/onlinenorm_nccl.h"

namespace {

struct Shape {
  int64_t rows, cols;
  onorm_dtype dtype;
  int op;  // 0 softmax, 1 rms_norm
};
constexpr Shape kShapes[] = {{4096, 32768, ONORM_BF16, 0}, {4096, 131072, ONORM_BF16, 0}, {1024, 262144, ONORM_F32, 0},
                             {16384, 8192, ONORM_BF16, 1}, {4096, 32768, ONORM_BF16, 1}};
constexpr int kShapeCount = sizeof kShapes / sizeof kShapes[0];

struct Result {
  float split_us[kShapeCount];      // the split call, this rank
  float local_us[kShapeCount];      // the single call on this rank's columns
  float gather_us[kShapeCount];     // one all-gather of rows x 8 bytes
  float whole_us[kShapeCount];      // the single call on the whole rows
  float stats_us[kShapeCount];      // the split call's parts, alone: the stats of this rank's columns
  float finish_us[kShapeCount];     // and their finish from the states
  int ok;
};

template <typename F>
float median_us(cudaStream_t s, F&& f) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 5; ++i) f();
  std::vector<float> t;
  for (int i = 0; i < 20; ++i) {
    cudaEventRecord(a, s);
    f();
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms * 1000.0f);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// x ~ N(0, 2): a block of random values on the host, copied over the whole tensor (rows of
// one value, zeros for example, would be constant slices, whose moments a stats call takes
// again in double).
void fill_normal(void* x, size_t n, onorm_dtype dtype, cudaStream_t stream) {
  const size_t es = onorm_dtype_size(dtype), block = std::min<size_t>(n, size_t(1) << 22);
  std::vector<unsigned char> h(block * es);
  std::mt19937 g(1234);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (size_t i = 0; i < block; ++i) {
    const float v = nd(g);
    if (dtype == ONORM_F32) {
      std::memcpy(&h[i * 4], &v, 4);
    } else {
      const uint16_t b = onorm::core::f32_to_bf16(v);
      std::memcpy(&h[i * 2], &b, 2);
    }
  }
  for (size_t off = 0; off < n; off += block) {
    const size_t m = std::min(block, n - off);
    cudaMemcpyAsync(static_cast<char*>(x) + off * es, h.data(), m * es, cudaMemcpyHostToDevice, stream);
  }
  cudaStreamSynchronize(stream);
}

Result run_rank(int rank, int ranks, ncclComm_t comm) {
  Result res{};
  onorm_context ctx = nullptr;
  if (onorm_create(ONORM_BACKEND_CUDA, rank, &ctx) != ONORM_OK) return res;
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  onorm_set_stream(ctx, stream);
  bool ok = true;
  for (int si = 0; si < kShapeCount; ++si) {
    const Shape s = kShapes[si];
    const size_t es = onorm_dtype_size(s.dtype), n = static_cast<size_t>(s.rows * s.cols);
    const int64_t local = s.cols / ranks;
    void *x = nullptr, *y = nullptr, *g = nullptr;
    onorm_malloc(ctx, n * es, &x);
    onorm_malloc(ctx, n * es, &y);
    onorm_malloc(ctx, static_cast<size_t>(s.rows) * 8 * ranks, &g);
    fill_normal(x, n, s.dtype, stream);
    const onorm_rows xl{x, s.dtype, s.rows, local, local}, yl{y, s.dtype, s.rows, local, local};
    const onorm_rows xw{x, s.dtype, s.rows, s.cols, s.cols}, yw{y, s.dtype, s.rows, s.cols, s.cols};
    onorm_norm_args a;
    onorm_norm_args_init(&a, ONORM_RMS_NORM);
    a.eps = 1e-6;
    auto single = [&](const onorm_rows& xi, const onorm_rows& yi) {
      ok = ok && (s.op == 0 ? onorm_softmax(ctx, &xi, &yi) : onorm_norm(ctx, &xi, &a, &yi)) == ONORM_OK;
    };
    res.split_us[si] = median_us(stream, [&] {
      ok = ok && (s.op == 0 ? onorm_nccl_softmax(ctx, comm, &xl, 0, &yl) : onorm_nccl_norm(ctx, comm, &xl, &a, &yl)) == ONORM_OK;
    });
    res.local_us[si] = median_us(stream, [&] { single(xl, yl); });
    res.gather_us[si] = median_us(stream, [&] {
      ncclAllGather(static_cast<char*>(g) + static_cast<size_t>(s.rows) * 8 * rank, g, static_cast<size_t>(s.rows) * 8,
                    ncclUint8, comm, stream);
    });
    res.whole_us[si] = median_us(stream, [&] { single(xw, yw); });
    void* st = nullptr;  // states of this rank's columns (softmax's 8 bytes or the moments' 24)
    onorm_malloc(ctx, static_cast<size_t>(s.rows) * 24, &st);
    res.stats_us[si] = median_us(stream, [&] {
      ok = ok && (s.op == 0 ? onorm_softmax_stats(ctx, &xl, static_cast<onorm_softmax_state*>(st))
                            : onorm_moments_stats(ctx, &xl, static_cast<onorm_moments_state*>(st))) == ONORM_OK;
    });
    res.finish_us[si] = median_us(stream, [&] {
      ok = ok && (s.op == 0 ? onorm_softmax_finish(ctx, &xl, static_cast<onorm_softmax_state*>(st), 0, &yl)
                            : onorm_norm_finish(ctx, &xl, static_cast<onorm_moments_state*>(st), &a, &yl)) == ONORM_OK;
    });
    onorm_synchronize(ctx);
    onorm_free(ctx, st);
    onorm_synchronize(ctx);
    for (void* p : {x, y, g}) onorm_free(ctx, p);
  }
  res.ok = ok ? 1 : 0;
  onorm_destroy(ctx);
  cudaStreamDestroy(stream);
  return res;
}

}  // namespace

int main() {
  const int gpus = onorm_nccl_test::count_gpus();
  if (gpus < 2) {
    std::printf("skipped: %d CUDA device(s)\n", gpus);
    return 0;
  }
  std::vector<Result> r;
  if (!onorm_nccl_test::run_ranks<Result>(gpus, run_rank, r)) return 1;
  std::printf("ranks,op,dtype,rows,cols,split_us,local_us,gather_us,floor_us,split_over_floor,whole_1gpu_us,speedup_vs_1gpu,"
              "stats_us,finish_us\n");
  for (int si = 0; si < kShapeCount; ++si) {
    const Shape s = kShapes[si];
    float split = 0;
    for (const Result& x : r) split = std::max(split, x.split_us[si]);  // the slowest rank
    const float floor = r[0].local_us[si] + r[0].gather_us[si];
    std::printf("%d,%s,%s,%lld,%lld,%.1f,%.1f,%.1f,%.1f,%.3f,%.1f,%.2f,%.1f,%.1f\n", gpus, s.op == 0 ? "softmax" : "rms_norm",
                s.dtype == ONORM_BF16 ? "bf16" : "f32", static_cast<long long>(s.rows), static_cast<long long>(s.cols),
                split, r[0].local_us[si], r[0].gather_us[si], floor, split / floor, r[0].whole_us[si],
                r[0].whole_us[si] / split, r[0].stats_us[si], r[0].finish_us[si]);
  }
  for (const Result& x : r)
    if (!x.ok) return 1;
  return 0;
}
