// Argument validation shared by every backend: runs before any backend sees a request,
// so a bad request writes nothing anywhere.
#pragma once

#include "backend_interface.h"

namespace onorm {

// Returns ONORM_OK when request may run, otherwise the status to return (with
// onorm_last_error() set). `empty` is set when there is nothing to compute.
onorm_status validate_request(const onorm_request& request, bool& empty);

// Element size in bytes; 0 for a value outside the enum.
size_t dtype_size(int dtype);
const char* dtype_name(int dtype);
const char* op_name(onorm_op op);

}  // namespace onorm
