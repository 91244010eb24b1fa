// A failed C ABI call as a Python exception that carries the library's message.
#pragma once
#include <onlinenorm/onlinenorm.h>

// Throws for any status but ONORM_OK: ValueError for an invalid argument, TypeError for a request
// the backend does not take (a dtype, an alignment), MemoryError, else RuntimeError. The message is
// "<function>: <status string>: <onorm_last_error()>".
void check(onorm_status status, const char* function);
