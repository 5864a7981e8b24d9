// Probe (stop 68): can a grid-wide barrier start from any workspace state, without a zero
// kernel first in the call, by tagging each block's arrival with the launch's %gridid?
//
// Why: fuse_route=2's sort kernel (templates/moe/route_sort.cuh) meets its blocks at a barrier
// whose count a zero kernel clears first in every call, because the op never depends on how the
// caller's workspace was left. On the H100 (benchmarks/results/h100-stop68-2026-12-06.md) the
// sort kernel starts 0.7-0.8 us into the call, after that zero kernel. A barrier whose arrivals
// carry a value unique to the launch needs no clearing: block b stores the tag into its own slot
// (release), then waits until every slot holds the tag (acquire); stale slots hold an earlier
// launch's tag, garbage almost surely no valid one. PTX calls %gridid "the temporal grid launch
// number for this context", used by debuggers; whether every launch gets a fresh value (plain,
// programmatic, each replay of a CUDA graph, other streams) is what this probe checks first.
//
// Prints:
//   1. %gridid of 8 plain launches, 8 programmatic ones, 3 launches in a graph replayed 4 times,
//      and launches on two streams at once: whether all are distinct (and every block of a grid
//      read the same value);
//   2. the tagged barrier from garbage slots: 20000 launches (G = 1..64 blocks) plainly and in
//      graph replays, each block checking after the barrier that every other block's payload of
//      this launch is there; errors must be 0 and no launch may hang (20 s limit);
//   3. the cost, in graphs of 20 calls (medians of 30 replays after 5): a zero kernel then a
//      programmatically launched G-block kernel at a counting barrier (today's form) against
//      the tagged barrier alone, G = 4, 16, 32, 64.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I . -I templates \
//        benchmarks/moe/gridid_probe.cu -o gridid_probe && ./gridid_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <vector>

#include "benchmarks/dev_check.hpp"  // CK, launch_ex
#include "common/pdl.cuh"

using namespace ktune;

constexpr int kThreads = 128;
constexpr int kMaxBlocks = 64;

__device__ __forceinline__ unsigned long long grid_id() {
  unsigned long long v;
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(v));
  return v;
}

/// Every block writes the %gridid it reads to ids[slot * gridDim.x + block].
__global__ void record(unsigned long long* ids, int slot) {
  griddep_launch_dependents();
  if (threadIdx.x == 0) ids[slot * gridDim.x + blockIdx.x] = grid_id();
}

/// The tagged barrier: block b publishes payload[b] = tag, then slot[b] = tag (release), waits
/// until slot[0 .. G) all hold the tag (acquire), and counts in *errors every payload[i] != tag.
/// A later launch on the same slots may start only once every block is past the barrier and
/// its check (its tags and payloads would hide this launch's): dependents are released last.
__global__ void __launch_bounds__(kThreads) tagged(unsigned long long* slot,
                                                   unsigned long long* payload, int* errors) {
  const unsigned long long tag = grid_id();
  const int g = static_cast<int>(gridDim.x);
  const int b = static_cast<int>(blockIdx.x);
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) {
    payload[b] = tag;
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(slot + b), "l"(tag) : "memory");
  }
  if (tid < g) {
    unsigned long long seen;
    do {
      asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(seen) : "l"(slot + tid) : "memory");
    } while (seen != tag);
  }
  __syncthreads();
  if (tid < g && __ldcg(payload + tid) != tag) atomicAdd(errors, 1);
  __syncthreads();
  griddep_launch_dependents();
}

/// Today's form, for the cost: a count cleared by a zero kernel before it, one add per block.
__global__ void zero(unsigned long long* count) {
  griddep_launch_dependents();
  if (threadIdx.x == 0) *count = 0;
}

__global__ void __launch_bounds__(kThreads) counted(unsigned long long* count) {
  griddep_launch_dependents();
  griddep_wait();
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(count, 1ull);
    unsigned long long seen;
    do {
      asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(seen) : "l"(count) : "memory");
    } while (seen < gridDim.x);
  }
  __syncthreads();
}

template <typename... Params, typename... Args>
void launch(void (*k)(Params...), int blocks, cudaStream_t s, bool programmatic, Args... args) {
  launch_ex(k, static_cast<unsigned>(blocks), kThreads, 0, s, programmatic, args...);
}

/// Waits for the stream, failing after `seconds` (a barrier that never opens hangs).
void wait_for(cudaStream_t s, double seconds, const char* what) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) CK(e);
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > seconds) {
      std::printf("HANG: %s did not finish in %.0f s\n", what, seconds);
      std::exit(3);
    }
  }
}

bool report_ids(const char* what, const std::vector<unsigned long long>& ids, int grids,
                int blocks) {
  std::set<unsigned long long> distinct;
  bool same_in_grid = true;
  std::printf("%-34s", what);
  for (int g = 0; g < grids; ++g) {
    const unsigned long long v = ids[g * blocks];
    for (int b = 1; b < blocks; ++b) same_in_grid &= ids[g * blocks + b] == v;
    distinct.insert(v);
    if (g < 12) std::printf(" %llx", v);
  }
  const bool ok = static_cast<int>(distinct.size()) == grids && same_in_grid;
  std::printf("%s\n  -> %d grids, %zu distinct, same in every block: %s: %s\n",
              grids > 12 ? " ..." : "", grids, distinct.size(), same_in_grid ? "yes" : "NO",
              ok ? "ok" : "FAIL");
  return ok;
}

int main() {
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  cudaStream_t s, s2;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  constexpr int kBlocks = 4;
  constexpr int kMaxGrids = 64;
  unsigned long long* ids;
  CK(cudaMalloc(&ids, sizeof(unsigned long long) * kMaxGrids * kBlocks));
  std::vector<unsigned long long> host(kMaxGrids * kBlocks);
  const auto fetch = [&](int grids) {
    CK(cudaStreamSynchronize(s));
    CK(cudaStreamSynchronize(s2));
    CK(cudaMemcpy(host.data(), ids, sizeof(unsigned long long) * grids * kBlocks,
                  cudaMemcpyDeviceToHost));
    return std::vector<unsigned long long>(host.begin(), host.begin() + grids * kBlocks);
  };
  bool ok = true;

  // 1. Fresh values?
  std::printf("== 1. %%gridid per launch\n");
  for (int i = 0; i < 8; ++i) launch(record, kBlocks, s, false, ids, i);
  ok &= report_ids("plain, 8 launches:", fetch(8), 8, kBlocks);
  for (int i = 0; i < 8; ++i) launch(record, kBlocks, s, i > 0, ids, i);
  ok &= report_ids("programmatic, 8 launches:", fetch(8), 8, kBlocks);
  {
    // Three launches captured once, replayed four times: each replay records into its own
    // slots by copying the first three out between replays.
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < 3; ++i) launch(record, kBlocks, s, i > 0, ids, i);
    CK(cudaStreamEndCapture(s, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    std::vector<unsigned long long> all;
    for (int r = 0; r < 4; ++r) {
      CK(cudaGraphLaunch(exec, s));
      const std::vector<unsigned long long> v = fetch(3);
      all.insert(all.end(), v.begin(), v.end());
    }
    ok &= report_ids("graph of 3, replayed 4 times:", all, 12, kBlocks);
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
  }
  for (int i = 0; i < 8; ++i) launch(record, kBlocks, i % 2 ? s2 : s, false, ids, i);
  ok &= report_ids("two streams, 8 launches:", fetch(8), 8, kBlocks);

  // 2. The tagged barrier from garbage.
  std::printf("== 2. tagged barrier from garbage slots\n");
  unsigned long long *slot, *payload;
  int* errors;
  CK(cudaMalloc(&slot, sizeof(unsigned long long) * kMaxBlocks));
  CK(cudaMalloc(&payload, sizeof(unsigned long long) * kMaxBlocks));
  CK(cudaMalloc(&errors, sizeof(int)));
  CK(cudaMemset(errors, 0, sizeof(int)));
  std::mt19937_64 rng(68);
  std::vector<unsigned long long> garbage(kMaxBlocks);
  for (auto& g : garbage) g = rng();
  CK(cudaMemcpy(slot, garbage.data(), sizeof(unsigned long long) * kMaxBlocks,
                cudaMemcpyHostToDevice));
  int launches = 0;
  for (int i = 0; i < 10000; ++i, ++launches) {
    if (i % 1000 == 0) {  // garbage again, now and then
      for (auto& g : garbage) g = rng();
      CK(cudaMemcpyAsync(slot, garbage.data(), sizeof(unsigned long long) * kMaxBlocks,
                         cudaMemcpyHostToDevice, s));
    }
    launch(tagged, 1 + i % kMaxBlocks, s, i % 2 == 1, slot, payload, errors);
  }
  wait_for(s, 20, "10000 plain and programmatic tagged launches");
  {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < 10; ++i) launch(tagged, 8 + 6 * i, s, i > 0, slot, payload, errors);
    CK(cudaStreamEndCapture(s, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    for (int r = 0; r < 1000; ++r, launches += 10) CK(cudaGraphLaunch(exec, s));
    wait_for(s, 20, "1000 replays of a graph of 10 tagged launches");
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
  }
  int bad = -1;
  CK(cudaMemcpy(&bad, errors, sizeof(int), cudaMemcpyDeviceToHost));
  std::printf("tagged barrier: %d launches, %d blocks saw a missing payload: %s\n", launches,
              bad, bad == 0 ? "ok" : "FAIL");
  ok &= bad == 0;

  // 3. Cost: graphs of 20 calls of each form.
  std::printf("== 3. cost per call (graphs of 20 calls, median of 30 replays)\n");
  unsigned long long* count;
  CK(cudaMalloc(&count, sizeof(unsigned long long)));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const auto per_call = [&](auto&& body) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < 20; ++i) body();
    CK(cudaStreamEndCapture(s, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    std::vector<float> ms;
    for (int r = 0; r < 35; ++r) {
      CK(cudaEventRecord(e0, s));
      CK(cudaGraphLaunch(exec, s));
      CK(cudaEventRecord(e1, s));
      wait_for(s, 20, "a timed graph");
      float t = 0;
      CK(cudaEventElapsedTime(&t, e0, e1));
      if (r >= 5) ms.push_back(t);
    }
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2] * 1000.f / 20.f;
  };
  std::printf("%6s %26s %16s %10s\n", "blocks", "zero + counting (us/call)", "tagged (us/call)",
              "saved (us)");
  for (int g : {4, 16, 32, 64}) {
    const float a = per_call([&] {
      launch(zero, 1, s, false, count);
      launch(counted, g, s, true, count);
    });
    const float b = per_call([&] { launch(tagged, g, s, false, slot, payload, errors); });
    std::printf("%6d %26.2f %16.2f %10.2f\n", g, a, b, a - b);
  }
  std::printf("%s\n", ok ? "ALL OK" : "FAILED");
  return ok ? 0 : 1;
}
