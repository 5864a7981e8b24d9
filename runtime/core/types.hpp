// Plain value types shared by every ktune module: element types, device fingerprints,
// problem shapes and tunable parameter sets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ktune/dtype.hpp"

namespace ktune {

const char* dtype_name(DType t);
std::size_t dtype_size(DType t);
/// Parses "bf16", "fp16"/"f16", "fp32"/"f32", "e4m3"/"fp8"/"float8_e4m3fn"; nullopt otherwise.
std::optional<DType> parse_dtype(std::string_view s);

/// Length of the well-formed UTF-8 sequence of 2 to 4 bytes starting at s[i], or 0 when none
/// starts there (ASCII, a stray continuation byte, an overlong form, a surrogate, > U+10FFFF).
std::size_t utf8_sequence(std::string_view s, std::size_t i);

/// `s` safe for a terminal: control characters (C0, DEL, C1) and bytes that are not UTF-8 become
/// escapes (\n, \t, \x1b), so text from a file or the environment cannot move the cursor,
/// change colours or forge lines. Valid UTF-8 passes through.
std::string printable(std::string_view s);

/// A value for an error message: printable(), in double quotes, cut to `max` bytes with the full
/// size noted ("aaaa..." (100000 bytes)), so that a message stays one short line.
std::string quoted(std::string_view s, std::size_t max = 64);

/// "0x7f0000000002": a device address in a message.
std::string address_text(std::uint64_t address);

/// What identifies a GPU for tuning purposes, plus the limits `valid()` needs.
struct DeviceInfo {
  std::string name;                   // e.g. "NVIDIA H100 80GB HBM3"
  int cc_major = 0;                   // compute capability
  int cc_minor = 0;
  int sm_count = 0;                   // multiprocessors
  std::int64_t memory_bytes = 0;      // total global memory
  std::int64_t l2_bytes = 0;          // L2 cache size
  int smem_optin_per_block = 0;       // max dynamic+static shared memory a block may opt into
  int smem_per_sm = 0;                // shared memory per multiprocessor
  int regs_per_block = 0;             // register file available to one block
  int regs_per_sm = 0;                // register file per multiprocessor
  int max_threads_per_block = 0;
  int max_threads_per_sm = 0;
  std::int64_t memory_bandwidth = 0;  // peak DRAM bytes/s: 2 x memory clock x bus width; 0 unknown
  int driver_version = 0;             // cuDriverGetVersion, e.g. 13000
  int nvrtc_version = 0;              // major*1000 + minor*10, e.g. 13000

  /// Exact compile target: "sm_90a" for compute capability 9.0, else "sm_XY".
  std::string arch() const;
  /// Stable identity of the hardware (name, capability, SMs, memory): the database's device key.
  std::string key() const;
};

/// Built-in description of a GPU, used when compiling or checking validity without one.
/// Known archs: sm_80 (A100-like) and sm_90a (H100-like).
std::optional<DeviceInfo> device_for_arch(std::string_view arch);

/// One problem instance: a value per dimension the op declares, in the op's order.
/// Enumerated dimensions hold the index of their choice.
struct Problem {
  std::vector<std::int64_t> values;
  bool operator==(const Problem& o) const { return values == o.values; }
  bool operator!=(const Problem& o) const { return !(*this == o); }
};

/// One configuration: a value per tunable the op declares, in the op's order.
struct Params {
  std::vector<std::int64_t> values;
  bool operator==(const Params& o) const { return values == o.values; }
  bool operator!=(const Params& o) const { return !(*this == o); }
  bool operator<(const Params& o) const { return values < o.values; }
};

}  // namespace ktune
