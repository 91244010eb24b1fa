#include "context.hpp"

#include <cstdlib>
#include <cstring>

#include "status.hpp"

Context::Context(onorm_backend backend, int device) {
  check(onorm_create(backend, device, &handle), "onorm_create");
  kind = onorm_context_backend(handle);
  this->device = kind == ONORM_BACKEND_CPU ? 0 : device;
  // AUTO may take the device from ONLINENORM_BACKEND ("cuda:1"): the name says which ("cuda:1 (...)").
  if (backend == ONORM_BACKEND_AUTO && kind != ONORM_BACKEND_CPU) {
    const char* name = onorm_backend_name(handle);
    if (const char* colon = std::strchr(name, ':')) this->device = std::atoi(colon + 1);
  }
}
