// The hard norm rows the GPU checks draw from (the host emulator's tests and onorm_bench_cuda
// --check): per row, by r % 8, an outlier of 300 at column 0, every 512-column boundary and
// the last column; offsets 1e3, 1e5, 1e6 + N(0,1); the constant 1e6 + 0.125; +-3e38; an offset
// row with boundary outliers; plain rows. Two more sets pair plain rows with tiny rows (eps 0)
// or with offset rows under eps = 1e39.
#pragma once

#include <cstdint>
#include <random>

namespace onorm_ref {

enum HardSet : int { kHardMixed = 0, kHardTiny = 1, kHardHugeEps = 2 };
constexpr int kHardKinds = 8;  // row kinds, by r % kHardKinds

inline const char* hard_set_name(int set) {
  return set == kHardMixed ? "mixed" : set == kHardTiny ? "tiny eps=0" : "eps=1e39";
}
inline double hard_eps(int set) { return set == kHardMixed ? 1e-5 : set == kHardTiny ? 0.0 : 1e39; }

template <class Rng>
double hard_value(int set, int64_t r, int64_t j, int64_t cols, Rng& rng) {
  std::normal_distribution<double> n01(0.0, 1.0);
  const bool boundary = j == 0 || j % 512 == 0 || j % 512 == 511 || j == cols - 1;
  const int kind = static_cast<int>(r % kHardKinds);
  if (set == kHardTiny) return kind % 2 ? 1e-30 * n01(rng) : 3.0 + 1.5 * n01(rng);
  if (set == kHardHugeEps) return kind % 2 ? 1e6 + n01(rng) : 3.0 + 1.5 * n01(rng);
  switch (kind) {
    case 0: return boundary ? 300.0 : 3.0 + 1.5 * n01(rng);
    case 1: return 1e3 + n01(rng);
    case 2: return 1e5 + n01(rng);
    case 3: return 1e6 + n01(rng);
    case 4: return 1e6 + 0.125;
    case 5: return j % 4 == 0 ? 3e38 : -3e38;
    case 6: return 1e6 + (boundary ? 300.0 : n01(rng));
    default: return -2.0 + 1.5 * n01(rng);
  }
}

}  // namespace onorm_ref
