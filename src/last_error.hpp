// The thread-local detail behind onorm_last_error().
#pragma once

#include <string>

#include "onlinenorm/onlinenorm.h"

namespace onorm {

// Records message as this thread's last error and returns status, so callers can
// `return fail(ONORM_ERROR_..., "...")`.
onorm_status fail(onorm_status status, const std::string& message);
const char* last_error_message();

}  // namespace onorm
