// Device classes that the built-in defaults' rules tell apart beyond the compute capability.
#pragma once

#include "runtime/core/types.hpp"

namespace ktune {

/// Peak memory bandwidth per SM from which a device has the H200's fast memory: the H200 feeds
/// each SM 36 GB/s (4.8 TB/s over 132 SMs), the H100 SXM 25. Rules read from H200 sweeps where
/// the H100's chose otherwise apply from here.
constexpr double kFastMemoryBytesPerSm = 30e9;

/// Whether `device` has the H200's fast memory per SM (kFastMemoryBytesPerSm); unknown
/// bandwidth or SM count: no.
inline bool fast_memory_per_sm(const DeviceInfo& device) {
  return device.sm_count > 0 &&
         static_cast<double>(device.memory_bandwidth) >= kFastMemoryBytesPerSm * device.sm_count;
}

}  // namespace ktune
