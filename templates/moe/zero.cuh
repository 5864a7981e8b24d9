// Zeroes a small scratch on the stream before a kernel that needs it zero: the op's run() neither
// allocates nor calls cuMemset*, so a whole MoE call stays one sequence of kernel launches (CUDA
// graph capturable) and never depends on how the caller's workspace was left.
#pragma once

namespace ktune {

struct MoeZeroArgs {
  unsigned long long* data;  // [count]
  int count;
};

/// Threads per block of moe_zero_kernel (any grid: grid-stride).
constexpr int kMoeZeroThreads = 256;

#if defined(__CUDACC__)

__global__ void __launch_bounds__(kMoeZeroThreads) moe_zero_kernel(const MoeZeroArgs args) {
  for (int i = static_cast<int>(blockIdx.x * kMoeZeroThreads + threadIdx.x); i < args.count;
       i += static_cast<int>(gridDim.x) * kMoeZeroThreads)
    args.data[i] = 0ull;
}

#endif  // __CUDACC__

}  // namespace ktune
