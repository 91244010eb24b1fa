// Every Highway target the machine runs: onorm_cpu_targets() lists them; for each,
// ONLINENORM_CPU_TARGET=<name> caps the CPU backend of contexts created afterwards, and a
// representative subset of the suite must hold on that target.
#include <algorithm>
#include <cctype>
#include <set>

#include "common/op_case.hpp"
#include "reference.hpp"

namespace onorm_test {
namespace {

std::vector<std::string> targets() {
  const int n = onorm_cpu_targets(nullptr, 0);
  std::vector<const char*> names(static_cast<size_t>(std::max(n, 0)), nullptr);
  const int m = onorm_cpu_targets(names.data(), n);
  EXPECT_EQ(m, n);
  std::vector<std::string> out;
  for (const char* s : names) out.push_back(s ? s : "");
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

TEST(CpuTargets, ListIsWellFormed) {
  const std::vector<std::string> t = targets();
  ASSERT_GE(t.size(), 1u);
  std::set<std::string> unique;
  for (const std::string& s : t) {
    EXPECT_FALSE(s.empty());
    EXPECT_TRUE(unique.insert(s).second) << "listed twice: " << s;
  }
  // A smaller capacity writes only that many and still returns the total.
  const char* one[1] = {nullptr};
  const char* sentinel = "untouched";
  const char* two[2] = {nullptr, sentinel};
  EXPECT_EQ(onorm_cpu_targets(one, 1), static_cast<int>(t.size()));
  EXPECT_EQ(std::string(one[0]), t[0]);
  if (t.size() == 1) {
    EXPECT_EQ(onorm_cpu_targets(two, 2), 1);
    EXPECT_EQ(two[1], sentinel) << "wrote beyond the count";
  }
  EXPECT_EQ(onorm_cpu_targets(nullptr, 0), static_cast<int>(t.size()));
}

class EnvTarget {
 public:
  explicit EnvTarget(const std::string& v) {
    if (const char* o = std::getenv("ONLINENORM_CPU_TARGET")) had_ = true, old_ = o;
    setenv("ONLINENORM_CPU_TARGET", v.c_str(), 1);
  }
  ~EnvTarget() {
    if (had_) setenv("ONLINENORM_CPU_TARGET", old_.c_str(), 1);
    else unsetenv("ONLINENORM_CPU_TARGET");
  }

 private:
  bool had_ = false;
  std::string old_;
};

void check_target(const std::string& target) {
  SCOPED_TRACE("ONLINENORM_CPU_TARGET=" + target);
  EnvTarget env(target);
  ONORM_OPEN_OR_SKIP(ctx, ONORM_BACKEND_CPU);
  const std::string name = onorm_backend_name(ctx);
  EXPECT_NE(lower(name).find(lower(target)), std::string::npos) << "backend name '" << name << "' does not show the target";
  ONORM_SEEDED_RNG(rng);
  struct C {
    Op op;
    onorm_dtype in, out;
  };
  const C cases[] = {{Op::softmax, ONORM_F32, ONORM_F32},      {Op::softmax, ONORM_BF16, ONORM_BF16},
                     {Op::log_softmax, ONORM_F16, ONORM_F32},   {Op::log_softmax, ONORM_F32, ONORM_F16},
                     {Op::layer_norm, ONORM_F32, ONORM_F32},    {Op::layer_norm, ONORM_BF16, ONORM_F32},
                     {Op::layer_norm, ONORM_F16, ONORM_F16},    {Op::rms_norm, ONORM_BF16, ONORM_BF16},
                     {Op::rms_norm, ONORM_F32, ONORM_BF16},     {Op::softmax, ONORM_F64, ONORM_F32},
                     {Op::layer_norm, ONORM_F64, ONORM_F64}};
  for (const C& c : cases) {
    for (int64_t cols : {1, 7, 33, 1025, 20001}) {
      Layout L;
      L.gamma = L.beta = L.mean = L.rstd = cols % 2 == 1;
      L.x_offset = cols % 3 == 1 ? 1 : 0;
      L.y_pad = 2;
      EXPECT_TRUE(run_checked(ctx, c.op, c.in, c.out, 3, cols, L, rng));
      if (::testing::Test::HasFailure()) return;
    }
    // Special values on this target too.
    auto masked = [](int64_t r, int64_t c) { return r == 0 ? -HUGE_VAL : r == 1 && c == 5 ? std::nan("") : 0.01 * c; };
    Layout L;
    EXPECT_TRUE(run_checked(ctx, c.op, c.in, c.out, 3, 1031, L, rng, masked));
  }
}

constexpr int64_t kChunkCols = 4096;  // the CPU backend's chunk

// One request of check_residual: RMSNorm or LayerNorm of dt x (into f32 y where widened) with a
// residual of rows x cols, residual_out or not; every row tensor padded past its row.
void check_residual_case(onorm_context ctx, std::mt19937_64& rng, onorm_dtype dt, int64_t rows, int64_t cols,
                         bool layer, bool residual_out, bool widened) {
  const onorm_dtype yt = widened ? ONORM_F32 : dt;
  SCOPED_TRACE(std::string(dtype_name(dt)) + " x " + std::to_string(rows) + " x " + std::to_string(cols) + " y " +
               dtype_name(yt) + (layer ? " LayerNorm" : " RMSNorm") + (residual_out ? " with residual_out" : " without"));
  // Odd strides (rows off any alignment), and for the widened rows strides of whole 16-byte
  // steps, which their SIMD add takes.
  const int64_t pad = widened ? 8 : 1;
  Tensor x(ctx, dt, rows, cols, cols + pad), r(ctx, dt, rows, cols, cols + 3 * pad), h(ctx, dt, rows, cols, cols + 2 * pad),
      y(ctx, yt, rows, cols, cols + pad), g(ctx, dt, 1, cols), b(ctx, dt, 1, cols);
  const auto at_boundary = [&](int64_t c) { return c > 0 && (c % kChunkCols == 0 || c % kChunkCols == kChunkCols - 1); };
  x.fill([&](int64_t, int64_t c) { return at_boundary(c) ? 60.0 : cheap_normal(rng, 2.0, 3.0); });
  r.fill([&](int64_t, int64_t c) { return at_boundary(c) ? -7.0 : cheap_normal(rng, -2.0, 1.0); });
  g.fill([&](int64_t, int64_t) { return cheap_normal(rng, 0.0, 1.0); });
  b.fill([&](int64_t, int64_t) { return cheap_normal(rng, 0.0, 1.0); });
  const onorm_rows xr = x.dev_rows(), rr = r.dev_rows(), hr = h.dev_rows(), yr = y.dev_rows();
  onorm_norm_args a;
  onorm_norm_args_init(&a, layer ? ONORM_LAYER_NORM : ONORM_RMS_NORM);
  a.gamma = g.dev();
  if (layer) a.beta = b.dev();
  a.param_dtype = dt;
  a.residual = &rr;
  if (residual_out) a.residual_out = &hr;
  a.weight_offset = widened ? 1.0 : 0.0;  // Gemma's offset: the widened rows fold it in
  ASSERT_EQ(onorm_norm(ctx, &xr, &a, &yr), ONORM_OK) << onorm_last_error();
  y.download();
  h.download();
  onorm_ref::NormSpec spec;
  spec.layer = layer;
  spec.x = x.host_rows();
  const onorm_rows r_host = r.host_rows();
  spec.residual = &r_host;
  spec.gamma = g.host();
  if (layer) spec.beta = b.host();
  spec.param_dtype = dt;
  spec.weight_offset = a.weight_offset;
  spec.eps = a.eps;
  spec.h_dtype = dt;
  const onorm_rows h_host = h.host_rows();
  const onorm_ref::Report rep = onorm_ref::check_norm(spec, onorm_ref::compute_norm(spec), y.host_rows(), nullptr, 0.0,
                                                      nullptr, nullptr, residual_out ? &h_host : nullptr);
  EXPECT_TRUE(rep.ok()) << rep.describe();
  EXPECT_TRUE(h.outside_untouched("residual_out"));
}

// The norms' residual add on this target, inside the norm's passes a chunk (a group of short rows)
// at a time or, for LayerNorm's 16-bit rows of one chunk, over a block first: h = round(x +
// residual) into residual_out (the reference checks it bit for bit) or scratch, and RMSNorm and
// LayerNorm of the rounded h, in every dtype the add vectorizes: widths below a vector, with a
// tail, a group of short rows and one left over, whole chunks, and rows of several chunks with
// outliers on both sides of every chunk boundary; 16-bit x into f32 y with Gemma's offset too
// (the widened rows, whose add is SIMD where the target loads x's dtype and portable where it
// does not: f16 on SSE4 and SCALAR).
void check_residual(const std::string& target) {
  SCOPED_TRACE("ONLINENORM_CPU_TARGET=" + target);
  EnvTarget env(target);
  ONORM_OPEN_OR_SKIP(ctx, ONORM_BACKEND_CPU);
  ONORM_SEEDED_RNG(rng);
  for (onorm_dtype dt : {ONORM_F32, ONORM_BF16, ONORM_F16})
    for (int64_t cols : {int64_t(1), int64_t(7), int64_t(33), int64_t(1024), int64_t(1025), kChunkCols,
                         kChunkCols + 1, 4 * kChunkCols + 1})
      for (const bool layer : {false, true})
        for (const bool residual_out : {true, false})
          for (const bool widened : {false, true}) {  // 16-bit x into f32 y: the widened rows
            if (widened && dt == ONORM_F32) continue;
            check_residual_case(ctx, rng, dt, 5, cols, layer, residual_out, widened);
            if (::testing::Test::HasFailure()) return;
          }
}

TEST(CpuTargets, ResidualAddOnEveryTarget) {
  for (const std::string& t : targets()) {
    check_residual(t);
    if (HasFailure()) return;
  }
}

// Outputs past the CPU backend's streaming threshold (16 MB of y), at odd strides (partial
// stores before and after the streamed vectors): y streamed from rows of several chunks and
// from short rows in groups, both adding the residual as they read; residual_out streamed by
// LayerNorm's 16-bit block add (rows of one chunk). On the best target (about 2 s a case, most
// of it the reference).
TEST(CpuTargets, ResidualOutStreamed) {
  const std::string t = targets().front();
  SCOPED_TRACE("ONLINENORM_CPU_TARGET=" + t);
  EnvTarget env(t);
  ONORM_OPEN_OR_SKIP(ctx, ONORM_BACKEND_CPU);
  ONORM_SEEDED_RNG(rng);
  struct C {
    onorm_dtype dt;
    int64_t rows, cols;
    bool layer;
  };
  for (const C& c : {C{ONORM_F32, 257, 16385, false}, C{ONORM_BF16, 2050, 4096, true}, C{ONORM_BF16, 8400, 1000, false}}) {
    check_residual_case(ctx, rng, c.dt, c.rows, c.cols, c.layer, true, false);
    if (HasFailure()) return;
  }
}

TEST(CpuTargets, RepresentativeSubsetOnEveryTarget) {
  for (const std::string& t : targets()) {
    check_target(t);
    if (HasFailure()) return;
  }
}

// A cap naming a target Highway knows but this build or machine lacks runs the next lower
// target, and says so in the context's name: ONLINENORM_CPU_TARGET=EMU128 where SCALAR is the
// compiled baseline must not silently mean SCALAR.
TEST(CpuTargets, UnavailableCapIsNamed) {
  const std::vector<std::string> have = targets();
  for (const char* cap : {"EMU128", "SCALAR"}) {
    if (std::find(have.begin(), have.end(), cap) != have.end()) continue;
    EnvTarget env(cap);
    ONORM_OPEN_OR_SKIP(ctx, ONORM_BACKEND_CPU);
    const std::string name = onorm_backend_name(ctx);
    EXPECT_NE(name.find(std::string(cap) + " not available"), std::string::npos) << name;
    return;
  }
  GTEST_SKIP() << "every baseline target is compiled here";
}

}  // namespace
}  // namespace onorm_test
