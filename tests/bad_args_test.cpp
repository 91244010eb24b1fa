// Every bad-argument case of the contract on every backend: the status, a non-empty
// onorm_last_error() (set by this call), and nothing written anywhere (all buffers are
// poisoned or filled beforehand and compared byte for byte afterwards). Also the legal
// corner cases next to them: empty shapes, exact in-place, interleaved rows. For softmax
// backward, x and y below are its y and dx, and dy is its second input.
#include <climits>
#include <functional>

#include "common/op_case.hpp"

namespace onorm_test {
namespace {

class BadArgs : public ::testing::TestWithParam<onorm_backend> {};

struct Call {
  onorm_context ctx;
  bool x_null = false, y_null = false, dy_null = false;
  onorm_rows x, y, dy;
  const void* gamma = nullptr;
  const void* beta = nullptr;
  double eps = 1e-5;
  float* mean = nullptr;
  float* rstd = nullptr;
};

onorm_status invoke(Op op, const Call& c) {
  const onorm_rows* x = c.x_null ? nullptr : &c.x;
  const onorm_rows* y = c.y_null ? nullptr : &c.y;
  switch (op) {
    case Op::softmax: return onorm_softmax(c.ctx, x, y);
    case Op::log_softmax: return onorm_log_softmax(c.ctx, x, y);
    case Op::layer_norm: return onorm_layer_norm(c.ctx, x, c.gamma, c.beta, c.eps, y, c.mean, c.rstd);
    case Op::rms_norm: return onorm_rms_norm(c.ctx, x, c.gamma, c.eps, y, c.rstd);
    case Op::softmax_backward: return onorm_softmax_backward(c.ctx, x, c.dy_null ? nullptr : &c.dy, y);
    case Op::log_softmax_backward: return onorm_log_softmax_backward(c.ctx, x, c.dy_null ? nullptr : &c.dy, y);
  }
  return ONORM_ERROR_INTERNAL;
}

// Sets this thread's last error to a known text, so that a call that fails without setting
// its own message is caught.
std::string set_sentinel_error() {
  onorm_context c = nullptr;
  EXPECT_NE(onorm_create(ONORM_BACKEND_CPU, 4321, &c), ONORM_OK);
  onorm_destroy(c);
  return onorm_last_error();
}

class Fixture {
 public:
  explicit Fixture(onorm_context ctx) : ctx_(ctx) {
    x = Tensor(ctx, ONORM_F32, kRows, kCols, kStride);
    y = Tensor(ctx, ONORM_F32, kRows, kCols, kStride);
    dy = Tensor(ctx, ONORM_F32, kRows, kCols, kStride);
    gamma = Tensor(ctx, ONORM_F32, 1, kCols);
    beta = Tensor(ctx, ONORM_F32, 1, kCols);
    mean = Tensor(ctx, ONORM_F32, 1, kRows);
    rstd = Tensor(ctx, ONORM_F32, 1, kRows);
    arena = Tensor(ctx, ONORM_F32, 1, 4096);
    x.fill([](int64_t r, int64_t c) { return 0.25 * r - 0.125 * c; });
    dy.fill([](int64_t r, int64_t c) { return 0.5 * r + 0.0625 * c; });
    gamma.fill([](int64_t, int64_t c) { return 1.0 + c; });
    beta.fill([](int64_t, int64_t c) { return -1.0 * c; });
    arena.fill([](int64_t, int64_t c) { return 0.001 * c; });
  }
  static constexpr int64_t kRows = 4, kCols = 16, kStride = 20;

  // A valid call of every op (the cases below break one thing at a time).
  Call valid() const {
    Call c;
    c.ctx = ctx_;
    c.x = x.dev_rows();
    c.y = y.dev_rows();
    c.dy = dy.dev_rows();
    c.gamma = gamma.dev();
    c.beta = beta.dev();
    c.mean = mean.dev_f32();
    c.rstd = rstd.dev_f32();
    return c;
  }
  // Rows carved out of the arena (for overlap cases), offsets in f32 elements.
  onorm_rows in_arena(int64_t offset, int64_t rows, int64_t cols, int64_t stride, onorm_dtype dt = ONORM_F32) const {
    return onorm_rows{static_cast<char*>(arena.dev()) + offset * 4, dt, rows, cols, stride};
  }
  float* arena_f32(int64_t offset) const { return arena.dev_f32() + offset; }

  std::vector<Tensor*> all() { return {&x, &y, &dy, &gamma, &beta, &mean, &rstd, &arena}; }
  std::vector<std::vector<unsigned char>> snapshot() {
    std::vector<std::vector<unsigned char>> s;
    for (Tensor* t : all()) {
      t->download();
      s.push_back(t->image());
    }
    return s;
  }
  ::testing::AssertionResult unchanged(const std::vector<std::vector<unsigned char>>& before) {
    const char* names[] = {"x", "y", "dy", "gamma", "beta", "mean", "rstd", "arena"};
    size_t i = 0;
    for (Tensor* t : all()) {
      t->download();
      if (auto r = t->same_image(before[i], names[i]); !r) return r;
      ++i;
    }
    return ::testing::AssertionSuccess();
  }

  Tensor x, y, dy, gamma, beta, mean, rstd, arena;

 private:
  onorm_context ctx_;
};

struct Case {
  std::string name;
  std::function<void(Call&, const Fixture&)> mutate;
  onorm_status want;
  bool norm_only = false;  // only LayerNorm / RMSNorm take the broken argument
  bool ln_only = false;
  bool dy_only = false;    // only softmax backward takes dy
  bool not_norm = false;   // the norms treat the argument otherwise (a case of its own)
};

std::vector<Case> cases(onorm_backend backend) {
  const onorm_status INVALID = ONORM_ERROR_INVALID_ARGUMENT, UNSUPPORTED = ONORM_ERROR_UNSUPPORTED, OK = ONORM_OK;
  const int64_t R = Fixture::kRows, C = Fixture::kCols, S = Fixture::kStride;
  std::vector<Case> v = {
      {"null ctx", [](Call& c, const Fixture&) { c.ctx = nullptr; }, INVALID},
      {"null x", [](Call& c, const Fixture&) { c.x_null = true; }, INVALID},
      {"null y", [](Call& c, const Fixture&) { c.y_null = true; }, INVALID},
      {"null x data", [](Call& c, const Fixture&) { c.x.data = nullptr; }, INVALID},
      {"null y data", [](Call& c, const Fixture&) { c.y.data = nullptr; }, INVALID},
      {"negative rows", [](Call& c, const Fixture&) { c.x.rows = c.y.rows = -1; }, INVALID},
      {"negative cols", [](Call& c, const Fixture&) { c.x.cols = c.y.cols = -3; }, INVALID},
      {"negative x rows only", [](Call& c, const Fixture&) { c.x.rows = -4; }, INVALID},
      {"x stride < cols", [C](Call& c, const Fixture&) { c.x.row_stride = C - 1; }, INVALID},
      {"y stride < cols", [C](Call& c, const Fixture&) { c.y.row_stride = C - 1; }, INVALID},
      {"zero stride", [](Call& c, const Fixture&) { c.x.row_stride = c.y.row_stride = 0; }, INVALID},
      {"negative stride", [](Call& c, const Fixture&) { c.x.row_stride = -20; }, INVALID},
      {"rows*stride overflows int64",
       [](Call& c, const Fixture&) {
         c.x.rows = c.y.rows = int64_t{1} << 40;
         c.x.row_stride = c.y.row_stride = int64_t{1} << 30;
       },
       INVALID},
      {"rows*stride*4 bytes overflows int64",
       [](Call& c, const Fixture&) {
         c.x.rows = c.y.rows = int64_t{1} << 31;
         c.x.row_stride = c.y.row_stride = int64_t{1} << 31;
       },
       INVALID},
      {"huge rows", [](Call& c, const Fixture&) { c.x.rows = c.y.rows = INT64_MAX; }, INVALID},
      {"huge stride", [](Call& c, const Fixture&) { c.y.row_stride = INT64_MAX; }, INVALID},
      {"rows differ", [](Call& c, const Fixture&) { c.y.rows = c.x.rows - 1; }, INVALID},
      {"cols differ", [](Call& c, const Fixture&) { c.y.cols = c.x.cols - 1; }, INVALID},
      {"x i8", [](Call& c, const Fixture&) { c.x.dtype = ONORM_I8; }, UNSUPPORTED},
      // (Values beyond the enum's C++ range, -1 or 1000, are passed from C: c_abi_check.c.)
      {"x dtype 7", [](Call& c, const Fixture&) { c.x.dtype = static_cast<onorm_dtype>(7); }, INVALID},
      {"y dtype 6", [](Call& c, const Fixture&) { c.y.dtype = static_cast<onorm_dtype>(6); }, INVALID},
      {"x f8_e4m3", [](Call& c, const Fixture&) { c.x.dtype = ONORM_F8_E4M3; }, UNSUPPORTED},
      {"y f8_e4m3", [](Call& c, const Fixture&) { c.y.dtype = ONORM_F8_E4M3; }, UNSUPPORTED, false, false, false, true},
      {"y i8", [](Call& c, const Fixture&) { c.y.dtype = ONORM_I8; }, UNSUPPORTED, false, false, false, true},
      // A norm's quantized y needs a scale, which the version-1 functions do not take.
      {"y f8_e4m3 without a scale", [](Call& c, const Fixture&) { c.y.dtype = ONORM_F8_E4M3; }, INVALID, true},
      {"y i8 without a scale", [](Call& c, const Fixture&) { c.y.dtype = ONORM_I8; }, INVALID, true},
      {"eps negative", [](Call& c, const Fixture&) { c.eps = -1e-5; }, INVALID, true},
      {"eps tiny negative", [](Call& c, const Fixture&) { c.eps = -1e-300; }, INVALID, true},
      {"eps NaN", [](Call& c, const Fixture&) { c.eps = std::nan(""); }, INVALID, true},
      {"eps -inf", [](Call& c, const Fixture&) { c.eps = -HUGE_VAL; }, INVALID, true},
      // Overlaps, in the arena: x = rows at 0, 16, 32, 48 (stride 16).
      {"y shifted by 8 elements",
       [=](Call& c, const Fixture& f) {
         c.x = f.in_arena(0, R, C, C);
         c.y = f.in_arena(8, R, C, C);
       },
       INVALID},
      {"y shifted by one row",
       [=](Call& c, const Fixture& f) {
         c.x = f.in_arena(0, R, C, C);
         c.y = f.in_arena(C, R, C, C);
       },
       INVALID},
      {"y last element on x's first",
       [=](Call& c, const Fixture& f) {
         c.x = f.in_arena((R - 1) * C + C - 1, R, C, C);
         c.y = f.in_arena(0, R, C, C);
       },
       INVALID},
      {"y with x's data but another stride",
       [=](Call& c, const Fixture& f) {
         c.x = f.in_arena(0, R, C, S);
         c.y = f.in_arena(0, R, C, S + 1);
       },
       INVALID},
      {"y with x's data, stride, but another dtype size",
       [=](Call& c, const Fixture& f) {
         c.x = f.in_arena(0, R, C, S);
         c.y = f.in_arena(0, R, C, S, ONORM_BF16);
       },
       INVALID},
      {"y inside x's stride padding but touching x",
       [=](Call& c, const Fixture& f) {
         c.x = f.in_arena(0, R, C, S);
         c.y = f.in_arena(C - 1, R, C, S);
       },
       INVALID},
      {"y overlaps gamma",
       [=](Call& c, const Fixture& f) {
         c.y = f.in_arena(0, R, C, S);
         c.gamma = f.arena_f32(S + 5);
       },
       INVALID, true},
      {"y overlaps beta",
       [=](Call& c, const Fixture& f) {
         c.y = f.in_arena(0, R, C, S);
         c.beta = f.arena_f32(2 * S - 3);
       },
       INVALID, false, true},
      {"y overlaps mean",
       [=](Call& c, const Fixture& f) {
         c.y = f.in_arena(0, R, C, S);
         c.mean = f.arena_f32(3 * S + C - 1);
       },
       INVALID, false, true},
      {"y overlaps rstd",
       [=](Call& c, const Fixture& f) {
         c.y = f.in_arena(100, R, C, S);
         c.rstd = f.arena_f32(98);
       },
       INVALID, true},
      {"mean overlaps x (an output over an input)",
       [=](Call& c, const Fixture& f) {
         c.x = f.in_arena(0, R, C, S);
         c.mean = f.arena_f32(2 * S + 3);
       },
       INVALID, false, true},
      {"rstd overlaps x (an output over an input)",
       [=](Call& c, const Fixture& f) {
         c.x = f.in_arena(0, R, C, S);
         c.rstd = f.arena_f32(C - 2);
       },
       INVALID, true},
      {"mean overlaps rstd",
       [=](Call& c, const Fixture& f) {
         c.mean = f.arena_f32(1000);
         c.rstd = f.arena_f32(1000 + R - 1);
       },
       INVALID, false, true},
  };
  // Softmax backward's dy: NULL, broken, of another shape, and partial overlaps of dx with it
  // (dx == dy exactly is legal: LegalAliasingRuns).
  const std::vector<Case> dy_cases = {
      {"null dy", [](Call& c, const Fixture&) { c.dy_null = true; }, INVALID},
      {"null dy data", [](Call& c, const Fixture&) { c.dy.data = nullptr; }, INVALID},
      {"dy rows differ", [](Call& c, const Fixture&) { c.dy.rows = c.x.rows - 1; }, INVALID},
      {"dy cols differ", [](Call& c, const Fixture&) { c.dy.cols = c.x.cols + 1; }, INVALID},
      {"dy negative rows", [](Call& c, const Fixture&) { c.dy.rows = -1; }, INVALID},
      {"dy stride < cols", [C](Call& c, const Fixture&) { c.dy.row_stride = C - 1; }, INVALID},
      {"dy i8", [](Call& c, const Fixture&) { c.dy.dtype = ONORM_I8; }, UNSUPPORTED},
      {"dy f8_e4m3", [](Call& c, const Fixture&) { c.dy.dtype = ONORM_F8_E4M3; }, UNSUPPORTED},
      {"dx shifted by 8 elements from dy",
       [=](Call& c, const Fixture& f) {
         c.dy = f.in_arena(0, R, C, C);
         c.y = f.in_arena(8, R, C, C);
       },
       INVALID},
      {"dx with dy's data but another stride",
       [=](Call& c, const Fixture& f) {
         c.dy = f.in_arena(0, R, C, S);
         c.y = f.in_arena(0, R, C, S + 1);
       },
       INVALID},
      {"dx with dy's data and stride, another dtype size",
       [=](Call& c, const Fixture& f) {
         c.dy = f.in_arena(0, R, C, S);
         c.y = f.in_arena(0, R, C, S, ONORM_BF16);
       },
       INVALID},
      {"dx's last element on dy's first",
       [=](Call& c, const Fixture& f) {
         c.dy = f.in_arena((R - 1) * C + C - 1, R, C, C);
         c.y = f.in_arena(0, R, C, C);
       },
       INVALID},
  };
  for (Case k : dy_cases) {
    k.dy_only = true;
    v.push_back(k);
  }
  if (is_gpu(backend)) {
    v.push_back({"dy f64 on a GPU", [](Call& c, const Fixture&) { c.dy.dtype = ONORM_F64; c.x.cols = c.y.cols = c.dy.cols = 8; },
                 UNSUPPORTED, false, false, true});
    v.push_back({"x f64 on a GPU", [](Call& c, const Fixture&) { c.x.dtype = ONORM_F64; c.x.cols = c.y.cols = c.dy.cols = 8; }, UNSUPPORTED});
    v.push_back({"y f64 on a GPU", [](Call& c, const Fixture&) { c.y.dtype = ONORM_F64; c.x.cols = c.y.cols = c.dy.cols = 8; }, UNSUPPORTED});
  }
  (void)OK;
  return v;
}

// Legal requests next to the illegal ones: they must succeed (and, where empty, write nothing).
std::vector<Case> legal_cases() {
  const int64_t R = Fixture::kRows, C = Fixture::kCols, S = Fixture::kStride;
  return {
      {"rows 0", [](Call& c, const Fixture&) { c.x.rows = c.y.rows = c.dy.rows = 0; }, ONORM_OK},
      {"cols 0", [](Call& c, const Fixture&) { c.x.cols = c.y.cols = c.dy.cols = 0; }, ONORM_OK},
      {"rows 0, NULL data", [](Call& c, const Fixture&) {
         c.x.rows = c.y.rows = c.dy.rows = 0;
         c.x.data = c.y.data = c.dy.data = nullptr;
       }, ONORM_OK},
      {"cols 0, NULL data, stride 0", [](Call& c, const Fixture&) {
         c.x.cols = c.y.cols = c.dy.cols = 0;
         c.x.row_stride = c.y.row_stride = c.dy.row_stride = 0;
         c.x.data = c.y.data = c.dy.data = nullptr;
       }, ONORM_OK},
      {"rows 0, NULL gamma/mean", [](Call& c, const Fixture&) {
         c.x.rows = c.y.rows = c.dy.rows = 0;
         c.gamma = c.beta = nullptr;
         c.mean = c.rstd = nullptr;
       }, ONORM_OK},
  };
  (void)R; (void)C; (void)S;
}

TEST_P(BadArgs, StatusMessageAndNothingWritten) {
  const onorm_backend backend = GetParam();
  ONORM_OPEN_OR_SKIP(ctx, backend);
  Fixture f(ctx);
  for (Op op : all_ops()) {
    for (const Case& k : cases(backend)) {
      const bool is_norm = op == Op::layer_norm || op == Op::rms_norm;
      if (k.norm_only && !is_norm) continue;
      if (k.ln_only && op != Op::layer_norm) continue;
      if (k.not_norm && is_norm) continue;
      if (k.dy_only && op_inputs(op) < 2) continue;
      SCOPED_TRACE(std::string(onorm_ref::op_name(op)) + ": " + k.name);
      const auto before = f.snapshot();
      Call c = f.valid();
      k.mutate(c, f);
      const std::string sentinel = set_sentinel_error();
      const onorm_status st = invoke(op, c);
      EXPECT_EQ(st, k.want) << onorm_status_string(st) << ": " << onorm_last_error();
      const std::string msg = onorm_last_error();
      EXPECT_FALSE(msg.empty());
      EXPECT_NE(msg, sentinel) << "the failing call did not set its own message";
      EXPECT_STRNE(onorm_status_string(st), "");
      onorm_synchronize(ctx);
      EXPECT_TRUE(f.unchanged(before));
    }
  }
}

TEST_P(BadArgs, EmptyIsOkAndWritesNothing) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  Fixture f(ctx);
  for (Op op : all_ops()) {
    for (const Case& k : legal_cases()) {
      SCOPED_TRACE(std::string(onorm_ref::op_name(op)) + ": " + k.name);
      const auto before = f.snapshot();
      Call c = f.valid();
      k.mutate(c, f);
      EXPECT_EQ(invoke(op, c), ONORM_OK) << onorm_last_error();
      EXPECT_EQ(onorm_synchronize(ctx), ONORM_OK);
      EXPECT_TRUE(f.unchanged(before));
    }
  }
}

// Legal aliasing: exact in place (also across two dtypes of one size), rows of y interleaved
// between rows of x with the same stride, gamma == beta, gamma inside x.
TEST_P(BadArgs, LegalAliasingRuns) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  ONORM_SEEDED_RNG(rng);
  for (Op op : all_ops()) {
    SCOPED_TRACE(onorm_ref::op_name(op));
    // In place f16 -> bf16 (same size) and f32 -> f32 with padding: through the checked runner.
    Layout L;
    L.in_place = true;
    L.x_pad = 4;
    L.gamma = L.beta = L.mean = L.rstd = true;
    EXPECT_TRUE(run_checked(ctx, op, ONORM_F16, ONORM_BF16, 3, 33, L, rng));
    EXPECT_TRUE(run_checked(ctx, op, ONORM_F32, ONORM_F32, 3, 33, L, rng));
    if (op_inputs(op) > 1) {  // dx == dy exactly, also across dtypes of one size
      L.alias = 1;
      EXPECT_TRUE(run_checked(ctx, op, ONORM_F16, ONORM_BF16, 3, 33, L, rng));
      L.dy_dtype = ONORM_BF16;
      EXPECT_TRUE(run_checked(ctx, op, ONORM_F32, ONORM_F16, 3, 33, L, rng));
      L.dy_dtype = ONORM_F32;
      EXPECT_TRUE(run_checked(ctx, op, ONORM_BF16, ONORM_F32, 3, 1025, L, rng));
    }
    // Interleaved: x rows at 0, 32, 64; y rows at 16, 48, 80; both stride 32.
    Tensor arena(ctx, ONORM_F32, 1, 32 * 3);
    arena.fill([](int64_t, int64_t c) { return (c / 16) % 2 == 0 ? 0.1 * (c % 16) : -7.0; });
    onorm_rows x{arena.dev(), ONORM_F32, 3, 16, 32};
    onorm_rows y{arena.dev_f32() + 16, ONORM_F32, 3, 16, 32};
    // Softmax backward: dy's rows interleaved too (dy rows at 8, 40, 72: the inputs may overlap).
    const onorm_rows dy{arena.dev_f32() + 8, ONORM_F32, 3, 8, 32};
    if (op_inputs(op) > 1) x.cols = y.cols = 8;
    OpArgs a;
    a.dy = &dy;
    a.gamma = arena.dev_f32();  // gamma (an input) inside x is fine
    a.beta = arena.dev_f32();   // and gamma == beta
    EXPECT_EQ(run_op(ctx, op, x, y, a), ONORM_OK) << onorm_last_error();
    ASSERT_EQ(onorm_synchronize(ctx), ONORM_OK);
    // The reference from the host image as it was before the run.
    const onorm_rows xh[2] = {{arena.host(), ONORM_F32, 3, x.cols, 32}, {static_cast<float*>(arena.host()) + 8, ONORM_F32, 3, 8, 32}};
    const onorm_ref::Result ref = onorm_ref::compute(op, xh, op_inputs(op), has_gamma(op) ? arena.host() : nullptr,
                                                     has_beta(op) ? arena.host() : nullptr, a.eps);
    arena.download();
    const onorm_rows yh{static_cast<float*>(arena.host()) + 16, ONORM_F32, 3, y.cols, 32};
    const onorm_ref::Report rep = onorm_ref::check(op, ref, yh, has_gamma(op) ? arena.host() : nullptr, ONORM_F32, nullptr, nullptr);
    EXPECT_TRUE(rep.ok()) << rep.describe();
    // x's rows are untouched.
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t c = 0; c < x.cols; ++c) EXPECT_EQ(arena.get(0, r * 32 + c), static_cast<double>(static_cast<float>(0.1 * c)));
  }
}

INSTANTIATE_TEST_SUITE_P(All, BadArgs, ::testing::ValuesIn(all_backends()), BackendName());

}  // namespace
}  // namespace onorm_test
