#include "runtime/core/launcher.hpp"

#include "ktune/error.hpp"
#include "runtime/core/driver.hpp"

namespace ktune {
namespace {

/// Whether the current context's device takes programmatic dependent launches (compute
/// capability 9.0 and later), cached per device ordinal: no allocation, two driver queries per
/// device and thread at most.
bool programmatic_launch_supported() {
  constexpr int kDevices = 64;
  thread_local signed char known[kDevices] = {};  // 0 unknown, 1 yes, -1 no
  const Driver& d = Driver::get();
  CUdevice dev = 0;
  if (d.cuCtxGetDevice(&dev) != CUDA_SUCCESS || dev < 0 || dev >= kDevices) return false;
  if (known[dev] == 0) {
    int major = 0;
    const bool ok = d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                           dev) == CUDA_SUCCESS;
    known[dev] = ok && major >= 9 ? 1 : -1;
  }
  return known[dev] > 0;
}

}  // namespace

void CudaLauncher::launch(const KernelLaunch& launch) {
  if (launch.kernel == nullptr) throw InvalidArgument("CudaLauncher::launch: null kernel handle");
  if (launch.args == nullptr && launch.args_size != 0) {
    throw InvalidArgument("CudaLauncher::launch: null argument struct of " +
                          std::to_string(launch.args_size) + " bytes");
  }
  const Driver& d = Driver::get();
  // Every kernel takes one by-value argument struct, so kernelParams has a single entry.
  void* params[] = {const_cast<void*>(launch.args)};
  if (launch.programmatic && d.cuLaunchKernelEx != nullptr && programmatic_launch_supported()) {
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config{};
    config.gridDimX = launch.grid[0], config.gridDimY = launch.grid[1];
    config.gridDimZ = launch.grid[2];
    config.blockDimX = launch.block[0], config.blockDimY = launch.block[1];
    config.blockDimZ = launch.block[2];
    config.sharedMemBytes = launch.shared_bytes;
    config.hStream = stream_;
    config.attrs = &attr;
    config.numAttrs = 1;
    KTUNE_CU(d.cuLaunchKernelEx(&config, static_cast<CUfunction>(launch.kernel),
                                launch.args != nullptr ? params : nullptr, nullptr));
    return;
  }
  KTUNE_CU(d.cuLaunchKernel(static_cast<CUfunction>(launch.kernel), launch.grid[0], launch.grid[1],
                            launch.grid[2], launch.block[0], launch.block[1], launch.block[2],
                            launch.shared_bytes, stream_,
                            launch.args != nullptr ? params : nullptr, nullptr));
}

}  // namespace ktune
