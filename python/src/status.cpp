#include "status.hpp"

#include <nanobind/nanobind.h>

#include <string>

namespace nb = nanobind;

void check(onorm_status status, const char* function) {
  if (status == ONORM_OK) return;
  const std::string message = std::string(function) + ": " + onorm_status_string(status) + ": " + onorm_last_error();
  switch (status) {
    case ONORM_ERROR_INVALID_ARGUMENT: throw nb::value_error(message.c_str());
    case ONORM_ERROR_UNSUPPORTED: throw nb::type_error(message.c_str());
    case ONORM_ERROR_OUT_OF_MEMORY: PyErr_SetString(PyExc_MemoryError, message.c_str()); throw nb::python_error();
    default: throw std::runtime_error(message);
  }
}
