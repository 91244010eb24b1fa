// Where a test runs: every backend, and on the CPU every Highway target the machine has
// (onorm_cpu_targets(), capped with ONLINENORM_CPU_TARGET when the context is created), so a
// defect of one target's kernels (SCALAR, SSE4 without F16C, ...) shows up under its own name.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace onorm_test {

struct Where {
  onorm_backend backend = ONORM_BACKEND_CPU;
  std::string cpu_target;  // empty: the backend's default (and every GPU)
};

// The CPU targets this machine runs, best first; empty if the CPU backend lists none.
inline std::vector<std::string> cpu_target_names() {
  const int n = onorm_cpu_targets(nullptr, 0);
  std::vector<const char*> names(static_cast<size_t>(n > 0 ? n : 0), nullptr);
  if (n > 0) onorm_cpu_targets(names.data(), n);
  std::vector<std::string> out;
  for (const char* s : names)
    if (s) out.emplace_back(s);
  return out;
}

// One CPU instance per target, then the GPU backends (which skip where absent).
inline std::vector<Where> all_wheres() {
  std::vector<Where> w;
  for (const std::string& t : cpu_target_names()) w.push_back({ONORM_BACKEND_CPU, t});
  if (w.empty()) w.push_back({ONORM_BACKEND_CPU, ""});
  w.push_back({ONORM_BACKEND_CUDA, ""});
  w.push_back({ONORM_BACKEND_HIP, ""});
  return w;
}

inline std::string where_name(const Where& w) {
  return w.cpu_target.empty() ? std::string(backend_name(w.backend)) : std::string("cpu_") + w.cpu_target;
}

// Sets an environment variable for its lifetime, restoring the old value (or its absence).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) had_ = true, old_ = old;
    if (!value.empty()) setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// ONORM_OPEN_OR_SKIP for a Where: the CPU target cap is read when the context is opened.
#define ONORM_OPEN_WHERE_OR_SKIP(ctx, where)                                        \
  SCOPED_TRACE(::onorm_test::where_name(where));                                    \
  std::unique_ptr<::onorm_test::ScopedEnv> ctx##_env_(                              \
      new ::onorm_test::ScopedEnv("ONLINENORM_CPU_TARGET", (where).cpu_target));    \
  ONORM_OPEN_OR_SKIP(ctx, (where).backend);                                         \
  ctx##_env_.reset()

}  // namespace onorm_test
