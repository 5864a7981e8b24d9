// Kernels compiled and loaded once per GPU test binary (the tests that launch an op's kernels
// themselves rather than through the runtime).
#pragma once

#include <filesystem>

#include "runtime/core/driver.hpp"
#include "templates/op.hpp"

namespace ktune::test {

/// The binary's compile cache: a temporary directory, removed at exit.
const std::filesystem::path& kernel_cache_dir();

/// `source` compiled for `dev` (once per name expression for the whole binary) and loaded;
/// dynamic_smem > 0 raises the function's dynamic shared memory limit to it.
CUfunction load_kernel(const KernelSource& source, const DeviceInfo& dev, unsigned dynamic_smem);

}  // namespace ktune::test
