// Dtype dispatch of the SIMD kernels: which requests they take, and the per-target entry
// points (non-template functions, exported by kernels.cpp) that pick the op (core::ops::visit
// or the op list) and the storage types. Per target (Highway's -inl.h pattern).

// Per-target include guard (see hwy/examples/skeleton-inl.h).
#if defined(ONORM_CPU_DISPATCH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ONORM_CPU_DISPATCH_INL_H_
#undef ONORM_CPU_DISPATCH_INL_H_
#else
#define ONORM_CPU_DISPATCH_INL_H_
#endif

#include "bf16_cvt-inl.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "quantize_simd-inl.h"
#include "residual_add-inl.h"
#include "row_drivers-inl.h"
#include "scalar_rows.hpp"

HWY_BEFORE_NAMESPACE();
namespace onorm {
namespace cpu {
namespace HWY_NAMESPACE {

HWY_INLINE bool SimdType(onorm_dtype t) {
  return t == ONORM_F32 || t == ONORM_BF16 || (ONORM_SIMD_F16 && t == ONORM_F16);
}

// Every input of one storage type: a kernel per input dtype combination would multiply the
// instantiations (and the build) for a rare case; two-input requests of mixed dtypes run the
// scalar kernels.
bool SimdSupports(const onorm_request& q) {
  const int inputs = core::ops::signature(q.op).inputs;
  for (int k = 1; k < inputs; ++k)
    if (q.in[k].dtype != q.in[0].dtype) return false;
  return SimdType(q.in[0].dtype) && SimdType(q.out[0].dtype);
}

// f(TypeTag<T>{}) for a dtype SimdType takes.
template <typename F>
HWY_INLINE void WithSimdType(onorm_dtype t, F&& f) {
  switch (t) {
    case ONORM_F32: return f(TypeTag<float>{});
    case ONORM_BF16: return f(TypeTag<core::bf16_bits>{});
#if ONORM_SIMD_F16
    case ONORM_F16: return f(TypeTag<core::f16_bits>{});
#endif
    default: return;
  }
}

void RunRows(const onorm_request& q, int64_t r0, int64_t r1, unsigned opts, float* scratch) {
  core::ops::visit(q.op, [&](auto op) {
    WithSimdType(q.in[0].dtype, [&](auto in) {
      WithSimdType(q.out[0].dtype, [&](auto out) {
        WithStoreType<typename decltype(out)::type>([&](auto store) {
          RunRowsT<decltype(op), typename decltype(in)::type, typename decltype(store)::type>(q, r0, r1, opts, scratch);
        });
      });
    });
  });
  if (opts & kOptStream) hwy::FlushStream();
}

// Rows [r0, r0 + n) of q's quantized y from their float values v (n rows of cols floats,
// divided in place where the rule divides).
void QuantizeRows(const onorm_request& q, int64_t r0, int64_t n, float* v) {
  const int64_t cols = q.out[0].cols;
  const bool e4m3 = q.out[0].dtype == ONORM_F8_E4M3;
  for (int64_t i = 0; i < n; ++i)
    QuantizeRow(e4m3, q.y_scale ? q.y_scale + r0 + i : nullptr, q.y_static_scale, v + i * cols,
                static_cast<size_t>(cols), const_cast<void*>(row_of(q.out[0], r0 + i)));
}

// The norms' residual add: rows [r0, r0 + n) of x and res into rows [h0, h0 + n) of h, all of
// x's dtype (one SimdType takes: option_blocks_fit).
void AddRows(const onorm_rows& x, const onorm_rows& res, const onorm_rows& h, int64_t r0, int64_t h0, int64_t n) {
  WithSimdType(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    WithStoreType<T>([&](auto store) {
      using S = typename decltype(store)::type;
      for (int64_t i = 0; i < n; ++i)
        AddRow<T, S>(static_cast<const T*>(row_of(x, r0 + i)), static_cast<const T*>(row_of(res, r0 + i)),
                     static_cast<S*>(const_cast<void*>(row_of(h, h0 + i))), static_cast<size_t>(x.cols));
    });
  });
}

// The state depends on the input type only.
template <class Op>
typename Op::Merged ChunkStateOp(const onorm_request& q, int64_t r, int64_t k, unsigned opts) {
  typename Op::Merged s{};
  WithSimdType(q.in[0].dtype, [&](auto in) { s = ChunkStateT<Op, typename decltype(in)::type>(q, r, k, opts); });
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

#endif  // per-target include guard
