// ONLINENORM_TUNE=key=value,key=value: the one tuning hook, for benchmarking a schedule against
// its alternative in one process. Every key is listed in kTuneKeys (documented in
// docs/tuning.md); onorm_create refuses an unknown key or a malformed value with
// ONORM_ERROR_INVALID_ARGUMENT, whatever the backend, so a typo never measures the default.
//
// Header-only: the GPU backends are separate shared libraries (opened with dlopen) that read
// their keys here without linking the core library.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace onorm {
namespace tune {

constexpr const char* kEnv = "ONLINENORM_TUNE";

struct Key {
  const char* name;
  long long lo, hi;  // accepted integer values, inclusive
};

// Ranges are the values that mean something; a backend may narrow one further against its
// device (cuda: stage_bytes against the shared memory a block may use).
constexpr Key kTuneKeys[] = {
    // CUDA
    {"reg_cols", 0, (1ll << 40)},          // longest row kept in registers (both dtypes)
    {"stage_bytes", 4096, (1ll << 30)},    // shared-memory stage of the staged kernel
    {"tworead", 0, 1},                     // long rows always take the two-read schedule
    {"cluster", 0, 1},                     // thread-block clusters (on where the device has them)
    {"cluster_cols", 1, (1ll << 40)},      // shortest row split over a cluster (both dtypes)
    {"cluster_max", 1, 16},                // largest cluster, blocks per row
    {"cluster_tier", 0, 1},                // smallest slice tried
    {"cluster_prefetch", 0, 1},            // gamma / beta prefetched before the cluster merge
    {"cluster_stream", 0, 1},              // resident clusters walking rows through a shared-memory stage
    {"backward_stages", 1, 3},             // rows staged at once by the norms' backward over clusters
    {"short_wide", 0, 1},                  // wide shapes for short rows
    {"dense_cols", 1, (1ll << 40)},        // shortest 16-bit row in the dense register shapes
    // CPU
    {"stream", 0, 1},                      // streaming stores for large outputs
    {"prefetch", 0, 1},                    // software prefetch
    {"twoexp", 0, 1},                      // softmax recomputes exp in the write pass
};

inline const Key* find_key(const char* name, size_t len) {
  for (const Key& k : kTuneKeys)
    if (std::strlen(k.name) == len && std::strncmp(k.name, name, len) == 0) return &k;
  return nullptr;
}

// Walks "key=value,..." and checks every entry against kTuneKeys. With want set, stores the
// value of that key (the last one wins) in *value and returns whether it was present; errors
// go to err. Returns -1 on a malformed string, 1 if want was found, 0 otherwise.
inline int scan(const char* s, const char* want, long long* value, char* err, size_t err_len) {
  int found = 0;
  if (!s) return 0;
  const char* p = s;
  while (*p) {
    const char* end = std::strchr(p, ',');
    if (!end) end = p + std::strlen(p);
    const std::string item(p, static_cast<size_t>(end - p));
    p = *end ? end + 1 : end;
    if (item.empty()) continue;  // "a=1,,b=0" and a trailing comma are harmless
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const Key* k = find_key(key.data(), key.size());
    if (!k) {
      std::string names;
      for (const Key& n : kTuneKeys) names += std::string(names.empty() ? "" : ", ") + n.name;
      std::snprintf(err, err_len, "%s: unknown key '%s' (known: %s)", kEnv, key.c_str(), names.c_str());
      return -1;
    }
    const std::string text = eq == std::string::npos ? std::string() : item.substr(eq + 1);
    char* stop = nullptr;
    errno = 0;
    const long long v = text.empty() ? 0 : std::strtoll(text.c_str(), &stop, 10);
    if (text.empty() || *stop != '\0' || errno == ERANGE || v < k->lo || v > k->hi) {
      std::snprintf(err, err_len, "%s: key '%s' needs an integer in [%lld, %lld], got '%s'", kEnv, k->name, k->lo,
                    k->hi, text.c_str());
      return -1;
    }
    if (want && key == want) {
      *value = v;
      found = 1;
    }
  }
  return found;
}

// Checks the whole variable (onorm_create calls it before any backend opens).
inline bool validate(char* err, size_t err_len) { return scan(std::getenv(kEnv), nullptr, nullptr, err, err_len) >= 0; }

// The value of one key, or fallback when the variable does not set it. Call after validate().
inline long long get(const char* key, long long fallback) {
  long long v = fallback;
  char err[8];
  return scan(std::getenv(kEnv), key, &v, err, sizeof err) == 1 ? v : fallback;
}

}  // namespace tune
}  // namespace onorm
