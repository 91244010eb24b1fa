// An onorm_context owned by Python, with the device kind and number its arrays must live on.
#pragma once
#include <onlinenorm/onlinenorm.h>

struct Context {
  Context(onorm_backend backend, int device);
  ~Context() { onorm_destroy(handle); }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  onorm_context handle = nullptr;
  onorm_backend kind = ONORM_BACKEND_CPU;  // never AUTO: what the library chose
  int device = 0;                          // the GPU's number (0 on the CPU)
};
