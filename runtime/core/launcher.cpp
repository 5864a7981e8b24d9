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
  const bool clustered = launch.cluster > 1 || launch.cluster_y > 1;
  if (launch.cluster == 0 || (clustered && launch.grid[0] % launch.cluster != 0)) {
    throw InvalidArgument("CudaLauncher::launch: grid x " + std::to_string(launch.grid[0]) +
                          " is not a multiple of the cluster size " +
                          std::to_string(launch.cluster) + " (a cluster size is 1 or more)");
  }
  if (launch.cluster_y == 0 || (clustered && launch.grid[1] % launch.cluster_y != 0)) {
    throw InvalidArgument("CudaLauncher::launch: grid y " + std::to_string(launch.grid[1]) +
                          " is not a multiple of the cluster's y size " +
                          std::to_string(launch.cluster_y) + " (a cluster size is 1 or more)");
  }
  const Driver& d = Driver::get();
  if (clustered && d.cuLaunchKernelEx == nullptr)
    throw InvalidArgument("CudaLauncher::launch: a cluster launch needs cuLaunchKernelEx (a "
                          "CUDA 12.0 or later driver)");
  // Every kernel takes one by-value argument struct, so kernelParams has a single entry.
  void* params[] = {const_cast<void*>(launch.args)};
  const bool programmatic =
      launch.programmatic && d.cuLaunchKernelEx != nullptr && programmatic_launch_supported();
  if (programmatic || clustered) {
    CUlaunchAttribute attrs[2] = {};
    unsigned n = 0;
    if (programmatic) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attrs[n++].value.programmaticStreamSerializationAllowed = 1;
    }
    if (clustered) {
      // Above the portable 8 CTAs (Hopper takes 16), the kernel must say it accepts it.
      if (launch.cluster * launch.cluster_y > 8)
        KTUNE_CU(d.cuFuncSetAttribute(static_cast<CUfunction>(launch.kernel),
                                      CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attrs[n].value.clusterDim.x = launch.cluster;
      attrs[n].value.clusterDim.y = launch.cluster_y;
      attrs[n++].value.clusterDim.z = 1;
    }
    CUlaunchConfig config{};
    config.gridDimX = launch.grid[0], config.gridDimY = launch.grid[1];
    config.gridDimZ = launch.grid[2];
    config.blockDimX = launch.block[0], config.blockDimY = launch.block[1];
    config.blockDimZ = launch.block[2];
    config.sharedMemBytes = launch.shared_bytes;
    config.hStream = stream_;
    config.attrs = attrs;
    config.numAttrs = n;
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
