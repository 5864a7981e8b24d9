// Device fingerprint from the driver.
#pragma once

#include "runtime/core/types.hpp"

namespace ktune {

/// Number of CUDA devices; 0 when there is no driver or no device (never throws).
int device_count();
/// Fingerprint of device `ordinal`, NVRTC version included. Throws NoDevice.
DeviceInfo query_device(int ordinal = 0);

}  // namespace ktune
