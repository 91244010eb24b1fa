// onorm: the onlinenorm command line. Backends available, one operator on one backend, the
// cross-backend comparison against a float64 reference, and the width sweep benchmark. The
// commands live in cmd_*.cpp, their shared options in options.cpp, checking in checking.cpp,
// tables and JSON in output.cpp.
#include <cstdio>
#include <iostream>
#include <new>
#include <string>

#include "commands.hpp"
#include "tool_common.hpp"

#ifndef ONORM_TOOL_VERSION
#define ONORM_TOOL_VERSION "unknown"
#endif

using namespace onorm_tool;

namespace onorm_tool {

const char* const kMainUsage =
    "usage: onorm <command> [options]\n"
    "\n"
    "commands:\n"
    "  info      library version, backends (available or why not, devices), CPU targets\n"
    "  run       one operator on one backend: time, bandwidth, error against float64\n"
    "  compare   one operator on every backend over the same input: one table\n"
    "  bench     the width sweep on one backend, with a device copy as the ceiling\n"
    "\n"
    "options:\n"
    "  --help    this text\n"
    "  --version the tool's version\n"
    "\n"
    "`onorm <command> --help` describes a command's options.\n"
    "Exit status: 0 ok, 1 error, 2 usage error, 3 a result outside the contract's bound,\n"
    "130 interrupted.\n";

}  // namespace onorm_tool

int main(int argc, char** argv) {
  try {
    if (argc < 2) throw UsageError(std::string("missing command\n\n") + kMainUsage);
    const std::string cmd = argv[1];
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      std::cout << kMainUsage;
      return kExitOk;
    }
    if (cmd == "--version") {
      std::cout << "onorm " << ONORM_TOOL_VERSION << "\n";
      return kExitOk;
    }
    if (cmd == "info") return cmd_info(argc, argv);
    if (cmd == "run") return cmd_run(argc, argv);
    if (cmd == "compare") return cmd_compare(argc, argv);
    if (cmd == "bench") return cmd_bench(argc, argv);
    throw UsageError("unknown command '" + cmd + "'\n\n" + kMainUsage);
  } catch (const UsageError& e) {
    std::string m = e.what();
    if (m.find("usage:") == std::string::npos) {
      const std::string cmd = argc >= 2 ? argv[1] : "";
      const char* usage = cmd == "info" ? kInfoUsage : cmd == "run" ? kRunUsage : cmd == "compare" ? kCompareUsage
                          : cmd == "bench" ? kBenchUsage : kMainUsage;
      m += std::string("\n\n") + usage;
    }
    std::fprintf(stderr, "onorm: %s", m.c_str());
    if (m.back() != '\n') std::fprintf(stderr, "\n");
    return kExitUsage;
  } catch (const ToolError& e) {
    std::fprintf(stderr, "onorm: error: %s\n", e.what());
    return kExitError;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "onorm: error: out of host memory\n");
    return kExitError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "onorm: error: %s\n", e.what());
    return kExitError;
  }
}
