// Out of memory (API.md "Memory"): a call that cannot get the scratch it needs returns
// ONORM_ERROR_OUT_OF_MEMORY, never aborts the process, and writes nothing. This executable
// replaces the global operator new/delete (every variant: plain, array, nothrow, aligned,
// sized) with malloc-based ones behind a switch that refuses allocations of at least N bytes
// (throwing forms throw std::bad_alloc, nothrow forms return nullptr). The CPU backend's
// scratch comes from operator new, so arming the switch around one call is an allocation
// failure in the middle of the library. An abort (bad_alloc escaping an OpenMP region ends in
// std::terminate) kills this test's process: ctest runs each test alone and counts that as a
// failure. CPU only: GPU scratch comes from the device allocator, which no hook here reaches.
//
// ASan/UBSan: replacing operator new in the executable is allowed there; every block comes
// from malloc/posix_memalign and goes back through free, so new/delete pairs stay consistent.
#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "common/op_case.hpp"

namespace {

// Allocations of at least this many bytes are refused; SIZE_MAX: none.
std::atomic<size_t> g_refuse_from{SIZE_MAX};
std::atomic<long> g_refused{0};
// The largest single allocation while counting is on (the scratch-size test).
std::atomic<bool> g_counting{false};
std::atomic<size_t> g_largest{0};

void* hooked_alloc(size_t n, size_t align) noexcept {
  if (n >= g_refuse_from.load(std::memory_order_relaxed)) {
    g_refused.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  if (g_counting.load(std::memory_order_relaxed)) {
    size_t seen = g_largest.load(std::memory_order_relaxed);
    while (n > seen && !g_largest.compare_exchange_weak(seen, n)) {
    }
  }
  if (n == 0) n = 1;
  if (align > alignof(std::max_align_t)) {
    void* p = nullptr;
    return posix_memalign(&p, align, n) == 0 ? p : nullptr;
  }
  return std::malloc(n);
}
void* hooked_or_throw(size_t n, size_t align) {
  void* p = hooked_alloc(n, align);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(size_t n) { return hooked_or_throw(n, 0); }
void* operator new[](size_t n) { return hooked_or_throw(n, 0); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return hooked_alloc(n, 0); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return hooked_alloc(n, 0); }
void* operator new(size_t n, std::align_val_t a) { return hooked_or_throw(n, static_cast<size_t>(a)); }
void* operator new[](size_t n, std::align_val_t a) { return hooked_or_throw(n, static_cast<size_t>(a)); }
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return hooked_alloc(n, static_cast<size_t>(a));
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return hooked_alloc(n, static_cast<size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

namespace onorm_test {
namespace {

// Refuses allocations of >= bytes while alive. Nothing else that allocates (gtest, the
// harness) may run while it is: arm around the library call only.
class Refuse {
 public:
  explicit Refuse(size_t bytes) {
    g_refused.store(0);
    g_refuse_from.store(bytes);
  }
  ~Refuse() { g_refuse_from.store(SIZE_MAX); }
  Refuse(const Refuse&) = delete;
  Refuse& operator=(const Refuse&) = delete;
};

constexpr size_t kMiB = size_t{1} << 20;

// The hook itself can fail: without this, a hook that never fires would pass everything.
TEST(OomHook, RefusesWhatItShouldAndNothingElse) {
  bool threw = false, threw_aligned = false;
  void *small = nullptr, *nothrow_big = reinterpret_cast<void*>(1), *nothrow_aligned = reinterpret_cast<void*>(1);
  {
    Refuse r(kMiB);
    try {
      delete[] new char[kMiB];
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    try {
      ::operator delete(::operator new(2 * kMiB, std::align_val_t{64}), std::align_val_t{64});
    } catch (const std::bad_alloc&) {
      threw_aligned = true;
    }
    nothrow_big = ::operator new[](kMiB, std::nothrow);
    nothrow_aligned = ::operator new(kMiB, std::align_val_t{128}, std::nothrow);
    small = ::operator new(kMiB - 1);
  }
  EXPECT_TRUE(threw);
  EXPECT_TRUE(threw_aligned);
  EXPECT_EQ(nothrow_big, nullptr);
  EXPECT_EQ(nothrow_aligned, nullptr);
  EXPECT_NE(small, nullptr);
  ::operator delete(small);
  EXPECT_EQ(g_refused.load(), 4);
  void* aligned = ::operator new(100, std::align_val_t{256});  // disarmed: aligned blocks work
  EXPECT_EQ(reinterpret_cast<uintptr_t>(aligned) % 256, 0u);
  ::operator delete(aligned, std::align_val_t{256});
}

struct Case {
  Op op;
  int64_t rows, cols;
  int threads;  // OpenMP threads for the call; rows < threads with cols >= 16384: the split path
  const char* what;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.what; }

using Param = std::tuple<Case, size_t>;  // case, refuse allocations from this many bytes
class Oom : public ::testing::TestWithParam<Param> {};

// With the hook armed: the status is OUT_OF_MEMORY with a message and nothing written
// wherever an allocation was refused; a call that was refused nothing must simply succeed
// (the contract forbids neither). Then, disarmed, the same call succeeds and writes every output.
TEST_P(Oom, ReturnsOutOfMemoryAndWritesNothing) {
  const auto [c, refuse_from] = GetParam();
  const int threads_before = omp_get_max_threads();
  omp_set_num_threads(c.threads);
  ONORM_OPEN_OR_SKIP(ctx, ONORM_BACKEND_CPU);
  ONORM_SEEDED_RNG(rng);
  Tensor x(ctx, ONORM_F32, c.rows, c.cols), y(ctx, ONORM_F32, c.rows, c.cols);
  Tensor mean(ctx, ONORM_F32, 1, c.rows), rstd(ctx, ONORM_F32, 1, c.rows);
  ASSERT_TRUE(x.ok() && y.ok() && mean.ok() && rstd.ok());
  x.fill([&](int64_t, int64_t) { return cheap_normal(rng, 1.0, 2.0); });
  Tensor dy;  // softmax backward's second input
  if (op_inputs(c.op) > 1) {
    dy = Tensor(ctx, ONORM_F32, c.rows, c.cols);
    ASSERT_TRUE(dy.ok());
    dy.fill([&](int64_t, int64_t) { return cheap_normal(rng, 0.0, 1.0); });
  }
  const onorm_rows dyr = dy.ok() ? dy.dev_rows() : onorm_rows{};
  const std::vector<unsigned char> x0 = x.image(), y0 = y.image(), mean0 = mean.image(), rstd0 = rstd.image();
  OpArgs a;
  a.dy = dy.ok() ? &dyr : nullptr;
  a.mean = has_mean(c.op) ? mean.dev_f32() : nullptr;
  a.rstd = has_rstd(c.op) ? rstd.dev_f32() : nullptr;

  onorm_status st = ONORM_OK;
  long refused;
  bool escaped = false;  // a C++ exception crossed the C ABI
  {
    Refuse r(refuse_from);
    try {
      st = run_op(ctx, c.op, x.dev_rows(), y.dev_rows(), a);
    } catch (...) {
      escaped = true;
    }
    refused = g_refused.load();
  }
  ASSERT_FALSE(escaped) << "an exception escaped the C ABI (" << refused << " allocations refused)";
  const std::string err = onorm_last_error();
  x.download();
  y.download();
  mean.download();
  rstd.download();
  EXPECT_TRUE(x.same_image(x0, "x"));
  if (refused > 0) {
    EXPECT_EQ(st, ONORM_ERROR_OUT_OF_MEMORY) << refused << " allocations were refused; status "
                                             << onorm_status_string(st) << ": " << err;
    EXPECT_FALSE(err.empty()) << "no onorm_last_error() message";
    EXPECT_TRUE(y.same_image(y0, "y"));
    EXPECT_TRUE(mean.same_image(mean0, "mean"));
    EXPECT_TRUE(rstd.same_image(rstd0, "rstd"));
  } else {
    EXPECT_EQ(st, ONORM_OK) << "nothing was refused, yet: " << onorm_status_string(st) << ": " << err;
  }
  std::cout << "[ info ] " << c.what << ", refusing >= " << refuse_from << " bytes: " << refused
            << " allocations refused, status " << onorm_status_string(st) << "\n";

  // Disarmed, the same call succeeds and writes every output.
  y.poison();
  mean.poison();
  rstd.poison();
  EXPECT_EQ(run_op(ctx, c.op, x.dev_rows(), y.dev_rows(), a), ONORM_OK) << onorm_last_error();
  y.download();
  mean.download();
  rstd.download();
  EXPECT_TRUE(y.all_written("y"));
  if (a.mean) {
    EXPECT_TRUE(mean.all_written("mean"));
  }
  if (a.rstd) {
    EXPECT_TRUE(rstd.all_written("rstd"));
  }
  omp_set_num_threads(threads_before);
}

const Case kCases[] = {
    {Op::softmax, 4, int64_t{1} << 20, 2, "softmax_4x2p20"},
    {Op::log_softmax, 4, int64_t{1} << 20, 2, "log_softmax_4x2p20"},
    {Op::layer_norm, 4, int64_t{1} << 20, 2, "layer_norm_4x2p20"},
    {Op::rms_norm, 4, int64_t{1} << 20, 2, "rms_norm_4x2p20"},
    {Op::softmax_backward, 4, int64_t{1} << 20, 2, "softmax_backward_4x2p20"},
    {Op::log_softmax_backward, 4, int64_t{1} << 20, 2, "log_softmax_backward_4x2p20"},
    // rows < threads, cols >= 16384: the split path (its scratch holds every row).
    {Op::softmax, 1, int64_t{1} << 20, 2, "split_softmax_1x2p20"},
    {Op::layer_norm, 1, int64_t{1} << 20, 2, "split_layer_norm_1x2p20"},
    {Op::softmax_backward, 1, int64_t{1} << 20, 2, "split_softmax_backward_1x2p20"},
    {Op::softmax, 3, int64_t{1} << 18, 4, "split_softmax_3x2p18_4threads"},
    {Op::rms_norm, 3, 16384, 4, "split_rms_norm_3x16384_4threads"},
};

std::string name(const ::testing::TestParamInfo<Param>& info) {
  const size_t r = std::get<1>(info.param);
  return std::string(std::get<0>(info.param).what) + (r == 0 ? "_refuse_all" : "_refuse_from_1MiB");
}
// 1 MiB: scratch rows fail, small bookkeeping does not. 0: every operator new fails.
INSTANTIATE_TEST_SUITE_P(Cpu, Oom, ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Values(kMiB, size_t{0})),
                         name);

// Scratch is bounded by the threads and a row's chunks, never by the input: rows fewer than
// the threads, split over them, once took a rows x cols float copy of their exp values
// (+401 MB for 100 x 2^20 at 128 threads). Here 3 x 2^20 at 4 threads (the split path) and
// 64 x 2^16 at 2 threads (rows over threads): the largest allocation stays far below the input.
TEST(Scratch, BoundedByThreadsNotByInput) {
  const int threads_before = omp_get_max_threads();
  for (const Case& c : {Case{Op::softmax, 3, int64_t{1} << 20, 4, "split"}, Case{Op::softmax, 64, int64_t{1} << 16, 2, "rows"},
                        Case{Op::layer_norm, 3, int64_t{1} << 20, 4, "split_ln"},
                        Case{Op::softmax_backward, 3, int64_t{1} << 20, 4, "split_backward"}}) {
    SCOPED_TRACE(c.what);
    omp_set_num_threads(c.threads);
    ONORM_OPEN_OR_SKIP(ctx, ONORM_BACKEND_CPU);
    Tensor x(ctx, ONORM_F32, c.rows, c.cols), y(ctx, ONORM_F32, c.rows, c.cols);
    ASSERT_TRUE(x.ok() && y.ok());
    x.fill([](int64_t r, int64_t col) { return 0.001 * static_cast<double>((r * 7 + col) % 1000); });
    Tensor dy(ctx, ONORM_F32, c.rows, c.cols);
    dy.fill([](int64_t r, int64_t col) { return 0.01 * static_cast<double>((r * 3 + col) % 100); });
    const onorm_rows dyr = dy.dev_rows();
    OpArgs a;
    a.dy = &dyr;
    g_largest.store(0);
    g_counting.store(true);
    const onorm_status st = run_op(ctx, c.op, x.dev_rows(), y.dev_rows(), a);
    g_counting.store(false);
    ASSERT_EQ(st, ONORM_OK) << onorm_last_error();
    const size_t input = static_cast<size_t>(c.rows * c.cols) * sizeof(float);
    // A row's exp values per thread (rows over threads) are allowed: 4 MiB at most.
    EXPECT_LE(g_largest.load(), static_cast<size_t>(c.threads) * ((size_t{1} << 22) + 4096)) << "input " << input;
    EXPECT_LT(g_largest.load(), input / 2) << "input " << input;
  }
  omp_set_num_threads(threads_before);
}

}  // namespace
}  // namespace onorm_test
