// The backend registry: which backends exist, loading GPU modules on first use, and the
// run-time choice for ONORM_BACKEND_AUTO (ONLINENORM_BACKEND, then GPU before CPU).
#pragma once

#include <string>

#include "backend_interface.h"

namespace onorm {

struct BackendEntry {
  const onorm_backend_module* module = nullptr;  // null when unavailable
  std::string unavailable_reason;                // why module is null or has no device
  int device_count = 0;
};

// Loaded once per process, thread-safe.
const BackendEntry& backend_entry(onorm_backend kind);

// Resolves AUTO and the environment to a concrete backend and device.
// Returns ONORM_OK or the failure status (with onorm_last_error() set).
onorm_status resolve_backend(onorm_backend requested, int device, onorm_backend& kind, int& resolved_device);

// Backends compiled into this library itself.
extern "C" const onorm_backend_module* onorm_cpu_backend_module(void);

}  // namespace onorm
