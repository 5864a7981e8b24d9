#include "runtime/core/launcher.hpp"

#include "ktune/error.hpp"
#include "runtime/core/driver.hpp"

namespace ktune {

void CudaLauncher::launch(const KernelLaunch& launch) {
  if (launch.kernel == nullptr) throw InvalidArgument("CudaLauncher::launch: null kernel handle");
  if (launch.args == nullptr && launch.args_size != 0) {
    throw InvalidArgument("CudaLauncher::launch: null argument struct of " +
                          std::to_string(launch.args_size) + " bytes");
  }
  const Driver& d = Driver::get();
  // Every kernel takes one by-value argument struct, so kernelParams has a single entry.
  void* params[] = {const_cast<void*>(launch.args)};
  KTUNE_CU(d.cuLaunchKernel(static_cast<CUfunction>(launch.kernel), launch.grid[0], launch.grid[1],
                            launch.grid[2], launch.block[0], launch.block[1], launch.block[2],
                            launch.shared_bytes, stream_,
                            launch.args != nullptr ? params : nullptr, nullptr));
}

}  // namespace ktune
