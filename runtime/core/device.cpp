#include "runtime/core/device.hpp"

#include "ktune/error.hpp"
#include "runtime/core/compiler.hpp"
#include "runtime/core/driver.hpp"

namespace ktune {
namespace {

int attribute(const Driver& d, CUdevice dev, CUdevice_attribute a, const char* what) {
  int v = 0;
  cu_check(d.cuDeviceGetAttribute(&v, a, dev), what);
  return v;
}

// The DeviceInfo fields read straight from one device attribute.
struct IntAttribute {
  int DeviceInfo::*field;
  CUdevice_attribute attribute;
  const char* what;  // for error messages
};

#define KTUNE_ATTRIBUTE(field, attr) {&DeviceInfo::field, attr, "cuDeviceGetAttribute(" #attr ")"}
constexpr IntAttribute kIntAttributes[] = {
    KTUNE_ATTRIBUTE(cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
    KTUNE_ATTRIBUTE(cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
    KTUNE_ATTRIBUTE(sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
    KTUNE_ATTRIBUTE(smem_optin_per_block, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
    KTUNE_ATTRIBUTE(smem_per_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
    KTUNE_ATTRIBUTE(regs_per_block, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK),
    KTUNE_ATTRIBUTE(regs_per_sm, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR),
    KTUNE_ATTRIBUTE(max_threads_per_block, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
    KTUNE_ATTRIBUTE(max_threads_per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR),
};
#undef KTUNE_ATTRIBUTE

/// Peak DRAM bandwidth in bytes/s from the memory clock (kHz) and bus width (bits), double data
/// rate; 0 where the driver does not report either (a default rule keyed by bandwidth then keeps
/// the compute capability's row).
std::int64_t peak_memory_bandwidth(const Driver& d, CUdevice dev) {
  int khz = 0, bits = 0;
  if (d.cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, dev) != CUDA_SUCCESS ||
      d.cuDeviceGetAttribute(&bits, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, dev) !=
          CUDA_SUCCESS ||
      khz <= 0 || bits <= 0)
    return 0;
  return 2 * static_cast<std::int64_t>(khz) * 1000 * (bits / 8);
}

}  // namespace

int device_count() {
  if (!Driver::available()) return 0;
  int n = 0;
  if (Driver::get().cuDeviceGetCount(&n) != CUDA_SUCCESS) return 0;
  return n;
}

DeviceInfo query_device(int ordinal) {
  const Driver& d = Driver::get();
  const int count = device_count();
  if (count == 0) throw NoDevice("no CUDA device: the CUDA driver reports none");
  if (ordinal < 0 || ordinal >= count) {
    throw NoDevice("no CUDA device " + std::to_string(ordinal) + ": this machine has " +
                   std::to_string(count) + " (valid ordinals are 0 to " +
                   std::to_string(count - 1) + ")");
  }
  CUdevice dev = 0;
  KTUNE_CU(d.cuDeviceGet(&dev, ordinal));

  DeviceInfo info;
  char name[256] = {};
  KTUNE_CU(d.cuDeviceGetName(name, static_cast<int>(sizeof name) - 1, dev));
  info.name = name;
  std::size_t total = 0;
  KTUNE_CU(d.cuDeviceTotalMem(&total, dev));
  info.memory_bytes = static_cast<std::int64_t>(total);
  KTUNE_CU(d.cuDriverGetVersion(&info.driver_version));

  for (const IntAttribute& a : kIntAttributes) {
    info.*a.field = attribute(d, dev, a.attribute, a.what);
  }
  info.l2_bytes = attribute(d, dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE,
                            "cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)");

  info.memory_bandwidth = peak_memory_bandwidth(d, dev);
  info.nvrtc_version = Compiler::nvrtc_version();
  return info;
}

}  // namespace ktune
