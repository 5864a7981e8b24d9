// Internal to the flash attention op: what attention_op.cpp's Op methods delegate to, one file
// each:
//   attention_launch.cpp  the kernels of a configuration and their launches (arguments, strides,
//                         the wgmma kernel's tensor maps), and the reference's
//   attention_space.cpp   why a point cannot be instantiated (no device needed)
// Not an interface: nothing outside templates/attention/ includes it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "templates/attention/args.h"
#include "templates/attention/args_sm90.h"
#include "templates/attention/attention_problem.hpp"
#include "templates/op.hpp"

namespace ktune::attention {

constexpr std::int64_t kMaxRowStride = std::int64_t{1} << 23;  // a tile's offsets are 32-bit
constexpr std::int64_t kPages[] = {0, 16, 32, 64, 128, 256};   // 0: contiguous K/V

struct Config {
  int block_m, block_n, warps, stages;
  bool q_regs, smem_pad;
  int impl;
  bool pingpong;
  bool persistent;
  bool reg_split;
  bool kv_apart;
};

inline Config config_of(const Params& p) {
  const auto at = [&](Param i) { return static_cast<int>(p.values[i]); };
  return {at(kBlockM),    at(kBlockN),        at(kWarps),
          at(kStages),    at(kQRegs) != 0,    at(kSmemPad) != 0,
          at(kImpl),      at(kPingpong) != 0, at(kPersistent) != 0,
          at(kRegSplit) != 0, at(kKvApart) != 0};
}


/// The wgmma kernel's consumer warpgroups: one per 64 query rows.
inline int consumers(const Config& c) { return c.block_m / kSm90RowsPerConsumer; }

/// Bytes of one element of q, k and v: e4m3 1, the 16-bit types 2.
inline int elem_bytes(DType t) { return static_cast<int>(dtype_size(t)); }

/// `page`: the paged kernels' page size (impl=0 keeps two slots of page ids after its ring).
inline unsigned smem_bytes(const Config& c, std::int64_t d, DType t, std::int64_t page = 0) {
  if (c.impl == 1)
    return flash_attention_sm90_smem_bytes(static_cast<int>(d), c.block_n, consumers(c),
                                           c.stages, elem_bytes(t), c.kv_apart);
  return flash_attention_smem_bytes(static_cast<int>(d), c.block_m, c.block_n, c.stages,
                                    c.smem_pad, static_cast<int>(page));
}

inline std::string str(std::int64_t v) { return std::to_string(v); }
inline const char* cpp_bool(bool b) { return b ? "true" : "false"; }

/// "block_m=.., block_n=.., stages=.. at d=.. need N bytes of shared memory (...)".
std::string smem_text(const Config& c, const Shape& s, DType t);

// ---- attention_launch.cpp ----

/// The kernels of the configuration at the kernel's shape `s` for data of head dim `dv` (<= s.d):
/// the kernel, then with e4m3 V's transpose.
std::vector<KernelSource> kernel_sources(const Config& c, const Shape& s, std::int64_t dv,
                                         DType t);
/// The workspace of a call: V transposed for e4m3, else none.
std::size_t vt_workspace_bytes(const Shape& s, DType t);
/// The launches of one call (Op::run).
void launch_attention(const RunArgs& a, Launcher& launcher);
std::vector<KernelSource> reference_sources(const Shape& s, DType t);
/// The reference's launch (Op::run_reference).
void launch_reference(const RunArgs& a, Launcher& launcher);

// ---- attention_space.cpp ----

/// Why the configuration cannot be instantiated at the kernel's shape `s` for data of head dim
/// `dv`, or nullopt; `op` names `params` where a kernel's own check speaks.
std::optional<std::string> config_reason(const Config& c, const Shape& s, std::int64_t dv,
                                         DType t, const Op& op, const Params& params);

}  // namespace ktune::attention
