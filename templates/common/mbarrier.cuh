// Shared-memory mbarriers and 1-D bulk copies (sm_90): the completion mechanism of the tensor
// memory accelerator's global -> shared copies. NVRTC-safe (no host headers).
//
// A copy `bulk_g2s(dst, src, bytes, bar)` moves `bytes` (a multiple of 16, both addresses 16-byte
// aligned) and, when they have landed, counts them off the barrier's transaction count. A phase of
// a barrier initialised with count 1 completes once its one arrival (`arrive_expect_tx`, which also
// announces the bytes to come) has happened and every announced byte has landed; `wait_parity`
// spins until the phase of the given parity (0 for a barrier's first use, then alternating) has
// completed. Writes of the bulk copy are then visible to the waiting threads.
//
// A producer/consumer ring (warp-specialised kernels) pairs each slot's "full" barrier (count
// 1: the producer's arrive_expect_tx, completed by the copy's bytes) with an "empty" one (count:
// the consumers' arrivals, `arrive`, once they have read the slot). Use k of slot s = k % STAGES
// waits on full with parity (k / STAGES) & 1; the producer waits on empty with the opposite
// parity before refilling, which a fresh barrier passes at once (the phase before its first
// counts as completed), so the first STAGES fills need no special case.
#pragma once

namespace ktune {
namespace mbar {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define KTUNE_MBAR_ASM(...) asm volatile(__VA_ARGS__)
#else
// Older targets never run these (their callers are sm_90 only); keep them compiling.
#define KTUNE_MBAR_ASM(...) __trap()
#endif

/// Initialises the barrier at shared address `bar` (8-byte aligned) for `count` arrivals per phase.
/// Follow with fence_init() and a block barrier before any other thread uses it.
__device__ __forceinline__ void init(unsigned bar, unsigned count) {
  KTUNE_MBAR_ASM("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

/// Makes this thread's barrier initialisations visible to the async proxy (the copy engine).
__device__ __forceinline__ void fence_init() {
  KTUNE_MBAR_ASM("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/// Orders this thread's (and, after a block barrier, the block's) earlier shared-memory accesses
/// of the generic proxy before later async-proxy writes to the same memory (a bulk copy refilling
/// a buffer the threads have read or written).
__device__ __forceinline__ void fence_proxy_async_shared() {
  KTUNE_MBAR_ASM("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/// One arrival on the barrier, announcing `bytes` more to land in the current phase.
__device__ __forceinline__ void arrive_expect_tx(unsigned bar, unsigned bytes) {
  KTUNE_MBAR_ASM(
      "{\n"
      ".reg .b64 state;\n"
      "mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n"
      "}\n" ::"r"(bar),
      "r"(bytes)
      : "memory");
}

/// Spins until the barrier's phase of parity `parity` has completed.
__device__ __forceinline__ void wait_parity(unsigned bar, unsigned parity) {
  KTUNE_MBAR_ASM(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

/// Announces `bytes` more to land in the current phase without arriving: for a phase fed by
/// several copies whose issuers account for their own bytes, the one arrival made elsewhere.
__device__ __forceinline__ void expect_tx(unsigned bar, unsigned bytes) {
  KTUNE_MBAR_ASM("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}

/// `count` arrivals at once (1 or more; release semantics: this thread's earlier shared-memory
/// reads and writes happen before the phase completes). What a consumer does once it has
/// finished reading a slot, on the slot's "empty" barrier, so that the producer may refill it;
/// a count above 1 lets one thread stand for a group whose completion it has established, e.g.
/// a warpgroup's leader after a named barrier, on a barrier initialised with one count per warp.
__device__ __forceinline__ void arrive(unsigned bar, unsigned count = 1) {
  // The phase state it returns is not needed: the sink '_' takes it.
  KTUNE_MBAR_ASM("mbarrier.arrive.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(count)
                 : "memory");
}

/// One test of the barrier's phase of parity `parity`, blocking up to a system-dependent time
/// limit inside the instruction: true once it has completed. For callers with other work to do
/// between tests (wait_parity() is the same test in a loop).
__device__ __forceinline__ bool try_wait_parity(unsigned bar, unsigned parity) {
  unsigned done = 0;
  KTUNE_MBAR_ASM(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

/// Copies `bytes` from global `src` to shared `dst` through the copy engine; the barrier at `bar`
/// counts them off its transaction count when they have landed.
__device__ __forceinline__ void bulk_g2s(unsigned dst, const void* src, unsigned bytes,
                                         unsigned bar) {
  KTUNE_MBAR_ASM(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}

/// Arrives on the barrier once every cp.async this thread issued before it has landed
/// (cp.async.mbarrier.arrive.noinc): a producer's plain 16-byte copies (a gather through an index
/// list, which the copy engine cannot do in one request) complete on the same "full" barrier as
/// its bulk copies. .noinc: the pending count is not raised first, so the barrier's init count
/// must include one arrival per calling thread per phase. The copies are generic-proxy writes:
/// a consumer that reads them through the async proxy (wgmma) issues fence_proxy_async_shared()
/// after its wait.
__device__ __forceinline__ void cp_async_arrive_noinc(unsigned bar) {
  KTUNE_MBAR_ASM("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

#undef KTUNE_MBAR_ASM

}  // namespace mbar
}  // namespace ktune
