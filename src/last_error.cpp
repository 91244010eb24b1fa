#include "last_error.hpp"

namespace onorm {
namespace {
thread_local std::string tls_last_error;
}

onorm_status fail(onorm_status status, const std::string& message) {
  tls_last_error = message;
  return status;
}

const char* last_error_message() { return tls_last_error.c_str(); }

}  // namespace onorm
