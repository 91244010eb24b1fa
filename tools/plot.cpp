#include "plot.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "tool_common.hpp"

#ifndef ONORM_TOOL_SOURCE_DIR
#define ONORM_TOOL_SOURCE_DIR ""
#endif

namespace onorm_tool {

int run_process(const std::vector<std::string>& args, bool quiet) {
  std::vector<char*> av;
  for (const std::string& a : args) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (quiet) {
      if (std::freopen("/dev/null", "w", stdout) == nullptr) _exit(127);
      if (std::freopen("/dev/null", "w", stderr) == nullptr) _exit(127);
    }
    execvp(av[0], av.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

namespace {

std::string exe_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string p(buf, static_cast<size_t>(n));
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? "" : p.substr(0, slash);
}

bool file_exists(const std::string& p) { return !p.empty() && access(p.c_str(), R_OK) == 0; }

}  // namespace

// Draws the PNG with tools/plot_bench.py through a python3 that has matplotlib.
void plot_png(const std::string& json_path, const std::string& png_path) {
  std::vector<std::string> scripts;
  if (const char* s = std::getenv("ONORM_PLOT_SCRIPT")) scripts.push_back(s);
  const std::string dir = exe_dir();
  if (!dir.empty()) {
    scripts.push_back(dir + "/plot_bench.py");
    scripts.push_back(dir + "/../share/onlinenorm/plot_bench.py");
  }
  scripts.push_back(std::string(ONORM_TOOL_SOURCE_DIR) + "/plot_bench.py");
  std::string script;
  for (const std::string& s : scripts)
    if (file_exists(s)) {
      script = s;
      break;
    }
  if (script.empty()) throw ToolError("--png: plot_bench.py not found beside onorm (set ONORM_PLOT_SCRIPT)");
  std::vector<std::string> pythons;
  if (const char* py = std::getenv("ONORM_PYTHON")) {
    pythons.push_back(py);  // only that one when set
  } else {
    pythons.push_back("python3");
    pythons.push_back("/usr/bin/python3");
  }
  std::string python;
  bool any_python = false;
  for (const std::string& py : pythons) {
    const int rc = run_process({py, "-c", "import matplotlib"}, true);
    if (rc == 0) {
      python = py;
      break;
    }
    if (rc != 127 && rc != -1) any_python = true;
  }
  if (python.empty())
    throw ToolError(any_python ? "--png: python3 is there but matplotlib is not (Debian: apt-get install python3-matplotlib; "
                                 "or set ONORM_PYTHON to a python with matplotlib); the JSON is at " + json_path
                               : "--png: python3 was not found (Debian: apt-get install python3 python3-matplotlib); "
                                 "the JSON is at " + json_path);
  if (run_process({python, script, json_path, png_path}, false) != 0)
    throw ToolError("--png: " + script + " failed; the JSON is at " + json_path);
}

}  // namespace onorm_tool
