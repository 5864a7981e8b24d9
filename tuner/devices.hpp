// The GPUs of `ktune sweep --devices`: the list and its checks, and what identifies each GPU in
// the database (its fingerprint key, ordinal and PCI bus id).
#pragma once

#include <string>
#include <vector>

namespace ktune {

/// A GPU a sweep runs on.
struct SweepDevice {
  int ordinal = 0;   // CUDA ordinal (as CUDA_VISIBLE_DEVICES numbers them)
  std::string key;   // DeviceInfo::key(): GPUs with one key share one queue of problems
  std::string name;  // DeviceInfo::name, for messages
};

/// The ordinals `text` names: `all` (each of the `count` GPUs the driver shows) or distinct
/// ordinals separated by commas (`0,1,3`), in the order given. Throws InvalidArgument for a
/// malformed list (empty, an item that is not an integer from 0 to 1023, an ordinal listed twice)
/// and NoDevice for an ordinal this machine does not have, or `all` when it has none (`why_none`
/// then says why). Each message names the option, the text and what is allowed.
std::vector<int> parse_device_list(const std::string& text, int count,
                                   const std::string& why_none = "the CUDA driver reports no GPU");

/// parse_device_list against the driver's device count, then each GPU's fingerprint, from the
/// driver's attributes only (no context is created: the workers own the GPUs).
std::vector<SweepDevice> find_devices(const std::string& text);

/// The PCI bus id of GPU `ordinal` (`0000:1b:00.0`); empty when the driver cannot say. Creates
/// no context; never throws.
std::string pci_bus_id(int ordinal);

/// Compile threads for each of `devices` GPUs sweeping at once when `jobs` (--jobs, 0 for the
/// number of cores) is the total: an even share, at least 1; `jobs` itself for one GPU.
int compile_threads_per_device(int jobs, std::size_t devices);

}  // namespace ktune
