// onorm info: the library version, the backends (available or why not, devices), the CPU
// targets and the environment variables the library reads.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <vector>

#include "commands.hpp"
#include "options.hpp"

#ifndef ONORM_TOOL_VERSION
#define ONORM_TOOL_VERSION "unknown"
#endif

namespace onorm_tool {

const char* const kInfoUsage =
    "usage: onorm info\n"
    "\n"
    "Prints the library version, each backend (cpu, cuda, hip) with its devices or the reason\n"
    "it is unavailable, and the CPU SIMD targets this machine can run.\n";

int cmd_info(int argc, char** argv) {
  auto opts = parse_options(argc, argv, 2, {{"help", false}});
  if (opts.count("help")) {
    std::cout << kInfoUsage;
    return kExitOk;
  }
  std::cout << "onorm " << ONORM_TOOL_VERSION << " (onlinenorm C ABI version " << ONORM_API_VERSION << ")\n";
  std::cout << "backends:\n";
  for (onorm_backend b : {ONORM_BACKEND_CPU, ONORM_BACKEND_CUDA, ONORM_BACKEND_HIP}) {
    const int n = onorm_backend_device_count(b);
    const char* why = onorm_backend_unavailable_reason(b);
    char head[32];
    std::snprintf(head, sizeof head, "  %-5s", backend_kind_name(b));
    if (n <= 0) {
      std::cout << head << "unavailable: " << (why && *why ? why : "no device") << "\n";
      continue;
    }
    std::cout << head << "available, " << n << " device" << (n == 1 ? "" : "s") << "\n";
    for (int d = 0; d < n; ++d) {
      BackendSpec spec{b, d};
      onorm_context ctx = nullptr;
      if (onorm_status s = onorm_create(b, d, &ctx)) {
        std::cout << "        " << spec.label() << ": cannot open: " << onorm_status_string(s) << " ("
                  << onorm_last_error() << ")\n";
        continue;
      }
      std::cout << "        " << spec.label() << "  " << onorm_backend_name(ctx) << "\n";
      onorm_destroy(ctx);
    }
  }
  const int nt = onorm_cpu_targets(nullptr, 0);
  std::vector<const char*> names(static_cast<size_t>(std::max(nt, 0)));
  const int got = onorm_cpu_targets(names.data(), nt);
  std::cout << "cpu targets (best first):";
  for (int i = 0; i < std::min(got, nt); ++i) std::cout << " " << names[i];
  std::cout << "\n";
  if (const char* cap = std::getenv("ONLINENORM_CPU_TARGET")) std::cout << "ONLINENORM_CPU_TARGET=" << cap << "\n";
  // The tuning variable (docs/tuning.md): a key the library refuses makes every context fail.
  if (const char* tune = std::getenv("ONLINENORM_TUNE")) {
    std::cout << "ONLINENORM_TUNE=" << tune;
    onorm_context ctx = nullptr;
    if (onorm_create(ONORM_BACKEND_CPU, 0, &ctx) == ONORM_ERROR_INVALID_ARGUMENT && !ctx)
      std::cout << " (invalid: " << onorm_last_error() << ")";
    onorm_destroy(ctx);
    std::cout << "\n";
  }
  // What ONORM_BACKEND_AUTO does with the variable: a value the library refuses is shown as
  // such, with its reason, not just echoed.
  if (const char* be = std::getenv("ONLINENORM_BACKEND")) {
    std::cout << "ONLINENORM_BACKEND=" << be;
    if (*be) {
      onorm_context ctx = nullptr;
      const onorm_status s = onorm_create(ONORM_BACKEND_AUTO, 0, &ctx);
      if (s == ONORM_OK) std::cout << " (AUTO selects " << onorm_backend_name(ctx) << ")";
      else if (s == ONORM_ERROR_INVALID_ARGUMENT) std::cout << " (invalid: " << onorm_last_error() << ")";
      else std::cout << " (" << onorm_status_string(s) << ": " << onorm_last_error() << ")";
      onorm_destroy(ctx);
    } else {
      std::cout << " (empty: same as unset)";
    }
    std::cout << "\n";
  }
  return kExitOk;
}

}  // namespace onorm_tool
