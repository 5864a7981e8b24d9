#include "runtime/core/types.hpp"

#include <cstdio>

namespace ktune {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "fp32";
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

std::size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }

std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  if (s == "fp16" || s == "f16" || s == "half" || s == "float16") return DType::f16;
  if (s == "fp32" || s == "f32" || s == "float32") return DType::f32;
  return std::nullopt;
}

std::string DeviceInfo::arch() const {
  std::string a = "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
  // sm_90a unlocks wgmma/setmaxnreg; its CUBIN runs only on 9.0, which is what we compile for.
  if (cc_major == 9 && cc_minor == 0) a += "a";
  return a;
}

std::string DeviceInfo::key() const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "|cc%d.%d|%dsm|%lldMiB", cc_major, cc_minor, sm_count,
                static_cast<long long>(memory_bytes >> 20));
  return name + buf;
}

std::optional<DeviceInfo> device_for_arch(std::string_view arch) {
  DeviceInfo d;
  if (arch == "sm_90a" || arch == "sm_90") {
    d.name = "generic sm_90 (H100 SXM limits)";
    d.cc_major = 9;
    d.cc_minor = 0;
    d.sm_count = 132;
    d.memory_bytes = 80LL << 30;
    d.l2_bytes = 50LL << 20;
    d.smem_optin_per_block = 227 * 1024;
    d.smem_per_sm = 228 * 1024;
  } else if (arch == "sm_80") {
    d.name = "generic sm_80 (A100 limits)";
    d.cc_major = 8;
    d.cc_minor = 0;
    d.sm_count = 108;
    d.memory_bytes = 80LL << 30;
    d.l2_bytes = 40LL << 20;
    d.smem_optin_per_block = 163 * 1024;
    d.smem_per_sm = 164 * 1024;
  } else {
    return std::nullopt;
  }
  d.regs_per_block = 65536;
  d.regs_per_sm = 65536;
  d.max_threads_per_block = 1024;
  d.max_threads_per_sm = 2048;
  return d;
}

}  // namespace ktune
