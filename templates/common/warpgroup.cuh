// Warp specialisation (sm_90): which warpgroup and warp a thread belongs to, one elected thread
// per warp, named barriers between subsets of the block, and register reallocation between
// warpgroups (setmaxnreg, sm_90a).
//
// A warp-specialised kernel splits its block into warpgroups of 128 threads (4 consecutive
// warps; the unit wgmma and setmaxnreg work on): a producer warpgroup whose one elected thread
// issues the copies (common/tma.cuh) and consumer warpgroups that compute. Once the roles split,
// __syncthreads() (barrier 0, every thread) no longer fits: the groups meet on named barriers
// 1..15, each with the number of threads that take part (a multiple of 32). bar_sync() waits
// for them all; bar_arrive() only counts the caller in, for a group that publishes something
// another waits for and need not wait itself (the waiting side then owns the next step; a group
// must not arrive twice on one barrier before the others have synced, or two generations merge).
//
// Register reallocation: the producer needs few registers and the consumers many, but the
// compiler allocates one count for the whole kernel. setmaxnreg_dec<N>() lowers the calling
// warpgroup's count to N and setmaxnreg_inc<N>() raises it (N a multiple of 8 in 24..256); the
// increase waits until enough registers were released. It takes effect only when the kernel has
// a register cap at entry (__launch_bounds__(threads, 1)) and each role is one branch of an
// if/else on the warpgroup index; otherwise ptxas ignores it with warning C7508. The totals
// must fit the register file: e.g. 3 warpgroups as 128 x 40 + 256 x 232 = 64512 <= 65536.
// Register counts only change speed, never results, so outside sm_90a (KTUNE_SETMAXNREG 0) both
// are no-ops rather than traps.
//
// NVRTC alone: no headers. Device code only.
#pragma once

// 1 where setmaxnreg may be issued: device code for sm_90a (as KTUNE_WGMMA in wgmma.cuh).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define KTUNE_SETMAXNREG 1
#else
#define KTUNE_SETMAXNREG 0
#endif

namespace ktune {
namespace wgrp {

constexpr int kWarpgroupThreads = 128;  // 4 consecutive warps
constexpr int kWarpgroupWarps = 4;

#if defined(__CUDACC__)

/// Index of the calling thread's warpgroup in a 1-D block, broadcast from lane 0 so that the
/// compiler knows it is uniform across the warp (role branches then stay warp-uniform, which
/// setmaxnreg and wgmma's .sync.aligned forms need).
__device__ __forceinline__ int warpgroup_index() {
  return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / kWarpgroupThreads, 0);
}

/// Index of the calling thread's warp in a 1-D block, warp-uniform as warpgroup_index().
__device__ __forceinline__ int warp_index() {
  return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 32, 0);
}

/// Index of the calling thread's warp inside its warpgroup (0..3).
__device__ __forceinline__ int warp_in_warpgroup() { return warp_index() % kWarpgroupWarps; }

/// Index of the calling thread inside its warpgroup (0..127): the thread argument of
/// wg::Acc<N>::row/col.
__device__ __forceinline__ int thread_in_warpgroup() {
  return static_cast<int>(threadIdx.x) % kWarpgroupThreads;
}

/// True in exactly one lane of the calling warp (every lane must call it together): the thread
/// that issues a warp's copies or arrivals. elect.sync on sm_90, so that the choice is warp-
/// uniform without a shuffle; the lowest lane elsewhere.
__device__ __forceinline__ bool elect_one() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned elected = 0;
  asm volatile(
      "{\n"
      ".reg .b32 leader;\n"
      ".reg .pred p;\n"
      "elect.sync leader|p, 0xffffffff;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(elected));
  return elected != 0;
#else
  return (threadIdx.x & 31) == 0;
#endif
}

/// Waits on named barrier `id` (1..15; 0 is __syncthreads') until `threads` threads (a multiple
/// of 32, counted per whole warp) have arrived or synced on it; orders their shared-memory
/// accesses like __syncthreads() does. Every thread of a calling warp must call it.
__device__ __forceinline__ void bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

/// Counts the calling warp in on named barrier `id` for `threads` threads without waiting: the
/// caller's earlier shared-memory writes are visible to the threads that bar_sync() on it.
__device__ __forceinline__ void bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

/// Lowers the calling warpgroup's registers per thread to N (a multiple of 8, 24..256), freeing
/// them for setmaxnreg_inc in other warpgroups. Every thread of the warpgroup calls it.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg takes a multiple of 8, 24..256");
#if KTUNE_SETMAXNREG
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

/// Raises the calling warpgroup's registers per thread to N (a multiple of 8, 24..256), waiting
/// until other warpgroups have released enough. Every thread of the warpgroup calls it.
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg takes a multiple of 8, 24..256");
#if KTUNE_SETMAXNREG
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

#endif  // __CUDACC__

}  // namespace wgrp
}  // namespace ktune
