// Context creation and backend selection: explicit backends and devices, bad values, AUTO
// with and without ONLINENORM_BACKEND, and the small functions around a context.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

#include "common/test_util.hpp"

namespace onorm_test {
namespace {

// Sets or clears ONLINENORM_BACKEND for one scope and restores it after.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) had_ = true, old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~EnvGuard() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

onorm_status create(onorm_backend b, int device, onorm_backend* kind = nullptr) {
  onorm_context c = nullptr;
  const onorm_status s = onorm_create(b, device, &c);
  if (s == ONORM_OK) {
    EXPECT_NE(c, nullptr);
    if (kind) *kind = onorm_context_backend(c);
    EXPECT_STRNE(onorm_backend_name(c), "");
  } else {
    EXPECT_EQ(c, nullptr) << "a failed create must leave *out NULL";
    EXPECT_STRNE(onorm_last_error(), "");
  }
  onorm_destroy(c);
  return s;
}

onorm_backend best_gpu() {
  if (onorm_backend_device_count(ONORM_BACKEND_CUDA) > 0) return ONORM_BACKEND_CUDA;
  if (onorm_backend_device_count(ONORM_BACKEND_HIP) > 0) return ONORM_BACKEND_HIP;
  return ONORM_BACKEND_CPU;
}

TEST(Create, CpuAlwaysAvailable) {
  onorm_backend k;
  ASSERT_EQ(create(ONORM_BACKEND_CPU, 0, &k), ONORM_OK);
  EXPECT_EQ(k, ONORM_BACKEND_CPU);
  EXPECT_EQ(onorm_backend_device_count(ONORM_BACKEND_CPU), 1);
  EXPECT_STREQ(onorm_backend_unavailable_reason(ONORM_BACKEND_CPU), "");
  onorm_context c = nullptr;
  ASSERT_EQ(onorm_create(ONORM_BACKEND_CPU, 0, &c), ONORM_OK);
  const std::string name = onorm_backend_name(c);
  EXPECT_EQ(name.rfind("cpu", 0), 0u) << name;
  EXPECT_EQ(onorm_set_stream(c, reinterpret_cast<void*>(0x1234)), ONORM_OK);  // ignored on CPU
  EXPECT_EQ(onorm_synchronize(c), ONORM_OK);
  onorm_destroy(c);
}

TEST(Create, BadArguments) {
  EXPECT_EQ(onorm_create(ONORM_BACKEND_CPU, 0, nullptr), ONORM_ERROR_INVALID_ARGUMENT);
  EXPECT_STRNE(onorm_last_error(), "");
  // Backend values outside the enum come from C (c_abi_check.c): in C++ they are not valid values.
  EXPECT_EQ(create(ONORM_BACKEND_CPU, -1), ONORM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(create(ONORM_BACKEND_CPU, 1), ONORM_ERROR_BACKEND_UNAVAILABLE);
  EXPECT_EQ(create(ONORM_BACKEND_CPU, 1000000), ONORM_ERROR_BACKEND_UNAVAILABLE);
}

TEST(Create, GpuBackendsAvailableOrUnavailable) {
  for (onorm_backend b : {ONORM_BACKEND_CUDA, ONORM_BACKEND_HIP}) {
    SCOPED_TRACE(backend_name(b));
    const int n = onorm_backend_device_count(b);
    ASSERT_GE(n, 0);
    if (n == 0) {
      EXPECT_STRNE(onorm_backend_unavailable_reason(b), "");
      EXPECT_EQ(create(b, 0), ONORM_ERROR_BACKEND_UNAVAILABLE);
    } else {
      EXPECT_STREQ(onorm_backend_unavailable_reason(b), "");
      onorm_backend k;
      EXPECT_EQ(create(b, n - 1, &k), ONORM_OK);
      EXPECT_EQ(k, b);
    }
    EXPECT_EQ(create(b, n), ONORM_ERROR_BACKEND_UNAVAILABLE);  // one past the last device
  }
  EXPECT_EQ(onorm_backend_device_count(ONORM_BACKEND_AUTO), 0);
}

TEST(Create, AutoWithoutEnvironmentPrefersGpu) {
  EnvGuard env("ONLINENORM_BACKEND", nullptr);
  onorm_backend k;
  ASSERT_EQ(create(ONORM_BACKEND_AUTO, 0, &k), ONORM_OK);
  EXPECT_EQ(k, best_gpu());
}

// AUTO with a device index picks the best backend that has that device; when none has it the
// call fails rather than handing out the CPU's device 0 under another index.
TEST(Create, AutoDeviceNoBackendHas) {
  EnvGuard env("ONLINENORM_BACKEND", nullptr);
  const int most = std::max(onorm_backend_device_count(ONORM_BACKEND_CUDA), onorm_backend_device_count(ONORM_BACKEND_HIP));
  for (int dev : {std::max(most, 1), most + 7}) {
    SCOPED_TRACE(dev);
    EXPECT_EQ(create(ONORM_BACKEND_AUTO, dev), ONORM_ERROR_BACKEND_UNAVAILABLE);
    EXPECT_NE(std::string(onorm_last_error()).find("device " + std::to_string(dev)), std::string::npos)
        << onorm_last_error();
  }
  if (most >= 2) {
    onorm_backend k;
    EXPECT_EQ(create(ONORM_BACKEND_AUTO, 1, &k), ONORM_OK);
    EXPECT_NE(k, ONORM_BACKEND_CPU);
  }
}

TEST(Create, AutoEmptyEnvironmentIsUnset) {
  EnvGuard env("ONLINENORM_BACKEND", "");
  onorm_backend k;
  ASSERT_EQ(create(ONORM_BACKEND_AUTO, 0, &k), ONORM_OK);
  EXPECT_EQ(k, best_gpu());
}

TEST(Create, EnvironmentCpu) {
  for (const char* v : {"cpu", "cpu:0"}) {
    EnvGuard env("ONLINENORM_BACKEND", v);
    onorm_backend k;
    ASSERT_EQ(create(ONORM_BACKEND_AUTO, 0, &k), ONORM_OK) << v;
    EXPECT_EQ(k, ONORM_BACKEND_CPU) << v;
  }
  EnvGuard env("ONLINENORM_BACKEND", "cpu:1");
  EXPECT_EQ(create(ONORM_BACKEND_AUTO, 0), ONORM_ERROR_BACKEND_UNAVAILABLE);
}

TEST(Create, EnvironmentGpu) {
  for (onorm_backend b : {ONORM_BACKEND_CUDA, ONORM_BACKEND_HIP}) {
    const std::string name = backend_name(b);
    const int n = onorm_backend_device_count(b);
    for (int dev : {-1, 0, 1}) {
      const std::string v = dev < 0 ? name : name + ":" + std::to_string(dev);
      SCOPED_TRACE(v);
      EnvGuard env("ONLINENORM_BACKEND", v.c_str());
      onorm_backend k;
      const int want_dev = dev < 0 ? 0 : dev;
      const onorm_status s = create(ONORM_BACKEND_AUTO, 0, &k);
      if (want_dev < n) {
        EXPECT_EQ(s, ONORM_OK);
        EXPECT_EQ(k, b);
      } else {
        EXPECT_EQ(s, ONORM_ERROR_BACKEND_UNAVAILABLE);
      }
    }
  }
}

TEST(Create, EnvironmentGarbage) {
  for (const char* v : {"garbage", "cuda:", "cuda:x", "cuda:-1", "hip:1:2", "cpu0", "gpu"}) {
    EnvGuard env("ONLINENORM_BACKEND", v);
    EXPECT_EQ(create(ONORM_BACKEND_AUTO, 0), ONORM_ERROR_INVALID_ARGUMENT) << "'" << v << "'";
    EXPECT_NE(std::string(onorm_last_error()).find("ONLINENORM_BACKEND"), std::string::npos) << onorm_last_error();
  }
}

// The environment only steers AUTO: an explicit backend ignores it.
TEST(Create, EnvironmentIgnoredForExplicitBackend) {
  EnvGuard env("ONLINENORM_BACKEND", "garbage");
  onorm_backend k;
  ASSERT_EQ(create(ONORM_BACKEND_CPU, 0, &k), ONORM_OK);
  EXPECT_EQ(k, ONORM_BACKEND_CPU);
}

// ONLINENORM_TUNE (src/tune.hpp): every backend's keys are accepted by every backend, since one
// variable serves a whole process; a key nobody knows or a bad value is refused, naming the key.
TEST(Create, TuneAccepted) {
  for (const char* v : {"", "stream=0", "stream=0,prefetch=0,twoexp=1", "cluster=0,tworead=1,reg_cols=0",
                        "cluster_max=16,", "short_wide=0,,tworead=1"}) {
    EnvGuard env("ONLINENORM_TUNE", v);
    EXPECT_EQ(create(ONORM_BACKEND_CPU, 0), ONORM_OK) << "'" << v << "': " << onorm_last_error();
  }
}

TEST(Create, TuneRefused) {
  const std::pair<const char*, const char*> cases[] = {
      {"nostream", "nostream"},          // the old ONLINENORM_CPU_TUNE spelling
      {"streem=0", "streem"},            // misspelt key
      {"stream=0,bogus=1", "bogus"},     // a bad key after a good one
      {"stream", "stream"},              // no value
      {"stream=", "stream"},             // empty value
      {"stream=yes", "stream"},          // not an integer
      {"stream=2", "stream"},            // out of range
      {"cluster_max=17", "cluster_max"}, // out of range
      {"reg_cols=-1", "reg_cols"},       // negative
      {"stage_bytes=12x", "stage_bytes"},
      {"=1", "''"},                      // no key
  };
  for (const auto& c : cases) {
    EnvGuard env("ONLINENORM_TUNE", c.first);
    for (onorm_backend b : {ONORM_BACKEND_CPU, ONORM_BACKEND_AUTO}) {
      EXPECT_EQ(create(b, 0), ONORM_ERROR_INVALID_ARGUMENT) << "'" << c.first << "'";
      const std::string msg = onorm_last_error();
      EXPECT_NE(msg.find("ONLINENORM_TUNE"), std::string::npos) << msg;
      EXPECT_NE(msg.find(c.second), std::string::npos) << msg;
    }
  }
}

TEST(Misc, StatusStringsAndNulls) {
  for (int s = ONORM_OK; s <= ONORM_ERROR_INTERNAL; ++s) EXPECT_STRNE(onorm_status_string(static_cast<onorm_status>(s)), "");
  EXPECT_STRNE(onorm_status_string(ONORM_OK), onorm_status_string(ONORM_ERROR_INVALID_ARGUMENT));
  onorm_destroy(nullptr);  // no-op
  EXPECT_NE(onorm_backend_name(nullptr), nullptr);
  EXPECT_EQ(onorm_set_stream(nullptr, nullptr), ONORM_ERROR_INVALID_ARGUMENT);
  EXPECT_STRNE(onorm_last_error(), "");
  EXPECT_EQ(onorm_synchronize(nullptr), ONORM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(onorm_dtype_size(ONORM_F32), 4u);
  EXPECT_EQ(onorm_dtype_size(ONORM_F16), 2u);
  EXPECT_EQ(onorm_dtype_size(ONORM_BF16), 2u);
  EXPECT_EQ(onorm_dtype_size(ONORM_F64), 8u);
  EXPECT_EQ(onorm_dtype_size(ONORM_F8_E4M3), 1u);
  EXPECT_EQ(onorm_dtype_size(ONORM_I8), 1u);
  EXPECT_EQ(onorm_dtype_size(static_cast<onorm_dtype>(6)), 0u);
  EXPECT_EQ(ONORM_API_VERSION, 2);
}

class Memory : public ::testing::TestWithParam<onorm_backend> {};

TEST_P(Memory, MallocCopyFree) {
  ONORM_OPEN_OR_SKIP(ctx, GetParam());
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(onorm_malloc(ctx, 1000, &a), ONORM_OK);
  ASSERT_EQ(onorm_malloc(ctx, 1000, &b), ONORM_OK);
  ASSERT_NE(a, nullptr);
  std::vector<unsigned char> src(1000), dst(1000, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
  ASSERT_EQ(onorm_memcpy(ctx, a, src.data(), 1000, ONORM_COPY_HOST_TO_DEVICE), ONORM_OK);
  ASSERT_EQ(onorm_memcpy(ctx, b, a, 1000, ONORM_COPY_DEVICE_TO_DEVICE), ONORM_OK);
  ASSERT_EQ(onorm_memcpy(ctx, dst.data(), b, 1000, ONORM_COPY_DEVICE_TO_HOST), ONORM_OK);
  EXPECT_EQ(src, dst);
  EXPECT_EQ(onorm_memcpy(ctx, dst.data(), b, 0, ONORM_COPY_DEVICE_TO_HOST), ONORM_OK);
  EXPECT_EQ(onorm_memcpy(ctx, nullptr, b, 10, ONORM_COPY_DEVICE_TO_HOST), ONORM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(onorm_memcpy(ctx, dst.data(), nullptr, 10, ONORM_COPY_DEVICE_TO_HOST), ONORM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(onorm_memcpy(ctx, dst.data(), b, 10, static_cast<onorm_copy_kind>(3)), ONORM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(onorm_memcpy(nullptr, dst.data(), b, 10, ONORM_COPY_DEVICE_TO_HOST), ONORM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(onorm_malloc(nullptr, 10, &a), ONORM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(onorm_malloc(ctx, 10, nullptr), ONORM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(onorm_free(ctx, nullptr), ONORM_OK);
  EXPECT_EQ(onorm_free(nullptr, a), ONORM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(onorm_free(ctx, a), ONORM_OK);
  EXPECT_EQ(onorm_free(ctx, b), ONORM_OK);
  void* z = nullptr;
  EXPECT_EQ(onorm_malloc(ctx, 0, &z), ONORM_OK);  // zero bytes: OK, freeable
  EXPECT_EQ(onorm_free(ctx, z), ONORM_OK);
}

INSTANTIATE_TEST_SUITE_P(All, Memory, ::testing::ValuesIn(all_backends()), BackendName());

}  // namespace
}  // namespace onorm_test
