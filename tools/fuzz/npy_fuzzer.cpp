// libFuzzer target for the .npy parser. Build with clang (ONLINENORM_BUILD_FUZZERS=ON) and run:
//   build-fuzz/bin/npy_fuzzer -max_total_time=300 tools/fuzz/corpus
#include <cstddef>
#include <cstdint>
#include <string>

#include "npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  onorm_tool::NpyArray a;
  std::string err;
  if (onorm_tool::parse_npy(data, size, a, err)) {
    // A successful parse must describe exactly the bytes it holds.
    const int64_t n = a.elements();
    if (static_cast<size_t>(n) * static_cast<size_t>(a.item_size) != a.data.size()) __builtin_trap();
    if (a.item_size != 1 && a.item_size != 2 && a.item_size != 4 && a.item_size != 8) __builtin_trap();
  } else if (err.empty()) {
    __builtin_trap();  // every rejection says why
  }
  return 0;
}
