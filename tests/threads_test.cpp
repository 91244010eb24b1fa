// Threads: one CPU context shared by several threads at once, each checking its own results;
// distinct contexts (any backend) used from distinct threads; onorm_last_error is per thread.
#include <atomic>
#include <thread>

#include "common/op_case.hpp"

namespace onorm_test {
namespace {

// Each thread runs a different mix of ops, dtypes and shapes against the reference.
void worker(onorm_context ctx, int id, uint64_t seed, int iterations, std::atomic<int>* failures, std::string* first) {
  std::mt19937_64 rng(seed + static_cast<uint64_t>(id) * 7919);
  const onorm_dtype dts[] = {ONORM_F32, ONORM_F16, ONORM_BF16};
  for (int i = 0; i < iterations; ++i) {
    const Op op = all_ops()[static_cast<size_t>(id + i) % all_ops().size()];
    const onorm_dtype in = dts[static_cast<size_t>(i) % 3], out = dts[static_cast<size_t>(id + 2 * i) % 3];
    const int64_t rows = 1 + static_cast<int64_t>(rng() % 9);
    const int64_t cols = 1 + static_cast<int64_t>(rng() % (i % 5 == 4 ? 70000 : 3000));
    Layout L;
    L.gamma = L.beta = L.mean = L.rstd = (i % 2) == 0;
    L.y_pad = static_cast<int64_t>(rng() % 4);
    const ::testing::AssertionResult r = run_checked(ctx, op, in, out, rows, cols, L, rng);
    if (!r) {
      if (failures->fetch_add(1) == 0) *first = "thread " + std::to_string(id) + ": " + r.message();
    }
  }
}

void run_threads(onorm_context shared, onorm_backend backend, int nthreads, int iterations, bool own_contexts) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::atomic<int> failures{0};
  std::string first;
  std::vector<std::thread> threads;
  for (int t = 0; t < nthreads; ++t) {
    threads.emplace_back([&, t] {
      if (!own_contexts) return worker(shared, t, seed, iterations, &failures, &first);
      onorm_context c = nullptr;
      if (onorm_create(backend, 0, &c) != ONORM_OK) {
        if (failures.fetch_add(1) == 0) first = std::string("create failed: ") + onorm_last_error();
        return;
      }
      worker(c, t, seed, iterations, &failures, &first);
      onorm_destroy(c);
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0) << first;
}

TEST(Threads, SharedCpuContext) {
  ONORM_OPEN_OR_SKIP(ctx, ONORM_BACKEND_CPU);
  run_threads(ctx, ONORM_BACKEND_CPU, 4, 24, false);
}

class ThreadsPerContext : public ::testing::TestWithParam<onorm_backend> {};
TEST_P(ThreadsPerContext, DistinctContexts) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());  // skips where the backend is unavailable
  run_threads(nullptr, GetParam(), 3, 12, true);
}
INSTANTIATE_TEST_SUITE_P(All, ThreadsPerContext, ::testing::ValuesIn(all_backends()), BackendName());

TEST(Threads, LastErrorIsPerThread) {
  ONORM_OPEN_OR_SKIP(ctx, ONORM_BACKEND_CPU);
  std::string msg_a, msg_b, after_a;
  std::thread a([&] {
    onorm_rows x{nullptr, ONORM_F32, 1, 1, 1};
    EXPECT_EQ(onorm_softmax(ctx, &x, &x), ONORM_ERROR_INVALID_ARGUMENT);
    msg_a = onorm_last_error();
  });
  a.join();
  std::thread b([&] {
    onorm_context c = nullptr;
    EXPECT_EQ(onorm_create(ONORM_BACKEND_CPU, 5, &c), ONORM_ERROR_BACKEND_UNAVAILABLE);
    msg_b = onorm_last_error();
  });
  b.join();
  EXPECT_FALSE(msg_a.empty());
  EXPECT_FALSE(msg_b.empty());
  EXPECT_NE(msg_a, msg_b);
  // Concurrent failures with different messages do not leak into each other.
  std::atomic<int> mixed{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        onorm_rows x{nullptr, ONORM_F32, 1, 1, 1};
        onorm_rows y{nullptr, ONORM_F32, 1, 1, 1};
        if (t % 2) {
          x.rows = -1 - t;  // negative rows
          y.rows = -1 - t;
        }
        onorm_softmax(ctx, &x, &y);
        const std::string m = onorm_last_error();
        const bool says_negative = m.find("negative") != std::string::npos;
        const bool says_null = m.find("NULL") != std::string::npos;
        if ((t % 2) ? !says_negative : !says_null) mixed.fetch_add(1);
      }
    });
  }
  for (auto& th : ts) th.join();
  EXPECT_EQ(mixed.load(), 0) << "a thread saw another thread's error message";
}

}  // namespace
}  // namespace onorm_test
