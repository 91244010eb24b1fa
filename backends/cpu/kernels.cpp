// Compiles kernels-inl.h once per Highway target and exports one dispatch table per entry
// point. Contexts pick a table index themselves (target_index), instead of Highway's global
// choice, so that contexts capped at different targets coexist in one process.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels.cpp"  // this file, found through the include path
#include "hwy/foreach_target.h"           // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels-inl.h"

#if HWY_ONCE
#include <cmath>
#include <cstring>

namespace onorm {
namespace cpu {

HWY_EXPORT(SimdSupports);
HWY_EXPORT(RunRows);
HWY_EXPORT(ChunkState1);
HWY_EXPORT(WriteChunk);

bool simd_supports(size_t t, onorm_dtype in, onorm_dtype out) {
  return HWY_DISPATCH_TABLE(SimdSupports)[t](in, out);
}
void simd_run_rows(size_t t, const onorm_request& q, int64_t r0, int64_t r1, unsigned opts, float* scratch) {
  HWY_DISPATCH_TABLE(RunRows)[t](q, r0, r1, opts, scratch);
}
OpState simd_chunk_state(size_t t, const onorm_request& q, int64_t r, int64_t k, unsigned opts) {
  return HWY_DISPATCH_TABLE(ChunkState1)[t](q, r, k, opts);
}
void simd_write_chunk(size_t t, const onorm_request& q, int64_t r, int64_t k, const RowFinal& f, unsigned opts,
                      float chunk_max) {
  HWY_DISPATCH_TABLE(WriteChunk)[t](q, r, k, f, opts, chunk_max);
}

OpState OpState::identity() {
  OpState s;
  std::memset(static_cast<void*>(&s), 0, sizeof s);
  s.op = ONORM_OP_SOFTMAX;
  s.s.ms = core::MaxSum<float>::identity();
  return s;
}

OpState OpState::combine(const OpState& a, const OpState& b) {
  OpState m = a;
  switch (a.op) {
    case ONORM_OP_SOFTMAX:
    case ONORM_OP_LOG_SOFTMAX: m.s.ms = core::MaxSum<float>::combine(a.s.ms, b.s.ms); break;
    case ONORM_OP_LAYER_NORM: m.s.w = core::Welford<double>::combine(a.s.w, b.s.w); break;
    case ONORM_OP_RMS_NORM: m.s.ss = core::SumSq<double>::combine(a.s.ss, b.s.ss); break;
  }
  return m;
}

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
