// One chunk of a row split over threads (simd_chunk_state, simd_write_chunk), per op of the
// list, compiled once per Highway target in a translation unit of their own (kernels.cpp says
// how the tables work).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels_chunks.cpp"  // this file, found through the include path
#include "hwy/foreach_target.h"                  // IWYU pragma: keep

#include "dispatch-inl.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels.hpp"
#include "row_drivers-inl.h"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {

// The state depends on the input type and on the output's (its exp: SimdMathFor). Requests
// without an output (partial states) have an f32 one here.
template <class Op>
typename Op::Merged ChunkStateOp(const onorm_request& q, int64_t r, int64_t k, unsigned opts) {
  typename Op::Merged s{};
  WithSimdType(q.in[0].dtype, [&](auto in) {
    WithSimdType(q.out[0].dtype, [&](auto out) {
      s = ChunkStateT<Op, typename decltype(in)::type, SimdMathFor<typename decltype(out)::type>>(q, r, k, opts);
    });
  });
  return s;
}

template <class Op>
void WriteChunkOp(const onorm_request& q, int64_t r, int64_t k, const FloatCoefs<Op>& row,
                  const typename Op::Merged& chunk, unsigned opts) {
  WithSimdType(q.in[0].dtype, [&](auto in) {
    WithSimdType(q.out[0].dtype, [&](auto out) {
      WithStoreType<typename decltype(out)::type>([&](auto store) {
        WriteChunkT<Op, typename decltype(in)::type, typename decltype(store)::type>(q, r, k, row, chunk, opts);
      });
    });
  });
  if (opts & kOptStream) hwy::FlushStream();
}

// Per op of the list: ChunkState_<name>, WriteChunk_<name> (HWY_EXPORT takes plain names).
#define ONORM_CPU_CHUNK_ENTRIES(ID, name, Type)                                                           \
  core::ops::Type::Merged ChunkState_##name(const onorm_request& q, int64_t r, int64_t k, unsigned opts) { \
    return ChunkStateOp<core::ops::Type>(q, r, k, opts);                                                  \
  }                                                                                                       \
  void WriteChunk_##name(const onorm_request& q, int64_t r, int64_t k,                                    \
                         const core::ops::Type::Coefs<float>& row, const core::ops::Type::Merged& chunk,  \
                         unsigned opts) {                                                                 \
    WriteChunkOp<core::ops::Type>(q, r, k, row, chunk, opts);                                             \
  }
ONORM_OP_LIST(ONORM_CPU_CHUNK_ENTRIES)
#undef ONORM_CPU_CHUNK_ENTRIES

}  // namespace HWY_NAMESPACE
}  // namespace cpu
}  // namespace onorm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace onorm {
namespace cpu {

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

}  // namespace cpu
}  // namespace onorm
#endif  // HWY_ONCE
