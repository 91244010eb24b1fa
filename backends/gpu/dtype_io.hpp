// Element access for the storage dtypes on the GPU: scalar and 16-byte vector loads into
// float, and stores from float with round-to-nearest-even (through the vendor shim).
// Storage types are the core's: float, core::f16_bits, core::bf16_bits.
#pragma once

#include "vendor_shim.hpp"  // first: the vendor runtime defines __host__ / __device__

#include <stdint.h>

#include "onlinenorm/core/element.hpp"

namespace onorm {
namespace gpu {

// Runtime dtype codes passed to kernels (the same values as onorm_dtype); the quantized ones
// are outputs of the norms only.
enum : int { kF32 = 0, kF16 = 1, kBF16 = 2, kE4M3 = 4, kI8 = 5 };

template <typename T> struct io;

template <> struct io<float> {
  static constexpr int kVec = 4;  // elements per 16-byte vector
  ONORM_DEV static float load1(const float* p) { return *p; }
  ONORM_DEV static void load_vec(const float* p, float* o) { unpack(*reinterpret_cast<const shim::Vec16*>(p), o); }
  ONORM_DEV static void unpack(const shim::Vec16& v, float* o) {
    o[0] = core::float_of(v.x); o[1] = core::float_of(v.y);
    o[2] = core::float_of(v.z); o[3] = core::float_of(v.w);
  }
  ONORM_DEV static void store1(float* p, float v) { *p = v; }
};

template <> struct io<core::bf16_bits> {
  static constexpr int kVec = 8;
  ONORM_DEV static float cvt(uint16_t h) { return shim::bf16_to_f32(h); }
  ONORM_DEV static uint16_t back(float f) { return shim::f32_to_bf16_rn(f); }
  ONORM_DEV static float load1(const core::bf16_bits* p) { return cvt(p->bits); }
  ONORM_DEV static void load_vec(const core::bf16_bits* p, float* o) {
    unpack(*reinterpret_cast<const shim::Vec16*>(p), o);
  }
  ONORM_DEV static void unpack(const shim::Vec16& v, float* o) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      o[2 * i] = core::float_of(w[i] << 16);
      o[2 * i + 1] = core::float_of(w[i] & 0xffff0000u);
    }
  }
  ONORM_DEV static void store1(core::bf16_bits* p, float v) { p->bits = back(v); }
};

template <> struct io<core::f16_bits> {
  static constexpr int kVec = 8;
  ONORM_DEV static float cvt(uint16_t h) { return shim::f16_to_f32(h); }
  ONORM_DEV static uint16_t back(float f) { return shim::f32_to_f16_rn(f); }
  ONORM_DEV static float load1(const core::f16_bits* p) { return cvt(p->bits); }
  ONORM_DEV static void load_vec(const core::f16_bits* p, float* o) {
    unpack(*reinterpret_cast<const shim::Vec16*>(p), o);
  }
  ONORM_DEV static void unpack(const shim::Vec16& v, float* o) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      o[2 * i] = cvt(static_cast<uint16_t>(w[i] & 0xffffu));
      o[2 * i + 1] = cvt(static_cast<uint16_t>(w[i] >> 16));
    }
  }
  ONORM_DEV static void store1(core::f16_bits* p, float v) { p->bits = back(v); }
};

// A float rounded to T and back (to nearest even).
template <typename T>
ONORM_DEV float round_to(float v) {
  if constexpr (sizeof(T) == 4) return v;
  else return io<T>::cvt(io<T>::back(v));
}

// Stores N consecutive floats as Out with vector stores (p aligned to N * sizeof(Out) bytes,
// which is 8, 16 or 32).
template <typename Out, int N>
ONORM_DEV void store_vec(Out* p, const float* v) {
  constexpr int kWords = N * static_cast<int>(sizeof(Out)) / 4;
  uint32_t w[kWords];
  if constexpr (sizeof(Out) == 4) {
#pragma unroll
    for (int i = 0; i < N; ++i) w[i] = core::bits_of(v[i]);
  } else {
#pragma unroll
    for (int i = 0; i < N / 2; ++i)
      w[i] = static_cast<uint32_t>(io<Out>::back(v[2 * i])) |
             (static_cast<uint32_t>(io<Out>::back(v[2 * i + 1])) << 16);
  }
  if constexpr (kWords % 4 == 0) {
#pragma unroll
    for (int i = 0; i < kWords / 4; ++i) {
      shim::Vec16 q;
      q.x = w[4 * i]; q.y = w[4 * i + 1]; q.z = w[4 * i + 2]; q.w = w[4 * i + 3];
      reinterpret_cast<shim::Vec16*>(p)[i] = q;
    }
  } else {
    static_assert(kWords == 2, "8-byte store");
    uint2 q;
    q.x = w[0]; q.y = w[1];
    *reinterpret_cast<uint2*>(p) = q;
  }
}

// The raw 32-bit words of N consecutive elements of T, loaded now and converted later
// (unpack_n), so that several loads are in flight before the first is used.
template <typename T, int N>
struct RawN {
  static constexpr int kWords = N * static_cast<int>(sizeof(T)) / 4;
  uint32_t w[kWords];
};

// Loads them as whole 16-byte vectors, or one 8-byte access (four 16-bit elements: a second
// input or a column vector of another dtype than the rows, whose vectors set N). p is aligned
// to min(16, N * sizeof(T)) bytes.
template <typename T, int N>
ONORM_DEV void load_raw_n(const T* p, RawN<T, N>& r) {
  constexpr int kWords = RawN<T, N>::kWords;
  if constexpr (kWords % 4 == 0) {
#pragma unroll
    for (int q = 0; q < kWords / 4; ++q) {
      const shim::Vec16 v = reinterpret_cast<const shim::Vec16*>(p)[q];
      r.w[4 * q] = v.x; r.w[4 * q + 1] = v.y; r.w[4 * q + 2] = v.z; r.w[4 * q + 3] = v.w;
    }
  } else {
    static_assert(kWords == 2, "an 8-byte access of four 16-bit elements");
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    r.w[0] = v.x; r.w[1] = v.y;
  }
}

// The N floats of raw words (little-endian: the lower half of a word is the first element).
template <typename T, int N>
ONORM_DEV void unpack_n(const RawN<T, N>& r, float* o) {
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int i = 0; i < N; ++i) o[i] = core::float_of(r.w[i]);
  } else {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      o[2 * i] = io<T>::cvt(static_cast<uint16_t>(r.w[i] & 0xffffu));
      o[2 * i + 1] = io<T>::cvt(static_cast<uint16_t>(r.w[i] >> 16));
    }
  }
}

// Loads N consecutive elements of T as floats (load_raw_n's alignment).
template <typename T, int N>
ONORM_DEV void load_n(const T* p, float* o) {
  RawN<T, N> r;
  load_raw_n<T, N>(p, r);
  unpack_n<T, N>(r, o);
}

// Loads the VEC elements of item c of p[0, n) (out-of-range elements: pad); a 16-byte vector
// where `aligned` and the item is whole, else one element at a time.
template <typename In, int VEC = io<In>::kVec>
ONORM_DEV void load_one_item(const In* p, int c, int n, bool aligned, float pad, float* v) {
  if (aligned && c + VEC <= n) {
    load_n<In, VEC>(p + c, v);
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) v[j] = c + j < n ? io<In>::load1(p + c + j) : pad;
  }
}

// An aligned row that fills some of a thread's items only (widths like 6144 or 7168): every
// whole item's load is issued before any is converted. A branch per item around its load and
// its conversion made each load wait for the one before (half the bandwidth of a full row).
// Items cut by the row's end take the elements one at a time.
template <typename In, int ITEMS, int STRIDE, int VEC>
ONORM_DEV void load_partial_items(const In* p, int n, int lane, float* v, float pad) {
  constexpr int kQ = VEC * static_cast<int>(sizeof(In)) / 16;  // 16-byte vectors per item
  shim::Vec16 raw[ITEMS * kQ];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int c = (lane + i * STRIDE) * VEC;
#pragma unroll
    for (int q = 0; q < kQ; ++q) {
      shim::Vec16& r = raw[i * kQ + q];
      r.x = r.y = r.z = r.w = 0u;
      if (c + VEC <= n) r = reinterpret_cast<const shim::Vec16*>(p + c)[q];
    }
  }
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int c = (lane + i * STRIDE) * VEC;
    if (c + VEC <= n) {
#pragma unroll
      for (int q = 0; q < kQ; ++q) io<In>::unpack(raw[i * kQ + q], v + i * VEC + q * io<In>::kVec);
    } else {
      load_one_item<In, VEC>(p, c, n, false, pad, v + i * VEC);
    }
  }
}

// Whether a thread's ITEMS items of VEC elements (item i at (lane + i * STRIDE) * VEC) all lie
// in [0, n): load_items' whole case.
template <int ITEMS, int STRIDE, int VEC>
ONORM_DEV bool items_whole(int n, int lane) {
  return (lane + (ITEMS - 1) * STRIDE) * VEC + VEC <= n;
}

// The raw words of a thread's whole items of an aligned row, loaded (load) and converted
// (unpack) apart.
template <typename T, int ITEMS, int STRIDE, int VEC>
struct RawItems {
  RawN<T, VEC> item[ITEMS];
  ONORM_DEV void load(const T* p, int lane) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) load_raw_n<T, VEC>(p + (lane + i * STRIDE) * VEC, item[i]);
  }
  ONORM_DEV void unpack(float* v) const {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) unpack_n<T, VEC>(item[i], v + i * VEC);
  }
};

// A thread's whole items of two aligned rows (two inputs, or x and a residual) as floats, every
// load of both issued before the first conversion. Loaded one row after the other, each
// conversion in its own branch, the second row's loads waited for the first's.
template <typename T0, typename T1, int ITEMS, int STRIDE, int VEC>
ONORM_DEV void load_whole_pair(const T0* p0, const T1* p1, int lane, float* v0, float* v1) {
  RawItems<T0, ITEMS, STRIDE, VEC> r0;
  RawItems<T1, ITEMS, STRIDE, VEC> r1;
  r0.load(p0, lane);
  r1.load(p1, lane);
  r0.unpack(v0);
  r1.unpack(v1);
}

// Loads ITEMS vectors of VEC elements for one thread of a group of STRIDE threads: item i
// covers elements [(lane + i*STRIDE)*VEC, +VEC) of p[0, n). Out-of-range elements get `pad`.
// `aligned`: p is 16-byte aligned (the vector path is legal).
template <typename In, int ITEMS, int STRIDE, int VEC = io<In>::kVec>
ONORM_DEV void load_items(const In* p, int n, int lane, float* v, bool aligned, float pad) {
  if (aligned && items_whole<ITEMS, STRIDE, VEC>(n, lane)) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) load_n<In, VEC>(p + (lane + i * STRIDE) * VEC, v + i * VEC);
    return;
  }
  if constexpr (VEC * sizeof(In) % 16 == 0) {
    if (aligned) {
      load_partial_items<In, ITEMS, STRIDE, VEC>(p, n, lane, v, pad);
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) load_one_item<In, VEC>(p, (lane + i * STRIDE) * VEC, n, aligned, pad, v + i * VEC);
}

// A row that starts `off` bytes past a 16-byte boundary (the rows of a tensor whose row length
// is not a multiple of 16 bytes): item c's bytes lie across its own kQ aligned 16-byte chunks
// (from p + c - off) and the next one, which is the first chunk of the next thread's item. Each
// thread loads its own chunks, and a group of G lanes (the row's threads where they share a
// warp, else the warp) passes each item's first chunk to the lane before it by a shuffle; the
// group's last lane loads that chunk itself. A chunk is loaded only where it lies inside the
// row; an item whose chunks do not all (the first of a row, the last ones) takes its elements
// one at a time. The item's words are picked out of the loaded ones (the row's run-time word
// offset, then half a word across for 16-bit elements at an odd 2-byte offset): a thread gets
// the same elements as with element loads, so the same floats. Every lane of the warp calls it.
template <typename In, int ITEMS, int STRIDE, int VEC, int WARP>
ONORM_DEV void load_shifted_items(const In* p, int n, int lane, float* v, float pad) {
  constexpr int kQ = VEC * static_cast<int>(sizeof(In)) / 16;
  constexpr int kW = 4 * kQ;
  constexpr int G = STRIDE < WARP ? STRIDE : WARP;
  const unsigned off = static_cast<unsigned>(reinterpret_cast<uintptr_t>(p) % 16u);
  const auto* base = reinterpret_cast<const shim::Vec16*>(reinterpret_cast<const unsigned char*>(p) - off);
  const int64_t end = int64_t(n) * int64_t(sizeof(In)) + off;  // the row's end, in bytes from base
  const auto inside = [&](int64_t q) { return q * 16 >= int64_t(off) && q * 16 + 16 <= end; };
  const int g = lane % G;
  shim::Vec16 own[ITEMS][kQ];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
#pragma unroll
    for (int j = 0; j < kQ; ++j) {
      const int64_t q = int64_t(lane + i * STRIDE) * kQ + j;
      own[i][j].x = own[i][j].y = own[i][j].z = own[i][j].w = 0u;
      if (inside(q)) own[i][j] = base[q];
    }
  const unsigned k = off / 4u;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int c = (lane + i * STRIDE) * VEC;
    uint32_t r[kW + 4];
#pragma unroll
    for (int j = 0; j < kQ; ++j) {
      r[4 * j] = own[i][j].x; r[4 * j + 1] = own[i][j].y; r[4 * j + 2] = own[i][j].z; r[4 * j + 3] = own[i][j].w;
    }
    const int src = g + 1 < G ? g + 1 : 0;
    r[kW] = shim::shfl_idx(own[i][0].x, src, G);
    r[kW + 1] = shim::shfl_idx(own[i][0].y, src, G);
    r[kW + 2] = shim::shfl_idx(own[i][0].z, src, G);
    r[kW + 3] = shim::shfl_idx(own[i][0].w, src, G);
    if (g == G - 1) {
      const int64_t q = int64_t(lane + i * STRIDE + 1) * kQ;
      if (inside(q)) {
        const shim::Vec16 x = base[q];
        r[kW] = x.x; r[kW + 1] = x.y; r[kW + 2] = x.z; r[kW + 3] = x.w;
      }
    }
    if (c >= VEC && int64_t(c) * int64_t(sizeof(In)) + (kQ + 1) * 16 <= end) {
      // words k.. of r (two selects a word), then half a word across at an odd 2-byte offset
      uint32_t t[kW + 1];
#pragma unroll
      for (int j = 0; j <= kW; ++j) {
        const uint32_t lo = (k & 2u) ? r[j + 2] : r[j];
        const uint32_t hi = (k & 2u) ? r[j + 3] : r[j + 1];
        t[j] = (k & 1u) ? hi : lo;
      }
      RawN<In, VEC> w;
#pragma unroll
      for (int j = 0; j < kW; ++j) w.w[j] = (off & 2u) ? (t[j] >> 16) | (t[j + 1] << 16) : t[j];
      unpack_n<In, VEC>(w, v + i * VEC);
    } else {
      load_one_item<In, VEC>(p, c, n, false, pad, v + i * VEC);
    }
  }
}

// f32 rows off a 16-byte boundary, a block a row (STRIDE a multiple of WARP above it): item i
// of a warp's lanes covers WARP * VEC consecutive floats. Taken element by element in the
// items' own order (lane l: elements l * VEC + j), a warp's access touches VEC lines for one
// line of bytes, and the L1 and L2 requests, not DRAM, bound the kernel (ncu, bench/RESULTS.md).
// Here the warp reads and writes them lane after lane (one line an access) and passes them
// through a region of shared memory a warp to the items' order: each thread gets or gives the
// same elements, so the same floats. Every lane of the warp calls them.
template <typename In, int STRIDE, int WARP>
constexpr bool kThroughWarpBuffer = sizeof(In) == 4 && STRIDE > WARP && STRIDE % WARP == 0;
template <int STRIDE, int WARP, int VEC>
ONORM_DEV float* warp_buffer(int lane) {
  __shared__ __align__(16) float buf[STRIDE / WARP][WARP * VEC];
  return buf[lane / WARP];
}
template <int ITEMS, int STRIDE, int VEC, int WARP>
ONORM_DEV void load_items_through_warp(const float* p, int n, int lane, float* v, float pad) {
  float* w = warp_buffer<STRIDE, WARP, VEC>(lane);
  const int l = lane % WARP;
  float raw[ITEMS][VEC];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int base = (lane - l + i * STRIDE) * VEC + l;
#pragma unroll
    for (int t = 0; t < VEC; ++t) raw[i][t] = base + t * WARP < n ? p[base + t * WARP] : pad;
  }
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    shim::sync_warp();  // the warp's reads of the item before are done
#pragma unroll
    for (int t = 0; t < VEC; ++t) w[l + t * WARP] = raw[i][t];
    shim::sync_warp();
#pragma unroll
    for (int q = 0; q < VEC / 4; ++q) {
      const float4 f = reinterpret_cast<const float4*>(w + l * VEC)[q];
      v[i * VEC + 4 * q] = f.x; v[i * VEC + 4 * q + 1] = f.y; v[i * VEC + 4 * q + 2] = f.z; v[i * VEC + 4 * q + 3] = f.w;
    }
  }
}
// Lane l's VEC values of an item into its place in the warp's buffer, for the warp's stores to
// read back lane after lane.
template <int VEC>
ONORM_DEV void put_in_warp_buffer(float* w, int l, const float* v) {
  shim::sync_warp();  // the warp's reads of the item before (or of the load) are done
#pragma unroll
  for (int q = 0; q < VEC / 4; ++q)
    reinterpret_cast<float4*>(w + l * VEC)[q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
  shim::sync_warp();
}
template <int ITEMS, int STRIDE, int VEC, int WARP>
ONORM_DEV void store_items_through_warp(float* y, int n, int lane, const float* v) {
  float* w = warp_buffer<STRIDE, WARP, VEC>(lane);
  const int l = lane % WARP;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    put_in_warp_buffer<VEC>(w, l, v + i * VEC);
    const int base = (lane - l + i * STRIDE) * VEC + l;
#pragma unroll
    for (int t = 0; t < VEC; ++t)
      if (base + t * WARP < n) y[base + t * WARP] = w[l + t * WARP];
  }
}

// 16-bit values the same way: the warp writes its item's floats to the buffer, then stores them
// as 32-bit words lane after lane (a line an access); where the row starts at an odd element
// of a word, the item's first and last elements go alone (their words straddle the items
// before and after), as does an element whose word the row's end cuts.
template <typename Out, int ITEMS, int STRIDE, int VEC, int WARP>
ONORM_DEV void store_16bit_items_through_warp(Out* y, int n, int lane, const float* v) {
  static_assert(sizeof(Out) == 2 && VEC % 4 == 0, "16-bit values, items of whole float4s");
  float* w = warp_buffer<STRIDE, WARP, VEC>(lane);
  const int l = lane % WARP;
  const int s = static_cast<int>(reinterpret_cast<uintptr_t>(y) / 2u % 2u);  // 1: words start at odd elements
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    put_in_warp_buffer<VEC>(w, l, v + i * VEC);
    const int base = (lane - l + i * STRIDE) * VEC;  // the item's first element: even
#pragma unroll
    for (int t = 0; t < VEC / 2; ++t) {
      const int e = 2 * (l + t * WARP) - s;  // the word's first element in the item
      const int c = base + e;
      if (e < 0) {
        if (base < n) io<Out>::store1(y + base, w[0]);
      } else if (c + 1 < n) {
        *reinterpret_cast<uint32_t*>(y + c) =
            static_cast<uint32_t>(io<Out>::back(w[e])) | (static_cast<uint32_t>(io<Out>::back(w[e + 1])) << 16);
      } else if (c < n) {
        io<Out>::store1(y + c, w[e]);
      }
    }
    if (s == 1 && l == WARP - 1 && base + WARP * VEC - 1 < n) io<Out>::store1(y + base + WARP * VEC - 1, w[WARP * VEC - 1]);
  }
}

// load_items for a row of a tensor whose rows are aligned (`aligned`) or not (then 16-bit
// elements in items of whole 16-byte vectors by load_shifted_items, f32 rows a block holds
// through the warp's buffer). Every lane of the warp calls it.
template <typename In, int ITEMS, int STRIDE, int VEC, int WARP>
ONORM_DEV void load_row_items(const In* p, int n, int lane, float* v, bool aligned, float pad) {
  if constexpr (sizeof(In) == 2 && VEC * sizeof(In) % 16 == 0) {
    if (!aligned) return load_shifted_items<In, ITEMS, STRIDE, VEC, WARP>(p, n, lane, v, pad);
  }
  if constexpr (kThroughWarpBuffer<In, STRIDE, WARP>) {
    if (!aligned) return load_items_through_warp<ITEMS, STRIDE, VEC, WARP>(p, n, lane, v, pad);
  }
  load_items<In, ITEMS, STRIDE, VEC>(p, n, lane, v, aligned, pad);
}

// Stores VEC finished 16-bit values at q, which is not 16-byte aligned: in the widest stores its
// address allows (at an odd 2-byte offset: one element, pairs as words, one element).
template <typename Out, int VEC>
ONORM_DEV void store_shifted_item(Out* q, const float* v) {
  const unsigned a = static_cast<unsigned>(reinterpret_cast<uintptr_t>(q) % 16u);
  uint32_t h[VEC];
#pragma unroll
  for (int i = 0; i < VEC; ++i) h[i] = io<Out>::back(v[i]);
  if (a % 8u == 0u) {
#pragma unroll
    for (int i = 0; i < VEC / 4; ++i) {
      uint2 w;
      w.x = h[4 * i] | (h[4 * i + 1] << 16); w.y = h[4 * i + 2] | (h[4 * i + 3] << 16);
      reinterpret_cast<uint2*>(q)[i] = w;
    }
  } else if (a % 4u == 0u) {
#pragma unroll
    for (int i = 0; i < VEC / 2; ++i) reinterpret_cast<uint32_t*>(q)[i] = h[2 * i] | (h[2 * i + 1] << 16);
  } else {
    q[0].bits = static_cast<uint16_t>(h[0]);
#pragma unroll
    for (int i = 0; i < VEC / 2 - 1; ++i)
      reinterpret_cast<uint32_t*>(q + 1)[i] = h[2 * i + 1] | (h[2 * i + 2] << 16);
    q[VEC - 1].bits = static_cast<uint16_t>(h[VEC - 1]);
  }
}

// Stores the VEC finished values of item c.
template <typename Out, int VEC>
ONORM_DEV void store_one_item(Out* p, int c, int n, bool aligned, const float* v) {
  constexpr bool kShifted = sizeof(Out) == 2 && VEC * sizeof(Out) % 16 == 0;
  if (c + VEC <= n && (aligned || (kShifted && reinterpret_cast<uintptr_t>(p + c) % 16u == 0u))) {
    store_vec<Out, VEC>(p + c, v);
  } else if (kShifted && c + VEC <= n) {
    if constexpr (kShifted) store_shifted_item<Out, VEC>(p + c, v);
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j)
      if (c + j < n) io<Out>::store1(p + c + j, v[j]);
  }
}

// An element of a run-time dtype (kF32, kF16, kBF16).
ONORM_DEV float load_dtype(const void* p, int dt, int64_t i) {
  switch (dt) {
    case kF32: return static_cast<const float*>(p)[i];
    case kF16: return io<core::f16_bits>::load1(static_cast<const core::f16_bits*>(p) + i);
    default: return io<core::bf16_bits>::load1(static_cast<const core::bf16_bits*>(p) + i);
  }
}
ONORM_DEV void store_dtype(void* p, int dt, int64_t i, float v) {
  switch (dt) {
    case kF32: static_cast<float*>(p)[i] = v; break;
    case kF16: io<core::f16_bits>::store1(static_cast<core::f16_bits*>(p) + i, v); break;
    default: io<core::bf16_bits>::store1(static_cast<core::bf16_bits*>(p) + i, v); break;
  }
}

// Row tensors of element type T, or (T = void) each of its own run-time dtype. Typed tensors
// also move kVec elements (16 bytes) at a time where the launch found every row aligned.
template <typename T>
struct Elems {
  static constexpr int kVec = io<T>::kVec;
  ONORM_DEV static float load(const void* p, int, int64_t i) { return io<T>::load1(static_cast<const T*>(p) + i); }
  ONORM_DEV static void store(void* p, int, int64_t i, float v) { io<T>::store1(static_cast<T*>(p) + i, v); }
  ONORM_DEV static void load_vec(const void* p, int64_t i, float* o) { io<T>::load_vec(static_cast<const T*>(p) + i, o); }
  ONORM_DEV static void store_vec(void* p, int64_t i, const float* v) { gpu::store_vec<T, kVec>(static_cast<T*>(p) + i, v); }
};
template <>
struct Elems<void> {
  static constexpr int kVec = 1;
  ONORM_DEV static float load(const void* p, int dt, int64_t i) { return load_dtype(p, dt, i); }
  ONORM_DEV static void store(void* p, int dt, int64_t i, float v) { store_dtype(p, dt, i, v); }
  ONORM_DEV static void load_vec(const void*, int64_t, float*) {}
  ONORM_DEV static void store_vec(void*, int64_t, const float*) {}
};

// V consecutive elements from i: one 16-byte vector (V == Elems<T>::kVec) or one element (V == 1).
template <typename T, int V>
ONORM_DEV void load_group(const void* p, int dt, int64_t i, float* o) {
  if constexpr (V > 1) Elems<T>::load_vec(p, i, o);
  else o[0] = Elems<T>::load(p, dt, i);
}

}  // namespace gpu
}  // namespace onorm
