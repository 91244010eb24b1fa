#include "last_error.hpp"

#include <cstdio>

namespace onorm {
namespace {
thread_local char tls_last_error[2048];
}

onorm_status fail(onorm_status status, const char* message, const char* more) {
  std::snprintf(tls_last_error, sizeof tls_last_error, "%s%s", message ? message : "", more ? more : "");
  return status;
}

const char* last_error_message() { return tls_last_error; }

}  // namespace onorm
