#include "tuner/devices.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <thread>

#include "ktune/error.hpp"
#include "runtime/core/device.hpp"
#include "runtime/core/driver.hpp"
#include "runtime/core/types.hpp"

namespace ktune {
namespace {

constexpr int kMaxOrdinal = 1023;  // as --device allows

const char* const kAllowed =
    "expected all, or GPU ordinals from 0 to 1023 separated by commas, e.g. 0,1";

std::string trimmed(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace

std::vector<int> parse_device_list(const std::string& text, int count, const std::string& why_none) {
  const std::string shown = "--devices " + quoted(text, 100);
  const std::string list = trimmed(text);
  if (list.empty()) throw InvalidArgument(shown + " is not allowed: " + kAllowed);
  std::vector<int> out;
  if (list == "all") {
    if (count <= 0) throw NoDevice("--devices all: " + why_none);
    for (int i = 0; i < count; ++i) out.push_back(i);
    return out;
  }
  // Syntax first, so that a malformed list gets the same message on any machine.
  std::size_t at = 0;
  for (;;) {
    const std::size_t comma = list.find(',', at);
    const std::string item =
        trimmed(list.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (item.empty())
      throw InvalidArgument(shown + ": an empty item between commas (" + kAllowed + ")");
    const bool digits = item.size() <= 4 && std::all_of(item.begin(), item.end(), [](char c) {
                          return c >= '0' && c <= '9';
                        });
    if (!digits || std::stoi(item) > kMaxOrdinal)
      throw InvalidArgument(shown + ": " + quoted(item, 40) + " is not a GPU ordinal (" +
                            kAllowed + ")");
    const int ordinal = std::stoi(item);
    if (std::find(out.begin(), out.end(), ordinal) != out.end())
      throw InvalidArgument(shown + ": GPU " + std::to_string(ordinal) +
                            " is listed twice (expected each ordinal once)");
    out.push_back(ordinal);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  for (int ordinal : out) {
    if (count <= 0) throw NoDevice(shown + ": " + why_none);
    if (ordinal >= count)
      throw NoDevice(shown + ": there is no GPU " + std::to_string(ordinal) + ": this machine has " +
                     std::to_string(count) + " (valid ordinals are 0 to " +
                     std::to_string(count - 1) + "; all names each of them)");
  }
  return out;
}

std::vector<SweepDevice> find_devices(const std::string& text) {
  std::vector<SweepDevice> out;
  std::string why = "the CUDA driver reports no GPU";
  const int count = device_count();
  if (count == 0) Driver::available(&why);  // without a driver, what stopped it
  for (int ordinal : parse_device_list(text, count, why)) {
    const DeviceInfo d = query_device(ordinal);
    out.push_back({ordinal, d.key(), d.name});
  }
  return out;
}

std::string pci_bus_id(int ordinal) {
  if (!Driver::available()) return {};
  try {
    const Driver& d = Driver::get();
    // Not in the driver table (runtime/core/driver.hpp): only the tuner wants it. The library is
    // loaded already, so this takes a reference to it and loads nothing.
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (lib == nullptr) return {};
    using GetPciBusId = CUresult (*)(char*, int, CUdevice);
    GetPciBusId get = nullptr;
    if (void* p = dlsym(lib, "cuDeviceGetPCIBusId")) std::memcpy(&get, &p, sizeof get);
    std::string id;
    CUdevice dev = 0;
    char buf[32] = {};
    if (get != nullptr && d.cuDeviceGet(&dev, ordinal) == CUDA_SUCCESS &&
        get(buf, static_cast<int>(sizeof buf) - 1, dev) == CUDA_SUCCESS)
      id = buf;
    dlclose(lib);
    for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return id;
  } catch (const Error&) {
    return {};
  }
}

int compile_threads_per_device(int jobs, std::size_t devices) {
  if (devices <= 1) return jobs;
  const int total = jobs > 0 ? jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, total / static_cast<int>(devices));
}

}  // namespace ktune
