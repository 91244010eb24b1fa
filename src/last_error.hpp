// The thread-local detail behind onorm_last_error().
#pragma once

#include <string>

#include "onlinenorm/onlinenorm.h"

namespace onorm {

// Records message (and, when given, a second part appended to it) as this thread's last error
// and returns status, so callers can `return fail(ONORM_ERROR_..., "...")`. The message lives
// in a fixed thread-local buffer (long messages are cut): recording one never allocates, so
// the out-of-memory path cannot throw. Exported for the library's own layers in other shared
// libraries (onlinenorm::nccl), whose failures onorm_last_error() reports too.
ONORM_API onorm_status fail(onorm_status status, const char* message, const char* more = "");
inline onorm_status fail(onorm_status status, const std::string& message) { return fail(status, message.c_str()); }
const char* last_error_message();

}  // namespace onorm
