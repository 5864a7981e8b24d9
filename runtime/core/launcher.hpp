// The Launcher that issues real launches through the CUDA driver.
#pragma once

#include <cuda.h>

#include "templates/op.hpp"

namespace ktune {

/// Launches on one stream with cuLaunchKernel; the kernel's argument struct is its only parameter.
/// Throws CudaError when the launch is refused.
class CudaLauncher final : public Launcher {
 public:
  explicit CudaLauncher(CUstream stream) : stream_(stream) {}
  void launch(const KernelLaunch& launch) override;
  CUstream stream() const { return stream_; }

 private:
  CUstream stream_;
};

}  // namespace ktune
