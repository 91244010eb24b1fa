// Compiles kernels-inl.h once per Highway target and exports one dispatch table per entry
// point. Contexts pick a table index themselves (target_index), instead of Highway's global
// choice, so that contexts capped at different targets coexist in one process.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels.cpp"  // this file, found through the include path
#include "hwy/foreach_target.h"           // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels-inl.h"

#if HWY_ONCE
#include <cstring>

namespace onorm {
namespace cpu {

HWY_EXPORT(SimdSupports);
HWY_EXPORT(RunRows);
HWY_EXPORT(ChunkStats);
HWY_EXPORT(WriteCols);

bool simd_supports(size_t t, onorm_dtype in, onorm_dtype out) {
  return HWY_DISPATCH_TABLE(SimdSupports)[t](in, out);
}
void simd_run_rows(size_t t, const onorm_request& q, int64_t r0, int64_t r1, unsigned opts) {
  HWY_DISPATCH_TABLE(RunRows)[t](q, r0, r1, opts);
}
void simd_chunk_stats(size_t t, const onorm_request& q, int64_t r, int64_t k0, int64_t k1, ChunkState* states,
                      unsigned opts, float* scratch_row) {
  HWY_DISPATCH_TABLE(ChunkStats)[t](q, r, k0, k1, states, opts, scratch_row);
}
void simd_write_cols(size_t t, const onorm_request& q, int64_t r, int64_t c0, int64_t c1, const RowFinal& f,
                     unsigned opts, const float* scratch_row, float scale) {
  HWY_DISPATCH_TABLE(WriteCols)[t](q, r, c0, c1, f, opts, scratch_row, scale);
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

namespace {
// Pairwise merge of one member of the chunk states; no allocation up to 64 chunks.
template <typename State, typename Get>
State merge_member(ChunkState* states, int64_t count, Get get) {
  if (count == 1) return get(states[0]);
  State local[64];
  std::vector<State> heap;
  State* v = local;
  if (count > 64) {
    heap.resize(static_cast<size_t>(count));
    v = heap.data();
  }
  for (int64_t i = 0; i < count; ++i) v[i] = get(states[i]);
  return core::merge_pairwise(v, count);
}
}  // namespace

ChunkState merge_states_many(onorm_op op, ChunkState* states, int64_t count) {
  ChunkState m;
  std::memset(static_cast<void*>(&m), 0, sizeof m);
  switch (op) {
    case ONORM_OP_SOFTMAX:
    case ONORM_OP_LOG_SOFTMAX:
      m.ms = merge_member<core::MaxSum<float>>(states, count, [](const ChunkState& s) { return s.ms; });
      break;
    case ONORM_OP_LAYER_NORM:
      m.w = merge_member<core::Welford<float>>(states, count, [](const ChunkState& s) { return s.w; });
      break;
    case ONORM_OP_RMS_NORM:
      m.ss = merge_member<core::SumSq<float>>(states, count, [](const ChunkState& s) { return s.ss; });
      break;
  }
  return m;
}

}  // namespace cpu
}  // namespace onorm
#endif  // HWY_ONCE
