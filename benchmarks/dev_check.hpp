// CK(call): the CUDA runtime error check of the development harnesses (benchmarks/*/ *_dev.cu)
// and probes: prints the file, line, call and error, and exits with status 2. launch_ex: a
// kernel launch, optionally programmatic (templates/common/pdl.cuh), and launch_clustered: one in
// thread block clusters, both checked the same way. median_ms and copy_tbs: the probes' timing
// (decode_bench.py's method) and copy bandwidth; median_us: one call at a time on a stream.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) check_cuda((x), #x, __FILE__, __LINE__)
static void check_cuda(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, cudaGetErrorString(e));
    std::exit(2);
  }
}

/// Launches kernel k on `grid` CTAs of `threads` with `smem` bytes of dynamic shared memory on
/// stream s; programmatic: with programmatic stream serialization (it may start during the
/// previous kernel's tail; it waits with griddep_wait). Exits as CK does on an error.
template <typename... Params, typename... Args>
void launch_ex(void (*k)(Params...), unsigned grid, unsigned threads, unsigned smem,
               cudaStream_t s, bool programmatic, Args... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = programmatic ? 1 : 0;
  CK(cudaLaunchKernelEx(&cfg, k, args...));
}

/// Launches kernel k on `grid` CTAs of `threads` with `smem` bytes of dynamic shared memory in
/// clusters of `cluster` CTAs (on the default stream). Exits as CK does on an error.
template <typename... Params, typename... Args>
void launch_clustered(void (*k)(Params...), dim3 grid, unsigned threads, unsigned smem,
                      dim3 cluster, Args... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = cluster.x;
  attr.val.clusterDim.y = cluster.y;
  attr.val.clusterDim.z = cluster.z;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, k, args...));
}

/// Median milliseconds per launch over `reps` samples of `batch` back-to-back launches (r = 0,
/// 1, ... across all of them), after `warmup` launches: the decode bench's method.
template <typename Launch>
float median_ms(int warmup, int reps, int batch, Launch launch) {
  cudaEvent_t t0, t1;
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));
  int r = 0;
  for (; r < warmup; ++r) launch(r);
  std::vector<float> ms;
  for (int s = 0; s < reps; ++s) {
    CK(cudaEventRecord(t0));
    for (int b = 0; b < batch; ++b) launch(r++);
    CK(cudaEventRecord(t1));
    CK(cudaEventSynchronize(t1));
    float x = 0;
    CK(cudaEventElapsedTime(&x, t0, t1));
    ms.push_back(x / static_cast<float>(batch));
  }
  CK(cudaEventDestroy(t0));
  CK(cudaEventDestroy(t1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

/// Median microseconds of call() on stream st over 30 calls after 5.
template <class Call>
float median_us(cudaStream_t st, Call call) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) call();
  std::vector<float> t;
  for (int i = 0; i < 30; ++i) {
    CK(cudaEventRecord(a, st));
    call();
    CK(cudaEventRecord(b, st));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.f);
  }
  CK(cudaGetLastError());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// Prints device 0's name and SM count; returns the count.
inline int print_device() {
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  return prop.multiProcessorCount;
}

/// Device-to-device copy bandwidth as decode_bench.py measures it: 2 GiB, read + write, TB/s.
inline float copy_tbs() {
  const size_t n = size_t{2} << 30;
  void *a = nullptr, *b = nullptr;
  CK(cudaMalloc(&a, n));
  CK(cudaMalloc(&b, n));
  CK(cudaMemset(a, 1, n));
  const float ms =
      median_ms(2, 20, 3, [&](int) { CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice)); });
  CK(cudaFree(a));
  CK(cudaFree(b));
  return static_cast<float>(2.0 * n / (ms * 1e-3) / 1e12);
}
