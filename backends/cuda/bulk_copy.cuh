// Asynchronous transfers into shared memory that complete on a shared-memory barrier (sm_90):
// one-dimensional bulk copies from global memory through the copy engine (one thread starts a
// whole slice of a row, no registers hold it in flight; addresses and byte counts are
// multiples of 16, PTX ISA cp.async.bulk), and stores into another block of the cluster
// (st.async), which carry no release: the sender waits for none of its earlier stores.
#pragma once

#include <stdint.h>

namespace onorm {
namespace cuda {
namespace bulk {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// A barrier expecting one arrival per phase; visible to the copy engine before its first use.
__device__ __forceinline__ void init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_address(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// The arrival of this phase, which completes once `bytes` more have landed.
__device__ __forceinline__ void arrive_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
}

// Shared memory read by ordinary loads is about to be written by the copy engine.
__device__ __forceinline__ void fence_before_copy() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

__device__ __forceinline__ void copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem_address(dst)),
      "l"(src), "r"(bytes), "r"(smem_address(bar))
      : "memory");
}

// The address of `local` (this block's shared memory) in block `rank` of the cluster.
__device__ __forceinline__ uint32_t peer_address(const void* local, unsigned rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(smem_address(local)), "r"(rank));
  return r;
}

// Stores `words` 4-byte words at `src` into a peer's shared memory (peer_address), the bytes
// counted on the peer's barrier `peer_bar`.
__device__ __forceinline__ void store_to_peer(uint32_t peer_dst, const uint32_t* src, int words, uint32_t peer_bar) {
  for (int i = 0; i < words; ++i)
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(peer_dst + 4u * i),
                 "r"(src[i]), "r"(peer_bar)
                 : "memory");
}

// The cluster's barrier without memory ordering: arrive (after the barriers' init and its
// fence), then wait before the first store into a peer.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;" ::: "memory"); }

// Waits until the barrier's phase of parity `parity` has completed.
__device__ __forceinline__ void wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(smem_address(bar)), "r"(parity)
        : "memory");
  } while (!done);
}
#endif

}  // namespace bulk
}  // namespace cuda
}  // namespace onorm
