// Zeroes a small scratch on the stream before a kernel that needs it zero: the op's run() neither
// allocates nor calls cuMemset*, so a whole MoE call stays one sequence of kernel launches (CUDA
// graph capturable) and never depends on how the caller's workspace was left.
#pragma once

#if defined(__CUDACC__)
#include "common/pdl.cuh"
#endif

namespace ktune {

struct MoeZeroArgs {
  unsigned long long* data;  // [count]
  int count;
};

/// Threads per block of moe_zero_kernel (any grid: grid-stride).
constexpr int kMoeZeroThreads = 256;

#if defined(__CUDACC__)

__global__ void __launch_bounds__(kMoeZeroThreads) moe_zero_kernel(const MoeZeroArgs args) {
  // Every kernel of the op after its first is launched programmatically (common/pdl.cuh):
  // nothing the previous one wrote is read before the wait; a small grid, so the next kernel
  // may be scheduled at once (a no-op for the first kernel and before sm_90).
  griddep_wait();
  griddep_launch_dependents();
  for (int i = static_cast<int>(blockIdx.x * kMoeZeroThreads + threadIdx.x); i < args.count;
       i += static_cast<int>(gridDim.x) * kMoeZeroThreads)
    args.data[i] = 0ull;
}

#endif  // __CUDACC__

}  // namespace ktune
