// CK(call): the CUDA runtime error check of the development harnesses (benchmarks/*/ *_dev.cu):
// prints the file, line, call and error, and exits with status 2.
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
