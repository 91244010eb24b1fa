#include "registry.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "last_error.hpp"

namespace onorm {
namespace {

const char* module_file(onorm_backend kind) {
  switch (kind) {
    case ONORM_BACKEND_CUDA: return "libonlinenorm_cuda.so";
    case ONORM_BACKEND_HIP: return "libonlinenorm_hip.so";
    default: return nullptr;
  }
}

// The folder this library was loaded from: modules are installed beside it.
std::string own_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&backend_entry), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string path(info.dli_fname);
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

BackendEntry load_module(onorm_backend kind) {
  BackendEntry entry;
  const std::string file = module_file(kind);
  std::string tried;
  void* handle = nullptr;
  std::string candidates[3];
  if (const char* dir = std::getenv("ONLINENORM_MODULE_PATH")) candidates[0] = std::string(dir) + "/" + file;
  candidates[1] = own_directory() + file;
  candidates[2] = file;  // the loader's own search path
  for (const std::string& path : candidates) {
    if (path.empty()) continue;
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) break;
    const char* why = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + (why ? why : path);
  }
  if (!handle) {
    entry.unavailable_reason = "module " + file + " could not be loaded (" + tried + ")";
    return entry;
  }
  auto fn = reinterpret_cast<onorm_backend_module_entry_fn>(dlsym(handle, ONORM_BACKEND_MODULE_ENTRY));
  const onorm_backend_module* module = fn ? fn() : nullptr;
  if (!module || module->abi != ONORM_BACKEND_MODULE_ABI || module->kind != kind) {
    entry.unavailable_reason = "module " + file + " is not a compatible onlinenorm backend";
    dlclose(handle);
    return entry;
  }
  entry.module = module;  // the handle stays open for the life of the process
  return entry;
}

BackendEntry make_entry(onorm_backend kind) {
  BackendEntry entry;
  if (kind == ONORM_BACKEND_CPU) {
    entry.module = onorm_cpu_backend_module();
  } else if (module_file(kind)) {
    entry = load_module(kind);
  } else {
    entry.unavailable_reason = "no such backend";
    return entry;
  }
  if (entry.module) {
    char why[512] = {0};
    entry.device_count = entry.module->device_count(why, sizeof why);
    if (entry.device_count <= 0) {
      entry.device_count = 0;
      entry.unavailable_reason = why[0] ? why : "no device";
    }
  }
  return entry;
}

bool parse_backend(const std::string& text, onorm_backend& kind, int& device, bool& has_device) {
  std::string name = text;
  has_device = false;
  const size_t colon = text.find(':');
  if (colon != std::string::npos) {
    name = text.substr(0, colon);
    const std::string index = text.substr(colon + 1);
    if (index.empty() || index.size() > 6 || index.find_first_not_of("0123456789") != std::string::npos) return false;
    device = std::atoi(index.c_str());
    has_device = true;
  }
  if (name == "cpu") kind = ONORM_BACKEND_CPU;
  else if (name == "cuda") kind = ONORM_BACKEND_CUDA;
  else if (name == "hip") kind = ONORM_BACKEND_HIP;
  else return false;
  return true;
}

}  // namespace

const BackendEntry& backend_entry(onorm_backend kind) {
  static std::once_flag once[4];
  static BackendEntry entries[4];
  const int i = static_cast<int>(kind);
  if (i < 1 || i > 3) {
    static const BackendEntry none{nullptr, "no such backend", 0};
    return none;
  }
  std::call_once(once[i], [&] { entries[i] = make_entry(kind); });
  return entries[i];
}

onorm_status resolve_backend(onorm_backend requested, int device, onorm_backend& kind, int& resolved) {
  if (device < 0) return fail(ONORM_ERROR_INVALID_ARGUMENT, "device index must be >= 0");
  kind = requested;
  resolved = device;
  if (requested == ONORM_BACKEND_AUTO) {
    const char* env = std::getenv("ONLINENORM_BACKEND");
    if (env && *env) {
      bool has_device = false;
      if (!parse_backend(env, kind, resolved, has_device))
        return fail(ONORM_ERROR_INVALID_ARGUMENT,
                    std::string("ONLINENORM_BACKEND='") + env + "' is not one of cpu, cuda[:N], hip[:N]");
    } else {
      // The best backend that has this device: a GPU, else the CPU, which has device 0 only.
      // A device index no backend has is an error, not a quiet fall back to the CPU.
      kind = ONORM_BACKEND_CPU;
      for (onorm_backend gpu : {ONORM_BACKEND_CUDA, ONORM_BACKEND_HIP}) {
        if (backend_entry(gpu).device_count > device) {
          kind = gpu;
          break;
        }
      }
      if (kind == ONORM_BACKEND_CPU && device != 0)
        return fail(ONORM_ERROR_BACKEND_UNAVAILABLE,
                    "AUTO: no backend has device " + std::to_string(device) + " (cuda has " +
                        std::to_string(backend_entry(ONORM_BACKEND_CUDA).device_count) + ", hip has " +
                        std::to_string(backend_entry(ONORM_BACKEND_HIP).device_count) +
                        " device(s); the cpu has device 0 only)");
    }
  } else if (requested < ONORM_BACKEND_AUTO || requested > ONORM_BACKEND_HIP) {
    return fail(ONORM_ERROR_INVALID_ARGUMENT,
                "backend " + std::to_string(static_cast<int>(requested)) + " is not an onorm_backend");
  }
  const BackendEntry& entry = backend_entry(kind);
  const char* name = kind == ONORM_BACKEND_CPU ? "cpu" : kind == ONORM_BACKEND_CUDA ? "cuda" : "hip";
  if (!entry.module || entry.device_count == 0)
    return fail(ONORM_ERROR_BACKEND_UNAVAILABLE,
                std::string("backend ") + name + " is unavailable: " + entry.unavailable_reason);
  if (resolved >= entry.device_count)
    return fail(ONORM_ERROR_BACKEND_UNAVAILABLE,
                std::string("backend ") + name + " has " + std::to_string(entry.device_count) +
                    " device(s); device " + std::to_string(resolved) + " does not exist");
  return ONORM_OK;
}

}  // namespace onorm
