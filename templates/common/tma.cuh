// The tensor memory accelerator (TMA, sm_90): tiles of a 1- to 5-dimensional global tensor
// copied to shared memory and back by the copy engine, described by a tensor map that the host
// encodes (runtime/core/tensor_map.hpp, cuTensorMapEncodeTiled) and passes by value inside a
// `const __grid_constant__` kernel argument: the instructions take the generic address of the
// map, which must stay in parameter (or global) memory, never a local copy.
//
// Loads (`load`) complete on an mbarrier (common/mbarrier.cuh): the issuing thread announces
// the tile's bytes with mbar::arrive_expect_tx on the same barrier, and the waiting threads see
// the tile after mbar::wait_parity. Elements outside the tensor (any coordinate negative or past
// its dimension) land as zeros, so edge tiles need no special case; the byte count is always
// the whole box. Stores (`store`) read a shared tile and write only the elements inside the
// tensor; they complete in bulk groups (`store_commit`, then `store_wait` before the kernel's
// writes are needed elsewhere, or `store_wait_read` before the shared tile is overwritten).
// Shared tiles written by ordinary stores need fence_proxy_async() in every writing thread,
// then a barrier, before the store is issued.
//
// Coordinates are in elements, innermost dimension first (c0 is the contiguous one), as the
// tensor map's dimensions; c0 times the element size must be a multiple of 16 bytes (negative
// coordinates are fine: a box at column -5 of a bf16 matrix faulted as an illegal instruction
// on the H100, one at -8 is the test's). The shared tile is the box in the same order: for a
// 2-D box of B1 rows of B0 elements, row r starts at r * B0 * sizeof(element) without swizzle.
// With the 128-byte swizzle (a box row of exactly 128 bytes) the 16-byte chunk j of row r lands
// at wg::sw128_offset(r, j) when the tile starts 1024-byte aligned: the layout wgmma reads through
// wg::sw128_desc(), so TMA feeds wgmma unchanged. Every shared tile must be at least 128-byte
// aligned; use 1024 for swizzled ones.
//
// NVRTC alone: no headers. Host code (g++) may include this file for TensorMap (its size and
// alignment are checked against the driver's CUtensorMap there); the device wrappers exist
// only under __CUDACC__ and trap before sm_90, so a file including this one compiles for every
// target.
#pragma once

namespace ktune {
namespace tma {

/// The driver's CUtensorMap as kernels see it (NVRTC has no cuda.h): 128 opaque bytes, 64-byte
/// aligned, as the instructions require. A kernel argument struct holding one is 64-byte
/// aligned as a whole. Host mirrors of such structs hold this type too, the encoded
/// CUtensorMap's bytes copied in: cuda.h aligns CUtensorMap to 128 bytes from CUDA 13 on, which
/// would move the members after it and change the struct's size.
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

#if defined(__CUDACC__)

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define KTUNE_TMA_ASM(...) asm volatile(__VA_ARGS__)
#else
// Older targets never run these (their callers are sm_90 only); keep them compiling.
#define KTUNE_TMA_ASM(...) __trap()
#endif

/// Generic address of a tensor map (a __grid_constant__ argument's member, or global memory).
__device__ __forceinline__ unsigned long long map_address(const TensorMap* map) {
  return reinterpret_cast<unsigned long long>(map);
}

/// Fetches the tensor map into the copy engine's descriptor cache ahead of the first copy that
/// uses it (one thread, at kernel start). A hint: correctness never depends on it.
__device__ __forceinline__ void prefetch_map(const TensorMap* map) {
  KTUNE_TMA_ASM("prefetch.tensormap [%0];\n" ::"l"(map_address(map)) : "memory");
}

// Loads: the box at the given coordinates to shared address `dst`; its bytes are counted off
// the transaction count of the barrier at shared address `bar`. One thread issues each.

/// 1-D box at element c0.
__device__ __forceinline__ void load(unsigned dst, const TensorMap* map, unsigned bar, int c0) {
  KTUNE_TMA_ASM(
      "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2}], [%3];\n" ::"r"(dst),
      "l"(map_address(map)), "r"(c0), "r"(bar)
      : "memory");
}

/// 2-D box whose first element is (c0, c1): column c0 of row c1 for a row-major matrix.
__device__ __forceinline__ void load(unsigned dst, const TensorMap* map, unsigned bar, int c0,
                                     int c1) {
  KTUNE_TMA_ASM(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(map_address(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

/// 3-D box at (c0, c1, c2).
__device__ __forceinline__ void load(unsigned dst, const TensorMap* map, unsigned bar, int c0,
                                     int c1, int c2) {
  KTUNE_TMA_ASM(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(map_address(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

/// 4-D box at (c0, c1, c2, c3).
__device__ __forceinline__ void load(unsigned dst, const TensorMap* map, unsigned bar, int c0,
                                     int c1, int c2, int c3) {
  KTUNE_TMA_ASM(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(map_address(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}

/// 5-D box at (c0, c1, c2, c3, c4).
__device__ __forceinline__ void load(unsigned dst, const TensorMap* map, unsigned bar, int c0,
                                     int c1, int c2, int c3, int c4) {
  KTUNE_TMA_ASM(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];\n" ::"r"(dst),
      "l"(map_address(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(bar)
      : "memory");
}

// Stores: the shared tile at `src` to the box at the given coordinates; elements past the
// tensor's far edges are dropped. Start inside the tensor: on the H100 stores of boxes starting
// at negative coordinates faulted (illegal instruction; gpu_hopper_test). One thread issues
// each, after the tile is complete and fenced.

/// 1-D box at element c0.
__device__ __forceinline__ void store(const TensorMap* map, unsigned src, int c0) {
  KTUNE_TMA_ASM(
      "cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [%0, {%2}], [%1];\n" ::"l"(
          map_address(map)),
      "r"(src), "r"(c0)
      : "memory");
}

/// 2-D box whose first element is (c0, c1).
__device__ __forceinline__ void store(const TensorMap* map, unsigned src, int c0, int c1) {
  KTUNE_TMA_ASM(
      "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
          map_address(map)),
      "r"(src), "r"(c0), "r"(c1)
      : "memory");
}

/// 3-D box at (c0, c1, c2).
__device__ __forceinline__ void store(const TensorMap* map, unsigned src, int c0, int c1,
                                      int c2) {
  KTUNE_TMA_ASM(
      "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::
          "l"(map_address(map)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

/// 4-D box at (c0, c1, c2, c3).
__device__ __forceinline__ void store(const TensorMap* map, unsigned src, int c0, int c1, int c2,
                                      int c3) {
  KTUNE_TMA_ASM(
      "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group"
      " [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(map_address(map)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

/// 5-D box at (c0, c1, c2, c3, c4).
__device__ __forceinline__ void store(const TensorMap* map, unsigned src, int c0, int c1, int c2,
                                      int c3, int c4) {
  KTUNE_TMA_ASM(
      "cp.async.bulk.tensor.5d.global.shared::cta.tile.bulk_group"
      " [%0, {%2, %3, %4, %5, %6}], [%1];\n" ::"l"(map_address(map)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
}

/// Closes this thread's stores issued since the last commit into one bulk group.
__device__ __forceinline__ void store_commit() {
  KTUNE_TMA_ASM("cp.async.bulk.commit_group;\n" ::: "memory");
}

/// Waits until at most N of this thread's committed store groups are pending: the finished
/// ones' writes are done (visible to later kernels; within the grid after a fence).
template <int N>
__device__ __forceinline__ void store_wait() {
  KTUNE_TMA_ASM("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

/// Waits until at most N of this thread's committed store groups still read their shared
/// source: the tiles of the finished ones may be overwritten (their global writes may still be
/// in flight). Cheaper than store_wait; what a pipelined epilogue waits for.
template <int N>
__device__ __forceinline__ void store_wait_read() {
  KTUNE_TMA_ASM("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

#undef KTUNE_TMA_ASM

#endif  // __CUDACC__

}  // namespace tma
}  // namespace ktune
