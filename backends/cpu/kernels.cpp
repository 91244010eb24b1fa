// The SIMD kernels' dispatch tables: one per entry point, with an entry per Highway target, each
// exported by the translation unit that compiles its kernels once per target (this file:
// simd_supports; kernels_rows.cpp, kernels_chunks.cpp, kernels_options.cpp,
// kernels_backward.cpp: the others, apart so that they compile in parallel). Contexts pick a
// table index themselves (target_index), instead of Highway's global choice, so that contexts
// capped at different targets coexist in one process.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels.cpp"  // this file, found through the include path
#include "hwy/foreach_target.h"           // IWYU pragma: keep

#include "dispatch-inl.h"
#include "hwy/highway.h"
#include "kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {

// Every input of one storage type: a kernel per input dtype combination would multiply the
// instantiations (and the build) for a rare case; two-input requests of mixed dtypes run the
// scalar kernels.
bool SimdSupports(const onorm_request& q) {
  const int inputs = core::ops::signature(q.op).inputs;
  for (int k = 1; k < inputs; ++k)
    if (q.in[k].dtype != q.in[0].dtype) return false;
  return SimdType(q.in[0].dtype) && SimdType(q.out[0].dtype);
}

// Whether this target's kernels load and store dtype t (WithSimdType takes it).
bool SimdLoads(onorm_dtype t) { return SimdType(t); }

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cstring>

namespace onorm {
namespace cpu {

HWY_EXPORT(SimdSupports);
HWY_EXPORT(SimdLoads);

bool simd_supports(size_t t, const onorm_request& q) { return HWY_DISPATCH_TABLE(SimdSupports)[t](q); }
bool simd_loads(size_t t, onorm_dtype dtype) { return HWY_DISPATCH_TABLE(SimdLoads)[t](dtype); }

// Index of a target's entry in the HWY_EXPORT tables: the same arithmetic as
// hwy::ChosenTarget::GetIndex, applied to a single target instead of the global choice.
size_t target_index(int64_t bit) {
  int64_t mask = HWY_CHOSEN_TARGET_SHIFT(bit);
  if (bit == HWY_EMU128 || bit == HWY_SCALAR) mask |= HWY_CHOSEN_TARGET_MASK_SCALAR;
  mask &= HWY_CHOSEN_TARGET_MASK_TARGETS;
  return mask == 0 ? 0 : hwy::Num0BitsBelowLS1Bit_Nonzero64(static_cast<uint64_t>(mask));
}

const std::vector<TargetInfo>& available_targets() {
  static const std::vector<TargetInfo> list = [] {
    std::vector<TargetInfo> v;
    const int64_t have = hwy::SupportedTargets() & HWY_TARGETS;
    for (int b = 0; b < 63; ++b) {  // lower bit = better
      const int64_t bit = int64_t(1) << b;
      if (have & bit) v.push_back(TargetInfo{bit, hwy::TargetName(bit)});
    }
    return v;
  }();
  return list;
}

std::string known_target_names() {
  std::string s;
  for (int b = 0; b < 63; ++b) {
    const char* name = hwy::TargetName(int64_t(1) << b);
    if (std::strcmp(name, "Unknown") == 0) continue;
    if (!s.empty()) s += ", ";
    s += name;
  }
  return s;
}

bool choose_target(const char* cap, TargetInfo& out) {
  const std::vector<TargetInfo>& have = available_targets();
  if (!cap || !*cap) {
    out = have.front();
    return true;
  }
  int64_t cap_bit = -1;
  for (int b = 0; b < 63; ++b) {
    if (std::strcmp(hwy::TargetName(int64_t(1) << b), cap) == 0) cap_bit = int64_t(1) << b;
  }
  if (cap_bit < 0) return false;
  for (const TargetInfo& t : have) {
    if (t.bit >= cap_bit) {  // not better than the cap
      out = t;
      return true;
    }
  }
  out = have.back();  // nothing as low as the cap: the lowest target there is
  return true;
}

}  // namespace cpu
}  // namespace onorm
#endif  // HWY_ONCE
