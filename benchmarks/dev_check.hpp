// CK(call): the CUDA runtime error check of the development harnesses (benchmarks/*/ *_dev.cu):
// prints the file, line, call and error, and exits with status 2. launch_ex: a kernel launch,
// optionally programmatic (templates/common/pdl.cuh), checked the same way.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

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
