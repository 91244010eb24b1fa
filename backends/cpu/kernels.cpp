// Compiles the SIMD kernels (dispatch-inl.h and what it includes) once per Highway target and
// exports one dispatch table per entry point. Contexts pick a table index themselves
// (target_index), instead of Highway's global choice, so that contexts capped at different
// targets coexist in one process.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels.cpp"  // this file, found through the include path
#include "hwy/foreach_target.h"           // IWYU pragma: keep

#include "hwy/highway.h"
#include "dispatch-inl.h"
#include "norm_backward_simd-inl.h"

#if HWY_ONCE
#include <cstring>

namespace onorm {
namespace cpu {

HWY_EXPORT(SimdSupports);
HWY_EXPORT(RunRows);
HWY_EXPORT(QuantizeRows);
HWY_EXPORT(AddRows);
HWY_EXPORT(BackwardSupports);
HWY_EXPORT(BackwardRows);

bool simd_supports(size_t t, const onorm_request& q) { return HWY_DISPATCH_TABLE(SimdSupports)[t](q); }
void simd_run_rows(size_t t, const onorm_request& q, int64_t r0, int64_t r1, unsigned opts, float* scratch) {
  HWY_DISPATCH_TABLE(RunRows)[t](q, r0, r1, opts, scratch);
}
void simd_quantize_rows(size_t t, const onorm_request& q, int64_t r0, int64_t n, float* v) {
  HWY_DISPATCH_TABLE(QuantizeRows)[t](q, r0, n, v);
}
void simd_add_rows(size_t t, const onorm_rows& x, const onorm_rows& res, const onorm_rows& h, int64_t r0, int64_t h0,
                   int64_t n) {
  HWY_DISPATCH_TABLE(AddRows)[t](x, res, h, r0, h0, n);
}
bool simd_backward_supports(size_t t, const onorm_request& q) { return HWY_DISPATCH_TABLE(BackwardSupports)[t](q); }
void simd_backward_rows(size_t t, const onorm_request& q, const BackwardCall& cols, int64_t r0, int64_t r1,
                        float* block, double* group) {
  HWY_DISPATCH_TABLE(BackwardRows)[t](q, cols, r0, r1, block, group);
}

#define ONORM_CPU_EXPORT_CHUNK_KERNELS(ID, name, Type)                                                        \
  HWY_EXPORT(ChunkState_##name);                                                                              \
  HWY_EXPORT(WriteChunk_##name);                                                                              \
  core::ops::Type::Merged simd_chunk_state(core::ops::Type, size_t t, const onorm_request& q, int64_t r,     \
                                           int64_t k, unsigned opts) {                                        \
    return HWY_DISPATCH_TABLE(ChunkState_##name)[t](q, r, k, opts);                                           \
  }                                                                                                           \
  void simd_write_chunk(core::ops::Type, size_t t, const onorm_request& q, int64_t r, int64_t k,             \
                        const core::ops::Type::Coefs<float>& row, const core::ops::Type::Merged& chunk,     \
                        unsigned opts) {                                                                      \
    HWY_DISPATCH_TABLE(WriteChunk_##name)[t](q, r, k, row, chunk, opts);                                      \
  }
ONORM_OP_LIST(ONORM_CPU_EXPORT_CHUNK_KERNELS)
#undef ONORM_CPU_EXPORT_CHUNK_KERNELS

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
