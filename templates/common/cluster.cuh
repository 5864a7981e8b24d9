// Thread block clusters (sm_90; multicast loads sm_90a): a CTA's rank in its cluster, the
// cluster-wide barrier, arrivals on another CTA's mbarrier, and TMA loads multicast into the
// shared memory of several CTAs of the cluster. NVRTC-safe (no host headers).
//
// A cluster's CTAs run at once on one GPU processing cluster and may read, write and arrive on
// each other's shared memory. A multicast load issued by one CTA writes the same box at the same
// shared offset in every CTA of its mask and counts the bytes off the mbarrier at the same
// offset in each, so a tile that two CTAs both need is read from L2 once. Whoever overwrites a
// slot in another CTA must know that CTA is done with it: its consumers arrive on the issuing
// CTA's "empty" barrier too (arrive_remote). Before the first such access every CTA's barriers
// must be initialised (mbar::init, mbar::fence_init, then sync() here), and no CTA may exit while
// another can still arrive on its barriers or copy into it (sync() again before exit).
// Launch: the cluster size is a launch attribute (KernelLaunch::cluster).
#pragma once

#include "common/tma.cuh"

#if defined(__CUDACC__)

namespace ktune {
namespace cluster {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define KTUNE_CLUSTER_ASM(...) asm volatile(__VA_ARGS__)
#else
// Older targets never run these (their callers are sm_90 only); keep them compiling.
#define KTUNE_CLUSTER_ASM(...) __trap()
#endif
// Multicast copies exist on sm_90a only (the 'a' target's feature macro, as KTUNE_WGMMA).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define KTUNE_MULTICAST_ASM(...) asm volatile(__VA_ARGS__)
#else
#define KTUNE_MULTICAST_ASM(...) __trap()
#endif

/// This CTA's rank in its cluster (0 without a cluster).
__device__ __forceinline__ unsigned ctarank() {
  unsigned rank = 0;
  KTUNE_CLUSTER_ASM("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}

/// Every thread of every CTA of the cluster: arrive, then wait for the others. Release and
/// acquire at cluster scope: what a thread wrote before it (barrier initialisations included) is
/// visible to every thread of the cluster after it. Executed by whole warps (aligned).
__device__ __forceinline__ void sync() {
  KTUNE_CLUSTER_ASM(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
}

/// The address in the shared memory of the CTA of rank `rank` that corresponds to this CTA's
/// shared address `addr` (a shared::cluster address).
__device__ __forceinline__ unsigned map_shared(unsigned addr, unsigned rank) {
  unsigned out = 0;
  KTUNE_CLUSTER_ASM("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(addr), "r"(rank));
  return out;
}

/// One arrival on the mbarrier at this CTA's shared address `bar` in the CTA of rank `rank`
/// (rank may be this CTA's own), with the default semantics: release at CTA scope. Callers
/// arrive to say "my reads of a slot are done" after the reads themselves have completed (a
/// consumer's wgmmas, once wgmma.wait_group returned), so no wider release is needed; a
/// `.release.cluster` arrival made the MoE GEMMs' consumers wait on every release (H200,
/// 2026-12-02: gemm2 684 us against 483 with this form, the same pairs sharing).
__device__ __forceinline__ void arrive_remote(unsigned bar, unsigned rank) {
  KTUNE_CLUSTER_ASM("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(
                        map_shared(bar, rank))
                    : "memory");
}

// Multicast loads (sm_90a): the box at the given coordinates into shared address `dst` of every
// CTA whose rank's bit is set in `mask`, its bytes counted off the barrier at shared address
// `bar` in each of them. One thread issues each; every destination announces the bytes on its
// own barrier (mbar::arrive_expect_tx or expect_tx).

/// 2-D box at (c0, c1).
__device__ __forceinline__ void load_multicast(unsigned dst, const tma::TensorMap* map,
                                               unsigned bar, unsigned short mask, int c0,
                                               int c1) {
  KTUNE_MULTICAST_ASM(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(tma::map_address(map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
      : "memory");
}

/// 3-D box at (c0, c1, c2).
__device__ __forceinline__ void load_multicast(unsigned dst, const tma::TensorMap* map,
                                               unsigned bar, unsigned short mask, int c0, int c1,
                                               int c2) {
  KTUNE_MULTICAST_ASM(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(dst),
      "l"(tma::map_address(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(mask)
      : "memory");
}

/// 4-D box at (c0, c1, c2, c3).
__device__ __forceinline__ void load_multicast(unsigned dst, const tma::TensorMap* map,
                                               unsigned bar, unsigned short mask, int c0, int c1,
                                               int c2, int c3) {
  KTUNE_MULTICAST_ASM(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n" ::"r"(dst),
      "l"(tma::map_address(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar), "h"(mask)
      : "memory");
}

}  // namespace cluster
}  // namespace ktune

#endif  // __CUDACC__
